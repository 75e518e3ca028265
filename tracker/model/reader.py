"""Reading ``workarounds.toml``: validation and the typed ``Manifest`` in one pass.

``check()`` returns every problem with the line it is on (what ``lint`` prints);
``load()`` returns a ``Manifest`` or raises ``ManifestError`` carrying those problems.
The file is read and parsed by ``tracker.model.document`` (within bounds, by ``tomllib``).
Nothing here imports torch, vLLM or a workaround module. A valid manifest is read
without locating a single line (the locator is built on the first problem), and the
specifiers and versions it repeats are parsed once each.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tracker.model import one_line_fields, placeholders
from tracker.model.document import KEY_PARTS_LIMIT, LINE_LIMIT, SIZE_LIMIT, Unreadable, parse, read_bytes
from tracker.model.entries import ManifestValidator
from tracker.model.manifest import Manifest, ManifestError, Problem
from tracker.paths import shipped_manifest


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
    try:
        document = parse(path)  # the bytes within bounds, then tomllib
    except Unreadable as error:
        return None, [Problem(path, error.line, error.field, error.message)]
    validator = ManifestValidator(path, document.text, document.data)
    manifest, problems = validator.validate()
    unfilled = (placeholders.problems(path, document.data, lambda: validator.lines)
                if placeholders.PREFIX in document.text else [])
    if unfilled:  # "TODO: ..." as `new` wrote it: one line, what to fill in, not why it is no specifier
        named = {p.field for p in unfilled}
        manifest, problems = None, sorted([*(p for p in problems if p.field not in named), *unfilled],
                                          key=lambda p: p.line)
    controls = one_line_fields.problems(path, document.data, lambda: validator.lines, {p.field for p in problems})
    if controls:
        manifest, problems = None, [*problems, *controls]
    return (manifest._replace(sha256=hashlib.sha256(document.raw).hexdigest()) if manifest is not None else None), \
        problems


def digest(path: Path | str | None = None) -> str | None:
    """The sha256 of the manifest file at ``path`` (default: the shipped one), valid or not; None
    when it cannot be read (``read`` gives a valid manifest's as ``Manifest.sha256``)."""
    try:
        raw = read_bytes(path if path is not None else default_path())
    except Unreadable:
        return None
    return hashlib.sha256(raw).hexdigest()


__all__ = ["KEY_PARTS_LIMIT", "LINE_LIMIT", "SIZE_LIMIT", "ManifestError", "check", "default_path", "digest", "load",
           "read"]
