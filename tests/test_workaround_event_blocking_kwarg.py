"""event-blocking-kwarg: the Event shim, against torch 2.13.0's real torch.xpu.Event."""

from __future__ import annotations

import contextlib

import pytest
import torch
from support import vllm_harness
from support.decisions import ISSUE_STACK, reason
from support.retarget import carried, context_at
from support.vllm_harness import report_entry

from tracker.model import reader
from tracker.release.compare import needed_files
from workarounds.event_blocking_kwarg import accepted_keywords, event_shim, make_wrapper, probe

# vLLM 0.25.0's vllm/v1/worker/xpu_model_runner.py (vllm#47868): the shim vLLM carries itself.
VLLM_0_25_WRAPPER = """
    import contextlib
    from functools import partial
    import torch

    @contextlib.contextmanager
    def _torch_cuda_wrapper():
        torch.cuda.Stream = torch.xpu.Stream
        def _xpu_event(*args, blocking=None, **kwargs):
            return torch.xpu.Event(*args, **kwargs)
        torch.cuda.Event = _xpu_event
        yield
"""

# The nightly between vllm#47081 and vllm#47868: torch.cuda.Event aliased with no shim.
NIGHTLY_WRAPPER = """
    import contextlib
    import torch

    @contextlib.contextmanager
    def _torch_cuda_wrapper():
        torch.cuda.Stream = torch.xpu.Stream
        torch.cuda.Event = torch.xpu.Event
        yield
"""


@pytest.fixture
def restore_torch_cuda_event(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", torch.cuda.Event)


def context_for(tmp_path, monkeypatch, source: str):
    return context_at("event-blocking-kwarg", "runner_src:_torch_cuda_wrapper", source, tmp_path, monkeypatch,
                      vllm="0.24.1", torch="2.13.0")


@contextlib.contextmanager
def nightly_torch_cuda_wrapper():
    """What vLLM's nightly did inside the runner: alias torch.cuda.Event, no shim."""
    torch.cuda.Event = torch.xpu.Event
    yield "runner"


def test_torch_2_13_xpu_event_rejects_blocking():
    with pytest.raises(TypeError, match="unexpected keyword argument 'blocking'"):
        torch.xpu.Event(blocking=True)


def test_the_installed_xpu_event_accepts_only_enable_timing():
    assert accepted_keywords(torch.xpu.Event) == {"enable_timing"}


def test_the_shim_turns_the_type_error_into_a_call_torch_accepts():
    # What remains is the device boundary: the CPU build cannot create any XPU event.
    with pytest.raises(RuntimeError, match="Tried to instantiate dummy base class Event"):
        event_shim(torch.xpu.Event)(enable_timing=True, blocking=True)


def test_the_shim_drops_exactly_the_keywords_the_signature_lacks():
    class Event:  # the keywords torch 2.15.0's torch.xpu.Event takes (pytorch#192495)
        def __init__(self, enable_timing=False, blocking=False, interprocess=False):
            self.keywords = {"enable_timing": enable_timing, "blocking": blocking, "interprocess": interprocess}

    event = event_shim(Event)(enable_timing=True, blocking=True, external=True)
    assert event.keywords == {"enable_timing": True, "blocking": True, "interprocess": False}


def test_an_event_class_taking_any_keyword_is_used_unchanged():
    class Event:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    assert event_shim(Event) is Event


def test_inside_the_wrapped_context_blocking_no_longer_raises_a_type_error(restore_torch_cuda_event, tmp_path,
                                                                            monkeypatch):
    with nightly_torch_cuda_wrapper(), pytest.raises(TypeError, match="'blocking'"):
        torch.cuda.Event(blocking=True)
    wrapper = make_wrapper(context_for(tmp_path, monkeypatch, NIGHTLY_WRAPPER))
    with wrapper(nightly_torch_cuda_wrapper, None, (), {}) as value:
        assert value == "runner"
        with pytest.raises(RuntimeError, match="dummy base class"):  # the device boundary, as above
            torch.cuda.Event(blocking=True)


def test_the_source_probe_sees_vllm_carrying_the_shim(tmp_path, monkeypatch):
    finding = carried(context_for(tmp_path, monkeypatch, VLLM_0_25_WRAPPER))
    assert finding is not None and finding.reason == "vllm-carries-fix"
    assert "vllm-project/vllm#47868" in finding.detail and "a parameter named blocking" in finding.detail


def test_the_probes_find_the_bug_in_the_nightly_and_on_torch_2_13(tmp_path, monkeypatch):
    context = context_for(tmp_path, monkeypatch, NIGHTLY_WRAPPER)
    assert carried(context) is None
    assert probe(context) is None  # the module's own probe: torch 2.13.0's torch.xpu.Event rejects blocking


def test_dropping_interprocess_true_warns_once(caplog):
    # torch 2.13.0's torch.xpu.Event has no interprocess: an IPC event would silently become a local one.
    class Event:  # the keywords torch 2.13.0's torch.xpu.Event takes
        def __init__(self, enable_timing=False):
            self.enable_timing = enable_timing

    shim = event_shim(Event)
    with caplog.at_level("WARNING", logger="vllm.xpu_workarounds"):
        shim(interprocess=True)
        shim(enable_timing=True, interprocess=True)
    warnings = [record for record in caplog.records if "interprocess" in record.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelname == "WARNING"
    assert "not shared between processes" in warnings[0].getMessage()


def test_dropping_interprocess_false_or_blocking_says_nothing(caplog):
    class Event:
        def __init__(self, enable_timing=False):
            pass

    with caplog.at_level("WARNING", logger="vllm.xpu_workarounds"):
        event_shim(Event)(interprocess=False, blocking=True)
    assert caplog.records == []


# --- its decisions on the shipped manifest (here, so that its removal takes them along) ---------------

def test_the_issue_stack_has_vllms_own_fix():
    assert reason("event-blocking-kwarg", **ISSUE_STACK) == "vllm-carries-fix"


# only nightlies between 0.24.0 and 0.25.0
def test_event_shim_applies_to_a_nightly_between_the_cause_and_the_fix():
    assert reason("event-blocking-kwarg", vllm="0.24.1.dev30+gdeadbee", torch="2.12.0") == "affected"


def test_event_shim_is_not_needed_on_the_release_before_the_cause():
    assert reason("event-blocking-kwarg", vllm="0.24.0", torch="2.12.0") == "not-affected"


def test_event_shim_nightly_with_torch_2_15_has_the_root_fix():
    assert reason("event-blocking-kwarg", vllm="0.24.1.dev30", torch="2.15.0+xpu") == "root-fix-installed"


def test_the_manifest_records_what_the_root_fix_leaves():
    (root,) = reader.load().get("event-blocking-kwarg").refs("root-fix")
    assert root.ref == "pytorch/pytorch#192495" and "external" in root.remaining


def test_the_why_gives_vllm_47081_the_callers_and_the_runner_s_wrapper_the_alias():
    # vllm#47081 added blocking=True to the GPU runners' events; it did not alias torch.cuda.Event
    # (the release sources below). torch 2.13.0's device-generic torch.Event accepts blocking.
    why = " ".join(reader.load().get("event-blocking-kwarg").why.split())
    assert why.startswith("vllm#47081 made vLLM's GPU model runners create their events with "
                          "torch.cuda.Event(blocking=True).")
    assert "vLLM 0.24.0 rebinds it to the device-generic torch.Event, which accepts blocking" in why
    assert torch.Event(device="cpu", blocking=True).device.type == "cpu"


# ------------------------------------------- in real vLLM releases (marker release_matrix)
# tests/test_release_matrix.py's probe (the session's ``release_probe``), with this
# workaround's own scenario: tests/fixtures/event_blocking_kwarg/release_scenario.py.


@pytest.mark.release_matrix
def test_torch_itself_rejects_blocking_in_torch_xpu_event(release_probe):
    symptom = release_probe("0.24.0")["scenarios"]["event_blocking_kwarg"]["at_start"]["xpu_event_blocking"]
    assert symptom["raised"] == "TypeError: Event.__new__() got an unexpected keyword argument 'blocking'"


@pytest.mark.release_matrix
def test_blocking_is_accepted_inside_the_real_torch_cuda_wrapper_once_the_shim_is_forced(release_probe):
    # 0.24.0's own wrapper aliases torch.cuda.Event to torch.Event: what callers meet here is the shim.
    result = release_probe("0.24.0")
    assert report_entry(result["forced_report"], "event-blocking-kwarg")["outcome"] == "applied"
    forced = result["scenarios"]["event_blocking_kwarg"]["after_forcing"]
    assert forced["cuda_event_inside_torch_cuda_wrapper"] == "workarounds.event_blocking_kwarg.event_shim.<locals>.event"
    assert forced["blocking_inside_torch_cuda_wrapper"] == {"returned": "torch.xpu.streams.Event"}


@pytest.mark.release_matrix
def test_the_blocking_callers_came_after_0_24_0_whose_wrapper_rebinds_the_generic_event():
    needed = needed_files(reader.load())
    before, after = (vllm_harness.release_tree(release, needed) for release in ("0.24.0", "0.25.0"))
    runner, gpu_runner = "vllm/v1/worker/xpu_model_runner.py", "vllm/v1/worker/gpu_model_runner.py"
    assert "    torch.cuda.Event = torch.Event\n" in (before / runner).read_text()
    assert "Event(blocking=True)" not in (before / gpu_runner).read_text()
    assert "torch.cuda.Event(blocking=True)" in (after / gpu_runner).read_text()  # vllm#47081
    assert "return torch.xpu.Event(*args, **kwargs)" in (after / runner).read_text()  # vllm#47868
