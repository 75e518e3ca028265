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
from dataclasses import dataclass
from typing import Any

from tracker.model.manifest import UpstreamRef
from tracker.upstream.fields import (
    STATES,
    as_bool,
    as_choice,
    as_date,
    as_int,
    as_object,
    as_str,
    field_object,
    field_objects,
    optional_choice,
    optional_date,
    optional_object,
    optional_sha,
    optional_str,
)

_LANDED_LABEL = re.compile(r"^merged(X\d+)?$")
REVERTS = re.compile(r"^This reverts commit (?P<sha>[0-9a-f]{40})\b", re.M)
# The timeline events the state is read from; every other kind is passed over.
EVENTS = frozenset({"merged", "closed", "labeled", "referenced", "reopened", "cross-referenced"})


@dataclass(frozen=True)
class Pull:
    """The fields of ``GET /repos/O/R/pulls/N`` the state is read from, each of its type."""

    state: str  # open | closed
    merged: bool
    merged_at: str | None
    merge_commit_sha: str | None
    created_at: str
    closed_at: str | None
    labels: frozenset[str]


@dataclass(frozen=True)
class Mention:
    """The issue or pull request of a ``cross-referenced`` event (a revert PR, say)."""

    ref: str | None  # OWNER/NAME#N
    title: str
    body: str
    merged_at: str | None  # a pull request's; None for an issue or an unmerged PR


@dataclass(frozen=True)
class Event:
    """One timeline event of a kind in ``EVENTS``, each field of its type."""

    kind: str
    day: str  # YYYY-MM-DD
    commit: str | None
    actor: str | None
    label: str | None = None
    commit_url: str | None = None
    mention: Mention | None = None


def read_pull(data: object, where: str) -> Pull:
    """``data`` (a pull request as REST gives it) read field by field; ``WrongField`` otherwise."""
    labels = field_objects(data, "labels", where, optional=True)
    return Pull(as_choice(data, "state", where, STATES), as_bool(data, "merged", where),
                optional_date(data, "merged_at", where), optional_sha(data, "merge_commit_sha", where),
                as_date(data, "created_at", where), optional_date(data, "closed_at", where),
                frozenset(as_str(label, "name", f"{where} label") for label in labels))


def read_timeline(items: list[Any], where: str) -> list[Event]:
    """The events of ``items`` (a timeline as REST gives it) the state is read from, in order."""
    events = []
    for index, item in enumerate(items, 1):
        at = f"{where} event {index}"
        kind = as_str(item, "event", at)
        if kind not in EVENTS:
            continue
        actor = optional_object(item, "actor", at)  # its login null: a ghost, as earlier caches kept it
        label = as_str(field_object(item, "label", at), "name", f"{at} label") if kind == "labeled" else None
        mention = _mention(field_object(item, "source", at), f"{at} source") if kind == "cross-referenced" else None
        events.append(Event(kind, as_date(item, "created_at", at)[:10], optional_sha(item, "commit_id", at),
                            None if actor is None else optional_str(actor, "login", f"{at} actor"), label,
                            optional_str(item, "commit_url", at), mention))
    return events


def _mention(source: dict[str, Any], where: str) -> Mention:
    issue = field_object(source, "issue", where)
    at = f"{where} issue"
    repository = optional_object(issue, "repository", at)
    full_name = None if repository is None else as_str(repository, "full_name", f"{at} repository")
    number = as_int(issue, "number", at)
    pull = optional_object(issue, "pull_request", at)
    return Mention(f"{full_name}#{number}" if full_name else f"#{number}", as_str(issue, "title", at),
                   optional_str(issue, "body", at) or "",
                   None if pull is None else optional_date(pull, "merged_at", f"{at} pull_request"))


def landed_commits(pr: Pull, timeline: list[Event]) -> set[str]:
    """Every commit the PR landed as (a reland lands again, as another commit)."""
    found = {e.commit for e in timeline if e.kind in ("merged", "closed") and e.commit}
    if pr.merged and pr.merge_commit_sha:
        found.add(pr.merge_commit_sha)
    return found


def referenced_after_landing(pr: Pull, timeline: list[Event]) -> list[Event]:
    """The ``referenced`` events after the first landing whose commit is not a landed one:
    the only commits that can be a revert of it (each is read once, then cached for good)."""
    landed = landed_commits(pr, timeline)
    found, seen_landing = [], False
    for event in timeline:
        if event.kind in ("merged", "closed") and event.commit:
            seen_landing = True
        elif seen_landing and event.kind == "referenced" and event.commit and event.commit not in landed:
            found.append(event)
    return found


def reverted_sha(message: str) -> str | None:
    """The commit a commit message says it reverts (git's own ``This reverts commit <sha>.``)."""
    found = REVERTS.search(message)
    return found["sha"] if found else None


def classify_pr(ref: UpstreamRef, pr: Pull, timeline: list[Event],
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
        kind, day = event.kind, event.day
        if kind == "merged" and event.commit:
            landed, landed_at, landed_how, reverted_by = event.commit, day, "merged", None
        elif kind == "closed" and event.commit:
            landed, landed_at, reverted_by = event.commit, day, None
            landed_how = f"closed by {event.actor or 'a commit'}'s commit"
        elif kind == "labeled" and event.label == "reverted":
            labelled_in_timeline = True
            if landed:
                reverted_by = reverted_by or f"labelled reverted on {day}"
        elif landed and kind == "referenced" and event.commit and reverts.get(event.commit) == landed:
            by = event.commit[:12]
            reverted_by = reverted_by or f"reverted by commit {by} on {day} (\"This reverts commit {landed[:12]}\")"
        elif landed and kind == "reopened":
            reverted_by = reverted_by or f"reopened on {day}"
        elif landed and kind == "cross-referenced" and event.mention is not None:
            source = event.mention
            if source.merged_at and source.title.startswith("Revert") and \
                    f"#{ref.number}" in f"{source.title} {source.body}":
                reverted_by = f"reverted by {source.ref or 'a revert PR'} (merged {source.merged_at[:10]})"
    labels = pr.labels
    if pr.merged:
        landed = landed or pr.merge_commit_sha
        landed_how = "merged"
        landed_at = landed_at or (pr.merged_at or "")[:10]
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
    if pr.state == "open":
        return "open", None, f"Open since {pr.created_at[:10]}"
    return "closed-unmerged", None, f"Closed on {(pr.closed_at or '')[:10]} without a merge or a landing commit"


ISSUE_STATE_REASONS = ("completed", "not_planned", "reopened", "duplicate")


def classify_issue(issue: object, where: str) -> tuple[str, None, None, str]:
    """(state, commit, released_in, story) of an issue: open or closed, never in a release."""
    opened = as_date(issue, "created_at", where)[:10]
    if as_choice(issue, "state", where, STATES) != "closed":
        return "open", None, None, f"An issue, open since {opened}"
    reason = optional_choice(issue, "state_reason", where, ISSUE_STATE_REASONS)
    how = f" as {reason.replace('_', ' ')}" if reason else ""
    closed = optional_date(issue, "closed_at", where)
    return "closed", None, None, f"An issue, opened {opened}, closed{how} on {(closed or '')[:10]}"


def is_issue(data: object, where: str) -> bool:
    """Whether ``data`` (an answer of ``/issues/N``) is an issue: GitHub answers it for a pull request
    too, with ``pull_request``."""
    as_object(data, where)
    as_int(data, "number", where)
    return optional_object(data, "pull_request", where) is None
