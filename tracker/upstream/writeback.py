"""``upstream --write``: the learned state, commit and release written into a manifest,
keeping its formatting and comments; nothing written unless the result passes ``lint``."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit

from tracker.model.reader import check
from tracker.model.vocabulary import RELEASED_STATES, ErrorKind, ToolError
from tracker.paths import atomic_write
from tracker.upstream.facts import Report


@dataclass(frozen=True)
class FactChange:
    """One field of one reference's entry, as the facts change it."""

    workaround: str
    ref: str
    key: str  # state | commit | released_in
    old: str | None
    new: str | None  # None: removed

    def __str__(self) -> str:
        if self.new is None:
            return f"{self.workaround}: {self.ref}: {self.key} {self.old} removed"
        return f"{self.workaround}: {self.ref}: {self.key} {self.old if self.old is not None else '(unset)'} -> {self.new}"


def updated_text(text: str, report: Report) -> tuple[str, list[FactChange]]:
    """``text`` with the facts of ``report`` written in, and the changes made."""
    document = tomlkit.parse(text)
    changes: list[FactChange] = []
    for workaround in document.get("workaround", []):
        for table in workaround.get("upstream", []):
            facts = report.facts(str(table.get("ref")))
            if facts is None or facts.state is None:
                continue
            where = (str(workaround["id"]), facts.ref)
            changes += _update(table, "state", facts.state, where)
            if facts.commit:
                changes += _update(table, "commit", facts.commit, where)
            if facts.released_in is not None:
                changes += _update(table, "released_in", str(facts.released_in), where)
            elif facts.state not in RELEASED_STATES and "released_in" in table:
                changes.append(FactChange(*where, "released_in", str(table["released_in"]), None))
                del table["released_in"]
    return (tomlkit.dumps(document) if changes else text), changes


class NotWritten(ToolError):
    """The manifest was left as it was: the result would not pass ``lint``, someone changed the
    file meanwhile, or it cannot be read or written. Bad input: the file the caller named."""

    kind = ErrorKind.BAD_INPUT


def write_back(path: Path, report: Report) -> list[str]:
    """Write learned state/released_in/commit into the manifest at ``path``, keeping its
    formatting and comments. Returns one line per change; writes nothing when the result
    would not pass ``lint``. A fix stays unreleased (the workaround in force) until a
    release containing it is known.

    The file keeps its mode and line endings (CRLF stays CRLF); a symlink is written
    through to its target and stays a link. Nothing is written when the file changed
    between this read and the replace: a person's edit is never lost. ``NotWritten``
    says why nothing was.
    """
    try:
        return _write_back(path, report)
    except (ValueError, OSError) as error:  # ValueError: not UTF-8, not TOML, or refused below
        raise NotWritten(f"{path} not written: {error}") from None


def _write_back(path: Path, report: Report) -> list[str]:
    target = Path(os.path.realpath(path))
    original = target.read_bytes()
    mode = stat.S_IMODE(os.stat(target).st_mode)
    text = original.decode("utf-8")
    crlf = "\r\n" in text
    updated, changes = updated_text(text.replace("\r\n", "\n") if crlf else text, report)
    if not changes:
        return []
    if crlf:
        updated = updated.replace("\r\n", "\n").replace("\n", "\r\n")
    lines = [str(change) for change in changes]

    def checked(temporary: Path) -> None:
        problems = check(temporary)
        if problems:
            raise ValueError("the updated manifest would not pass lint: " + "; ".join(
                str(problem).replace(str(temporary), str(path)) for problem in problems[:3]))
        if target.read_bytes() != original:
            raise ValueError("it changed while upstream ran (someone edited it since it was read); run again")

    atomic_write(target, updated.encode("utf-8"), mode=mode, before_replace=checked)
    return lines


def _update(table: Any, key: str, value: str, where: tuple[str, str]) -> list[FactChange]:
    current = table.get(key)
    if current is not None and str(current) == value:
        return []
    table[key] = value
    return [FactChange(*where, key, str(current) if current is not None else None, value)]
