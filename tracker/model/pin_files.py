"""Pin files: the repository's own files that pin vLLM, as ``[layout] pins`` names them.

Each entry is a path relative to the repository's root or a glob, matched one path segment at a
time: ``*``, ``?`` and ``[...]`` (``fnmatch``'s syntax) match within one folder, never across a
``/``, and a pattern matches a path only with as many segments, so ``requirements*.txt`` is the
root's files alone and ``requirements/*.txt`` those of that one folder. (``fnmatch`` on the whole
path lets ``*`` cross ``/``, and ``PurePosixPath.match`` matches from the right: a fixture's
``tests/fixtures/requirements.txt`` would count.) A glob may match nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase


def pin_glob_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a ``[layout] pins`` entry (None: it is one): ``keys.PIN_GLOB``'s rule
    (the schema's), said part by part."""
    if not pattern:
        return "an empty path"
    if "\\" in pattern:
        return "a backslash: paths are written with '/'"
    if any(ord(character) < 0x20 or ord(character) == 0x7F for character in pattern):
        return "a control character"
    if pattern.startswith("/"):
        return "an absolute path: paths are relative to the repository's root"
    segments = pattern.split("/")
    if "" in segments:
        return "an empty path segment ('//' or a trailing '/')"
    if "." in segments or ".." in segments:
        return "a '.' or '..' segment: paths stay inside the repository, written without them"
    if "**" in pattern:
        return "'**': '*' matches within one folder; name each folder's files (e.g. 'requirements/*.txt')"
    return None


def matches(pattern: str, path: str) -> bool:
    """Whether repository path ``path`` is one ``pattern`` names, segment by segment (module docstring)."""
    wanted, parts = pattern.split("/"), path.split("/")
    return len(wanted) == len(parts) and all(fnmatchcase(part, glob_part) for part, glob_part in zip(parts, wanted, strict=True))


def is_pin_file(path: str, patterns: Iterable[str]) -> bool:
    """Whether ``path`` (as GitHub names a repository's file) is a pin file of ``patterns``; a path
    with a '.' or '..' segment never is."""
    if any(part in (".", "..", "") for part in path.split("/")):
        return False
    return any(matches(pattern, path) for pattern in patterns)


def is_glob(pattern: str) -> bool:
    """Whether ``pattern`` may name several files (``*``, ``?`` or ``[``), not one by its path."""
    return any(character in pattern for character in "*?[")


def declaring(path: str) -> str:
    """``path`` as a ``[layout] pins`` entry naming that file alone (``*``, ``?`` and ``[`` escaped)."""
    return re.sub(r"([*?[])", r"[\1]", path)


__all__ = ["declaring", "is_glob", "is_pin_file", "matches", "pin_glob_problem"]
