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
error), makes every reference to a patched function lead to the wrapper, verifies
callers reach the wrapper, and records an ``outcome``.

Every reference, wherever it is: a module-level target that is a plain Python function is
*redirected*: its own code object is swapped for one that calls the wrapper (the original
runs as a copy of itself), so a caller holding the function object by any name reaches the
wrapper, in any module, class, closure, default argument or container, now or later
(vLLM's ``torch.accelerator.get_memory_info = get_memory_info``). Modules of the target's
package that imported it by name are rebound to the wrapper too, as before, so that they hold
the very object the target's module holds. A function target that cannot be redirected (a
builtin, a ``functools.partial``, a coroutine or generator function, a callable object) is
rebound by reference instead: every module global and class attribute holding it, in every
loaded module and in every module imported later; a reference that cannot be rebound (a
closure cell, a default argument, a container, a read-only attribute) is named in ``left``
and the outcome is ``partial``. When the target's module is not imported yet it waits for it
(``tracker.engine.importhook.when_imported``) and patches when the module is
imported, never earlier; whether a module exists at all is read from disk
(``tracker.engine.source``), never by importing it. The code swap is ``tracker.engine.redirect``,
the reference scan ``tracker.engine.rebinding``, the record ``tracker.engine.record``.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any

from tracker import echoed
from tracker.engine import importhook, rebinding, redirect, source
from tracker.engine.record import Patch as Patch
from tracker.engine.record import PatchConflict as PatchConflict
from tracker.engine.record import Wrapper as Wrapper
from tracker.model.vocabulary import TARGET_KINDS as KINDS
from tracker.model.vocabulary import Outcome, TargetKind

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
        raise ValueError(f"{echoed(path)} is not 'package.module:Attribute.path'")
    if kind not in KINDS:
        raise ValueError(f"{echoed(kind)} is not one of {', '.join(KINDS)}")
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
        found = source.module_exists(module_name)
        if found is False:
            _settle(record, Outcome.SKIPPED if optional else Outcome.DRIFTED,
                    f"module {module_name} does not exist" + (" (optional target)" if optional else ""))
            return record
        record.detail = waiting_detail(module_name)
        if module_name not in _waiting:
            _waiting[module_name] = importhook.when_imported(module_name, _module_imported)
        return record


def waiting_detail(module_name: str) -> str:
    """What a target whose module is not imported yet says in the report."""
    return f"waiting until {module_name} is imported"


def revert(path: str) -> bool:
    """Undo the patch of ``path``: the exact original object is back everywhere. False if none."""
    with _lock:
        record = _registry.pop(path, None)
        if record is None:
            return False
        if record.outcome in (Outcome.APPLIED, Outcome.PARTIAL):
            _restore(record)
            record.outcome, record.detail = Outcome.SKIPPED, "reverted"
        _stop_watching(record)
        return True


# ------------------------------------------------------------------ imports

_waiting: dict[str, importhook.Hook] = {}  # target module not imported yet -> its hook
_alias_watch: dict[str, list[Patch]] = {}  # top-level package -> function patches to re-alias there
_alias_hooks: dict[str, importhook.Hook] = {}


def _module_imported(module: types.ModuleType) -> None:
    """A module with waiting targets was imported: patch them, then tell their owners."""
    with _lock:
        _waiting.pop(module.__name__, None)
        changed = [r for r in _registry.values() if r.module == module.__name__ and r.outcome == Outcome.WAITING]
        for record in changed:
            _apply(record, module)
    _announce(changed)


def _rebind_in(module: types.ModuleType) -> None:
    """A module was imported: rebind what it imported by name of a patched function of its package,
    and, of a function rebound everywhere (not redirected), every reference its globals and classes hold."""
    changed: list[Patch] = []
    with _lock:
        for record in [*_alias_watch.get(rebinding.top_package(module.__name__), []), *_alias_watch.get(importhook.EVERY, [])]:
            before = len(record._aliases), len(record.left)
            if record._everywhere:
                rebinding.rebind_in_module(record, module)
                _settle_rebound(record)
            else:
                rebinding.rebind_aliases(record, [module])
            if (len(record._aliases), len(record.left)) != before:
                changed.append(record)
    _announce(changed)


def _announce(changed: list[Patch]) -> None:
    # Outside the lock: callbacks may take their own locks, write files, or raise
    # (strict mode), which fails the import that set them off.
    for record in changed:
        if record.on_change is not None:
            record.on_change(record)


def _watch_aliases(top: str, record: Patch) -> None:
    records = _alias_watch.setdefault(top, [])
    if record not in records:
        records.append(record)
    if top not in _alias_hooks:
        _alias_hooks[top] = importhook.when_any_imported(top, _rebind_in)


def _stop_watching(record: Patch) -> None:
    top = importhook.EVERY if record._everywhere else rebinding.top_package(record.module)
    if record in _alias_watch.get(top, []):
        _alias_watch[top].remove(record)
        if not _alias_watch[top]:
            del _alias_watch[top]
            _alias_hooks.pop(top).cancel()
    waiting = any(r.module == record.module and r.outcome == Outcome.WAITING for r in _registry.values())
    if not waiting and record.module in _waiting:
        _waiting.pop(record.module).cancel()


# ------------------------------------------------------------------ applying


def _apply(record: Patch, module: types.ModuleType) -> None:
    """Fingerprint, wrap, rebind aliases, verify. Records the outcome; never raises."""
    try:
        resolved = _resolve(module, record.path.partition(":")[2])
    except AttributeError as error:
        outcome = Outcome.SKIPPED if record.optional else Outcome.DRIFTED
        _settle(record, outcome, f"{record.path} does not exist ({error}{'; optional target' if record.optional else ''})")
        return
    except Exception as error:  # noqa: BLE001 - e.g. a module __getattr__ that fails
        _settle(record, Outcome.FAILED, f"{type(error).__name__}: {error}", error=f"{type(error).__name__}: {error}")
        return
    container, name, raw, function = resolved
    del resolved  # a tuple holding the original: it would be one more reference to it (rebinding.rebind_everywhere)
    try:
        drift = _drift(record, container, raw, function)
        if drift is not None:
            _settle(record, Outcome.DRIFTED, drift)
            return
        if isinstance(container, types.ModuleType) and redirect.redirectable(raw):
            record._copy = redirect.clone(raw)
        installed = _make(record, raw, function)
        record._container, record._name = container, name
        record._had_own = name in vars(container)
        record._original = vars(container)[name] if record._had_own else raw
        record._installed = installed
        setattr(container, name, installed)
        scope: list[types.ModuleType] = []
        if isinstance(container, types.ModuleType):
            record._function = raw
            if record._copy is not None:
                redirect.redirect(record)
                scope = rebinding.scope(container.__name__)  # once: nothing is imported until the check below
                rebinding.rebind_aliases(record, scope)
                _watch_aliases(rebinding.top_package(container.__name__), record)
            else:
                record._everywhere = True
                rebinding.rebind_everywhere(record)
                _watch_aliases(importhook.EVERY, record)
        problem = _unreached(record, scope)
        if problem is not None:
            _restore(record)
            _settle(record, Outcome.FAILED, problem, error=problem)
            return
    except Exception as error:  # noqa: BLE001 - any failure is reported, not raised
        if record._installed is not None:
            _restore(record)
        _settle(record, Outcome.FAILED, f"{type(error).__name__}: {error}", error=f"{type(error).__name__}: {error}")
        return
    _settle_rebound(record)


def _settle_rebound(record: Patch) -> None:
    """``applied``, or ``partial`` naming each reference left reaching the original."""
    where = f"; aliases rebound: {', '.join(record.aliases)}" if record._aliases else ""
    if record.left:
        _settle(record, Outcome.PARTIAL, f"{record.path} wrapped{where}; still reaching the original: "
                                         f"{', '.join(record.left)}")
    else:
        _settle(record, Outcome.APPLIED, f"{record.path} wrapped{where}")


def _settle(record: Patch, outcome: Outcome, detail: str, error: str | None = None) -> None:
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
        found = source.fingerprint(record.kind, signature_parameters(function)).params
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


_STARS: dict[inspect._ParameterKind, str] = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}


def signature_parameters(function: Callable[..., Any]) -> list[tuple[str, str]]:
    """The live object's parameters as ``source.fingerprint`` takes them: (star, name) pairs."""
    return [(_STARS.get(parameter.kind, ""), parameter.name)
            for parameter in inspect.signature(function).parameters.values()]


def parameter_names(function: Callable[..., Any]) -> tuple[str, ...]:
    """Parameter names as a manifest fingerprint of a function writes them: ``*args`` and ``**kwargs`` starred."""
    return source.fingerprint(TargetKind.FUNCTION, signature_parameters(function)).params


def _make(record: Patch, raw: Any, function: Any) -> Any:
    wrapper = record.wrapper
    if record.kind == TargetKind.METHOD:
        @functools.wraps(function)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return wrapper(function.__get__(self, type(self)), self, args, kwargs)
        return method
    if record.kind == TargetKind.CLASSMETHOD:
        @functools.wraps(function)
        def bound_to_class(cls: type, *args: Any, **kwargs: Any) -> Any:
            return wrapper(types.MethodType(function, cls), cls, args, kwargs)
        return classmethod(bound_to_class)
    if record.kind == TargetKind.STATICMETHOD:
        @functools.wraps(function)
        def static(*args: Any, **kwargs: Any) -> Any:
            return wrapper(function, None, args, kwargs)
        return staticmethod(static)

    callee = function if record._copy is None else record._copy  # redirected: the original now leads here

    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return wrapper(callee, None, args, kwargs)
    return wrapped


def _unreached(record: Patch, scope: list[types.ModuleType]) -> str | None:
    """Why a caller would still reach the original, or None when the wrapper is reached
    (``scope``: the modules that may hold an alias of a function target)."""
    container, name, installed = record._container, record._name, record._installed
    if vars(container).get(name) is not installed:
        return f"{record.path}: setting the attribute did not take effect"
    reached = getattr(container, name)
    if isinstance(installed, (classmethod, staticmethod)):
        if getattr(reached, "__func__", reached) is not installed.__func__:
            return f"{record.path}: attribute access does not return the wrapper"
    elif reached is not installed:
        return f"{record.path}: attribute access does not return the wrapper"
    if record._copy is not None and record._function.__code__ is record._code:
        return f"{record.path}: its code could not be redirected to the wrapper"
    if record._function is not None:
        holders = rebinding.holders(record._function, scope)
        if holders:
            return f"{record.path}: still reachable unwrapped as {', '.join(holders)}"
    return None


def _restore(record: Patch) -> None:
    container, name = record._container, record._name
    if record._had_own:
        setattr(container, name, record._original)
    elif name in vars(container):
        delattr(container, name)
    for holder, alias in record._aliases:
        held = vars(holder).get(alias)
        if (held.__func__ if isinstance(held, staticmethod) else held) is record._installed:
            setattr(holder, alias, record._original)
    record._aliases.clear()
    record.left.clear()
    function = record._function
    if record._copy is not None and record._code is not None:
        if function.__code__ is not record._code:
            function.__code__ = record._code
        had, before = record._wrapped
        if had:
            function.__wrapped__ = before
        else:
            vars(function).pop("__wrapped__", None)
        record._code = None
