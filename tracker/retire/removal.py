"""The removal change: what a workaround owns, its manifest entry cut from the text, lint
against the edited tree, the regenerated catalogue.

What a workaround owns (removed with it), by its module ``workarounds.<name>``:

- ``workarounds/<name>.py`` (or the package ``workarounds/<name>/``);
- its tests: ``tests/**/test_<name>.py`` and ``tests/**/test_workaround_<name>.py``;
- its fixtures: ``tests/**/fixtures/<name>/**`` and ``tests/**/fixtures/<name>.<ext>``;
- its ``[[workaround]]`` entry in ``workarounds.toml`` (cut from the text, so every other
  line and comment stays as it was);

and ``docs/workarounds.md`` is regenerated from the edited manifest.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import tomlkit

from tracker.model import manifest as manifest_module
from tracker.model import reader
from tracker.model.catalogue import markdown
from tracker.model.manifest import Manifest, Workaround

MANIFEST_PATH = "workarounds.toml"
DOCS_PATH = "docs/workarounds.md"

_HEADER = re.compile(r"^\s*\[\[\s*workaround\s*\]\]\s*(#.*)?$")
_COMMENT = re.compile(r"^\s*#")
_OTHER_TABLE = re.compile(r"^\s*\[\[?\s*(?!workaround\b)[A-Za-z0-9_-]+\s*\]")


class RetireError(Exception):
    """The run cannot act at all (repository, base or manifest unreadable): one line."""


class RemovalError(Exception):
    """The removal would leave the repository failing lint: one line per problem."""


@dataclass(frozen=True)
class Snapshot:
    """The base branch as the API shows it: a commit, its tree, the manifest text."""

    branch: str
    commit: str
    tree: str
    blobs: dict[str, str]  # path -> blob sha, every file in the tree
    modes: dict[str, str]  # path -> file mode
    manifest_text: str

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(self.blobs)


@dataclass(frozen=True)
class Removal:
    """One workaround's removal: files deleted, files (re)written, the expected tree."""

    workaround: Workaround
    deleted: tuple[str, ...]
    written: dict[str, str]  # path -> new text

    def expected_blobs(self, snapshot: Snapshot) -> dict[str, str]:
        """path -> blob sha of the tree the removal commit must have."""
        return expected_blobs(snapshot, self.deleted, self.written)


@dataclass(frozen=True)
class Edit:
    """Files rewritten in place, nothing deleted (the upstream-facts PR)."""

    written: dict[str, str]
    deleted: tuple[str, ...] = ()

    def expected_blobs(self, snapshot: Snapshot) -> dict[str, str]:
        return expected_blobs(snapshot, self.deleted, self.written)


def expected_blobs(snapshot: Snapshot, deleted: tuple[str, ...], written: dict[str, str]) -> dict[str, str]:
    """path -> blob sha of the tree a commit deleting ``deleted`` and writing ``written`` on ``snapshot`` has."""
    blobs = {path: sha for path, sha in snapshot.blobs.items() if path not in deleted}
    blobs.update({path: blob_sha(text) for path, text in written.items()})
    return blobs


def blob_sha(text: str) -> str:
    """The git blob id of ``text`` (what ``git hash-object`` prints)."""
    raw = text.encode("utf-8")
    return hashlib.sha1(b"blob %d\0" % len(raw) + raw).hexdigest()


def module_name(w: Workaround) -> str:
    return w.module.removeprefix("workarounds.")


def owned_paths(w: Workaround, paths: Iterable[str]) -> list[str]:
    """The files that belong to ``w`` alone (see the module docstring for the convention)."""
    name = module_name(w)
    return sorted(path for path in paths if _owned(PurePosixPath(path).parts, name))


def _owned(parts: tuple[str, ...], name: str) -> bool:
    if parts[:1] == ("workarounds",):
        return parts[1:] == (f"{name}.py",) or (len(parts) > 2 and parts[1] == name)
    if parts[:1] != ("tests",):
        return False
    if parts[-1] in (f"test_{name}.py", f"test_workaround_{name}.py"):
        return True
    for index, part in enumerate(parts[:-1]):
        if part == "fixtures":
            below = parts[index + 1:]
            return below[0] == name if len(below) > 1 else PurePosixPath(below[0]).stem == name
    return False


def remove_entry(text: str, workaround_id: str) -> str:
    """``workarounds.toml`` without the ``[[workaround]]`` whose id is ``workaround_id``.

    The entry is cut from the text: its header, its sub-tables and the comment lines
    directly above its header go; the comment lines directly above the next entry's
    header stay with that entry (tomlkit alone would drop them with the deleted table);
    every other byte is kept. The result is checked against tomlkit's own deletion.
    """
    document = tomlkit.parse(text)
    ids = [entry.get("id") for entry in document.get("workaround", [])]
    if workaround_id not in ids:
        raise RemovalError(f"{MANIFEST_PATH}: no [[workaround]] with id {workaround_id!r}")
    index = ids.index(workaround_id)
    del document["workaround"][index]
    expected = document.unwrap()

    lines = text.splitlines(keepends=True)
    headers = [number for number, line in enumerate(lines) if _HEADER.match(line)]
    if len(headers) == len(ids):
        start = _comments_above(lines, headers[index])
        following = headers[index + 1] if index + 1 < len(headers) else len(lines)
        # Another top-level table (e.g. [[tracked]]) before the next entry ends this one too.
        following = next((number for number in range(headers[index] + 1, following)
                          if _OTHER_TABLE.match(lines[number])), following)
        end = _comments_above(lines, following) if following < len(lines) else len(lines)
        edited = "".join(lines[:start] + lines[end:])
        if end == len(lines):
            edited = edited.rstrip("\n") + "\n"
        try:
            if tomlkit.parse(edited).unwrap() == expected:
                return edited
        except tomlkit.exceptions.TOMLKitError:
            pass
    return str(tomlkit.dumps(document))  # an unusual layout: tomlkit's own result (comments may move)


def _comments_above(lines: list[str], header: int) -> int:
    """The first line of the comment block directly above line ``header``."""
    start = header
    while start > 0 and _COMMENT.match(lines[start - 1]):
        start -= 1
    return start


def compute_removal(snapshot: Snapshot, w: Workaround) -> Removal:
    """The change that retires ``w`` from ``snapshot``; raises RemovalError if lint would fail."""
    deleted = owned_paths(w, snapshot.paths)
    manifest_text = remove_entry(snapshot.manifest_text, w.id)
    remaining = snapshot.paths - set(deleted)
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-retire-") as scratch:
        path = Path(scratch) / MANIFEST_PATH
        path.write_text(manifest_text, encoding="utf-8")
        problems = [str(p).replace(str(path), MANIFEST_PATH)
                    for p in reader.check(path)]
        edited = reader.load(path) if not problems else None
    if edited is not None:
        for other in edited.workarounds:
            name = module_name(other)
            if f"workarounds/{name}.py" not in remaining and f"workarounds/{name}/__init__.py" not in remaining:
                problems.append(f"{MANIFEST_PATH}: workaround[{other.id}].module: module {other.module} "
                                f"does not exist in the edited tree")
    if problems or edited is None:
        raise RemovalError("; ".join(problems))
    return Removal(w, tuple(deleted), {MANIFEST_PATH: manifest_text, DOCS_PATH: markdown(edited)})


def manifest_from_text(text: str, where: str = "the base branch") -> Manifest:
    """The manifest in ``text`` (module existence is judged against the tree, not here);
    ``RetireError`` naming ``where`` (``OWNER/NAME@BRANCH``) and the file when it is invalid."""
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-retire-") as scratch:
        path = Path(scratch) / MANIFEST_PATH
        path.write_text(text, encoding="utf-8")
        try:
            return reader.load(path)
        except manifest_module.ManifestError as error:
            first = str(error.problems[0]).replace(str(path), MANIFEST_PATH)
            raise RetireError(f"{where}: {MANIFEST_PATH} is invalid ({first}"
                              f"{'; and more' if len(error.problems) > 1 else ''})") from None


def checked_manifest(text: str) -> Manifest:
    """The manifest in ``text`` if it passes lint (modules are the tree's, unchanged here); else RemovalError."""
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-retire-") as scratch:
        path = Path(scratch) / MANIFEST_PATH
        path.write_text(text, encoding="utf-8")
        problems = [str(p).replace(str(path), MANIFEST_PATH) for p in reader.check(path)]
        if problems:
            raise RemovalError("; ".join(problems))
        return reader.load(path)
