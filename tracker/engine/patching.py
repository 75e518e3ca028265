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
(``tracker.engine.source``), never by importing it.
"""

from __future__ import annotations

import functools
import gc
import inspect
import sys
import threading
import types
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from tracker import echoed
from tracker.engine import importhook, source
from tracker.model.vocabulary import TARGET_KINDS as KINDS
from tracker.model.vocabulary import Outcome, TargetKind

# wrapper(wrapped, instance, args, kwargs), in the shape of wrapt's function wrappers.
Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


class PatchConflict(RuntimeError):
    """A target is already patched by another owner."""


class Patch:
    """One target: what was asked, what happened, and what is needed to undo it.

    A plain class, not a dataclass: every vLLM process that applies something imports this
    module, and a dataclass compiles its generated methods at every import."""

    __slots__ = ("path", "owner", "kind", "params", "wrapper", "optional", "outcome", "detail", "error", "on_change",
                 "left", "_container", "_name", "_had_own", "_original", "_installed", "_function", "_aliases",
                 "_copy", "_code", "_wrapped", "_everywhere")

    def __init__(self, path: str, owner: str, kind: str, params: tuple[str, ...] | None, wrapper: Wrapper,
                 optional: bool = False, on_change: Callable[[Patch], None] | None = None) -> None:
        self.path = path
        self.owner = owner
        self.kind = kind
        self.params = params
        self.wrapper = wrapper
        self.optional = optional
        self.outcome: Outcome = Outcome.WAITING
        self.detail = ""
        self.error: str | None = None
        self.on_change = on_change
        self._container: Any = None
        self._name = ""
        self._had_own = False
        self._original: Any = None  # exactly what was in the container's __dict__
        self._installed: Any = None  # what replaced it
        self._function: Any = None  # original module-level function (alias scan)
        self._aliases: list[tuple[Any, str]] = []  # (module or class, name) rebound to the wrapper
        self.left: list[str] = []  # references to the original that could not be rebound (``partial``)
        self._copy: Any = None  # a redirected function: the copy the wrapper calls
        self._code: Any = None  # a redirected function: its own code object, put back on revert
        self._wrapped: tuple[bool, Any] = (False, None)  # its own ``__wrapped__`` before, if it had one
        self._everywhere = False  # not redirected: rebound in every module imported later

    def __repr__(self) -> str:
        return f"Patch(path={self.path!r}, owner={self.owner!r}, kind={self.kind!r}, outcome={self.outcome!r})"

    @property
    def module(self) -> str:
        return self.path.partition(":")[0]

    @property
    def original(self) -> Any:
        return self._original

    @property
    def aliases(self) -> list[str]:
        """``module.name`` (``module.Class.name`` for a class attribute) of every alias rebound to the wrapper."""
        return [f"{_owner_name(holder)}.{name}" for holder, name in self._aliases]

    @property
    def redirected(self) -> bool:
        """Whether the original function's own code leads to the wrapper (every reference to it does)."""
        return self._copy is not None


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
        for record in [*_alias_watch.get(_top(module.__name__), []), *_alias_watch.get(importhook.EVERY, [])]:
            before = len(record._aliases), len(record.left)
            if record._everywhere:
                _rebind_in_module(record, module)
                _settle_rebound(record)
            else:
                _rebind_aliases(record, [module])
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
    top = importhook.EVERY if record._everywhere else _top(record.module)
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
    del resolved  # a tuple holding the original: it would be one more reference to it (_rebind_everywhere)
    try:
        drift = _drift(record, container, raw, function)
        if drift is not None:
            _settle(record, Outcome.DRIFTED, drift)
            return
        if isinstance(container, types.ModuleType) and _redirectable(raw):
            record._copy = _clone(raw)
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
                _redirect(record)
                scope = _scope(container.__name__)  # once: nothing is imported until the check below
                _rebind_aliases(record, scope)
                _watch_aliases(_top(container.__name__), record)
            else:
                record._everywhere = True
                _rebind_everywhere(record)
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
        holders = _holders(record._function, scope)
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


# ------------------------------------------------------------------ redirecting

_UNBOUND_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
_templates: dict[int, types.CodeType] = {}  # number of free variables -> the redirecting code's template


def _redirectable(raw: Any) -> bool:
    """A plain Python function (not a generator or coroutine function, whose kind callers test)
    whose code can be swapped for code that calls the wrapper (one with as many free variables)."""
    if type(raw) is not types.FunctionType or raw.__code__.co_flags & _UNBOUND_FLAGS:
        return False
    free = len(raw.__code__.co_freevars)
    return len(_template(free).co_freevars) == free


def _clone(function: types.FunctionType) -> types.FunctionType:
    """A copy of ``function`` that keeps its code, globals, closure, defaults and attributes:
    what the wrapper calls once the original's own code leads to the wrapper."""
    copy = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__,
                              function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__dict__.update(vars(function))
    copy.__qualname__, copy.__module__, copy.__doc__ = function.__qualname__, function.__module__, function.__doc__
    copy.__annotations__ = function.__annotations__
    return copy


def _template(free: int) -> types.CodeType:
    """Code that calls a constant (``...``, replaced by the wrapper) with the arguments it was given,
    declaring ``free`` free variables that it never reads: a function's code may only be swapped for
    one with as many free variables as the function's closure has cells."""
    code = _templates.get(free)
    if code is None:
        names = [f"_{index}" for index in range(free)]
        lines = ["def outer():", *([f"    {' = '.join(names)} = None"] if names else []),
                 "    def redirect(*args, **kwargs):", "        return ...(*args, **kwargs)",
                 *([f"        {', '.join(names)}"] if names else []), "    return redirect"]
        namespace: dict[str, Any] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # "'ellipsis' object is not callable": it is replaced
            exec(compile("\n".join(lines), "<redirect>", "exec"), namespace)  # text built here, of names only
        code = _templates[free] = namespace["outer"]().__code__
    return code


def _redirect(record: Patch) -> None:
    """Swap the original function's code for code that calls the wrapper; ``_restore`` puts it back."""
    function = record._function
    own = function.__code__
    template = _template(len(own.co_freevars))
    record._code = own
    record._wrapped = ("__wrapped__" in vars(function), vars(function).get("__wrapped__"))
    function.__code__ = template.replace(
        co_consts=tuple(record._installed if constant is Ellipsis else constant for constant in template.co_consts),
        co_name=own.co_name, co_qualname=own.co_qualname,
        co_filename=f"<xpu-workarounds: {record.path} leads to its wrapper>")
    function.__wrapped__ = record._copy  # inspect.signature (and unwrap) read the original's own parameters


# ------------------------------------------------------------------- aliases


def _top(module_name: str) -> str:
    return module_name.partition(".")[0]


def _scope(module_name: str) -> list[types.ModuleType]:
    """Modules that may hold an alias: the target's top-level package and its submodules."""
    top = _top(module_name)
    prefix = top + "."
    modules = sys.modules  # its names copied, not its items: a vLLM process holds thousands of modules
    return [module for module in (modules.get(name) for name in list(modules) if name.startswith(prefix) or name == top)
            if module is not None]


def _names_of(value: Any, module: types.ModuleType) -> list[str]:
    """The names under which ``module`` holds ``value`` (a copy of its namespace is read: another
    thread may be importing into it). A comprehension: this runs over every name of every module
    in a target's package, several times faster than a loop with a statement per name."""
    return [name for name, held in list(vars(module).items()) if held is value]


def _holders(function: Any, modules: list[types.ModuleType]) -> list[str]:
    return [f"{module.__name__}.{name}" for module in modules for name in _names_of(function, module)]


def _owner_name(holder: Any) -> str:
    """A module's name, or a class's ``module.Qualified.name``."""
    if isinstance(holder, type):
        return f"{holder.__module__}.{holder.__qualname__}"
    return str(getattr(holder, "__name__", type(holder).__name__))


def _function_name(function: Any) -> str:
    return f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', '?')}"


def _rebind_class(record: Patch, klass: type, name: str) -> None:
    """Class attribute ``name`` of ``klass`` holds the original: the wrapper instead (a staticmethod
    where the original, a callable that does not bind, would not have received the instance)."""
    installed = record._installed
    held = installed if hasattr(type(record._function), "__get__") else staticmethod(installed)
    try:
        setattr(klass, name, held)
    except (TypeError, AttributeError):  # a built-in or frozen type
        record.left.append(f"{_owner_name(klass)}.{name} (a read-only class attribute)")
        return
    record._aliases.append((klass, name))


def _rebind_in_module(record: Patch, module: types.ModuleType) -> None:
    """A module imported after a function was rebound everywhere: its globals and its own classes."""
    original = record._function
    for name in _names_of(original, module):
        setattr(module, name, record._installed)
        record._aliases.append((module, name))
    for value in list(vars(module).values()):
        if isinstance(value, type) and value.__module__ == module.__name__:
            for name in _keys_of(original, vars(value)):
                _rebind_class(record, value, name)


def _keys_of(value: Any, mapping: Any) -> list[Any]:
    """The keys under which ``mapping`` holds ``value`` (a comprehension of its own: one in the
    functions below would keep ``value`` in a closure cell, one more reference for them to find)."""
    return [key for key, held in list(mapping.items()) if held is value]


def _rebind_everywhere(record: Patch) -> None:
    """A function that cannot be redirected: every reference to it the garbage collector knows,
    module globals and class attributes rebound to the wrapper, every other one named in ``left``.
    No comprehension here names the original (see ``_keys_of``)."""
    original, installed = record._function, record._installed
    modules = {id(namespace): module for module in list(sys.modules.values())
               if isinstance(module, types.ModuleType) and isinstance(namespace := getattr(module, "__dict__", None), dict)}
    own = {id(record), id(vars(installed)), *(id(cell) for cell in installed.__closure__ or ())}
    dicts: list[dict[Any, Any]] = []
    others: list[Any] = []
    for holder in gc.get_referrers(original):
        if id(holder) in own or isinstance(holder, types.FrameType):
            continue
        module = modules.get(id(holder)) if isinstance(holder, dict) else None
        if module is not None:
            for name in _keys_of(original, holder):
                if not (module is record._container and name == record._name):
                    setattr(module, name, installed)
                    record._aliases.append((module, name))
        elif isinstance(holder, dict):
            dicts.append(holder)
        else:
            others.append(holder)
    if dicts:
        _rebind_dicts(record, dicts)
    if others:
        record.left += _named(original, others)


def _rebind_dicts(record: Patch, dicts: list[dict[Any, Any]]) -> None:
    """Dictionaries holding the original that are no module's: a class's attributes are rebound;
    an instance's attributes, a function's keyword defaults and any other dictionary are named."""
    original = record._function
    owners: dict[int, Any] = {}
    for owner in gc.get_referrers(*dicts):
        if isinstance(owner, type):
            for referent in gc.get_referents(owner):
                if isinstance(referent, dict):
                    owners.setdefault(id(referent), owner)
        elif isinstance(owner, types.FunctionType) and owner.__kwdefaults__ is not None:
            owners.setdefault(id(owner.__kwdefaults__), owner)
        elif isinstance(getattr(owner, "__dict__", None), dict):
            owners.setdefault(id(owner.__dict__), owner)
    for held in dicts:
        owner = owners.get(id(held))
        for name in _keys_of(original, held):
            if isinstance(owner, type) and vars(owner).get(name) is original:
                _rebind_class(record, owner, name)
            elif isinstance(owner, types.FunctionType):
                record.left.append(f"keyword default {name} of {_function_name(owner)}")
            elif owner is not None:
                record.left.append(f"attribute {name} of a {type(owner).__qualname__} object")
            else:
                record.left.append(f"a dict entry {name!r}")


def _named(original: Any, holders: list[Any]) -> list[str]:
    """Each reference that cannot be rebound, in words: a closure cell or a default argument by
    the function that holds it, any other holder by its type."""
    cells = [holder for holder in holders if isinstance(holder, types.CellType)]
    closures: dict[int, list[str]] = {}
    if cells:
        tuples = [t for t in gc.get_referrers(*cells) if isinstance(t, tuple)]
        for function in gc.get_referrers(*tuples) if tuples else ():
            if isinstance(function, types.FunctionType) and function.__closure__ is not None:
                for cell in function.__closure__:
                    closures.setdefault(id(cell), []).append(_function_name(function))
    defaults: dict[int, str] = {}
    tuples = [holder for holder in holders if isinstance(holder, tuple)]
    if tuples:
        for function in gc.get_referrers(*tuples):
            if isinstance(function, types.FunctionType) and function.__defaults__ is not None:
                defaults.setdefault(id(function.__defaults__), _function_name(function))
    named: list[str] = []
    for holder in holders:
        if isinstance(holder, types.CellType):
            named += [f"closure of {name}" for name in closures.get(id(holder), [])] or ["a closure cell"]
        elif id(holder) in defaults:
            named.append(f"default argument of {defaults[id(holder)]}")
        else:
            named.append(f"a {type(holder).__qualname__}")
    return named


def _rebind_aliases(record: Patch, modules: list[types.ModuleType]) -> None:
    original, installed = record._function, record._installed
    for module in modules:
        for name in _names_of(original, module):
            if not (module is record._container and name == record._name):
                setattr(module, name, installed)
                record._aliases.append((module, name))
