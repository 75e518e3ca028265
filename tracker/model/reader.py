"""Reading ``workarounds.toml``: validation and the typed ``Manifest`` in one pass.

``check()`` returns every problem with the line it is on (what ``lint`` prints);
``load()`` returns a ``Manifest`` or raises ``ManifestError`` carrying those problems.
Nothing here imports torch, vLLM or a workaround module. A valid manifest is read
without locating a single line (the locator is built on the first problem), and the
specifiers and versions it repeats are parsed once each.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

from tracker.model import one_line_fields, placeholders
from tracker.model.entries import ManifestValidator
from tracker.model.manifest import Manifest, ManifestError, Problem
from tracker.paths import NotRegular, read_regular, shipped_manifest

# Bounds checked before the TOML parser sees a manifest (``_bounds``): tomllib takes about a
# second a MiB here, and a dotted key's cost grows with the square of its parts (one line of
# 40,000 parts takes it half a minute). The 500-workaround scale manifest is ~0.4 MiB, its
# longest line a few hundred characters and its deepest key two parts.
SIZE_LIMIT = 2 << 20
LINE_LIMIT = 16384  # characters
KEY_PARTS_LIMIT = 32


def default_path() -> Path:
    """The shipped manifest: inside the wheel, or at the top of a checkout."""
    return Path(shipped_manifest())


def load(path: Path | str | None = None) -> Manifest:
    """The manifest at ``path`` (default: the shipped one); raises ManifestError."""
    manifest, problems = read(Path(path) if path is not None else default_path())
    if problems or manifest is None:
        raise ManifestError(problems)
    return manifest


def check(path: Path | str | None = None) -> list[Problem]:
    """Every problem in the manifest at ``path``; empty when it is valid.

    The manifest alone: whether each workaround's module exists and has what
    ``tracker.api`` asks of it is ``tracker.commands.lint``'s part.
    """
    return read(Path(path) if path is not None else default_path())[1]


def read(path: Path) -> tuple[Manifest | None, list[Problem]]:
    raw = _read_bytes(path)
    if isinstance(raw, Problem):
        return None, [raw]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, [Problem(path, raw[:error.start].count(b"\n") + 1, "file", "not UTF-8")]
    out_of_bounds = _bounds(path, text)
    if out_of_bounds is not None:
        return None, [out_of_bounds]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        line = getattr(error, "lineno", None) or _line_from_message(str(error))
        return None, [Problem(path, line, "toml", _toml_message(str(error)))]
    except RecursionError:
        return None, [Problem(path, _first_line(text, r"[\[{]{50}"), "toml", "nested too deeply")]
    except ValueError:  # tomllib converts integers itself: Python refuses more than 4300 digits
        return None, [Problem(path, _first_line(text, r"\d{4300}"), "toml", "a number of more than 4300 digits")]
    validator = ManifestValidator(path, text, data)
    manifest, problems = validator.validate()
    unfilled = placeholders.problems(path, data, lambda: validator.lines) if placeholders.PREFIX in text else []
    if unfilled:  # "TODO: ..." as `new` wrote it: one line, what to fill in, not why it is no specifier
        named = {p.field for p in unfilled}
        manifest, problems = None, sorted([*(p for p in problems if p.field not in named), *unfilled],
                                          key=lambda p: p.line)
    controls = one_line_fields.problems(path, data, lambda: validator.lines, {p.field for p in problems})
    if controls:
        manifest, problems = None, [*problems, *controls]
    return (manifest._replace(sha256=hashlib.sha256(raw).hexdigest()) if manifest is not None else None), problems


def digest(path: Path | str | None = None) -> str | None:
    """The sha256 of the manifest file at ``path`` (default: the shipped one), valid or not; None
    when it cannot be read (``read`` gives a valid manifest's as ``Manifest.sha256``)."""
    raw = _read_bytes(Path(path) if path is not None else default_path())
    return None if isinstance(raw, Problem) else hashlib.sha256(raw).hexdigest()


def _read_bytes(path: Path) -> bytes | Problem:
    """The file's bytes: a regular file only (a FIFO or a device would block or never end), at
    most ``SIZE_LIMIT`` bytes; opened without blocking, so a FIFO never stops vLLM's start-up."""
    try:
        raw = read_regular(path, SIZE_LIMIT + 1)
    except NotRegular:
        return Problem(path, 1, "file", "not a regular file")
    except OSError as error:
        return Problem(path, 1, "file", f"cannot read: {error.strerror or error}")
    if len(raw) > SIZE_LIMIT:
        return Problem(path, 1, "file", f"larger than {SIZE_LIMIT // (1 << 20)} MiB")
    return raw


# A dotted key's parts (bare, "basic" or 'literal'), the dots and blanks between them, anything else.
_KEY_TOKEN = re.compile(r"""([A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')|(\.)|([ \t]+)|.""")


def _bounds(path: Path, text: str) -> Problem | None:
    """The first line longer than ``LINE_LIMIT`` or holding a dotted key (or table name) of more
    than ``KEY_PARTS_LIMIT`` parts, as a problem; None when the text is within bounds. Linear in
    the text: only a line with that many dots is looked at token by token, each token once. Text
    inside a string that reads as such a key counts too: no manifest needs one."""
    lines = text.split("\n")
    if max(map(len, lines)) > LINE_LIMIT:
        number = next(number for number, line in enumerate(lines, start=1) if len(line) > LINE_LIMIT)
        return Problem(path, number, "toml", f"a line longer than {LINE_LIMIT} characters")
    for number, line in enumerate(lines, start=1):
        if line.count(".") >= KEY_PARTS_LIMIT and _key_parts(line) > KEY_PARTS_LIMIT:
            return Problem(path, number, "toml", f"a dotted key of more than {KEY_PARTS_LIMIT} parts")
    return None


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


__all__ = ["ManifestError", "check", "default_path", "digest", "load", "read"]
