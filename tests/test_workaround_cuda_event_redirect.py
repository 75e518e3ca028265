"""cuda-event-redirect: torch.cuda.Event is torch.xpu.Event only while the constructor runs."""

from __future__ import annotations

import sys

import pytest
import torch
from support.decisions import ISSUE_STACK, reason
from support.patches import revert_every_patch
from support.retarget import carried, context_at
from support.vllm_harness import report_entry

from tracker.engine import patching
from workarounds.cuda_event_redirect import make_wrapper

# vLLM 0.24.0's DeepseekV4XPUAttention.__init__ (vllm/models/deepseek_v4/xpu/xpu_sparse.py).
VLLM_0_24_ATTENTION = """
    import torch

    class DeepseekV4Attention:
        def __init__(self, *args, **kwargs):
            self.ln_events = [torch.cuda.Event() for _ in range(4)]

    class DeepseekV4XPUAttention(DeepseekV4Attention):
        def __init__(self, *args, **kwargs) -> None:
            _orig_event = torch.cuda.Event
            torch.cuda.Event = torch.xpu.Event  # type: ignore[misc]
            try:
                super().__init__(*args, **kwargs)
            finally:
                torch.cuda.Event = _orig_event  # type: ignore[misc]
"""

# main between vllm#47140 and its revert: the redirect is gone. The base records which
# class it would construct (constructing either raises on the CPU build: device boundary).
WITHOUT_REDIRECT = """
    import torch

    class DeepseekV4Attention:
        def __init__(self, *args, **kwargs):
            self.event_class = torch.cuda.Event

    class DeepseekV4XPUAttention(DeepseekV4Attention):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
"""

TARGET = "xpu_sparse_src:DeepseekV4XPUAttention.__init__"


@pytest.fixture
def source(tmp_path, monkeypatch):
    yield lambda text: context_at("cuda-event-redirect", TARGET, text, tmp_path, monkeypatch, vllm="0.24.1")
    revert_every_patch()
    sys.modules.pop("xpu_sparse_src", None)


def test_torch_cuda_event_is_a_dummy_class_on_this_torch():
    with pytest.raises(RuntimeError, match="Tried to instantiate dummy base class Event"):
        torch.cuda.Event()


def test_the_constructor_runs_with_torch_xpu_event():
    seen = []
    make_wrapper(None)(lambda: seen.append(torch.cuda.Event), None, (), {})
    assert seen == [torch.xpu.Event]


def test_torch_cuda_event_is_the_real_class_again_afterwards():
    cuda_event = torch.cuda.Event
    make_wrapper(None)(lambda: None, None, (), {})
    assert torch.cuda.Event is cuda_event
    with pytest.raises(RuntimeError, match="dummy base class"):
        torch.cuda.Event()


def test_torch_cuda_event_is_restored_when_the_constructor_raises():
    cuda_event = torch.cuda.Event

    def init():
        raise ValueError("bad config")

    with pytest.raises(ValueError, match="bad config"):
        make_wrapper(None)(init, None, (), {})
    assert torch.cuda.Event is cuda_event


def test_the_class_is_patched_in_place_not_replaced(source):
    context = source(WITHOUT_REDIRECT)
    import xpu_sparse_src

    attention_class = xpu_sparse_src.DeepseekV4XPUAttention
    record = patching.patch(TARGET, make_wrapper(context), owner="cuda-event-redirect", kind="method",
                            params=context.workaround.targets[0].params)
    assert record.outcome == "applied"
    assert xpu_sparse_src.DeepseekV4XPUAttention is attention_class
    assert attention_class("config", prefix="layers.0").event_class is torch.xpu.Event


def test_the_probe_sees_vllm_carrying_the_redirect(source):
    finding = carried(source(VLLM_0_24_ATTENTION))
    assert finding is not None and finding.reason == "vllm-carries-fix"


def test_the_probe_finds_the_bug_without_the_redirect(source):
    assert carried(source(WITHOUT_REDIRECT)) is None


# --- its decisions on the shipped manifest (here, so that its removal takes them along) ---------------

def test_the_issue_stack_has_vllms_own_fix():
    assert reason("cuda-event-redirect", **ISSUE_STACK) == "vllm-carries-fix"


def test_cuda_event_redirect_on_a_release_is_carried_by_vllm():
    assert reason("cuda-event-redirect", vllm="0.34.0", torch="2.15.0") == "vllm-carries-fix"


def test_cuda_event_redirect_before_the_class_existed_is_not_affected():
    assert reason("cuda-event-redirect", vllm="0.22.1", torch="2.11.0") == "not-affected"


# ------------------------------------------- in real vLLM releases (marker release_matrix)
# tests/test_release_matrix.py's probe (the session's ``release_probe``), with this
# workaround's own scenario: tests/fixtures/cuda_event_redirect/release_scenario.py.


@pytest.mark.release_matrix
def test_torch_itself_refuses_to_build_torch_cuda_event_on_a_cpu_build(release_probe):
    symptom = release_probe("0.24.0")["scenarios"]["cuda_event_redirect"]["at_start"]["cuda_event"]
    assert symptom["raised"] == "RuntimeError: Tried to instantiate dummy base class Event"
    assert symptom["where"].endswith("torch/_utils.py")


@pytest.mark.release_matrix
def test_cuda_event_is_an_xpu_event_inside_the_real_deepseek_v4_constructor_and_restored_after(release_probe):
    result = release_probe("0.24.0")
    assert report_entry(result["forced_report"], "cuda-event-redirect")["outcome"] == "applied"
    forced = result["scenarios"]["cuda_event_redirect"]["after_forcing"]
    # The real constructor ran inside the wrapper, as far as the probe config let it.
    stack = forced["constructor_stack"]
    ours = next(i for i, frame in enumerate(stack) if frame.endswith("workarounds/cuda_event_redirect.py:with_xpu_events"))
    theirs = next(i for i, frame in enumerate(stack) if frame == f"{result['source_dir']}/models/deepseek_v4/attention.py:__init__")
    assert ours < theirs
    assert forced["cuda_event_during_constructor"] == {"returned": "torch.xpu.streams.Event"}
    assert forced["constructor"]["raised"] == "LookupError: stop here: probe config"
    assert forced["cuda_event_after_constructor"]["raised"] == "RuntimeError: Tried to instantiate dummy base class Event"
