"""``xpu-workarounds upstream``: what actually happened to every upstream reference.

Per reference (``OWNER/REPO#N``) it learns, from GitHub through PyGithub, the state
(``state``), the landed commit, the first release containing it (``releases``) and, for
vLLM's own inline workarounds, whether they are dead code at vLLM's XPU pins (``audit``).
Answers are cached and revalidated with conditional requests (``cache``); ``tracking``
runs it all; ``writeback`` writes the facts into a manifest; ``render`` prints them.
"""

from __future__ import annotations

from tracker.upstream.audit import VLLM_REPOSITORY, VLLM_XPU_REQUIREMENTS, inline_verdict, xpu_pins
from tracker.upstream.cache import MAX_AGE, Cache, Mode, NotCached, NoUsableCache, Source
from tracker.upstream.clock import age_text
from tracker.upstream.facts import SCHEMA, Facts, InlineVerdict, Report
from tracker.upstream.releases import RELEASE_TAG_PREFIX, REPOSITORY_COMPONENTS, Probe, Releases, Tag, release_of_tag
from tracker.upstream.render import render
from tracker.upstream.state import classify_pr
from tracker.upstream.tracking import Tracker, track
from tracker.upstream.writeback import updated_text, write_back

__all__ = [
    "MAX_AGE", "REPOSITORY_COMPONENTS", "RELEASE_TAG_PREFIX", "SCHEMA", "VLLM_REPOSITORY", "VLLM_XPU_REQUIREMENTS",
    "Cache", "Facts", "InlineVerdict", "Mode", "NoUsableCache", "NotCached", "Probe", "Releases", "Report",
    "Source", "Tag", "Tracker", "age_text", "classify_pr", "inline_verdict", "release_of_tag", "render", "track",
    "updated_text", "write_back", "xpu_pins",
]
