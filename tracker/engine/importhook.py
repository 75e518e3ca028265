"""Call back when a module is imported: a post-import hook in the shape of ``wrapt.importer``.

Knows nothing about what the callbacks do. ``when_imported(name, callback)`` calls
``callback(module)`` once module ``name`` has been executed by an import (at once, in
the caller's thread, if it is already imported); ``when_any_imported(package, callback)``
calls it after every module of the top-level ``package`` is executed (of every package for
``EVERY``), until cancelled.

The mechanism is wrapt's: a finder first on ``sys.meta_path`` that, for a name it is
interested in, asks the rest of the import system for the spec (marking the name in
progress so that it does not ask itself again) and wraps the spec's loader so that the
loader's ``exec_module`` is followed by the callbacks. The module keeps its real loader
(``__loader__`` and ``__spec__.loader``), so ``importlib.reload``, ``pkgutil`` and
``importlib.resources`` see what they would see without the hook. Callbacks run outside
this module's lock, in registration order; an exception raised by one fails that import
(as with wrapt). Reloading a module does not call its one-shot callbacks again.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from collections.abc import Callable, Sequence
from typing import Any

Callback = Callable[[types.ModuleType], None]
EVERY = "*"  # ``when_any_imported(EVERY, ...)``: every module of every package

_lock = threading.RLock()


class Hook:
    """One registration; ``cancel()`` removes it (a callback already running is not stopped)."""

    def __init__(self, key: str, callback: Callback, *, every: bool):
        self.key = key  # module name, or top-level package for ``every``
        self.callback = callback
        self.every = every

    def cancel(self) -> None:
        with _lock:
            table = _finder.every if self.every else _finder.once
            hooks = table.get(self.key, [])
            if self in hooks:
                hooks.remove(self)
            if not hooks:
                table.pop(self.key, None)


def when_imported(name: str, callback: Callback) -> Hook:
    """Call ``callback(module)`` once module ``name`` is imported; at once if it already is."""
    hook = Hook(name, callback, every=False)
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _finder.once.setdefault(name, []).append(hook)
            _install()
    if module is not None:
        callback(module)  # outside the lock, as wrapt does: the callback may import or start threads
    return hook


def when_any_imported(package: str, callback: Callback) -> Hook:
    """Call ``callback(module)`` after each later import of ``package`` or any module under it
    (``EVERY``: of any module at all)."""
    top = package.partition(".")[0]
    hook = Hook(top, callback, every=True)
    with _lock:
        _finder.every.setdefault(top, []).append(hook)
        _install()
    return hook


def _install() -> None:
    if _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def _notify(module: types.ModuleType) -> None:
    name = module.__name__
    with _lock:
        hooks = (_finder.every.get(name.partition(".")[0], []) + _finder.every.get(EVERY, [])
                 + _finder.once.pop(name, []))
    for hook in list(hooks):
        hook.callback(module)


class _ChainedLoader(importlib.abc.Loader):
    """Runs the real loader, then the callbacks for the module it executed."""

    def __init__(self, loader: Any):
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        created: types.ModuleType | None = self.loader.create_module(spec)
        return created

    def exec_module(self, module: types.ModuleType) -> None:
        # The module sees its real loader (pkgutil, importlib.resources, reload use it).
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _notify(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.once: dict[str, list[Hook]] = {}
        self.every: dict[str, list[Hook]] = {}
        self._asking = threading.local()  # names this thread is looking up through the rest of sys.meta_path

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.once and not self.every.get(fullname.partition(".")[0]) and not self.every.get(EVERY):
            return None
        asking: set[str] = self._asking.__dict__.setdefault("names", set())
        if fullname in asking:
            return None
        asking.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        except (ImportError, ValueError):
            return None
        finally:
            asking.discard(fullname)
        if spec is None or spec.loader is None or isinstance(spec.loader, _ChainedLoader):
            return spec
        if not hasattr(spec.loader, "exec_module"):
            return None  # a legacy loader: leave this import to it, untouched
        spec.loader = _ChainedLoader(spec.loader)
        return spec


_finder = _Finder()

__all__ = ["EVERY", "Callback", "Hook", "when_any_imported", "when_imported"]
