"""Reading code without importing it: where a module is, and what a definition in it says.

Nothing here executes the code it reads: a module is located on disk from the packages
already imported (or a top-level lookup, which imports nothing) and its source parsed.
Used to probe a target (does vLLM's own code already carry a fix?) before, or without,
importing it, and to tell a target whose module does not exist from one not imported yet.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from tracker.model.vocabulary import TargetKind


def module_exists(name: str) -> bool | None:
    """Whether module ``name`` can be imported, judged without importing anything new.

    None when it cannot be told (a top-level package that is not on disk as directories).
    """
    return _locate(name)[0]


def module_source(name: str) -> Path | None:
    """The ``.py`` file module ``name`` would be loaded from, found without importing it."""
    return _locate(name)[1]


_memo: dict[str, tuple[bool | None, Path | None]] | None = None


@contextlib.contextmanager
def memoized() -> Iterator[None]:
    """Within this block each module is located once: an activation asks about hundreds of
    targets in a few modules (docs/benchmarks.md), and nothing it does installs one."""
    global _memo
    outer = _memo
    _memo = {} if outer is None else outer
    try:
        yield
    finally:
        _memo = outer


def _locate(name: str) -> tuple[bool | None, Path | None]:
    memo = _memo
    if memo is None:
        return _find(name)
    if name not in memo:
        memo[name] = _find(name)
    return memo[name]


def _find(name: str) -> tuple[bool | None, Path | None]:
    module = sys.modules.get(name)
    if module is not None:
        origin = getattr(module, "__file__", None)
        return True, Path(origin) if origin and origin.endswith(".py") else None
    parts = name.split(".")
    for depth in range(len(parts) - 1, 0, -1):  # the deepest package already imported
        package = sys.modules.get(".".join(parts[:depth]))
        if package is not None:
            locations = list(getattr(package, "__path__", None) or [])
            rest = parts[depth:]
            break
    else:
        try:
            spec = importlib.util.find_spec(parts[0])  # a top-level lookup imports nothing
        except (ImportError, ValueError):
            return None, None
        if spec is None:
            return False, None
        if len(parts) == 1:
            return True, Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
        locations = list(spec.submodule_search_locations or [])
        rest = parts[1:]
    # os.path on strings, not pathlib: an activation asks this for every target's module
    # (pathlib's objects cost about 1 ms per activation here).
    if not locations or not all(os.path.isdir(location) for location in locations):
        return None, None
    for part in rest[:-1]:
        locations = [joined for location in locations if os.path.isdir(joined := os.path.join(location, part))]
        if not locations:
            return False, None
    last = rest[-1]
    for location in locations:
        for candidate in (os.path.join(location, f"{last}.py"), os.path.join(location, last, "__init__.py")):
            if os.path.isfile(candidate):
                return True, Path(candidate)
        if os.path.isdir(os.path.join(location, last)) or any(
                os.path.isfile(os.path.join(location, last + suffix)) for suffix in importlib.machinery.EXTENSION_SUFFIXES):
            return True, None
    return False, None


@functools.lru_cache(maxsize=64)
def _parsed(path: Path) -> ast.Module | None:
    return parsed_file(path)


def forget_parsed() -> None:
    """Drop the syntax trees kept of the files read so far: a release's tree, once read and removed,
    is never read again, and the trees of a few large modules kept alive make every garbage
    collection of the process slower (``check --supported`` reads 22 releases one after another)."""
    _parsed.cache_clear()


def parsed_module(name: str) -> ast.Module | None:
    """The syntax tree of module ``name``'s source, or None when it has no readable ``.py`` source."""
    source = module_source(name)
    return _parsed(source) if source is not None else None


def parsed_file(path: Path) -> ast.Module | None:
    """The syntax tree of the Python source at ``path`` as it is now (not cached), or None when it
    cannot be read or parsed."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):  # the last two: nested too deeply
        return None


def file_under(root: Path, name: str) -> Path | None:
    """The ``.py`` file of module ``name`` in a source tree ``root`` (not on sys.path)."""
    base = root.joinpath(*name.split("."))
    return next((candidate for candidate in (base.with_name(base.name + ".py"), base / "__init__.py")
                 if candidate.is_file()), None)


def definition(path: str, root: Path | None = None) -> ast.AST | None:
    """The ``def``/``class`` node of target ``path`` in its module's source, or None.

    Reads the source file; never imports the module. None when the module, or a
    definition of that exact name in that exact place (not inherited), is absent.
    With ``root``, the module is looked up in that source tree instead of sys.path.
    """
    module_name, _, qualname = path.partition(":")
    if root is None:
        node: ast.AST | None = parsed_module(module_name)
    else:
        found = file_under(root, module_name)
        node = _parsed(found) if found is not None else None
    for part in qualname.split("."):
        if node is None:
            return None
        node = next((child for child in getattr(node, "body", [])
                     if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and child.name == part), None)
    return node


class Fingerprint(NamedTuple):
    """What a target is and the parameters it takes, as a manifest's target writes them
    (``kind``, ``params``): the live drift check and the release check compare these."""

    kind: str
    params: tuple[str, ...]


def fingerprint(kind: str, parameters: Iterable[tuple[str, str]]) -> Fingerprint:
    """The fingerprint of a definition of ``kind`` taking ``parameters``: (star, name) pairs in
    the order declared, star ``"*"`` for ``*args``, ``"**"`` for ``**kwargs``, else ``""``. A
    classmethod's first parameter (``cls``) is not written; a method's ``self`` is. The one rule
    for both readings: of the live object (``tracker.engine.patching``) and of its source
    (``declared_fingerprint``)."""
    names = tuple(star + name for star, name in parameters)
    return Fingerprint(kind, names[1:] if kind == TargetKind.CLASSMETHOD else names)


def declared_fingerprint(path: str, root: Path | None = None) -> Fingerprint | None:
    """The fingerprint of target ``path`` as its source declares it (``definition``: read, not
    imported; ``root`` as there), or None when the definition is absent. A class is kind
    ``class`` taking nothing; the kind of a ``def`` is read from its decorators' names."""
    node = definition(path, root)
    if node is None:
        return None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return Fingerprint("class", ())
    qualname = path.partition(":")[2]
    in_class = "." in qualname and isinstance(definition(path.rsplit(".", 1)[0], root), ast.ClassDef)
    decorators = {d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "") for d in node.decorator_list}
    if in_class:
        kind = (TargetKind.CLASSMETHOD if "classmethod" in decorators
                else TargetKind.STATICMETHOD if "staticmethod" in decorators else TargetKind.METHOD)
    else:
        kind = TargetKind.CONTEXTMANAGER if "contextmanager" in decorators else TargetKind.FUNCTION
    arguments = node.args
    parameters = [("", a.arg) for a in [*arguments.posonlyargs, *arguments.args]]
    parameters += [("*", arguments.vararg.arg)] if arguments.vararg else []
    parameters += [("", a.arg) for a in arguments.kwonlyargs]
    parameters += [("**", arguments.kwarg.arg)] if arguments.kwarg else []
    return fingerprint(str(kind), parameters)


def contains(node: ast.AST | None, code: str) -> bool:
    """Whether the statement or expression ``code`` occurs in ``node`` (compared as syntax)."""
    if node is None:
        return False
    statement = ast.parse(code.strip()).body[0]
    wanted = ast.dump(statement.value if isinstance(statement, ast.Expr) else statement)
    for child in ast.walk(node):
        try:
            if ast.dump(child) == wanted:
                return True
        except RecursionError:  # nested deeper than ast.dump recurses: not the line a marker names
            continue
    return False


def declares(node: ast.AST | None, parameter: str) -> bool:
    """Whether ``node`` (or a function nested in it) declares a parameter named ``parameter``."""
    return node is not None and any(isinstance(child, ast.arg) and child.arg == parameter
                                    for child in ast.walk(node))


__all__ = ["Fingerprint", "contains", "declared_fingerprint", "declares", "definition", "file_under", "fingerprint",
           "module_exists", "module_source", "parsed_file", "parsed_module"]
