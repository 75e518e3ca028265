"""cudagraph-profile-skip: on XPU, profiling CUDA-graph memory returns 0 without capturing."""

from __future__ import annotations

import sys
import textwrap

import pytest
from packaging.version import Version
from support.decisions import ISSUE_STACK, MANIFEST, reason
from support.patches import revert_every_patch

from tracker.engine import patching
from tracker.model import reader
from tracker.model.retirement import retirement
from workarounds.cudagraph_profile_skip import make_wrapper

RUNNER = """
    class GPUModelRunner:
        captured = 0

        def profile_cudagraph_memory(self) -> int:
            type(self).captured += 1  # stands for the capture that loses the XPU device
            raise RuntimeError("level_zero backend failed with error: 20 (UR_RESULT_ERROR_DEVICE_LOST)")
"""


@pytest.fixture
def runner_module(tmp_path, monkeypatch):
    (tmp_path / "runner_src.py").write_text(textwrap.dedent(RUNNER))
    monkeypatch.syspath_prepend(str(tmp_path))
    import runner_src

    yield runner_src
    revert_every_patch()
    sys.modules.pop("runner_src", None)


def test_profiling_returns_zero_bytes_without_calling_the_profiler():
    def profiler():
        raise AssertionError("the capture must not run")

    assert make_wrapper(None)(profiler, object(), (), {}) == 0


def test_every_runner_target_in_the_manifest_takes_only_self():
    targets = reader.load().get("cudagraph-profile-skip").targets
    assert {target.params for target in targets} == {("self",)}


def test_a_patched_runner_starts_without_capturing(runner_module):
    record = patching.patch("runner_src:GPUModelRunner.profile_cudagraph_memory", make_wrapper(None),
                            owner="cudagraph-profile-skip", kind="method", params=["self"])
    assert record.outcome == "applied"
    assert runner_module.GPUModelRunner().profile_cudagraph_memory() == 0
    assert runner_module.GPUModelRunner.captured == 0


def test_why_says_when_each_release_series_profiles_xpu():
    why = reader.load().get("cudagraph-profile-skip").why
    # 0.19.x profiles unless enforce_eager and captures only with XPU graphs on; #39977 left XPU graphs profiling.
    assert "enforce_eager" in why and "VLLM_XPU_ENABLE_XPU_GRAPH=1" in why and "torch >= 2.11" in why
    assert "vllm#39977" in why and "vllm#41344" in why


# --- its decisions on the shipped manifest (here, so that its removal takes them along) ---------------

def test_the_issue_stack_has_vllms_own_fix():
    assert reason("cudagraph-profile-skip", **ISSUE_STACK) == "vllm-carries-fix"


# <= 0.19.1; 0.20.x with torch >= 2.11; never from 0.31.0
@pytest.mark.parametrize(("vllm", "torch", "expected"), [
    ("0.19.1", "2.10.0", "affected"),
    ("0.20.0", "2.11.0", "affected"),
    ("0.20.2", "2.11.0+xpu", "affected"),
    ("0.20.0", "2.10.0", "not-affected"),
    ("0.21.0", "2.11.0", "vllm-carries-fix"),
    ("0.30.0", "2.13.0", "vllm-carries-fix"),
    ("0.31.0", "2.14.0", "not-affected"),
    ("0.34.0", "2.15.0", "not-affected"),
])
def test_cudagraph_profile_window_edges(vllm, torch, expected):
    assert reason("cudagraph-profile-skip", vllm=vllm, torch=torch) == expected


def test_one_live_window_keeps_a_workaround():
    verdict = retirement(MANIFEST.get("cudagraph-profile-skip"), {**MANIFEST.support, "vllm": Version("0.20.0")})
    assert not verdict.retirable and "vllm>=0.20.0,<=0.20.2" in verdict.detail


def test_a_partial_inline_fix_does_not_count_as_vllm_carrying_the_fix():
    # vllm#39977 (0.20.0) only skips when graphs are off; XPU graphs on still profile until vllm#41344 (0.21.0).
    w = MANIFEST.get("cudagraph-profile-skip")
    partial = next(ref for ref in w.refs("inline-fix") if ref.ref == "vllm-project/vllm#39977")
    assert partial.remaining and str(partial.released_in) == "vllm>=0.20.0"
    assert reason("cudagraph-profile-skip", vllm="0.20.0", torch="2.11.0") == "affected"
    assert retirement(w, {**MANIFEST.support, "vllm": Version("0.20.0")}).verdict == "keep"


def test_cudagraph_profile_skip_s_complete_inline_fix_is_vllm_41344_in_0_21_0():
    w = MANIFEST.get("cudagraph-profile-skip")
    complete = [ref for ref in w.refs("inline-fix") if not ref.remaining]
    assert [(ref.ref, str(ref.released_in)) for ref in complete] == [("vllm-project/vllm#41344", "vllm>=0.21.0")]
    assert w.vllm_carries_fix is not None and min(c.version for c in w.vllm_carries_fix if c.operator == ">=") == "0.21.0"


def test_both_windows_below_the_floor_retire_it():
    verdict = retirement(MANIFEST.get("cudagraph-profile-skip"), {**MANIFEST.support, "vllm": Version("0.21.0")})
    assert verdict.retirable
