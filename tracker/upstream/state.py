"""A pull request's state, from the PR and its timeline: open, merged, landed, reverted or
closed-unmerged, with its landed commit and a sentence saying how that was established (an
issue: open or closed, ``classify_issue``).

``landed``: pytorch's merge bot pushed the commit and GitHub closed the PR (a ``merged``
label or a ``closed`` event carrying a ``commit_id``). ``reverted``: landed, then a
``reverted`` label, a reopen, a merged ``Revert "..."`` PR, or a commit referenced from
the timeline whose message says git's ``This reverts commit <the landed sha>.``; landed
again after that (a later merge or closing commit), it is landed again. The timeline
orders these events; the PR's label list alone does not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tracker.model.manifest import UpstreamRef

_LANDED_LABEL = re.compile(r"^merged(X\d+)?$")
REVERTS = re.compile(r"^This reverts commit (?P<sha>[0-9a-f]{40})\b", re.M)


def landed_commits(pr: dict[str, Any], timeline: list[dict[str, Any]]) -> set[str]:
    """Every commit the PR landed as (a reland lands again, as another commit)."""
    found = {str(e["commit_id"]) for e in timeline if e.get("event") in ("merged", "closed") and e.get("commit_id")}
    if pr.get("merged") and pr.get("merge_commit_sha"):
        found.add(str(pr["merge_commit_sha"]))
    return found


def referenced_after_landing(pr: dict[str, Any], timeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``referenced`` events after the first landing whose commit is not a landed one:
    the only commits that can be a revert of it (each is read once, then cached for good)."""
    landed = landed_commits(pr, timeline)
    found, seen_landing = [], False
    for event in timeline:
        if event.get("event") in ("merged", "closed") and event.get("commit_id"):
            seen_landing = True
        elif (seen_landing and event.get("event") == "referenced" and event.get("commit_id")
              and event["commit_id"] not in landed):
            found.append(event)
    return found


def reverted_sha(message: str) -> str | None:
    """The commit a commit message says it reverts (git's own ``This reverts commit <sha>.``)."""
    found = REVERTS.search(message)
    return found["sha"] if found else None


def classify_pr(ref: UpstreamRef, pr: dict[str, Any], timeline: list[dict[str, Any]],
                reverts: Mapping[str, str] | None = None) -> tuple[str, str | None, str]:
    """State, landed commit and a sentence saying how they were established.

    ``reverts`` maps a referenced commit to the commit its message says it reverts."""
    reverts = reverts or {}
    landed: str | None = None
    landed_at = ""
    landed_how = ""
    reverted_by: str | None = None
    labelled_in_timeline = False  # the timeline orders labels; the PR's label list does not
    for event in timeline:
        kind = event.get("event")
        day = str(event.get("created_at") or "")[:10]
        if kind == "merged" and event.get("commit_id"):
            landed, landed_at, landed_how, reverted_by = event["commit_id"], day, "merged", None
        elif kind == "closed" and event.get("commit_id"):
            actor = (event.get("actor") or {}).get("login", "a commit")
            landed, landed_at, reverted_by = event["commit_id"], day, None
            landed_how = f"closed by {actor}'s commit"
        elif kind == "labeled" and (event.get("label") or {}).get("name") == "reverted":
            labelled_in_timeline = True
            if landed:
                reverted_by = reverted_by or f"labelled reverted on {day}"
        elif landed and kind == "referenced" and reverts.get(str(event.get("commit_id"))) == landed:
            by = str(event["commit_id"])[:12]
            reverted_by = reverted_by or f"reverted by commit {by} on {day} (\"This reverts commit {landed[:12]}\")"
        elif landed and kind == "reopened":
            reverted_by = reverted_by or f"reopened on {day}"
        elif landed and kind == "cross-referenced":
            source = (event.get("source") or {}).get("issue") or {}
            title = str(source.get("title", ""))
            merged_at = (source.get("pull_request") or {}).get("merged_at")
            if merged_at and title.startswith("Revert") and f"#{ref.number}" in f"{title} {source.get('body') or ''}":
                where = _ref_of_issue(source) or "a revert PR"
                reverted_by = f"reverted by {where} (merged {str(merged_at)[:10]})"
    labels = {str(label.get("name")) for label in pr.get("labels") or []}
    if pr.get("merged"):
        landed = landed or pr.get("merge_commit_sha")
        landed_how = "merged"
        landed_at = landed_at or str(pr.get("merged_at") or "")[:10]
    if landed is None and any(_LANDED_LABEL.match(label) for label in labels):
        landed_how = "labelled merged by the merge bot"
    if reverted_by is None and landed and "reverted" in labels and not labelled_in_timeline:
        reverted_by = "labelled reverted"
    short = landed[:12] if landed else "an unknown commit"
    if reverted_by and (landed or landed_how):
        return "reverted", landed, f"Landed as {short} on {landed_at or 'an unknown day'}, then {reverted_by}"
    if landed_how == "merged":
        return "merged", landed, f"GitHub merged it as {short} on {landed_at}"
    if landed_how:
        shown = "GitHub shows it closed, not merged"
        if landed is None:
            return "landed", None, f"{landed_how.capitalize()} ({shown}), but no closing commit is recorded"
        return "landed", landed, f"Landed as {short} on {landed_at}, {landed_how} ({shown})"
    if pr.get("state") == "open":
        return "open", None, f"Open since {str(pr.get('created_at') or '')[:10]}"
    return "closed-unmerged", None, f"Closed on {str(pr.get('closed_at') or '')[:10]} without a merge or a landing commit"


def _ref_of_issue(issue: dict[str, Any]) -> str | None:
    repo = (issue.get("repository") or {}).get("full_name")
    number = issue.get("number")
    return f"{repo}#{number}" if repo and number else (f"#{number}" if number else None)


def classify_issue(issue: dict[str, Any]) -> tuple[str, None, None, str]:
    """(state, commit, released_in, story) of an issue: open or closed, never in a release."""
    opened = str(issue.get("created_at") or "")[:10]
    if issue.get("state") != "closed":
        return "open", None, None, f"An issue, open since {opened}"
    reason = issue.get("state_reason")
    how = f" as {str(reason).replace('_', ' ')}" if reason else ""
    return "closed", None, None, f"An issue, opened {opened}, closed{how} on {str(issue.get('closed_at') or '')[:10]}"
