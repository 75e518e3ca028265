"""The record of one patched target: what was asked, what happened, and what undoes it.

Knows nothing about XPU or vLLM (see ``tracker.engine.patching``, which makes and keeps these
records; ``tracker.engine.redirect`` and ``tracker.engine.rebinding`` fill in how the original
was made to lead to the wrapper).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tracker.model.vocabulary import Outcome

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
        return [f"{owner_name(holder)}.{name}" for holder, name in self._aliases]

    @property
    def redirected(self) -> bool:
        """Whether the original function's own code leads to the wrapper (every reference to it does)."""
        return self._copy is not None


def owner_name(holder: Any) -> str:
    """A module's name, or a class's ``module.Qualified.name``."""
    if isinstance(holder, type):
        return f"{holder.__module__}.{holder.__qualname__}"
    return str(getattr(holder, "__name__", type(holder).__name__))
