"""``upstream --write``: the learned state, commit and release written into a manifest,
keeping its formatting and comments; nothing written unless the result passes ``lint``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import tomlkit

from tracker.model.reader import check
from tracker.model.vocabulary import RELEASED_STATES
from tracker.upstream.facts import Report


def updated_text(text: str, report: Report) -> tuple[str, list[str]]:
    """``text`` with the facts of ``report`` written in, and one line per change."""
    document = tomlkit.parse(text)
    changes: list[str] = []
    for workaround in document.get("workaround", []):
        for table in workaround.get("upstream", []):
            facts = report.facts(str(table.get("ref")))
            if facts is None or facts.state is None:
                continue
            where = f"{workaround['id']}: {facts.ref}"
            changes += _update(table, "state", facts.state, where)
            if facts.commit:
                changes += _update(table, "commit", facts.commit, where)
            if facts.released_in is not None:
                changes += _update(table, "released_in", str(facts.released_in), where)
            elif facts.state not in RELEASED_STATES and "released_in" in table:
                del table["released_in"]
                changes.append(f"{where}: released_in removed ({facts.state})")
    return (tomlkit.dumps(document) if changes else text), changes


def write_back(path: Path, report: Report) -> list[str]:
    """Write learned state/released_in/commit into the manifest at ``path``, keeping its
    formatting and comments. Returns one line per change; writes nothing when the result
    would not pass ``lint``. A fix stays unreleased (the workaround in force) until a
    release containing it is known."""
    updated, changes = updated_text(path.read_text(encoding="utf-8"), report)
    if not changes:
        return []
    handle, temporary = tempfile.mkstemp(prefix=".workarounds-", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(updated)
        problems = check(Path(temporary))
        if problems:
            raise ValueError("the updated manifest would not pass lint: " + "; ".join(
                str(problem).replace(temporary, str(path)) for problem in problems[:3]))
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return changes


def _update(table: Any, key: str, value: str, where: str) -> list[str]:
    current = table.get(key)
    if current is not None and str(current) == value:
        return []
    table[key] = value
    return [f"{where}: {key} {current if current is not None else '(unset)'} -> {value}"]
