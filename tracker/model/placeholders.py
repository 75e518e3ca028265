"""Placeholders: the values ``xpu-workarounds new`` writes for what only a person can say.

A new entry's symptom, why, how, affected window and upstream references are written as
``"TODO: ..."`` (``placeholder``), each naming what goes there. A manifest that still holds one
is not valid: ``lint`` names each, at its line, as the one thing to do about that field, so that
the list of problems is the list of what is left to fill, and nothing unfinished ships.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracker.model.manifest import Problem
from tracker.model.vocabulary import entry_label

if TYPE_CHECKING:
    from tracker.model.lines import LineLocator

PREFIX = "TODO:"


def placeholder(hint: str) -> str:
    """The value written where a person has to say ``hint``."""
    return f"{PREFIX} {hint}"


def is_placeholder(value: object) -> bool:
    return isinstance(value, str) and value.strip().startswith(PREFIX)


def problems(path: Path, data: dict[str, Any], lines: Callable[[], LineLocator]) -> list[Problem]:
    """One problem per placeholder left in ``data``'s ``[[workaround]]`` and ``[[tracked]]`` entries."""
    return [Problem(path, _line(lines(), where, str(value)), field_name, f"to fill in: {' '.join(str(value).split())}")
            for field_name, value, where in _values(data) if is_placeholder(value)]


def _tables(value: object) -> Iterator[tuple[int, dict[str, Any]]]:
    for index, table in enumerate(value if isinstance(value, list) else ()):
        if isinstance(table, dict):
            yield index, table


# Where a value is: (table, index, key, workaround index) as ``LineLocator.of`` takes them.
Where = tuple[str, int, str, int]


def _line(lines: LineLocator, where: Where, value: str) -> int:
    table, index, key, workaround = where
    if table == "workaround" and key == "targets":  # a target's value: the line of the targets that holds it
        start = lines.of(table, index, key)
        return lines.find(value, start, start)
    return lines.of(table, index, key, workaround=workaround)


def _values(data: dict[str, Any]) -> Iterator[tuple[str, object, Where]]:
    """(field name as the validator names it, value, where it is) of every value that may be a placeholder."""
    for index, entry in _tables(data.get("workaround")):
        label = entry_label("workaround", entry.get("id"), index)
        for key, value in entry.items():
            yield f"{label}.{key}", value, ("workaround", index, key, -1)
        for number, target in _tables(entry.get("targets")):
            for key, value in target.items():
                yield f"{label}.targets[{number}].{key}", value, ("workaround", index, "targets", -1)
        for table in ("affected", "upstream"):
            for number, values in _tables(entry.get(table)):
                for key, value in values.items():
                    yield f"{label}.{table}[{number}].{key}", value, (f"workaround.{table}", number, key, index)
    for index, entry in _tables(data.get("tracked")):
        label = entry_label("tracked", entry.get("id"), index)
        for key, value in entry.items():
            yield f"{label}.{key}", value, ("tracked", index, key, -1)


__all__ = ["PREFIX", "is_placeholder", "placeholder", "problems"]
