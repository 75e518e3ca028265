"""static-launcher-uva: Inductor's static launcher is switched off under UVA offload with compilation.

vLLM's config classes cannot be imported without vLLM's dependencies (numpy, pydantic
models, ...), which this environment does not have; the configs here are plain
namespaces with the fields vLLM 0.19.0-0.28.0 all have (``offload_config.offload_backend``,
``.uva.cpu_offload_gb``, ``.prefetch.offload_group_size``; ``compilation_config.mode``
(an IntEnum, NONE == 0) and ``.inductor_compile_config``). The release-matrix and
whole-vLLM tests run the wrapper against vLLM's own classes.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from packaging.version import Version
from support.decisions import ISSUE_STACK, MANIFEST, decision, reason, stack
from support.retarget import carried, context_at
from support.vllm_harness import decided

from tracker.model.retirement import retirement
from workarounds.static_launcher_uva import make_wrapper

PIECEWISE = 3  # CompilationMode.VLLM_COMPILE; NONE is 0

# vLLM 0.28.0's XPUPlatform.check_and_update_config carries vllm#51770.
VLLM_0_28_CHECK = """
    class XPUPlatform:
        @classmethod
        def check_and_update_config(cls, vllm_config) -> None:
            compilation_config = vllm_config.compilation_config
            if uva_offloading:
                compilation_config.inductor_compile_config.setdefault(
                    "use_static_cuda_launcher", False
                )
"""

VLLM_0_27_CHECK = """
    class XPUPlatform:
        @classmethod
        def check_and_update_config(cls, vllm_config) -> None:
            compilation_config = vllm_config.compilation_config
"""


def config(backend="auto", cpu_offload_gb=4.0, group_size=0, mode=PIECEWISE, inductor=None):
    return SimpleNamespace(
        offload_config=SimpleNamespace(offload_backend=backend, uva=SimpleNamespace(cpu_offload_gb=cpu_offload_gb),
                                       prefetch=SimpleNamespace(offload_group_size=group_size)),
        compilation_config=SimpleNamespace(mode=mode, inductor_compile_config=dict(inductor or {})),
    )


def checked(vllm_config, original=lambda vllm_config: None):
    make_wrapper(None)(original, object, (vllm_config,), {})
    return vllm_config.compilation_config.inductor_compile_config


def test_uva_offload_with_compilation_switches_the_static_launcher_off():
    assert checked(config()) == {"use_static_cuda_launcher": False}


def test_an_explicit_uva_backend_counts_as_uva_offload():
    assert checked(config(backend="uva", cpu_offload_gb=0)) == {"use_static_cuda_launcher": False}


def test_a_users_explicit_setting_wins():
    assert checked(config(inductor={"use_static_cuda_launcher": True})) == {"use_static_cuda_launcher": True}


def test_nothing_changes_without_compilation():
    assert checked(config(mode=0)) == {}


def test_nothing_changes_with_prefetch_offload():
    assert checked(config(group_size=2)) == {}


def test_nothing_changes_without_offload():
    assert checked(config(cpu_offload_gb=0)) == {}


def test_vllms_check_runs_first_and_its_result_is_returned():
    def original(vllm_config):
        vllm_config.compilation_config.mode = 0  # vLLM may switch compilation off itself
        return "checked"

    vllm_config = config()
    assert make_wrapper(None)(original, object, (vllm_config,), {}) == "checked"
    assert vllm_config.compilation_config.inductor_compile_config == {}


def context_for(tmp_path, monkeypatch, source: str):
    return context_at("static-launcher-uva", "xpu_src:XPUPlatform.check_and_update_config", source, tmp_path,
                      monkeypatch, vllm="0.27.1", torch="2.13.0")


def test_the_probe_sees_vllm_carrying_the_switch(tmp_path, monkeypatch):
    finding = carried(context_for(tmp_path, monkeypatch, VLLM_0_28_CHECK))
    assert finding is not None and finding.reason == "vllm-carries-fix"


def test_the_probe_finds_the_bug_in_vllm_0_27(tmp_path, monkeypatch):
    assert carried(context_for(tmp_path, monkeypatch, VLLM_0_27_CHECK)) is None


# --- its decisions on the shipped manifest (here, so that its removal takes them along) ---------------

def test_the_issue_stack_is_affected():
    assert reason("static-launcher-uva", **ISSUE_STACK) == "affected"


def test_affected_detail_names_the_versions_and_the_window():
    detail = decision("static-launcher-uva", stack(**ISSUE_STACK)).detail
    assert "vllm 0.27.1" in detail and "torch 2.13.0" in detail and "vllm<0.28.0, torch>=2.11.0,<2.14.0" in detail


# vllm <= 0.27.1 with torch >=2.11.0,<2.14.0
def test_static_launcher_upper_vllm_edge_is_affected():
    assert reason("static-launcher-uva", vllm="0.27.1", torch="2.13.0+xpu") == "affected"


def test_static_launcher_from_vllm_0_28_vllm_carries_the_fix():
    assert reason("static-launcher-uva", vllm="0.28.0", torch="2.13.0") == "vllm-carries-fix"


def test_static_launcher_with_torch_2_14_root_fix_is_installed():
    d = decision("static-launcher-uva", stack(vllm="0.27.1", torch="2.14.0+xpu"))
    assert d.reason == "root-fix-installed" and "pytorch/pytorch#188240" in d.detail


def test_static_launcher_with_torch_2_14_dev_build_counts_as_2_14():
    assert reason("static-launcher-uva", vllm="0.27.1", torch="2.14.0.dev20260801+xpu") == "root-fix-installed"


def test_static_launcher_with_xpu_labelled_vllm_dev_build_before_0_28_is_affected():
    assert reason("static-launcher-uva", vllm="0.27.2.dev12+gabc1234.xpu", torch="2.13.0+xpu") == "affected"


def test_static_launcher_is_not_affected_on_torch_2_10_which_has_no_xpu_static_launcher():
    # torch 2.10.0's static launcher is CUDA-only ("Non-cuda device"): vLLM 0.19.x at its pin is fine.
    assert reason("static-launcher-uva", vllm="0.19.1", torch="2.10.0+xpu") == "not-affected"


def test_static_launcher_lower_torch_edge_2_11_is_affected():
    assert reason("static-launcher-uva", vllm="0.20.0", torch="2.11.0+xpu") == "affected"


def test_root_fix_in_every_supported_release_is_retirable():
    verdict = retirement(MANIFEST.get("static-launcher-uva"), {**MANIFEST.support, "torch": Version("2.14.0")})
    assert verdict.retirable and "pytorch/pytorch#188240" in verdict.detail


# ------------------------------------------- in real vLLM releases (marker release_matrix)
# tests/test_release_matrix.py's probe (the session's ``release_probe``).

CHECK_AND_UPDATE = "vllm.platforms.xpu:XPUPlatform.check_and_update_config"


@pytest.mark.release_matrix
def test_static_launcher_switch_off_patches_the_real_classmethod_on_0_27_1(release_probe):
    result = release_probe("0.27.1")
    assert decided(result["report"], "static-launcher-uva") == ("apply", "affected", "applied")
    assert result["targets"][CHECK_AND_UPDATE]["wrapped"]
    assert result["targets"][CHECK_AND_UPDATE]["source"] == f"{result['source_dir']}/platforms/xpu.py"


@pytest.mark.release_matrix
@pytest.mark.parametrize("release", ["0.28.0", "0.32.0", "0.34.0"])
def test_static_launcher_reports_vllm_carries_fix_from_0_28_0(release_probe, release):
    result = release_probe(release)
    assert decided(result["report"], "static-launcher-uva") == ("skip", "vllm-carries-fix", "skipped")
    assert not result["targets"][CHECK_AND_UPDATE]["wrapped"]
