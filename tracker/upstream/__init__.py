"""``xpu-workarounds upstream``: what actually happened to every upstream reference.

Per reference (``OWNER/REPO#N``) it learns, from GitHub through PyGithub, the state
(``state``), the landed commit, the first release containing it (``releases``) and, for
vLLM's own inline workarounds, whether they are dead code at vLLM's XPU pins (``audit``).
Answers are cached and revalidated with conditional requests (``cache``); ``tracking``
runs it all; ``writeback`` writes the facts into a manifest; ``overlay`` lays them over
one; ``floors`` evaluates a support-floor policy (``tracker.commands.upstream_text`` prints them).

The names below are imported on first use, so that ``tracker.upstream.floors`` (which
``retire`` reads without GitHub) does not import PyGithub. What answers from the cache alone
(``upstream --offline``, the ``retire`` plan) imports no GitHub client either: the settings,
the failures (``failure``) and the paging rules (``paging``) need none; only ``client``,
``errors``, ``graphql`` and ``prefetch`` import PyGithub, where a request is sent.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "VLLM_REPOSITORY": "audit", "VLLM_XPU_REQUIREMENTS": "audit", "inline_verdict": "audit", "xpu_pins": "audit",
    "MAX_AGE": "cache", "Cache": "cache", "Mode": "cache", "NoUsableCache": "cache", "NotCached": "cache",
    "Source": "cache", "age_text": "clock", "SCHEMA": "facts", "Facts": "facts", "InlineVerdict": "facts",
    "Report": "facts", "REPOSITORY_COMPONENTS": "releases", "RELEASE_TAG_PREFIX": "releases", "Probe": "releases",
    "Releases": "releases", "Tag": "releases", "release_of_tag": "releases",
    "classify_pr": "state", "Tracker": "tracking", "track": "tracking", "learn": "tracking",
    "updated_text": "writeback", "write_back": "writeback",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
