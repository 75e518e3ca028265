"""The manifest file as a TOML document: its bytes read within bounds, its text parsed by ``tomllib``.

The one reading of a manifest's text. ``tracker.model.reader`` validates what ``parse`` returns
into a ``Manifest``; a process that carries out stored plans (``tracker.runtime.record``) looks
each plan's workaround and targets up in it (``declared_targets``) without validating the rest,
which would import the whole model. Stdlib and ``tracker.paths`` only, for that reason.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

from tracker.paths import NotRegular, read_regular

# Bounds checked before the TOML parser sees a manifest (``_bounds``): tomllib takes about a
# second a MiB here, and a dotted key's cost grows with the square of its parts (one line of
# 40,000 parts takes it half a minute). The 500-workaround scale manifest is ~0.4 MiB, its
# longest line a few hundred characters and its deepest key two parts.
SIZE_LIMIT = 2 << 20
LINE_LIMIT = 16384  # characters
KEY_PARTS_LIMIT = 32


class Unreadable(Exception):
    """Why a manifest file is not a TOML document within bounds: the line (1 when none is
    meant), the field a problem names (``file`` or ``toml``) and a message."""

    def __init__(self, line: int, field: str, message: str) -> None:
        super().__init__(message)
        self.line, self.field, self.message = line, field, message


class Document(NamedTuple):
    raw: bytes
    text: str
    data: dict[str, Any]


def read_bytes(path: Path | str) -> bytes:
    """The file's bytes: a regular file only (a FIFO or a device would block or never end), at
    most ``SIZE_LIMIT`` bytes; opened without blocking, so a FIFO never stops vLLM's start-up."""
    try:
        raw = read_regular(path, SIZE_LIMIT + 1)
    except NotRegular:
        raise Unreadable(1, "file", "not a regular file") from None
    except OSError as error:
        raise Unreadable(1, "file", f"cannot read: {error.strerror or error}") from None
    if len(raw) > SIZE_LIMIT:
        raise Unreadable(1, "file", f"larger than {SIZE_LIMIT // (1 << 20)} MiB")
    return raw


def parse(path: Path | str) -> Document:
    """The manifest at ``path`` as bytes, text and TOML data; raises ``Unreadable``."""
    raw = read_bytes(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Unreadable(raw[:error.start].count(b"\n") + 1, "file", "not UTF-8") from None
    _bounds(text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        line = getattr(error, "lineno", None) or _line_from_message(str(error))
        raise Unreadable(line, "toml", _toml_message(str(error))) from None
    except RecursionError:
        raise Unreadable(_first_line(text, r"[\[{]{50}"), "toml", "nested too deeply") from None
    except ValueError:  # tomllib converts integers itself: Python refuses more than 4300 digits
        raise Unreadable(_first_line(text, r"\d{4300}"), "toml", "a number of more than 4300 digits") from None
    return Document(raw, text, data)


def declared_targets(data: dict[str, Any]) -> dict[str, frozenset[str]]:
    """Each ``[[workaround]]``'s id and the paths of its targets, as ``tomllib`` read them (inline
    ``targets = [...]`` and ``[[workaround.targets]]`` tables alike). An entry not of the shape a
    valid manifest gives (an id that is not a string, a target without a string path) is left out:
    nothing is declared for it."""
    found: dict[str, frozenset[str]] = {}
    entries = data.get("workaround")
    for entry in entries if isinstance(entries, list) else ():
        targets = entry.get("targets") if isinstance(entry, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(targets, list) and all(
                isinstance(target, dict) and isinstance(target.get("path"), str) for target in targets):
            found[entry["id"]] = frozenset(target["path"] for target in targets)
    return found


# A dotted key's parts (bare, "basic" or 'literal'), the dots and blanks between them, anything else.
_KEY_TOKEN = re.compile(r"""([A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')|(\.)|([ \t]+)|.""")


def _bounds(text: str) -> None:
    """Raise ``Unreadable`` at the first line longer than ``LINE_LIMIT`` or holding a dotted key (or
    table name) of more than ``KEY_PARTS_LIMIT`` parts. Linear in the text: only a line with that
    many dots is looked at token by token, each token once. Text inside a string that reads as
    such a key counts too: no manifest needs one."""
    lines = text.split("\n")
    if max(map(len, lines)) > LINE_LIMIT:
        number = next(number for number, line in enumerate(lines, start=1) if len(line) > LINE_LIMIT)
        raise Unreadable(number, "toml", f"a line longer than {LINE_LIMIT} characters")
    for number, line in enumerate(lines, start=1):
        if line.count(".") >= KEY_PARTS_LIMIT and _key_parts(line) > KEY_PARTS_LIMIT:
            raise Unreadable(number, "toml", f"a dotted key of more than {KEY_PARTS_LIMIT} parts")


def _key_parts(line: str) -> int:
    """The most parts of any run ``part . part . part`` in ``line``."""
    most = parts = 0
    dotted = False  # the last token that was not a blank: a dot after a part
    for found in _KEY_TOKEN.finditer(line):
        part, dot, blank = found.groups()
        if blank is not None:
            continue
        if part is not None:
            parts = parts + 1 if dotted else 1
            most = max(most, parts)
            dotted = False
        elif dot is not None and parts and not dotted:
            dotted = True
        else:
            parts, dotted = 0, False
    return most


def _first_line(text: str, pattern: str) -> int:
    found = re.search(pattern, text)
    return text.count("\n", 0, found.start()) + 1 if found else 1


def _line_from_message(message: str) -> int:
    found = re.search(r"line (\d+)", message)
    return int(found.group(1)) if found else 1


def _toml_message(message: str) -> str:
    return re.sub(r"\s*\(at line \d+, column \d+\)|\s*\(at end of document\)", "", message) or "invalid TOML"


__all__ = ["KEY_PARTS_LIMIT", "LINE_LIMIT", "SIZE_LIMIT", "Document", "Unreadable", "declared_targets", "parse",
           "read_bytes"]
