"""The names of the ``XPU_WORKAROUNDS*`` environment variables (README "Environment variables").

Names only, stdlib only: the plugin's fast path imports this in every vLLM process. The
values are read and parsed once per activation, by ``tracker.model.environment.Settings``
(the fast path hashes the raw decision variables into its key without parsing them).
"""

from __future__ import annotations

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

# Every variable an activation's decisions read (not the token, the cache or the report directory).
DECISION_VARIABLES = (KILL_SWITCH, DISABLE, FORCE, STRICT, PLATFORM, ASSUME, MANIFEST)
