"""Rebind references to a patched function: aliases by name, and, for a function that cannot be
redirected, every reference the garbage collector knows.

Knows nothing about XPU or vLLM. Module globals and class attributes holding the original are
rebound to the wrapper (recorded in the patch's aliases, so that a revert puts the original back);
a reference that cannot be rebound (a closure cell, a default argument, a container, a read-only
attribute) is named in the patch's ``left``. ``tracker.engine.patching`` decides which of these
runs for a target.
"""

from __future__ import annotations

import gc
import sys
import types
from typing import Any

from tracker.engine.record import Patch, owner_name


def top_package(module_name: str) -> str:
    return module_name.partition(".")[0]


def scope(module_name: str) -> list[types.ModuleType]:
    """Modules that may hold an alias: the target's top-level package and its submodules."""
    top = top_package(module_name)
    prefix = top + "."
    modules = sys.modules  # its names copied, not its items: a vLLM process holds thousands of modules
    return [module for module in (modules.get(name) for name in list(modules) if name.startswith(prefix) or name == top)
            if module is not None]


def names_of(value: Any, module: types.ModuleType) -> list[str]:
    """The names under which ``module`` holds ``value`` (a copy of its namespace is read: another
    thread may be importing into it). A comprehension: this runs over every name of every module
    in a target's package, several times faster than a loop with a statement per name."""
    return [name for name, held in list(vars(module).items()) if held is value]


def holders(function: Any, modules: list[types.ModuleType]) -> list[str]:
    return [f"{module.__name__}.{name}" for module in modules for name in names_of(function, module)]


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
        record.left.append(f"{owner_name(klass)}.{name} (a read-only class attribute)")
        return
    record._aliases.append((klass, name))


def rebind_in_module(record: Patch, module: types.ModuleType) -> None:
    """A module imported after a function was rebound everywhere: its globals and its own classes."""
    original = record._function
    for name in names_of(original, module):
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


def rebind_everywhere(record: Patch) -> None:
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


def rebind_aliases(record: Patch, modules: list[types.ModuleType]) -> None:
    original, installed = record._function, record._installed
    for module in modules:
        for name in names_of(original, module):
            if not (module is record._container and name == record._name):
                setattr(module, name, installed)
                record._aliases.append((module, name))
