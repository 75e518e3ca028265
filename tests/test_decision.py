"""How a decision is made, on a synthetic workaround: platform, missing and unparseable
versions, the kill switch, disable and force, settings read from the environment.

The decision table of each shipped workaround, window edge by window edge (expectations
from ../shared/reference/upstream-facts.md, "Version windows at a glance"), is in that
workaround's own test file, ``tests/test_workaround_<id>.py``, so that retiring a
workaround removes its expectations with it.
"""

import pytest
from support.decisions import MANIFEST, one, stack, synthetic
from support.manifests import workaround

from tracker.decision.gates import decide
from tracker.model.environment import Settings
from tracker.model.retirement import retirement

# affected on vllm >=0.23.0,<0.25.0 (and torch below 2.14.0), vLLM carries the fix from 0.25.0
ENTRY = one(id="synthetic-fix", affected=[{"vllm": ">=0.23.0,<0.25.0", "torch": "<2.14.0"}])
AFFECTED = {"vllm": "0.24.0", "torch": "2.13.0", "kernels": "0.1.12.3"}
CARRIED = {"vllm": "0.27.1", "torch": "2.13.0", "kernels": "0.1.12.3"}


def test_a_stack_in_the_window_is_affected_and_the_detail_names_versions_and_window():
    d = decide(ENTRY, stack(**AFFECTED), Settings())
    assert (d.decision, d.reason) == ("apply", "affected")
    assert "vllm 0.24.0" in d.detail and "torch 2.13.0" in d.detail and "vllm>=0.23.0,<0.25.0, torch<2.14.0" in d.detail


def test_other_platform_is_skipped_with_reason_platform():
    d = decide(ENTRY, stack(platform="cuda", **AFFECTED), Settings())
    assert (d.decision, d.reason) == ("skip", "platform")
    assert d.detail == "Only for xpu; this platform is cuda (override)."


def test_a_platform_that_cannot_be_told_is_skipped_and_the_detail_says_how_to_name_one():
    d = decide(ENTRY, stack(platform="unknown"), Settings())
    assert (d.decision, d.reason) == ("skip", "platform")
    assert d.detail == ("Only for xpu; the platform here could not be told (no torch build label or vLLM "
                        "platform says which): --platform or XPU_WORKAROUNDS_PLATFORM names it.")


def test_missing_vllm_is_not_affected_and_says_what_to_do():
    d = decide(ENTRY, stack(torch="2.13.0"), Settings())
    assert d.reason == "not-affected" and "vllm not installed" in d.detail and "--assume" in d.detail


def test_unparseable_version_gives_unknown_version_with_the_raw_string():
    d = decide(ENTRY, stack(vllm="0.24.0", torch="custom-build"), Settings())
    assert d.reason == "unknown-version" and "'custom-build'" in d.detail


def test_unparseable_version_of_an_unrelated_component_does_not_matter():
    d = decide(ENTRY, stack(vllm="0.24.0", torch="2.13.0", kernels="garbage"), Settings())
    assert d.reason == "affected"


def test_kill_switch_skips_everything():
    d = decide(ENTRY, stack(**AFFECTED), Settings(enabled=False))
    assert (d.decision, d.reason) == ("skip", "kill-switch")


def test_disable_list_skips_that_workaround():
    d = decide(ENTRY, stack(**AFFECTED), Settings(disabled=frozenset({ENTRY.id})))
    assert d.reason == "disabled"


def test_force_applies_outside_the_window_and_says_what_the_gates_said():
    d = decide(ENTRY, stack(**CARRIED), Settings(forced=frozenset({ENTRY.id})))
    assert (d.decision, d.reason) == ("apply", "forced") and "vllm-carries-fix" in d.detail


def test_force_still_requires_the_platform():
    d = decide(ENTRY, stack(platform="cpu", **CARRIED), Settings(forced=frozenset({ENTRY.id})))
    assert d.reason == "platform"


def test_disable_wins_over_force():
    both = frozenset({ENTRY.id})
    assert decide(ENTRY, stack(**AFFECTED), Settings(disabled=both, forced=both)).reason == "disabled"


# --- settings from the environment -------------------------------------------------------------

def test_unknown_ids_in_disable_and_force_are_reported():
    ids = synthetic(workaround(id="first-fix"), workaround(id="second-fix")).ids
    settings = Settings.from_env({"XPU_WORKAROUNDS_DISABLE": "nope", "XPU_WORKAROUNDS_FORCE": "second-fix,zzz"},
                                 known_ids=ids)
    assert settings.forced == {"second-fix"} and not settings.disabled
    assert any("nope" in p for p in settings.problems) and any("zzz" in p for p in settings.problems)


@pytest.mark.parametrize("value", ["0", "off", "false", "OFF"])
def test_kill_switch_values(value):
    assert not Settings.from_env({"XPU_WORKAROUNDS": value}).enabled


def test_malformed_platform_and_assumption_are_reported():
    settings = Settings.from_env({"XPU_WORKAROUNDS_PLATFORM": "gpu", "XPU_WORKAROUNDS_ASSUME": "torch=2"})
    assert settings.platform is None and not settings.assume and len(settings.problems) == 2


@pytest.mark.parametrize("value", ["disabled", "nein", "2", "offf"])
def test_a_kill_switch_value_that_is_not_documented_is_a_problem_not_silently_on(value):
    settings = Settings.from_env({"XPU_WORKAROUNDS": value})
    (problem,) = settings.problems
    assert problem.startswith(f"XPU_WORKAROUNDS: {value!r} is not 0, off or false")


@pytest.mark.parametrize("value", ["", "1", "on", "true", "yes", "0", "off", "false", "no", " OFF "])
def test_documented_kill_switch_values_are_no_problem(value):
    assert Settings.from_env({"XPU_WORKAROUNDS": value}).problems == ()


# --- retirement against [support] -------------------------------------------------------------

def test_nothing_is_retirable_at_the_shipped_support_floor():
    assert [w.id for w in MANIFEST.workarounds if retirement(w, MANIFEST.support).retirable] == []
