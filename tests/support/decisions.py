"""Decisions on a described stack, for the decision tests: the shipped manifest's entries
(each workaround's own test file) or a synthetic one (tests/test_decision.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from support.manifests import workaround, write_manifest
from tracker.decision.gates import Decision, decide
from tracker.model import reader
from tracker.model.environment import Environment, Settings
from tracker.model.manifest import Manifest, Workaround
from tracker.model.versions import ComponentVersion

MANIFEST = reader.load()

# The stack from the first report: vLLM 0.27.1, torch 2.13.0, kernels 0.1.12.3 on XPU.
ISSUE_STACK = {"vllm": "0.27.1", "torch": "2.13.0", "kernels": "0.1.12.3"}


def stack(platform: str = "xpu", **versions: str) -> Environment:
    names = {"vllm": "vllm", "torch": "torch", "kernels": "vllm-xpu-kernels"}
    return Environment(platform, "override",
                       {names[key]: ComponentVersion(names[key], raw) for key, raw in versions.items()})


def decision(workaround_id: str, env: Environment, settings: Settings = Settings()) -> Decision:
    return decide(MANIFEST.get(workaround_id), env, settings)


def reason(workaround_id: str, **versions: str) -> str:
    return str(decision(workaround_id, stack(**versions)).reason)


def synthetic(*entries: dict[str, Any]) -> Manifest:
    """A manifest of ``entries`` (``support.manifests.workaround()``), read like any other."""
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-decisions-") as scratch:
        return reader.load(write_manifest(Path(scratch) / "workarounds.toml", *entries))


def one(**fields: Any) -> Workaround:
    """One synthetic workaround (default: affected on vllm >=0.23.0,<0.25.0, carried from 0.25.0)."""
    (entry,) = synthetic(workaround(**fields)).workarounds
    return entry
