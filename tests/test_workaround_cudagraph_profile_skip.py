"""cudagraph-profile-skip: on XPU, profiling CUDA-graph memory returns 0 without capturing."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tracker.engine import patching
from tracker.model import reader
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
    patching.revert_all()
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
