"""The decision table for the shipped manifest, window edge by window edge.

Expectations follow ../shared/reference/upstream-facts.md ("Version windows at a glance").
"""

import pytest
from packaging.version import Version

from tracker.model import reader
from tracker.model.decision import decide, retirement
from tracker.model.environment import Environment, Settings
from tracker.model.versions import ComponentVersion

MANIFEST = reader.load()


def stack(platform="xpu", **versions):
    names = {"vllm": "vllm", "torch": "torch", "kernels": "vllm-xpu-kernels"}
    return Environment(platform, "override",
                       {names[key]: ComponentVersion(names[key], raw) for key, raw in versions.items()})


def decision(workaround_id, env, settings=Settings()):
    return decide(MANIFEST.get(workaround_id), env, settings)


def reason(workaround_id, **versions):
    return decision(workaround_id, stack(**versions)).reason


# --- the stack from the issue: vLLM 0.27.1, torch 2.13.0, kernels 0.1.12.3 on XPU -----------

ISSUE_STACK = {"vllm": "0.27.1", "torch": "2.13.0", "kernels": "0.1.12.3"}


@pytest.mark.parametrize(("workaround_id", "expected"), [
    ("event-blocking-kwarg", "vllm-carries-fix"),
    ("cuda-event-redirect", "vllm-carries-fix"),
    ("cudagraph-profile-skip", "vllm-carries-fix"),
    ("pp-broadcast-sync", "vllm-carries-fix"),
    ("static-launcher-uva", "affected"),
    ("uva-view-unpinned", "affected"),
])
def test_issue_stack_decisions(workaround_id, expected):
    assert reason(workaround_id, **ISSUE_STACK) == expected


def test_affected_detail_names_the_versions_and_the_window():
    detail = decision("static-launcher-uva", stack(**ISSUE_STACK)).detail
    assert "vllm 0.27.1" in detail and "torch 2.13.0" in detail and "vllm<0.28.0, torch>=2.11.0,<2.14.0" in detail


# --- static-launcher-uva: vllm <= 0.27.1 with torch < 2.14.0 -----------------------------------

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


# --- uva-view-unpinned: vllm < 0.28.0 whatever the kernels --------------------------------------

def test_uva_view_is_needed_even_with_fixed_kernels_on_old_vllm():
    assert reason("uva-view-unpinned", vllm="0.27.1", torch="2.13.0", kernels="0.1.13.1") == "affected"


def test_uva_view_from_vllm_0_28_vllm_carries_the_fix():
    assert reason("uva-view-unpinned", vllm="0.28.0", torch="2.13.0", kernels="0.1.13.2") == "vllm-carries-fix"


# --- pp-broadcast-sync: 0.23.0 - 0.24.x -------------------------------------------------------

@pytest.mark.parametrize(("vllm", "expected"), [
    ("0.22.1", "not-affected"), ("0.23.0", "affected"), ("0.24.0", "affected"),
    ("0.24.9", "affected"), ("0.25.0", "vllm-carries-fix"), ("0.25.0rc1", "vllm-carries-fix"),
])
def test_pp_broadcast_window_edges(vllm, expected):
    assert reason("pp-broadcast-sync", vllm=vllm, torch="2.12.0") == expected


# --- cudagraph-profile-skip: <= 0.19.1; 0.20.x with torch >= 2.11; never from 0.31.0 ------------

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


# --- event-blocking-kwarg and cuda-event-redirect: only nightlies between 0.24.0 and 0.25.0 ----

def test_event_shim_applies_to_a_nightly_between_the_cause_and_the_fix():
    assert reason("event-blocking-kwarg", vllm="0.24.1.dev30+gdeadbee", torch="2.12.0") == "affected"


def test_event_shim_is_not_needed_on_the_release_before_the_cause():
    assert reason("event-blocking-kwarg", vllm="0.24.0", torch="2.12.0") == "not-affected"


def test_event_shim_nightly_with_torch_2_15_has_the_root_fix():
    assert reason("event-blocking-kwarg", vllm="0.24.1.dev30", torch="2.15.0+xpu") == "root-fix-installed"


def test_cuda_event_redirect_on_a_release_is_carried_by_vllm():
    assert reason("cuda-event-redirect", vllm="0.34.0", torch="2.15.0") == "vllm-carries-fix"


def test_cuda_event_redirect_before_the_class_existed_is_not_affected():
    assert reason("cuda-event-redirect", vllm="0.22.1", torch="2.11.0") == "not-affected"


# --- environment edges -------------------------------------------------------------------------

def test_other_platform_is_skipped_with_reason_platform():
    d = decision("static-launcher-uva", stack(platform="cuda", **ISSUE_STACK))
    assert (d.decision, d.reason) == ("skip", "platform")


def test_missing_vllm_is_not_affected_and_says_what_to_do():
    d = decision("uva-view-unpinned", stack(torch="2.13.0"))
    assert d.reason == "not-affected" and "vllm not installed" in d.detail and "--assume" in d.detail


def test_unparseable_version_gives_unknown_version_with_the_raw_string():
    d = decision("static-launcher-uva", stack(vllm="0.27.1", torch="custom-build"))
    assert d.reason == "unknown-version" and "'custom-build'" in d.detail


def test_unparseable_version_of_an_unrelated_component_does_not_matter():
    d = decision("uva-view-unpinned", stack(vllm="0.27.1", torch="2.13.0", kernels="garbage"))
    assert d.reason == "affected"


def test_kill_switch_skips_everything():
    d = decision("static-launcher-uva", stack(**ISSUE_STACK), Settings(enabled=False))
    assert (d.decision, d.reason) == ("skip", "kill-switch")


def test_disable_list_skips_that_workaround():
    d = decision("static-launcher-uva", stack(**ISSUE_STACK), Settings(disabled=frozenset({"static-launcher-uva"})))
    assert d.reason == "disabled"


def test_force_applies_outside_the_window_and_says_what_the_gates_said():
    d = decision("pp-broadcast-sync", stack(**ISSUE_STACK), Settings(forced=frozenset({"pp-broadcast-sync"})))
    assert (d.decision, d.reason) == ("apply", "forced") and "vllm-carries-fix" in d.detail


def test_force_still_requires_the_platform():
    d = decision("pp-broadcast-sync", stack(platform="cpu", **ISSUE_STACK),
                 Settings(forced=frozenset({"pp-broadcast-sync"})))
    assert d.reason == "platform"


def test_disable_wins_over_force():
    both = frozenset({"uva-view-unpinned"})
    assert decision("uva-view-unpinned", stack(**ISSUE_STACK), Settings(disabled=both, forced=both)).reason == "disabled"


# --- settings from the environment -------------------------------------------------------------

def test_unknown_ids_in_disable_and_force_are_reported():
    settings = Settings.from_env({"XPU_WORKAROUNDS_DISABLE": "nope", "XPU_WORKAROUNDS_FORCE": "pp-broadcast-sync,zzz"},
                                 known_ids=MANIFEST.ids)
    assert settings.forced == {"pp-broadcast-sync"} and not settings.disabled
    assert any("nope" in p for p in settings.problems) and any("zzz" in p for p in settings.problems)


@pytest.mark.parametrize("value", ["0", "off", "false", "OFF"])
def test_kill_switch_values(value):
    assert not Settings.from_env({"XPU_WORKAROUNDS": value}).enabled


def test_malformed_platform_and_assumption_are_reported():
    settings = Settings.from_env({"XPU_WORKAROUNDS_PLATFORM": "gpu", "XPU_WORKAROUNDS_ASSUME": "torch=2"})
    assert settings.platform is None and not settings.assume and len(settings.problems) == 2


# --- retirement against [support] -------------------------------------------------------------

def test_nothing_is_retirable_at_the_shipped_support_floor():
    assert [w.id for w in MANIFEST.workarounds if retirement(w, MANIFEST.support).retirable] == []


def test_window_entirely_below_the_floor_is_retirable():
    verdict = retirement(MANIFEST.get("uva-view-unpinned"), {**MANIFEST.support, "vllm": Version("0.28.0")})
    assert verdict.retirable and "below the support floor vllm 0.28.0" in verdict.detail


def test_root_fix_in_every_supported_release_is_retirable():
    verdict = retirement(MANIFEST.get("static-launcher-uva"), {**MANIFEST.support, "torch": Version("2.14.0")})
    assert verdict.retirable and "pytorch/pytorch#188240" in verdict.detail


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


def test_kernels_root_fix_does_not_retire_the_uva_view_while_vllm_asserts():
    verdict = retirement(MANIFEST.get("uva-view-unpinned"), {**MANIFEST.support, "vllm-xpu-kernels": Version("0.1.14")})
    assert not verdict.retirable


@pytest.mark.parametrize("value", ["disabled", "nein", "2", "offf"])
def test_a_kill_switch_value_that_is_not_documented_is_a_problem_not_silently_on(value):
    settings = Settings.from_env({"XPU_WORKAROUNDS": value})
    (problem,) = settings.problems
    assert problem.startswith(f"XPU_WORKAROUNDS: {value!r} is not 0, off or false")


@pytest.mark.parametrize("value", ["", "1", "on", "true", "yes", "0", "off", "false", "no", " OFF "])
def test_documented_kill_switch_values_are_no_problem(value):
    assert Settings.from_env({"XPU_WORKAROUNDS": value}).problems == ()
