"""GraphQL's answers in the shapes of the REST answers they stand for.

``tracker.upstream.graphql`` asks many things in one query; what comes back is turned here into
the fields of the REST answer the same fact would have had (``GET /repos/O/R/pulls/N``, a
timeline event, a tag, a compare status, a file, a commit), so that everything after the
prefetch reads one shape whichever API answered. Each field is read as untrusted data
(``tracker.upstream.fields``): a wrong type is ``WrongField``, never a crash.
"""

from __future__ import annotations

import base64
from typing import Any

from tracker.upstream.fields import (
    as_bool,
    as_choice,
    as_date,
    as_int,
    as_sha,
    as_str,
    field_object,
    field_objects,
    optional_date,
    optional_object,
    optional_str,
)

_REST_EVENT = {"MergedEvent": "merged", "ClosedEvent": "closed", "ReopenedEvent": "reopened",
               "LabeledEvent": "labeled", "ReferencedEvent": "referenced", "CrossReferencedEvent": "cross-referenced"}
# GraphQL compares base = the tag with head = the commit; REST's compare/{commit}...{tag} the other way round.
REST_STATUS = {"BEHIND": "ahead", "IDENTICAL": "identical", "AHEAD": "behind", "DIVERGED": "diverged"}
CONTAINED = frozenset({"ahead", "identical"})  # REST statuses saying the tag contains the commit
PULL_STATES = ("OPEN", "CLOSED", "MERGED")  # GraphQL's PullRequestState


def rest_pull(node: dict[str, Any], where: str) -> dict[str, Any]:
    """The fields of ``GET /repos/O/R/pulls/N`` that ``state.read_pull`` reads."""
    merged = as_bool(node, "merged", where)
    merge_commit = optional_object(node, "mergeCommit", where)
    sha = as_sha(merge_commit, "oid", f"{where} mergeCommit") if merge_commit is not None else None
    labels = field_objects(field_object(node, "labels", where), "nodes", f"{where} labels")
    return {"number": as_int(node, "number", where),
            "state": "open" if as_choice(node, "state", where, PULL_STATES) == "OPEN" else "closed",
            "merged": merged, "merged_at": optional_date(node, "mergedAt", where),
            "merge_commit_sha": sha if merged else None,
            "created_at": as_date(node, "createdAt", where), "closed_at": optional_date(node, "closedAt", where),
            "labels": [{"name": as_str(label, "name", f"{where} label")} for label in labels]}


def _commit_of(item: dict[str, Any], name: str, where: str) -> str | None:
    """The sha of ``item``'s commit ``name`` (None: none, or a closer that is not a commit)."""
    commit = optional_object(item, name, where)
    if commit is None or (name == "closer" and as_str(commit, "__typename", f"{where} {name}") != "Commit"):
        return None
    return as_sha(commit, "oid", f"{where} {name}")


def rest_event(item: dict[str, Any], base_url: str, where: str) -> dict[str, Any] | None:
    """A timeline item as ``GET /repos/O/R/issues/N/timeline`` gives it (the fields read)."""
    kind = _REST_EVENT.get(as_str(item, "__typename", where))
    if kind is None:
        return None
    actor = optional_object(item, "actor", where)
    event: dict[str, Any] = {"event": kind, "created_at": as_date(item, "createdAt", where),
                             "actor": None if actor is None else {"login": as_str(actor, "login", f"{where} actor")},
                             "commit_id": None}
    if kind == "merged":
        event["commit_id"] = _commit_of(item, "commit", where)
    elif kind == "closed":
        event["commit_id"] = _commit_of(item, "closer", where)
    elif kind == "labeled":
        event["label"] = {"name": as_str(field_object(item, "label", where), "name", f"{where} label")}
    elif kind == "referenced":
        sha = _commit_of(item, "commit", where)
        found = optional_object(item, "commitRepository", where)
        repository = None if found is None else as_str(found, "nameWithOwner", f"{where} commitRepository")
        event["commit_id"] = sha
        event["commit_url"] = f"{base_url.rstrip('/')}/repos/{repository}/commits/{sha}" if sha and repository else None
    elif kind == "cross-referenced":
        at = f"{where} source"
        source = field_object(item, "source", where)
        kind_of_source = as_str(source, "__typename", at)
        issue: dict[str, Any] = {"number": as_int(source, "number", at), "title": as_str(source, "title", at),
                                 "body": optional_str(source, "body", at), "repository": {
                                     "full_name": as_str(field_object(source, "repository", at), "nameWithOwner",
                                                         f"{at} repository")}}
        if kind_of_source == "PullRequest":
            issue["pull_request"] = {"merged_at": optional_date(source, "mergedAt", at)}
        event["source"] = {"type": "issue", "issue": issue}
    return event


def rest_tag(node: dict[str, Any], where: str) -> dict[str, Any]:
    """A tag as ``GET /repos/O/R/git/matching-refs/tags/v`` gives it."""
    name = as_str(node, "name", where)
    return {"ref": f"refs/tags/{name}", "object": {"sha": as_sha(field_object(node, "target", where), "oid",
                                                                  f"{where} {name}")}}


def tag_date(node: dict[str, Any], where: str) -> str | None:
    """When the tag's commit was made (an annotated tag's target's)."""
    target = field_object(node, "target", where)
    if as_str(target, "__typename", f"{where} target") == "Tag":
        inner = optional_object(target, "target", f"{where} target")
        return None if inner is None else optional_date(inner, "committedDate", f"{where} target")
    return optional_date(target, "committedDate", f"{where} target")


def history_nodes(answer: dict[str, Any], where: str) -> list[dict[str, Any]] | None:
    """A tag's newest commits (None: GraphQL has no history of it to give)."""
    target = optional_object(answer, "target", where)
    if target is not None and as_str(target, "__typename", f"{where} target") == "Tag":
        target = optional_object(target, "target", f"{where} target")
    history = None if target is None else optional_object(target, "history", f"{where} target")
    return None if history is None else field_objects(history, "nodes", f"{where} history")


def rest_file(text: str) -> dict[str, Any]:
    """``GET /repos/O/R/contents/PATH``: the content, base64 as REST gives it."""
    return {"type": "file", "encoding": "base64", "content": base64.b64encode(text.encode()).decode()}


def rest_commit(node: dict[str, Any], where: str) -> dict[str, Any]:
    """``GET /repos/O/R/commits/SHA``: the sha and its message."""
    return {"sha": as_sha(node, "oid", where), "commit": {"message": as_str(node, "message", where)}}
