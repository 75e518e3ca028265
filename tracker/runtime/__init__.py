"""Run time after the fast path (``tracker.plugin``, what every vLLM process tries first):
activation (``activate``), the full path's decisions (``planning``) and the record they leave.

``tracker.runtime.report()`` (the contract's name) and ``register``/``reset``/``summary``
are looked up lazily, so that importing this package (for ``StrictModeError``, say) does
not import the activation machinery.
"""

from __future__ import annotations

from typing import Any

_ACTIVATION = ("register", "report", "reset", "summary")


class StrictModeError(RuntimeError):
    """XPU_WORKAROUNDS_STRICT=1 and a needed workaround failed or drifted: stop start-up."""


def __getattr__(name: str) -> Any:
    if name in _ACTIVATION:
        from tracker.runtime import activate

        return getattr(activate, name)
    raise AttributeError(f"module 'tracker.runtime' has no attribute {name!r}")


__all__ = ["StrictModeError", *_ACTIVATION]
