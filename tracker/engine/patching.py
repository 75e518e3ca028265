"""Wrap a named target in place, once, revertibly, even before its module is imported.

Knows nothing about XPU or vLLM. A target is ``package.module:Qualified.name``; a
wrapper has one signature for every kind of target (wrapt's convention)::

    def wrapper(wrapped, instance, args, kwargs): ...

``wrapped`` is the original, already bound for methods and classmethods, so the
wrapper calls ``wrapped(*args, **kwargs)``; ``instance`` is ``self`` for methods, the
class for classmethods and ``None`` for functions, staticmethods and context
managers. For a context manager the wrapper returns the context manager callers
will enter (it may itself be a ``@contextmanager`` function).

``patch()`` checks the target is what the caller expects (kind and parameter names)
before touching it, keeps one patch per target per process (a second owner is an
error), rebinds every module that imported a patched function by name (now and as
later modules are imported), verifies callers reach the wrapper, and records an
``outcome``. When the target's module is not imported yet it installs a post-import
hook (a ``sys.meta_path`` finder wrapping the loader's ``exec_module``, as
``wrapt.importer`` does) and patches when the module is imported, never earlier.
"""

from __future__ import annotations

import ast
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import sys
import threading
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Wrapper = Callable[[Callable[..., Any], Any, tuple, dict], Any]
KINDS = ("function", "method", "classmethod", "staticmethod", "contextmanager")
OUTCOMES = ("applied", "waiting", "skipped", "drifted", "failed")


class PatchConflict(RuntimeError):
    """A target is already patched by another owner."""


@dataclass
class Patch:
    """One target: what was asked, what happened, and what is needed to undo it."""

    path: str
    owner: str
    kind: str
    params: tuple[str, ...] | None
    wrapper: Wrapper
    optional: bool = False
    outcome: str = "waiting"  # applied | waiting | skipped | drifted | failed
    detail: str = ""
    error: str | None = None
    on_change: Callable[[Patch], None] | None = field(default=None, repr=False)
    _container: Any = field(default=None, repr=False)
    _name: str = ""
    _had_own: bool = False
    _original: Any = field(default=None, repr=False)  # exactly what was in the container's __dict__
    _installed: Any = field(default=None, repr=False)  # what replaced it
    _function: Any = field(default=None, repr=False)  # original module-level function (alias scan)
    _aliases: list[tuple[types.ModuleType, str]] = field(default_factory=list, repr=False)

    @property
    def module(self) -> str:
        return self.path.partition(":")[0]

    @property
    def original(self) -> Any:
        return self._original

    @property
    def aliases(self) -> list[str]:
        """``module.name`` of every alias rebound to the wrapper."""
        return [f"{module.__name__}.{name}" for module, name in self._aliases]


_lock = threading.RLock()
_registry: dict[str, Patch] = {}


def patches() -> dict[str, Patch]:
    """Every target patched (or waiting) in this process, by path."""
    return dict(_registry)


def patch(
    path: str,
    wrapper: Wrapper,
    *,
    owner: str,
    kind: str = "function",
    params: Sequence[str] | None = None,
    optional: bool = False,
    on_change: Callable[[Patch], None] | None = None,
) -> Patch:
    """Wrap ``path`` with ``wrapper`` once per process; see the module docstring.

    Returns the target's ``Patch``; calling again with the same owner returns the
    same record and changes nothing. Raises ``PatchConflict`` for another owner and
    ``ValueError`` for a malformed path or kind; every other problem is recorded in
    the outcome (``drifted``/``failed``), never raised.
    """
    module_name, sep, qualname = path.partition(":")
    if not sep or not module_name or not qualname:
        raise ValueError(f"{path!r} is not 'package.module:Attribute.path'")
    if kind not in KINDS:
        raise ValueError(f"{kind!r} is not one of {', '.join(KINDS)}")
    with _lock:
        existing = _registry.get(path)
        if existing is not None:
            if existing.owner != owner:
                raise PatchConflict(f"{path} is already patched by {existing.owner}; {owner} cannot patch it too")
            return existing
        record = Patch(path, owner, kind, tuple(params) if params is not None else None, wrapper,
                       optional=optional, on_change=on_change)
        _registry[path] = record
        module = sys.modules.get(module_name)
        if module is not None:
            _apply(record, module)
            return record
        found = module_exists(module_name)
        if found is False:
            _settle(record, "skipped" if optional else "drifted",
                    f"module {module_name} does not exist" + (" (optional target)" if optional else ""))
            return record
        record.detail = f"waiting until {module_name} is imported"
        _finder().watch_module(module_name)
        return record


def revert(path: str) -> bool:
    """Undo the patch of ``path``: the exact original object is back everywhere. False if none."""
    with _lock:
        record = _registry.pop(path, None)
        if record is None:
            return False
        if record.outcome == "applied":
            _restore(record)
            record.outcome, record.detail = "skipped", "reverted"
        _finder().forget(record)
        return True


def revert_all() -> None:
    for path in list(_registry):
        revert(path)


# ------------------------------------------------------------------ applying


def _apply(record: Patch, module: types.ModuleType) -> None:
    """Fingerprint, wrap, rebind aliases, verify. Records the outcome; never raises."""
    try:
        resolved = _resolve(module, record.path.partition(":")[2])
    except AttributeError as error:
        outcome = "skipped" if record.optional else "drifted"
        _settle(record, outcome, f"{record.path} does not exist ({error}{'; optional target' if record.optional else ''})")
        return
    except Exception as error:  # noqa: BLE001 - e.g. a module __getattr__ that fails
        _settle(record, "failed", f"{type(error).__name__}: {error}", error=f"{type(error).__name__}: {error}")
        return
    container, name, raw, function = resolved
    try:
        drift = _drift(record, container, raw, function)
        if drift is not None:
            _settle(record, "drifted", drift)
            return
        installed = _make(record, raw, function)
        record._container, record._name = container, name
        record._had_own = name in vars(container)
        record._original = vars(container)[name] if record._had_own else raw
        record._installed = installed
        setattr(container, name, installed)
        if isinstance(container, types.ModuleType):
            record._function = raw
            _rebind_aliases(record, _scope(container.__name__))
            _finder().watch_prefix(_top(container.__name__), record)
        problem = _unreached(record)
        if problem is not None:
            _restore(record)
            _settle(record, "failed", problem, error=problem)
            return
    except Exception as error:  # noqa: BLE001 - any failure is reported, not raised
        if record._installed is not None:
            _restore(record)
        _settle(record, "failed", f"{type(error).__name__}: {error}", error=f"{type(error).__name__}: {error}")
        return
    where = f"; aliases rebound: {', '.join(record.aliases)}" if record._aliases else ""
    _settle(record, "applied", f"{record.path} wrapped{where}")


def _settle(record: Patch, outcome: str, detail: str, error: str | None = None) -> None:
    record.outcome, record.detail, record.error = outcome, detail, error


def _resolve(module: types.ModuleType, qualname: str) -> tuple[Any, str, Any, Any]:
    """(container, attribute name, raw attribute as stored, plain callable) for ``qualname``."""
    parts = qualname.split(".")
    container: Any = module
    for part in parts[:-1]:
        container = getattr(container, part)
    name = parts[-1]
    if isinstance(container, type):
        for klass in container.__mro__:
            if name in vars(klass):
                raw = vars(klass)[name]
                break
        else:
            raise AttributeError(f"type object {container.__name__!r} has no attribute {name!r}")
        function = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
        return container, name, raw, function
    raw = getattr(container, name)
    return container, name, raw, raw


def _drift(record: Patch, container: Any, raw: Any, function: Any) -> str | None:
    """Why the target is not what the caller was written for, or None."""
    in_class = isinstance(container, type)
    expected = {
        "classmethod": isinstance(raw, classmethod),
        "staticmethod": isinstance(raw, staticmethod),
        "method": in_class and inspect.isfunction(raw),
        "function": not in_class and callable(raw) and not inspect.isclass(raw),
        "contextmanager": not in_class and inspect.isfunction(raw)
        and inspect.isgeneratorfunction(inspect.unwrap(raw)),
    }[record.kind]
    if not expected:
        return f"{record.path} is {_describe(raw, in_class)}, not a {record.kind}"
    if record.params is None:
        return None
    try:
        found = parameter_names(function, drop_first=record.kind == "classmethod")
    except (TypeError, ValueError) as error:
        return f"{record.path} has no readable signature ({error})"
    if found != record.params:
        return (f"{record.path} takes ({', '.join(found)}); "
                f"the workaround was written for ({', '.join(record.params)})")
    return None


def _describe(raw: Any, in_class: bool) -> str:
    if isinstance(raw, classmethod):
        return "a classmethod"
    if isinstance(raw, staticmethod):
        return "a staticmethod"
    if inspect.isclass(raw):
        return "a class"
    if inspect.isfunction(raw):
        return "a method" if in_class else "a plain function"
    return f"a {type(raw).__name__}"


def parameter_names(function: Callable[..., Any], *, drop_first: bool = False) -> tuple[str, ...]:
    """Parameter names as a manifest fingerprint writes them: ``*args`` and ``**kwargs`` starred."""
    names = []
    for parameter in inspect.signature(function).parameters.values():
        prefix = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}.get(parameter.kind, "")
        names.append(prefix + parameter.name)
    return tuple(names[1:] if drop_first else names)


def _make(record: Patch, raw: Any, function: Any) -> Any:
    wrapper = record.wrapper
    if record.kind == "method":
        @functools.wraps(function)
        def method(self, *args, **kwargs):
            return wrapper(function.__get__(self, type(self)), self, args, kwargs)
        return method
    if record.kind == "classmethod":
        @functools.wraps(function)
        def bound_to_class(cls, *args, **kwargs):
            return wrapper(types.MethodType(function, cls), cls, args, kwargs)
        return classmethod(bound_to_class)
    if record.kind == "staticmethod":
        @functools.wraps(function)
        def static(*args, **kwargs):
            return wrapper(function, None, args, kwargs)
        return staticmethod(static)

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        return wrapper(function, None, args, kwargs)
    return wrapped


def _unreached(record: Patch) -> str | None:
    """Why a caller would still reach the original, or None when the wrapper is reached."""
    container, name, installed = record._container, record._name, record._installed
    if vars(container).get(name) is not installed:
        return f"{record.path}: setting the attribute did not take effect"
    reached = getattr(container, name)
    if isinstance(installed, (classmethod, staticmethod)):
        if getattr(reached, "__func__", reached) is not installed.__func__:
            return f"{record.path}: attribute access does not return the wrapper"
    elif reached is not installed:
        return f"{record.path}: attribute access does not return the wrapper"
    if record._function is not None:
        holders = _holders(record._function, _scope(container.__name__))
        if holders:
            return f"{record.path}: still reachable unwrapped as {', '.join(holders)}"
    return None


def _restore(record: Patch) -> None:
    container, name = record._container, record._name
    if record._had_own:
        setattr(container, name, record._original)
    elif name in vars(container):
        delattr(container, name)
    for module, alias in record._aliases:
        if vars(module).get(alias) is record._installed:
            setattr(module, alias, record._original)
    record._aliases.clear()


# ------------------------------------------------------------------- aliases


def _top(module_name: str) -> str:
    return module_name.partition(".")[0]


def _scope(module_name: str) -> list[types.ModuleType]:
    """Modules that may hold an alias: the target's top-level package and its submodules."""
    top = _top(module_name)
    prefix = top + "."
    return [module for name, module in list(sys.modules.items())
            if module is not None and (name == top or name.startswith(prefix))]


def _holders(function: Any, modules: list[types.ModuleType]) -> list[str]:
    return [f"{module.__name__}.{name}" for module in modules
            for name, value in list(vars(module).items()) if value is function]


def _rebind_aliases(record: Patch, modules: list[types.ModuleType]) -> None:
    original, installed = record._function, record._installed
    for module in modules:
        for name, value in list(vars(module).items()):
            if value is original and not (module is record._container and name == record._name):
                setattr(module, name, installed)
                record._aliases.append((module, name))


# ------------------------------------------------------------ import hooks


class _LoaderProxy(importlib.abc.Loader):
    """Runs the real loader, then tells the finder the module is loaded."""

    def __init__(self, loader: Any, notify: Callable[[types.ModuleType], None]):
        self.loader = loader
        self.notify = notify

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        # The module sees its real loader (pkgutil, importlib.resources, reload use it).
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        self.notify(module)

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _ImportWatcher(importlib.abc.MetaPathFinder):
    """Patches targets when their module is imported, and rebinds aliases in later modules."""

    def __init__(self) -> None:
        self.modules: set[str] = set()  # target modules not imported yet
        self.prefixes: dict[str, list[Patch]] = {}  # top-level package -> function patches to re-alias
        self._busy = threading.local()

    def watch_module(self, name: str) -> None:
        self.modules.add(name)

    def watch_prefix(self, top: str, record: Patch) -> None:
        records = self.prefixes.setdefault(top, [])
        if record not in records:
            records.append(record)

    def forget(self, record: Patch) -> None:
        for records in self.prefixes.values():
            if record in records:
                records.remove(record)
        if not any(r.module == record.module and r.outcome == "waiting" for r in _registry.values()):
            self.modules.discard(record.module)

    def _interested(self, fullname: str) -> bool:
        return fullname in self.modules or bool(self.prefixes.get(_top(fullname)))

    def find_spec(self, fullname, path=None, target=None):
        if not self._interested(fullname):
            return None
        busy = self._busy.__dict__.setdefault("names", set())
        if fullname in busy:
            return None
        busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        except (ImportError, ValueError):
            return None
        finally:
            busy.discard(fullname)
        if spec is None or spec.loader is None or isinstance(spec.loader, _LoaderProxy):
            return spec
        if not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _LoaderProxy(spec.loader, self.loaded)
        return spec

    def loaded(self, module: types.ModuleType) -> None:
        name = module.__name__
        changed: list[Patch] = []
        with _lock:
            for record in self.prefixes.get(_top(name), []):
                before = len(record._aliases)
                _rebind_aliases(record, [module])
                if len(record._aliases) != before:
                    changed.append(record)
            if name in self.modules:
                self.modules.discard(name)
                for record in [r for r in _registry.values() if r.module == name and r.outcome == "waiting"]:
                    _apply(record, module)
                    changed.append(record)
        # Outside the lock: callbacks may take their own locks, write files, or raise
        # (strict mode), which fails this import.
        for record in changed:
            if record.on_change is not None:
                record.on_change(record)


_watcher: _ImportWatcher | None = None


def _finder() -> _ImportWatcher:
    global _watcher
    with _lock:
        if _watcher is None:
            _watcher = _ImportWatcher()
        if _watcher not in sys.meta_path:
            sys.meta_path.insert(0, _watcher)
        return _watcher


# ------------------------------------------------- finding code without importing it


def module_exists(name: str) -> bool | None:
    """Whether module ``name`` can be imported, judged without importing anything new.

    None when it cannot be told (a top-level package that is not on disk as directories).
    """
    return _locate(name)[0]


def module_source(name: str) -> Path | None:
    """The ``.py`` file module ``name`` would be loaded from, found without importing it."""
    return _locate(name)[1]


def _locate(name: str) -> tuple[bool | None, Path | None]:
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
    if not locations or not all(Path(location).is_dir() for location in locations):
        return None, None
    for part in rest[:-1]:
        locations = [str(Path(location) / part) for location in locations if (Path(location) / part).is_dir()]
        if not locations:
            return False, None
    last = rest[-1]
    for location in map(Path, locations):
        for candidate in (location / f"{last}.py", location / last / "__init__.py"):
            if candidate.is_file():
                return True, candidate
        if (location / last).is_dir() or any((location / f"{last}{suffix}").is_file()
                                               for suffix in importlib.machinery.EXTENSION_SUFFIXES):
            return True, None
    return False, None


@functools.lru_cache(maxsize=64)
def _parsed(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def definition(path: str) -> ast.AST | None:
    """The ``def``/``class`` node of target ``path`` in its module's source, or None.

    Reads the source file; never imports the module. None when the module, or a
    definition of that exact name in that exact place (not inherited), is absent.
    """
    module_name, _, qualname = path.partition(":")
    source = module_source(module_name)
    tree = _parsed(source) if source is not None else None
    node: ast.AST | None = tree
    for part in qualname.split("."):
        if node is None:
            return None
        node = next((child for child in getattr(node, "body", [])
                     if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and child.name == part), None)
    return node


def contains(node: ast.AST | None, code: str) -> bool:
    """Whether the statement or expression ``code`` occurs in ``node`` (compared as syntax)."""
    if node is None:
        return False
    statement = ast.parse(code.strip()).body[0]
    wanted = ast.dump(statement.value if isinstance(statement, ast.Expr) else statement)
    return any(ast.dump(child) == wanted for child in ast.walk(node))


def declares(node: ast.AST | None, parameter: str) -> bool:
    """Whether ``node`` (or a function nested in it) declares a parameter named ``parameter``."""
    return node is not None and any(isinstance(child, ast.arg) and child.arg == parameter
                                    for child in ast.walk(node))
