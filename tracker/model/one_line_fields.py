"""The manifest's one-line fields (``tracker.model.keys``): a control character in one is a problem.

These fields are printed on a line of their own or inside one: a terminal, a CI log (where a
line of its own that starts with ``::`` is a workflow command), a table row of the catalogue
or of a GitHub text. Every printer escapes what it prints (``tracker.one_line``,
``tracker.escape``); ``lint`` also says where such a character was written, so that it is
taken out rather than shown escaped. The prose fields (``why``, ``how``) may run over lines.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracker.model.keys import TRACKED_ONE_LINE, UPSTREAM_ONE_LINE, WORKAROUND_ONE_LINE
from tracker.model.manifest import Problem
from tracker.model.versions import COMPONENTS
from tracker.model.vocabulary import entry_label

if TYPE_CHECKING:
    from tracker.model.lines import LineLocator

# Control characters, format characters (zero-width and bidirectional marks among them) and the
# line and paragraph separators.
_CONTROL = frozenset({"Cc", "Cf", "Zl", "Zp"})


def problems(path: Path, data: dict[str, Any], lines: Callable[[], LineLocator],
             already: set[str]) -> list[Problem]:
    """A problem for each one-line field of ``data`` that holds a control character, unless
    ``already`` names that field (its value is wrong in another way, said once)."""
    found = []
    for table, index, field_name, key, value in _fields(data):
        character = _control(value)
        if character is not None and field_name not in already:
            workaround = index[1] if len(index) == 2 else -1
            line = lines().of(table, index[0], key, workaround=workaround)
            found.append(Problem(path, line, field_name, f"holds the control character {character!r}: "
                                                         "this field is one line of text"))
    return found


def _control(value: object) -> str | None:
    if not isinstance(value, str) or value.isprintable():
        return None
    return next((char for char in value if unicodedata.category(char) in _CONTROL), None)


def _tables(value: object) -> Iterator[tuple[int, dict[str, Any]]]:
    for index, table in enumerate(value if isinstance(value, list) else ()):
        if isinstance(table, dict):
            yield index, table


def _fields(data: dict[str, Any]) -> Iterator[tuple[str, tuple[int, ...], str, str, object]]:
    """(locator table, (index, workaround index), field name as problems name it, key, value)."""
    for index, entry in _tables(data.get("workaround")):
        label = entry_label("workaround", entry.get("id"), index)
        for key in WORKAROUND_ONE_LINE:
            yield "workaround", (index,), f"{label}.{key}", key, entry.get(key)
        for number, reference in _tables(entry.get("upstream")):
            for key in UPSTREAM_ONE_LINE:
                yield ("workaround.upstream", (number, index), f"{label}.upstream[{number}].{key}", key,
                       reference.get(key))
    for index, entry in _tables(data.get("tracked")):
        label = entry_label("tracked", entry.get("id"), index)
        for key in TRACKED_ONE_LINE:
            yield "tracked", (index,), f"{label}.{key}", key, entry.get(key)
    sources = data.get("sources")
    for component, entry in (sources.items() if isinstance(sources, dict) else ()):
        for key, value in (entry.items() if component in COMPONENTS and isinstance(entry, dict) else ()):
            yield f"sources.{component}", (0,), f"sources.{component}.{key}", key, value
