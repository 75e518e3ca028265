"""xpu-workarounds: the machinery that decides, applies and retires XPU workarounds.

The package's top holds one thing more: the names of the ``XPU_WORKAROUNDS*`` environment
variables (docs/commands.md, "Environment variables") and the one reading the plugin's two paths share.
They are here rather than in a module of their own because every vLLM process imports this
package, and pays for each module its replay imports (``tracker.plugin``).
The values are read and parsed once per activation, by ``tracker.model.environment.Settings``
(the fast path keeps the raw decision variables in its key without parsing them);
``strict`` is the one reading both share, so that a process carrying out stored plans knows
strict mode from its own environment, as the key does. Stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping

# The one version: the wheel's metadata reads it from here (pyproject.toml [tool.hatch.version]).
__version__ = "0.1.0"

KILL_SWITCH = "XPU_WORKAROUNDS"
DISABLE = "XPU_WORKAROUNDS_DISABLE"
FORCE = "XPU_WORKAROUNDS_FORCE"
STRICT = "XPU_WORKAROUNDS_STRICT"
PLATFORM = "XPU_WORKAROUNDS_PLATFORM"
ASSUME = "XPU_WORKAROUNDS_ASSUME"
MANIFEST = "XPU_WORKAROUNDS_MANIFEST"
REPORT = "XPU_WORKAROUNDS_REPORT"
CACHE_DIR = "XPU_WORKAROUNDS_CACHE_DIR"
GITHUB_TOKEN = "XPU_WORKAROUNDS_GITHUB_TOKEN"

# Every variable an activation's decisions read (not the token, the cache or the report directory;
# tests/test_fastpath.py checks the list against what an activation asks for).
DECISION_VARIABLES = (KILL_SWITCH, DISABLE, FORCE, STRICT, PLATFORM, ASSUME, MANIFEST)

STRICT_ON = ("1", "true", "on", "yes")


def strict(environ: Mapping[str, str]) -> bool:
    """Whether ``XPU_WORKAROUNDS_STRICT`` asks for strict mode (``Settings`` reports a value
    that is neither on nor off)."""
    return environ.get(STRICT, "").strip().lower() in STRICT_ON
