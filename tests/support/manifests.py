"""The one manifest builder of the tests: a valid ``workarounds.toml`` from a few overrides.

``workaround(...)`` is one ``[[workaround]]`` entry (defaults: the frozen manifest's
pipeline-parallel broadcast entry, trimmed, under an id no workaround ships);
``manifest_text(*entries)`` the whole file; ``write_manifest(path, *entries)`` writes it.
Anything a test does not name is a valid default, so each test states only what it is about.
"""

from __future__ import annotations

import datetime
import tempfile
from pathlib import Path
from typing import Any

import tomlkit

# A manifest of [[tracked]] entries only (a vLLM fork's): no floors, no [[workaround]].
TRACKED_ONLY = """schema = 1

[[tracked]]
id = "vllm-ucx-memtype-cache"
title = "vLLM sets UCX_MEMTYPE_CACHE=n on XPU"
file = "vllm/platforms/xpu.py"
marker = 'os.environ["UCX_MEMTYPE_CACHE"] = "n"'
carried_in = ">=0.19.0"
"""
SUPPORT = {"vllm": "0.19.0", "torch": "2.10.0", "vllm-xpu-kernels": "0.1.4"}
PP_TARGET = {"path": "vllm.v1.worker.gpu.pp_utils:PPHandler.broadcast", "kind": "method",
             "params": ["self", "sampled_token_ids", "num_sampled", "num_rejected", "input_batch"]}


def workaround(id: str = "main-stream-sync", *, targets: list[dict[str, Any]] | None = None,
               affected: list[dict[str, str]] | None = None, upstream: list[dict[str, Any]] | None = None,
               vllm_carries_fix: str | None = ">=0.25.0", **fields: Any) -> dict[str, Any]:
    """One entry; ``fields`` override or add keys (``platform``, ``title``, ``module`` ...)."""
    entry: dict[str, Any] = {
        "id": id,
        "title": "Synchronize the main stream before the pipeline-parallel broadcast",
        "platform": "xpu",
        "owner": "tests",
        "added": datetime.date(2026, 7, 1),
        "symptom": "wrong tokens with pipeline parallelism (PP > 1)",
        "why": "The side stream is not ordered after the sampler on XPU.",
        "how": "Synchronize the main stream first.",
    }
    if vllm_carries_fix is not None:
        entry["vllm_carries_fix"] = vllm_carries_fix
    entry.update(fields)
    entry["targets"] = targets if targets is not None else [dict(PP_TARGET)]
    entry["affected"] = affected if affected is not None else [{"vllm": ">=0.23.0,<0.25.0"}]
    entry["upstream"] = upstream if upstream is not None else [
        {"ref": "vllm-project/vllm#47253", "role": "inline-fix", "state": "merged", "released_in": "vllm>=0.25.0",
         "marker": "self.main_stream.synchronize()"}]
    return entry


def manifest_text(*entries: dict[str, Any], support: dict[str, str] | None = None,
                  tracked: list[dict[str, Any]] | None = None) -> str:
    """The manifest holding ``entries`` (default: one ``workaround()``) and the ``tracked`` ones
    (vLLM's own inline workarounds, ``[[tracked]]``)."""
    document: dict[str, Any] = {"schema": 1, "support": support if support is not None else dict(SUPPORT),
                                "workaround": list(entries) or [workaround()]}
    if tracked:
        document["tracked"] = tracked
    return tomlkit.dumps(document)


def write_manifest(path: Path, *entries: dict[str, Any], support: dict[str, str] | None = None,
                   tracked: list[dict[str, Any]] | None = None) -> Path:
    path.write_text(manifest_text(*entries, support=support, tracked=tracked), encoding="utf-8")
    return path


def loaded(text: str) -> Any:
    """``reader.load`` of a manifest given as text (written to a directory removed after)."""
    return _read(text, "load")


def checked(text: str) -> list[Any]:
    """``reader.check`` (lint's problems) of a manifest given as text."""
    return _read(text, "check")


def _read(text: str, how: str) -> Any:
    from tracker.model import reader

    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-test-") as scratch:
        path = Path(scratch) / "workarounds.toml"
        path.write_text(text, encoding="utf-8")
        return getattr(reader, how)(path)
