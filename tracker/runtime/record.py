"""The fast path's record (``tracker.plugin``): its key, writing it, and checking stored plans.

Only a full activation takes a whole key and writes a record, and only a record of stored
plans needs its plans checked, so none of this is imported where a process replays an
answer in which nothing applied (the path every vLLM process that applies nothing takes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

import tracker
from tracker.model.adopter import FOLDER
from tracker.model.document import Unreadable, declared_targets, parse
from tracker.model.vocabulary import APPLY_REASONS, SKIP_REASONS, Choice, DecidedBy, Platform, is_id
from tracker.paths import PACKAGE_DIR, atomic_write, path_directories, private_dir
from tracker.plugin import (
    _OWN_KEYS,
    KEY_METADATA,
    KEY_PATHS,
    KEY_WATCH,
    head,
    identity,
    is_one_line,
    matches,
    still,
    store_path,
    valid_record,
    watched_names,
)

# What an activation runs, and so what its key covers: this package's top-level modules and these
# packages, at any depth. Anything else (the command line, upstream facts, retirement) no vLLM
# process runs, and a change to it must not cost the next process its replay.
RUN_TIME_PACKAGES = ("decision", "engine", "model", "runtime")
_PLAN_KEYS = frozenset({"id", "decision", "reason", "detail", "decided_by", "targets", "released"})
_STEP_KEYS = frozenset({"path", "kind", "params", "optional"})


def _code() -> list[list[Any]]:
    """Every directory and ``.py`` file of this package a decision may run (``RUN_TIME_PACKAGES``
    and the top-level modules), absolute path and identity, in a fixed order. A directory's
    identity moves when a file in it is added, removed or renamed, a file's when it is
    rewritten: a later process checks these with one ``stat`` each (``plugin.still``) instead of
    listing the package again."""
    from tracker.model.versions import listing  # the full path has imported it

    found: list[list[Any]] = []
    pending = [PACKAGE_DIR]
    while pending:
        directory = pending.pop(0)
        found.append([directory, identity(directory)])
        for name in listing(directory) or ():
            path = os.path.join(directory, name)
            if name.endswith(".py"):
                found.append([path, identity(path)])
            elif ("." not in name and name != "__pycache__" and (directory != PACKAGE_DIR or name in RUN_TIME_PACKAGES)
                  and os.path.isdir(path)):
                pending.append(path)
    return found


def _metadata(distributions: Iterable[str]) -> list[list[Any]]:
    """The metadata file of every distribution named in ``distributions`` on ``sys.path``, with its identity."""
    from tracker.model.versions import metadata_entries, normalized_name  # the full path has imported it

    wanted = {normalized_name(name) for name in distributions}
    found: list[list[Any]] = []
    for entry in path_directories():
        for distribution, name, suffix in metadata_entries(entry) or ():
            if suffix != "egg" and distribution in wanted:
                folder = os.path.join(entry, name)
                for inner in ("METADATA", "PKG-INFO"):
                    path = os.path.join(folder, inner)
                    inner_identity = identity(path)
                    if inner_identity is not None:  # one created later moves the folder's identity
                        found.append([path, inner_identity])
                found.append([folder, identity(folder)])  # an egg-info file, or the folder itself
    return found


# Packages a process imports from this project, beside the detected distributions: one of these
# appearing earlier on sys.path would be imported instead.
_OWN_PACKAGES = ("tracker", "workarounds")


def key(environ: Mapping[str, str], distributions: Iterable[str]) -> list[Any] | None:
    """Everything a decision reads (docs/how-it-works.md, "Fast path"): ``plugin.head``, then this
    package's code and the metadata files of ``distributions``, each with its identity, and the
    watched entries of every ``sys.path`` directory (``plugin.watched``); None when it cannot be told."""
    from tracker.model.versions import normalized_name  # the full path has imported it

    first = head(environ)
    if first is None:
        return None
    watch = sorted({*(normalized_name(name).replace("-", "_") for name in distributions), *_OWN_PACKAGES})
    names = [watched_names(entry, watch) for entry, _ in first[KEY_PATHS]]
    return [*first, [*_code(), *_beside(environ)], _metadata(distributions), [watch, names]]


def _beside(environ: Mapping[str, str]) -> list[list[Any]]:
    """The ``workarounds/`` folder beside a named manifest, with its identity (None while there is
    none): an adopter's folder of modules appearing or going (``tracker.model.adopter``) changes what
    is decided; anything else changing beside the manifest does not."""
    named = environ.get(tracker.MANIFEST)
    if not named:
        return []
    folder = os.path.join(os.path.dirname(os.path.abspath(named)), FOLDER)
    return [[folder, identity(folder)]]


def _valid_id(value: object) -> bool:
    """A workaround id as the manifest allows it (the module imported is derived from it)."""
    return is_id(value) and is_one_line(value, 256)


def _valid_plan(plan: object) -> bool:
    """The shape of one stored plan (``tracker.runtime.plan.Plan.as_json``)."""
    if not isinstance(plan, dict) or set(plan) != _PLAN_KEYS:
        return False
    if not (_valid_id(plan["id"]) and is_one_line(plan["detail"]) and plan["decided_by"] == DecidedBy.VERSION):
        return False
    released = plan["released"]
    if plan["decision"] == Choice.SKIP:
        if plan["reason"] not in SKIP_REASONS or released is not None:
            return False
    elif plan["decision"] != Choice.APPLY or plan["reason"] not in APPLY_REASONS or not isinstance(released, dict) \
            or not all(is_one_line(ref, 256) and isinstance(found, bool) for ref, found in released.items()):
        return False
    if not isinstance(plan["targets"], list):
        return False
    return all(isinstance(step, dict) and set(step) == _STEP_KEYS and is_one_line(step["path"], 1024)
               and is_one_line(step["kind"], 64) and isinstance(step["optional"], bool) and isinstance(step["params"], list)
               and all(is_one_line(param, 256) for param in step["params"]) for step in plan["targets"])


def valid_plans(plans: object, environment: dict[str, Any]) -> bool:
    """Stored plans of the right shape, at least one of which applies (else it is stored as skipped),
    for a stack of a platform the vocabulary knows (each plan's ``Context`` carries it)."""
    return (isinstance(plans, list) and all(_valid_plan(plan) for plan in plans)
            and any(plan["decision"] == Choice.APPLY for plan in plans) and environment["platform"] in set(Platform))


def declared(plans: list[dict[str, Any]], key: list[Any]) -> bool:
    """Whether every stored plan is a workaround of the manifest the key names and every target
    it would patch is one that workaround declares: a record someone else wrote can then make a
    process patch nothing the manifest does not ask for. ``key`` already matches this process
    (the manifest is the file it was, ``plugin.matches``, and a plan is stored only from a valid
    one); the manifest is read as every reader reads it (``tracker.model.document``: within
    bounds, by ``tomllib``), and one it cannot read declares nothing."""
    try:
        targets = declared_targets(parse(key[3]).data)
    except Unreadable:
        return False
    return all(plan["id"] in targets and targets[plan["id"]].issuperset(step["path"] for step in plan["targets"])
               for plan in plans)


def store(environ: Mapping[str, str], body: dict[str, Any], before: list[Any] | None,
          sources: list[list[Any]] | None = None) -> None:
    """Remember a full activation's answer; never raises.

    ``body``: ``{"kind": "skipped", "report", "line"}`` (nothing applied: replayed as it is) or
    ``{"kind": "planned", "environment", "tool", "warnings", "plans"}`` (carried out again by
    ``tracker.runtime``). ``before``: the key taken before the activation read its inputs;
    ``sources``: [path, identity] of the source files a probe read, taken before it read them.
    Stored only when the inputs are still what they were: otherwise the answer may belong to neither.
    """
    try:
        if before is None or not matches(before, environ):
            return
        if sources:
            if not still(sources):
                return
            before = [*before[:KEY_METADATA], [*before[KEY_METADATA], *sources], *before[KEY_WATCH:]]
        record = {"key": before, **body}
        if body.get("kind") == "skipped":
            record["report"] = {k: v for k, v in body["report"].items() if k not in _OWN_KEYS}
        if not valid_record(record):
            return
        path = store_path(environ)
        private_dir(os.path.dirname(path))
        atomic_write(path, json.dumps(record))
    except Exception:  # noqa: BLE001 - a read-only or foreign cache only costs speed
        pass


__all__ = ["declared", "key", "store", "valid_plans"]
