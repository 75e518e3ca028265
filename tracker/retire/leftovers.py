"""What a removal leaves behind: files of the repository that still import or name what it deletes.

A removal (``removal.compute_removal``) deletes a workaround's module, its tests and its fixtures
and cuts its entry. A file it keeps that imports the module, or names the module or a deleted
file, breaks once the removal is merged. This is seen without running anything:

- a Python file (``*.py``): its imports, read with ``ast`` (``import workarounds.x``, ``from
  workarounds import x``, ``from workarounds.x import y``, relative imports inside the
  workarounds package, ``importlib.import_module("workarounds.x")``, and a deleted test module
  imported by another test, ``from test_workaround_x import y``);
- a Markdown file (``*.md``): its fenced code blocks, for the module's dotted name or a deleted
  path, as whole words;
- a workflow (``.github/workflows/*``), a script under ``.ci/`` or the project's
  ``pyproject.toml``: the same names, anywhere in the text.

And a removal that deletes no test file leaves its workaround's tests behind (or it had none).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tracker.model.manifest import Layout, Manifest
from tracker.retire.removal import (
    MANIFEST_PATH,
    Removal,
    RemovalError,
    Snapshot,
    blob_sha,
    compute_removal,
    manifest_from_text,
)

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TEXTS = ("pyproject.toml", "setup.cfg", "tox.ini")  # at the root: entry points and commands can name a module
_TEXT_FOLDERS = (".github/workflows/", ".ci/")


@dataclass(frozen=True)
class Leftover:
    """One place that still uses what the removal deletes."""

    path: str
    line: int
    what: str  # the module or the deleted path it uses
    how: str  # "imports" or "names"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.how} {self.what}" if self.line else f"{self.path}: {self.how} {self.what}"


def deleted_modules(deleted: Iterable[str], layout: Layout = Layout()) -> set[str]:
    """The dotted modules the deleted ``.py`` files were: ``workarounds.x`` (``workarounds.x.y``) for the
    workarounds package's, the bare module name (``test_workaround_x``) for a test's, which other tests import."""
    package = PurePosixPath(layout.workarounds)
    modules = set()
    for path in map(PurePosixPath, deleted):
        if path.suffix != ".py":
            continue
        if path.is_relative_to(package):
            parts = path.with_suffix("").relative_to(package.parent).parts
            modules.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        elif path.is_relative_to(PurePosixPath(layout.tests)) and path.stem != "__init__":
            modules.add(path.stem)
    return modules


def _module_of(path: PurePosixPath, layout: Layout) -> str | None:
    """The dotted package a file of the workarounds package belongs to (for its relative imports)."""
    package = PurePosixPath(layout.workarounds)
    if not path.is_relative_to(package):
        return None
    return ".".join(path.parent.relative_to(package.parent).parts)


def imported(source: str, path: str = "", layout: Layout = Layout()) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every module ``source`` imports, each ``from m import n`` giving ``m`` and ``m.n``
    (``n`` may be a module); nothing for a file Python cannot parse (its own checks say so)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return
    package = _module_of(PurePosixPath(path), layout) if path else None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if package is None:
                    continue
                parents = package.split(".")
                anchor = parents[:len(parents) - node.level + 1]
                base = ".".join(filter(None, [*anchor, base]))
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}" if base else alias.name
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and _call_name(node.func) in ("import_module", "__import__")):
            yield node.lineno, node.args[0].value


def _call_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _uses(module: str, modules: set[str]) -> str | None:
    """The deleted module ``module`` is, or is inside."""
    return next((deleted for deleted in sorted(modules) if module == deleted or module.startswith(deleted + ".")), None)


def code_blocks(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of every line inside a fenced code block of Markdown ``text``."""
    fence = ""
    for number, line in enumerate(text.splitlines(), 1):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) \
                    and not line.strip().strip(fence[0]):
                fence = ""
            else:
                yield number, line
        elif opened:
            fence = opened.group(1)


def _names(modules: set[str], deleted: Iterable[str]) -> re.Pattern[str] | None:
    """Each dotted module (not a bare test module's name: a word too common in prose) and deleted path, as a whole word."""
    words = sorted({*(module for module in modules if "." in module), *deleted}, key=len, reverse=True)
    if not words:
        return None
    return re.compile(rf"(?<![\w./-])(?:{'|'.join(map(re.escape, words))})(?![\w/-]|\.\w)")


def scanned(path: str) -> str | None:
    """How ``path`` is read: ``python``, ``markdown``, ``text``, or None (not read)."""
    if path.endswith(".py"):
        return "python"
    if path.endswith(".md"):
        return "markdown"
    if path in _TEXTS or path.startswith(_TEXT_FOLDERS):
        return "text"
    return None


def leftovers(removal: Removal, paths: Iterable[str], read: Callable[[str], str],
              layout: Layout = Layout()) -> list[Leftover]:
    """Every place among ``paths`` (the repository's files before the removal; ``read`` gives one's text) that
    still imports or names what ``removal`` deletes, in the tree the removal leaves (its written files as
    written); and, when it deletes no test file, the tests folder, as keeping its workaround's tests."""
    modules = deleted_modules(removal.deleted, layout)
    pattern = _names(modules, removal.deleted)
    found: list[Leftover] = []
    if not any(PurePosixPath(path).is_relative_to(PurePosixPath(layout.tests)) for path in removal.deleted):
        found.append(Leftover(f"{layout.tests}/", 0, f"{removal.workaround.id}'s tests (no test file of its own "
                              f"is deleted: tests/test_workaround_<module>.py is its, by the layout)", "keeps"))
    for path in sorted(set(paths) - set(removal.deleted)):
        kind = scanned(path)
        if kind is None:
            continue
        try:
            text = removal.written[path] if path in removal.written else read(path)
        except (OSError, UnicodeDecodeError):
            continue  # not text: it names nothing
        if kind == "python":
            if not any(module.rpartition(".")[2] in text for module in modules):
                continue  # an import of a module names it (its last part at least): no need to parse
            seen = set()
            for line, module in imported(text, path, layout):
                used = _uses(module, modules)
                if used is not None and (line, used) not in seen:
                    seen.add((line, used))
                    found.append(Leftover(path, line, used, "imports"))
            continue
        if pattern is None:
            continue
        lines = code_blocks(text) if kind == "markdown" else enumerate(text.splitlines(), 1)
        for line, content in lines:
            found.extend(Leftover(path, line, named, "names") for named in dict.fromkeys(pattern.findall(content)))
    return found


def local_snapshot(root: Path, paths: Iterable[str], manifest_path: str = MANIFEST_PATH) -> tuple[Snapshot, Manifest]:
    """A checkout's files (``paths``, relative to ``root``: git's, as the bot sees the tree) as the bot's
    ``Snapshot`` of its base branch, laid out as its manifest says, and that manifest."""
    listed = sorted(paths)
    text = (root / manifest_path).read_text(encoding="utf-8")
    manifest = manifest_from_text(text, str(root), manifest_path)
    layout = manifest.layout
    if layout.docs is not None and layout.docs not in listed:
        layout = layout._replace(docs=None)
    snapshot = Snapshot("main", "0" * 40, "0" * 40, {path: blob_sha(path) for path in listed}, {}, text,
                        manifest_path, layout, read=lambda path: (root / path).read_text(encoding="utf-8"))
    return snapshot, manifest


def checkout_leftovers(root: Path, paths: Iterable[str], manifest_path: str = MANIFEST_PATH) -> dict[str, list[str]]:
    """For each workaround of the checkout at ``root`` (its files ``paths``), what its removal, as the bot
    computes it, leaves behind (``leftovers``), or why the bot could not compute it; only those with any."""
    snapshot, manifest = local_snapshot(root, paths, manifest_path)
    found: dict[str, list[str]] = {}
    for w in manifest.workarounds:
        try:
            removal = compute_removal(snapshot, w)
        except RemovalError as error:
            found[w.id] = [f"the removal would not pass lint: {error}"]
            continue
        left = leftovers(removal, snapshot.paths, lambda path: (root / path).read_text(encoding="utf-8"),
                         snapshot.layout)
        if left:
            found[w.id] = [str(leftover) for leftover in left]
    return found
