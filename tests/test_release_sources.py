"""The manifest against the released source of every vLLM release from the support floor to the newest.

Each release's source distribution is fetched once from PyPI the way ``xpu-workarounds check``
fetches it (``tracker.release.fetch.fetch``: pip, nothing of it installed or run) and cached with only
the files the check reads (tests/support/vllm_harness.py ``release_tree``). Each test asks
``tracker.release.compare.check_tree``, the function the command runs, one question per release: the
targets are there with the manifest's fingerprint (or declared absent in that release), the
source probes agree with ``vllm_carries_fix``, and the decision at the release's own XPU pins
(its ``requirements/xpu.txt``) agrees with what its source shows.
"""

from __future__ import annotations

import pytest
from packaging.version import Version
from support import vllm_harness

from tracker.decision.probe import markers
from tracker.model import reader
from tracker.release import compare as check

pytestmark = pytest.mark.release_matrix

MANIFEST = reader.load()
NEEDED = check.needed_files(MANIFEST)
PROBED = {w.id for w in MANIFEST.workarounds if markers(w)}  # the workarounds with an inline fix's marker


@pytest.fixture(scope="module")
def checked():
    """``checked(release)``: ``check_tree`` of that release's source, computed once."""
    results: dict[str, check.ReleaseCheck] = {}

    def run(release: str) -> check.ReleaseCheck:
        if release not in results:
            results[release] = check.check_tree(MANIFEST, vllm_harness.release_tree(release, NEEDED))
        return results[release]

    return run


def test_the_matrix_runs_from_the_support_floor_in_release_order():
    releases = [Version(release) for release in vllm_harness.ALL_RELEASES]
    assert releases[0] == MANIFEST.support["vllm"]
    assert releases == sorted(set(releases))
    assert set(vllm_harness.RELEASES) <= set(vllm_harness.ALL_RELEASES)


@pytest.mark.parametrize("release", vllm_harness.ALL_RELEASES)
def test_the_source_is_that_release_with_torch_and_kernels_pinned_for_xpu(checked, release):
    result = checked(release)
    assert result.vllm == release
    assert set(result.pins) == {"torch", "vllm-xpu-kernels"}


@pytest.mark.parametrize("release", vllm_harness.ALL_RELEASES)
def test_every_target_is_there_with_its_fingerprint_or_declared_absent(checked, release):
    result = checked(release)
    assert [problem for problem in result.problems
            if "drifted" in problem.text or "vanished" in problem.text or "declares it absent" in problem.text] == []
    assert any(t.found == "same" for w in result.workarounds for t in w.targets)


@pytest.mark.parametrize("release", vllm_harness.ALL_RELEASES)
def test_every_source_probe_agrees_with_vllm_carries_fix(checked, release):
    result = checked(release)
    answers = {w.id: (w.source_fix, w.carries_fix) for w in result.workarounds if w.id in PROBED}
    assert all(source is not None for source, _ in answers.values()), answers  # each probe ran
    # Where the manifest says vLLM carries its own fix, the source has it.
    assert [name for name, (source, carries) in answers.items() if carries and not source] == []
    # The source may carry it earlier than vllm_carries_fix says only where no window holds anyway
    # (e.g. a redirect vLLM had before the change that dropped it, when the window is the nightlies after it).
    early = [w for w in result.workarounds if w.id in PROBED and w.source_fix and not w.carries_fix]
    assert all(w.decision is not None and w.decision["reason"] == "not-affected" for w in early), early


@pytest.mark.parametrize("release", vllm_harness.ALL_RELEASES)
def test_the_decision_at_the_release_s_xpu_pins_agrees_with_its_source(checked, release):
    result = checked(release)
    assert all(w.decision is not None for w in result.workarounds)
    assert result.problems == []


@pytest.mark.parametrize("release", vllm_harness.ALL_RELEASES)
def test_vllms_own_xpu_workarounds_are_in_exactly_the_releases_the_manifest_says(checked, release):
    result = checked(release)
    assert result.tracked_problems == []
    assert all(t.found == t.carried for t in result.tracked), result.tracked


def tracked(name: str):
    return next(inline for inline in MANIFEST.tracked if inline.id == name)


def test_the_sleep_mode_allocator_ships_from_the_release_its_note_names():
    pools = tracked("vllm-sleep-mode-pools")
    shipped = [release for release in vllm_harness.ALL_RELEASES
               if (vllm_harness.release_tree(release, NEEDED) / pools.file).is_file()]
    assert shipped == [r for r in vllm_harness.ALL_RELEASES if Version(r) >= Version(shipped[0])]
    assert pools.note is not None and f"ships from {shipped[0]}" in pools.note and shipped[0] == "0.23.0"
    carried = [release for release in shipped if pools.carried_in.contains(release)]
    assert f"until {shipped[len(shipped) - len(carried) - 1]}" in pools.note  # one pool per tag before the line


def test_vllms_uva_copy_keeps_strides_from_the_release_its_note_names():
    uva = tracked("vllm-uva-view-unpinned")
    function = "def get_accelerator_view_from_cpu_tensor("
    copies = {}
    for release in vllm_harness.ALL_RELEASES:
        source = (vllm_harness.release_tree(release, NEEDED) / uva.file).read_text()
        if uva.marker in source:
            body = source[source.index(function):].split("\ndef ", 1)[0]
            copies[release] = "empty_strided" if "torch.empty_strided(" in body else \
                "contiguous" if "cpu_tensor.contiguous()" in body else "?"
    contiguous = [release for release, how in copies.items() if how == "contiguous"]
    strided = [release for release, how in copies.items() if how == "empty_strided"]
    assert contiguous + strided == list(copies)
    assert uva.note is not None
    assert f"vLLM {contiguous[0]}-{contiguous[-1]} copy non-pinned input through contiguous()" in uva.note
    assert f"from {strided[0]} vLLM keeps them" in uva.note
