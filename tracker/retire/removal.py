"""The removal change: what a workaround owns, its manifest entry cut from the text, lint
against the edited tree, the regenerated catalogue.

What a workaround owns (removed with it), by its module ``workarounds.<name>``, in the
folders the manifest's ``[layout]`` names (defaults shown):

- ``workarounds/<name>.py`` (or the package ``workarounds/<name>/``);
- its tests: ``tests/**/test_<name>.py`` and ``tests/**/test_workaround_<name>.py``;
- its fixtures: ``tests/**/fixtures/<name>/**`` and ``tests/**/fixtures/<name>.<ext>``;
- its ``[[workaround]]`` entry in the manifest (cut from the text, so every other line and
  comment stays as it was);

and the catalogue (``docs/workarounds.md``; none when the layout names none) is regenerated
from the edited manifest. Where the repository's ``README.md`` has a table row linking to the
workaround's heading in that catalogue (``docs/workarounds.md#<id>``), the row goes too, so the
front page never links to a heading the removal deleted. Nothing the repository does not have
is created.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import tomlkit

from tracker import echoed
from tracker.escape import annotation
from tracker.model import manifest as manifest_module
from tracker.model import reader
from tracker.model.catalogue import markdown
from tracker.model.manifest import Layout, Manifest, Problem, Workaround
from tracker.model.vocabulary import ErrorKind, ToolError

MANIFEST_PATH = "workarounds.toml"  # the defaults: this repository's layout
DOCS_PATH = "docs/workarounds.md"
README = "README.md"

_HEADER = re.compile(r"^\s*\[\[\s*workaround\s*\]\]\s*(#.*)?$")
_COMMENT = re.compile(r"^\s*#")
_OTHER_TABLE = re.compile(r"^\s*\[\[?\s*(?!workaround\b)[A-Za-z0-9_-]+\s*\]")


class RetireError(ToolError):
    """The run cannot act at all (repository, base or manifest unreadable): one line."""

    kind = ErrorKind.OUTSIDE_SERVICE


class ManifestInvalid(RetireError):
    """The base branch's manifest is invalid: one line naming it, and every problem (annotations)."""

    def __init__(self, line: str, problems: list[Problem], path: str) -> None:
        super().__init__(line)
        self.problems = problems
        self.path = path

    def annotations(self) -> list[str]:
        """Each problem at its line of the manifest, as an error annotation."""
        return [annotation("error", f"{p.field}: {p.message}", title="workarounds manifest", file=self.path,
                           line=p.line) for p in self.problems]


class ConfigurationError(ToolError):
    """The repository is not laid out as the run was told (a missing manifest or layout path)."""

    kind = ErrorKind.BAD_INPUT


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
    manifest_path: str = MANIFEST_PATH
    layout: Layout = Layout()  # where the docs path is None, the repository keeps no catalogue
    # Reads one more file of the tree as text (the README a removal may edit); None: none is read.
    read: Callable[[str], str] | None = field(default=None, compare=False, repr=False)

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(self.blobs)

    @property
    def docs_path(self) -> str | None:
        return self.layout.docs

    def has_folder(self, folder: str) -> bool:
        return any(path.startswith(folder.rstrip("/") + "/") for path in self.blobs)

    def catalogue(self, manifest: Manifest) -> dict[str, str]:
        """The regenerated catalogue, where the repository keeps one."""
        return {self.docs_path: markdown(manifest)} if self.docs_path else {}

    def front_page(self, w: Workaround) -> dict[str, str]:
        """``README.md`` without its table rows linking to ``w``'s catalogue heading, where it has any."""
        if not self.docs_path or README not in self.blobs or self.read is None:
            return {}
        text = self.read(README)
        edited = without_rows_linking(text, f"{self.docs_path}#{w.id}")
        return {README: edited} if edited != text else {}


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


def owned_paths(w: Workaround, paths: Iterable[str], layout: Layout = Layout()) -> list[str]:
    """The files that belong to ``w`` alone (see the module docstring for the convention)."""
    name = module_name(w)
    modules, tests = PurePosixPath(layout.workarounds).parts, PurePosixPath(layout.tests).parts
    return sorted(path for path in paths if _owned(PurePosixPath(path).parts, name, modules, tests))


def module_paths(w: Workaround, layout: Layout = Layout()) -> tuple[str, str]:
    """Where ``w``'s module is: ``<workarounds>/<name>.py`` or ``<workarounds>/<name>/__init__.py``."""
    name = module_name(w)
    return f"{layout.workarounds}/{name}.py", f"{layout.workarounds}/{name}/__init__.py"


def _owned(parts: tuple[str, ...], name: str, modules: tuple[str, ...], tests: tuple[str, ...]) -> bool:
    if parts[:len(modules)] == modules:
        below = parts[len(modules):]
        return below == (f"{name}.py",) or (len(below) > 1 and below[0] == name)
    if parts[:len(tests)] != tests:
        return False
    parts = parts[len(tests):]
    if parts[-1] in (f"test_{name}.py", f"test_workaround_{name}.py"):
        return True
    for index, part in enumerate(parts[:-1]):
        if part == "fixtures":
            below = parts[index + 1:]
            return below[0] == name if len(below) > 1 else PurePosixPath(below[0]).stem == name
    return False


def remove_entry(text: str, workaround_id: str, manifest_path: str = MANIFEST_PATH) -> str:
    """``workarounds.toml`` without the ``[[workaround]]`` whose id is ``workaround_id``.

    The entry is cut from the text: its header, its sub-tables and the comment lines
    directly above its header go; the comment lines directly above the next entry's
    header stay with that entry (tomlkit alone would drop them with the deleted table);
    every other byte is kept. The result is checked against tomlkit's own deletion.
    """
    document = tomlkit.parse(text)
    ids = [entry.get("id") for entry in document.get("workaround", [])]
    if workaround_id not in ids:
        raise RemovalError(f"{manifest_path}: no [[workaround]] with id {echoed(workaround_id)}")
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
    manifest_path = snapshot.manifest_path
    deleted = owned_paths(w, snapshot.paths, snapshot.layout)
    manifest_text = remove_entry(snapshot.manifest_text, w.id, manifest_path)
    remaining = snapshot.paths - set(deleted)
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-retire-") as scratch:
        path = Path(scratch) / MANIFEST_PATH
        path.write_text(manifest_text, encoding="utf-8")
        problems = [str(p).replace(str(path), manifest_path)
                    for p in reader.check(path)]
        edited = reader.load(path) if not problems else None
    if edited is not None:
        for other in edited.workarounds:
            if not remaining & set(module_paths(other, snapshot.layout)):
                problems.append(f"{manifest_path}: workaround[{other.id}].module: module {other.module} "
                                f"does not exist in the edited tree")
    if problems or edited is None:
        raise RemovalError("; ".join(problems))
    return Removal(w, tuple(deleted), {manifest_path: manifest_text, **snapshot.catalogue(edited),
                                       **snapshot.front_page(w)})


def without_rows_linking(text: str, target: str) -> str:
    """``text`` without the Markdown table rows that link to ``target`` (``path#anchor``)."""
    link = re.compile(rf"\]\({re.escape(target)}\)")
    return "".join(line for line in text.splitlines(keepends=True)
                   if not (line.lstrip().startswith("|") and link.search(line)))


def manifest_from_text(text: str, where: str = "the base branch", manifest_path: str = MANIFEST_PATH) -> Manifest:
    """The manifest in ``text`` (module existence is judged against the tree, not here);
    ``ManifestInvalid`` naming ``where`` (``OWNER/NAME@BRANCH``) and the file when it is invalid."""
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-retire-") as scratch:
        path = Path(scratch) / MANIFEST_PATH
        path.write_text(text, encoding="utf-8")
        try:
            return reader.load(path)
        except manifest_module.ManifestError as error:
            first = str(error.problems[0]).replace(str(path), manifest_path)
            raise ManifestInvalid(f"{where}: {manifest_path} is invalid ({first}"
                                  f"{'; and more' if len(error.problems) > 1 else ''})", error.problems,
                                  manifest_path) from None


def checked_manifest(text: str, manifest_path: str = MANIFEST_PATH) -> Manifest:
    """The manifest in ``text`` if it passes lint (modules are the tree's, unchanged here); else RemovalError."""
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-retire-") as scratch:
        path = Path(scratch) / MANIFEST_PATH
        path.write_text(text, encoding="utf-8")
        problems = [str(p).replace(str(path), manifest_path) for p in reader.check(path)]
        if problems:
            raise RemovalError("; ".join(problems))
        return reader.load(path)
