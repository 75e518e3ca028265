"""pp-broadcast-sync: the main stream is synchronized before the PP broadcast."""

from __future__ import annotations

import pytest
from support.decisions import ISSUE_STACK, reason
from support.retarget import carried, context_at
from support.vllm_harness import decided

from workarounds.pp_broadcast_sync import make_wrapper

# vLLM 0.25.0's PPHandler.broadcast (vllm/v1/worker/gpu/pp_utils.py), which carries vllm#47253.
VLLM_0_25_BROADCAST = """
    class PPHandler:
        def broadcast(self, sampled_token_ids, num_sampled, num_rejected, input_batch) -> None:
            assert self.is_last_rank
            if current_platform.is_xpu():
                self.main_stream.synchronize()
            with torch.cuda.stream(self.broadcast_stream):
                self.broadcast_stream.wait_stream(self.main_stream)
"""

# vLLM 0.24.0's: the side stream waits on the main stream, nothing more.
VLLM_0_24_BROADCAST = """
    class PPHandler:
        def broadcast(self, sampled_token_ids, num_sampled, num_rejected, input_batch) -> None:
            assert self.is_last_rank
            with torch.cuda.stream(self.broadcast_stream):
                self.broadcast_stream.wait_stream(self.main_stream)
"""


class Stream:
    """Device-stream double (device boundary: no XPU stream on the CPU build); records the order."""

    def __init__(self, log):
        self.log = log

    def synchronize(self):
        self.log.append("main_stream.synchronize")


class Handler:
    def __init__(self, log):
        self.main_stream = Stream(log)


def context_for(tmp_path, monkeypatch, source: str):
    return context_at("pp-broadcast-sync", "pp_src:PPHandler.broadcast", source, tmp_path, monkeypatch,
                      vllm="0.24.0")


def test_the_main_stream_is_synchronized_before_the_broadcast():
    log = []

    def broadcast(*args):
        log.append("broadcast")

    make_wrapper(None)(broadcast, Handler(log), ("ids", 1, 0, "batch"), {})
    assert log == ["main_stream.synchronize", "broadcast"]


def test_arguments_and_result_pass_through_unchanged():
    received = []

    def broadcast(*args, **kwargs):
        received.append((args, kwargs))
        return "result"

    assert make_wrapper(None)(broadcast, Handler([]), ("ids", 1), {"input_batch": "b"}) == "result"
    assert received == [(("ids", 1), {"input_batch": "b"})]


def test_the_probe_sees_vllm_carrying_the_sync(tmp_path, monkeypatch):
    finding = carried(context_for(tmp_path, monkeypatch, VLLM_0_25_BROADCAST))
    assert finding is not None and finding.reason == "vllm-carries-fix"


def test_the_probe_finds_the_bug_in_vllm_0_24(tmp_path, monkeypatch):
    assert carried(context_for(tmp_path, monkeypatch, VLLM_0_24_BROADCAST)) is None


# --- its decisions on the shipped manifest (here, so that its removal takes them along) ---------------

def test_the_issue_stack_has_vllms_own_fix():
    assert reason("pp-broadcast-sync", **ISSUE_STACK) == "vllm-carries-fix"


@pytest.mark.parametrize(("vllm", "expected"), [
    ("0.22.1", "not-affected"), ("0.23.0", "affected"), ("0.24.0", "affected"),
    ("0.24.9", "affected"), ("0.25.0", "vllm-carries-fix"), ("0.25.0rc1", "vllm-carries-fix"),
])
def test_pp_broadcast_window_edges(vllm, expected):
    assert reason("pp-broadcast-sync", vllm=vllm, torch="2.12.0") == expected


# ------------------------------------------- in real vLLM releases (marker release_matrix)
# tests/test_release_matrix.py's probe (the session's ``release_probe``), with this
# workaround's own scenario: tests/fixtures/pp_broadcast_sync/release_scenario.py.

PP_BROADCAST = "vllm.v1.worker.gpu.pp_utils:PPHandler.broadcast"


@pytest.mark.release_matrix
def test_pp_sync_wraps_the_real_pphandler_broadcast_on_0_24_0(release_probe):
    result = release_probe("0.24.0")
    assert decided(result["report"], "pp-broadcast-sync") == ("apply", "affected", "applied")
    assert result["targets"][PP_BROADCAST]["wrapped"]
    assert result["targets"][PP_BROADCAST]["source"] == f"{result['source_dir']}/v1/worker/gpu/pp_utils.py"


@pytest.mark.release_matrix
def test_pp_sync_synchronizes_the_main_stream_before_the_real_broadcast_runs_on_0_24_0(release_probe):
    called = release_probe("0.24.0")["scenarios"]["pp_broadcast_sync"]["after_register"]
    # The real method's first statement (assert self.is_last_rank) raised after the sync.
    assert called["calls"] == ["main_stream.synchronize"]
    assert called["raised"].startswith("AssertionError") and called["where"].endswith("v1/worker/gpu/pp_utils.py")


@pytest.mark.release_matrix
def test_pp_sync_is_not_affected_on_0_22_1(release_probe):
    result = release_probe("0.22.1")
    assert decided(result["report"], "pp-broadcast-sync") == ("skip", "not-affected", "skipped")
    assert not result["targets"][PP_BROADCAST].get("wrapped")
