"""The workarounds against the real source of six vLLM releases, on torch 2.13.0 (CPU build).

For each release, one subprocess (tests/scripts/release_probe.py, run with the e2e
venv's python) imports that release's real Python source, downloaded from PyPI and
cached (tests/support/vllm_harness.py), with the platform forced to xpu and the release's
XPU pins assumed; it calls ``register()`` as vLLM's loader does, imports the target
modules, and prints what happened as JSON. Each release costs one import of vLLM.

Doubles, all at the device boundary: the compiled vllm-xpu-kernels extensions
(tests/scripts/stand_ins: vllm.platforms.xpu imports them at load), XPU event
construction and XPU streams (they need an XPU device), and vLLM's platform
resolution to XPU (it looks for an XPU device).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import vllm_harness

pytestmark = pytest.mark.release_matrix

# Each release's XPU pins (its requirements files; shared/reference/upstream-facts.md).
XPU_PINS = {
    "0.22.1": {"torch": "2.11.0", "vllm-xpu-kernels": "0.1.8"},
    "0.24.0": {"torch": "2.12.0", "vllm-xpu-kernels": "0.1.10"},
    "0.27.1": {"torch": "2.13.0", "vllm-xpu-kernels": "0.1.12"},
    "0.28.0": {"torch": "2.13.0", "vllm-xpu-kernels": "0.1.13.2"},
    "0.32.0": {"torch": "2.14.0", "vllm-xpu-kernels": "0.1.15.4"},
    "0.34.0": {"torch": "2.15.0", "vllm-xpu-kernels": "0.1.17"},
}
assert tuple(XPU_PINS) == vllm_harness.RELEASES

PP_BROADCAST = "vllm.v1.worker.gpu.pp_utils:PPHandler.broadcast"
UVA_VIEW = "vllm.utils.torch_utils:get_accelerator_view_from_cpu_tensor"
CHECK_AND_UPDATE = "vllm.platforms.xpu:XPUPlatform.check_and_update_config"
STAND_INS = vllm_harness.SCRIPTS / "stand_ins"


@pytest.fixture(scope="module")
def probe(e2e_python: Path, installed_project: Path):
    """``probe(release)``: the probe's JSON for that release, run once per release."""
    results: dict[str, dict] = {}

    def run(release: str) -> dict:
        if release not in results:
            source = vllm_harness.release_source(release)
            assume = ",".join([f"vllm=={release}", *(f"{name}=={version}" for name, version in XPU_PINS[release].items())])
            env = vllm_harness.subprocess_env([source, STAND_INS, installed_project],
                                              XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME=assume)
            done = subprocess.run([str(e2e_python), str(vllm_harness.SCRIPTS / "release_probe.py")],
                                  env=env, cwd=source, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, f"probe for {release} exited {done.returncode}:\n{done.stderr[-6000:]}"
            results[release] = json.loads(done.stdout.strip().splitlines()[-1])
            results[release]["source_dir"] = str(source / "vllm")
        return results[release]

    return run


def workaround(report: dict, workaround_id: str) -> dict:
    return next(entry for entry in report["workarounds"] if entry["id"] == workaround_id)


def decision(result: dict, workaround_id: str) -> tuple[str, str, str]:
    entry = workaround(result["report"], workaround_id)
    return entry["decision"], entry["reason"], entry["outcome"]


# ------------------------------------------------------------ every release


@pytest.mark.parametrize("release", vllm_harness.RELEASES)
def test_vllm_imported_is_the_release_source_with_every_target_module(probe, release):
    result = probe(release)
    assert result["vllm_source"] == result["source_dir"]
    # Only modules this release does not have fail to import (e.g. deepseek_v4 before 0.23.0).
    absent = {name for name in result["import_errors"]
              if not any((Path(result["source_dir"]).parent / (name.replace(".", "/") + suffix)).exists()
                         for suffix in (".py", "/__init__.py"))}
    assert set(result["import_errors"]) == absent, result["import_errors"]
    assert all(error.startswith("ModuleNotFoundError") for error in result["import_errors"].values())
    assert result["report"]["environment"]["platform"] == "xpu"
    assert result["report"]["environment"]["versions"]["vllm"] == release


@pytest.mark.parametrize("release", vllm_harness.RELEASES)
def test_every_applied_target_wraps_that_release_s_own_function(probe, release):
    result = probe(release)
    applied = [target["path"] for entry in result["report"]["workarounds"] if entry["outcome"] == "applied"
               for target in entry["targets"] if target["outcome"] == "applied"]
    for path in applied:
        state = result["targets"][path]
        assert state["wrapped"], path
        assert state["source"].startswith(result["source_dir"]), (path, state["source"])
    unapplied = [target["path"] for entry in result["report"]["workarounds"] for target in entry["targets"]
                 if target["outcome"] == "skipped"]
    assert all(not result["targets"][path].get("wrapped") for path in unapplied)


@pytest.mark.parametrize("release", vllm_harness.RELEASES)
def test_no_workaround_fails_or_drifts_on_a_supported_release(probe, release):
    outcomes = {entry["id"]: entry["outcome"] for entry in probe(release)["report"]["workarounds"]}
    assert not {"failed", "drifted"} & set(outcomes.values()), outcomes


# ---------------------------------------------------------- pp-broadcast-sync


def test_pp_sync_wraps_the_real_pphandler_broadcast_on_0_24_0(probe):
    result = probe("0.24.0")
    assert decision(result, "pp-broadcast-sync") == ("apply", "affected", "applied")
    assert result["targets"][PP_BROADCAST]["wrapped"]
    assert result["targets"][PP_BROADCAST]["source"] == f"{result['source_dir']}/v1/worker/gpu/pp_utils.py"


def test_pp_sync_synchronizes_the_main_stream_before_the_real_broadcast_runs_on_0_24_0(probe):
    called = probe("0.24.0")["pp_broadcast"]
    # The real method's first statement (assert self.is_last_rank) raised after the sync.
    assert called["calls"] == ["main_stream.synchronize"]
    assert called["raised"].startswith("AssertionError") and called["where"].endswith("v1/worker/gpu/pp_utils.py")


def test_pp_sync_is_not_affected_on_0_22_1(probe):
    result = probe("0.22.1")
    assert decision(result, "pp-broadcast-sync") == ("skip", "not-affected", "skipped")
    assert not result["targets"][PP_BROADCAST].get("wrapped")


# ------------------------------------------- uva-view-unpinned, static-launcher-uva


def test_uva_view_path_patches_the_real_function_and_every_alias_on_0_27_1(probe):
    result = probe("0.27.1")
    assert decision(result, "uva-view-unpinned") == ("apply", "affected", "applied")
    aliases = result["targets"][UVA_VIEW]["aliases"]
    # uva imported the function by name before register() ran; the others imported it later.
    assert "vllm.model_executor.offloader.uva.get_accelerator_view_from_cpu_tensor" in aliases
    assert "vllm.model_executor.model_loader.utils.get_accelerator_view_from_cpu_tensor" in aliases
    assert set(aliases.values()) == {"wrapper"}, aliases


def test_uva_view_assert_on_an_empty_tensor_is_reproduced_then_gone_on_0_27_1(probe):
    uva = probe("0.27.1")["uva_view"]
    assert uva["original"]["raised"] == "AssertionError: CPU tensor must be pinned"
    assert uva["original"]["where"].endswith("0.27.1/vllm/utils/torch_utils.py")
    # What vLLM's offloader now calls gets past vLLM's assert: kernels 0.1.12 lack #513, so an
    # empty tensor becomes an empty XPU tensor, and only torch's device layer (no XPU here) refuses.
    assert uva["offloader"]["raised"] == "AssertionError: Torch not compiled with XPU enabled"
    assert uva["offloader"]["where"].endswith("torch/xpu/__init__.py")


def test_static_launcher_switch_off_patches_the_real_classmethod_on_0_27_1(probe):
    result = probe("0.27.1")
    assert decision(result, "static-launcher-uva") == ("apply", "affected", "applied")
    assert result["targets"][CHECK_AND_UPDATE]["wrapped"]
    assert result["targets"][CHECK_AND_UPDATE]["source"] == f"{result['source_dir']}/platforms/xpu.py"


@pytest.mark.parametrize("release", ["0.28.0", "0.32.0", "0.34.0"])
def test_uva_view_and_static_launcher_report_vllm_carries_fix_from_0_28_0(probe, release):
    result = probe(release)
    assert decision(result, "uva-view-unpinned") == ("skip", "vllm-carries-fix", "skipped")
    assert decision(result, "static-launcher-uva") == ("skip", "vllm-carries-fix", "skipped")
    assert not result["targets"][UVA_VIEW]["wrapped"]
    assert set(result["targets"][UVA_VIEW]["aliases"].values()) == {"original"}
    assert not result["targets"][CHECK_AND_UPDATE]["wrapped"]


# ---------------------------------------------------------- the Event symptoms


def test_torch_itself_rejects_blocking_in_torch_xpu_event(probe):
    symptom = probe("0.24.0")["torch_symptoms"]["xpu_event_blocking"]
    assert symptom["raised"] == "TypeError: Event.__new__() got an unexpected keyword argument 'blocking'"


def test_torch_itself_refuses_to_build_torch_cuda_event_on_a_cpu_build(probe):
    symptom = probe("0.24.0")["torch_symptoms"]["cuda_event"]
    assert symptom["raised"] == "RuntimeError: Tried to instantiate dummy base class Event"
    assert symptom["where"].endswith("torch/_utils.py")


def test_blocking_is_accepted_inside_the_real_torch_cuda_wrapper_once_the_shim_is_forced(probe):
    # 0.24.0's own wrapper aliases torch.cuda.Event to torch.Event: what callers meet here is the shim.
    result = probe("0.24.0")
    assert workaround(result["forced_report"], "event-blocking-kwarg")["outcome"] == "applied"
    forced = result["forced"]
    assert forced["cuda_event_inside_torch_cuda_wrapper"] == "workarounds.event_blocking_kwarg.event_shim.<locals>.event"
    assert forced["blocking_inside_torch_cuda_wrapper"] == {"returned": "torch.xpu.streams.Event"}


def test_cuda_event_is_an_xpu_event_inside_the_real_deepseek_v4_constructor_and_restored_after(probe):
    result = probe("0.24.0")
    assert workaround(result["forced_report"], "cuda-event-redirect")["outcome"] == "applied"
    forced = result["forced"]
    # The real constructor ran inside the wrapper, as far as the probe config let it.
    stack = forced["constructor_stack"]
    ours = next(i for i, frame in enumerate(stack) if frame.endswith("workarounds/cuda_event_redirect.py:with_xpu_events"))
    theirs = next(i for i, frame in enumerate(stack) if frame == f"{result['source_dir']}/models/deepseek_v4/attention.py:__init__")
    assert ours < theirs
    assert forced["cuda_event_during_constructor"] == {"returned": "torch.xpu.streams.Event"}
    assert forced["constructor"]["raised"] == "LookupError: stop here: probe config"
    assert forced["cuda_event_after_constructor"]["raised"] == "RuntimeError: Tried to instantiate dummy base class Event"
