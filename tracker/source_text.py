"""Python source as every command reads it: one reader for the files of a release, of the installed
vLLM and of a workaround module, all of them strangers' bytes.

Python honours any codec a file declares (a PEP 263 coding declaration, a UTF-8 byte-order mark),
and a codec is code: ``idna`` refuses to replace what it cannot decode, ``undefined`` decodes
nothing, ``rot13`` and ``utf-16`` change what the text says. The reader honours a declaration only
when it names one of ``ALLOWED`` (the codecs source is written in); any other file is read as
UTF-8, what does not decode replaced, and a notice says which codec was not used. Nothing a file
holds stops the command: every file has a text.
"""

from __future__ import annotations

import codecs
import io
import re
from dataclasses import dataclass
from pathlib import Path

SOURCE_LIMIT = 4 << 20  # bytes: vLLM's largest source file is under 1 MiB; a larger one is not source
# Codecs (codecs.lookup's names) a declaration may name: what source is written in.
ALLOWED = frozenset({"utf-8", "utf-8-sig", "ascii", "iso8859-1", "iso8859-15", "cp1252"})
_SHOWN = 40  # characters of a declared codec's name a notice shows
_DECLARED = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


@dataclass(frozen=True)
class SourceText:
    """A file's text, and the notice of how it was read when not as it declares (None: as it declares)."""

    text: str
    notice: str | None = None


def _declared(data: bytes) -> str | None:
    """The codec the first two lines declare, as written (None: none), for a notice."""
    for line in data.removeprefix(codecs.BOM_UTF8).split(b"\n", 2)[:2]:
        found = _DECLARED.match(line)
        if found is not None:
            return found[1].decode("ascii", "replace")
        if line.strip() and not line.lstrip().startswith(b"#"):
            return None
    return None


def _as_utf8(data: bytes, notice: str) -> SourceText:
    return SourceText(data.decode("utf-8", errors="replace").removeprefix("\ufeff"), notice)


def source_text(data: bytes) -> SourceText:
    """``data`` (a Python file's bytes) as text: its declared codec when ``ALLOWED``, else UTF-8 with a
    notice; what does not decode is replaced either way."""
    import tokenize  # here: the plugin's start-up, which imports this module, reads no source

    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        name = codecs.lookup(encoding).name
    except (SyntaxError, LookupError):  # an unknown or contradictory declaration
        declared = _declared(data)
        shown = repr(declared[:_SHOWN]) if declared is not None else "a codec"
        return _as_utf8(data, f"declares {shown}, which Python does not decode here: read as UTF-8")
    if name not in ALLOWED:
        return _as_utf8(data, f"declares {encoding[:_SHOWN]!r}, not a codec source is read in "
                              f"({', '.join(sorted(ALLOWED))}): read as UTF-8")
    try:
        return SourceText(data.decode(name, errors="replace").removeprefix("\ufeff"))
    except (UnicodeError, LookupError):  # not one of ALLOWED's: kept for a codec that changes
        return _as_utf8(data, f"declares {encoding[:_SHOWN]!r}, which does not decode it: read as UTF-8")


def decoded(data: bytes) -> str:
    """``data``'s text (``source_text``) without the notice."""
    return source_text(data).text


def read_source(path: Path, limit: int = SOURCE_LIMIT) -> SourceText | None:
    """The text of the Python file at ``path`` (``source_text``); None when it is not a regular file (a
    folder, a FIFO, a device: never waited on), cannot be read, or is larger than ``limit`` bytes."""
    try:
        if not path.is_file():
            return None
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except (OSError, ValueError):  # ValueError: a path with a NUL
        return None
    return source_text(data) if len(data) <= limit else None


__all__ = ["ALLOWED", "SOURCE_LIMIT", "SourceText", "decoded", "read_source", "source_text"]
