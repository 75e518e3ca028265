"""The census on the released source of vLLM: each release's sdist fetched from PyPI as the
command fetches it into the CLI's release cache, and its census taken by the function the command
runs (``census_of``: tests/support/vllm_harness.py ``release_census``) against the shipped
manifest's ``[[tracked]]`` entries, kept in that cache as the command keeps it; a tree of the
files the census reads (``release_source``) for what is read where it is (``census_tree``).

The yardstick is the careful reading of vLLM 0.34.0 and 0.29.0 under one written definition
(../shared/reference/vllm-census-truth.md beside the repository, read at run time and not shipped:
without it those tests are skipped, saying so). The census finds at least 85% of the real sites
and at least 85% of the sites it lists are real (benchmarks/census_accuracy.py scores it), and
every tracked site is matched to its entry. Across consecutive releases, each tracked site is new
exactly in the first release its entry says carries it, and what changed inside a site is
neither new nor gone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from packaging.version import Version
from support import vllm_harness
from typer.testing import CliRunner

from benchmarks import census_accuracy
from tracker.census.adopt import adopted, with_tracked
from tracker.census.count import Census, CountedSite, compare
from tracker.commands.app import app
from tracker.model import reader
from tracker.release.census import census_tree
from tracker.release.compare import check_tree

pytestmark = pytest.mark.release_matrix

MANIFEST = reader.load()
# Consecutive releases: the pairs --since is checked across.
CHAIN = vllm_harness.CENSUS_RELEASES
# The tracked workarounds of 0.34.0: each one's places (file under vllm/, first and last line).
REAL = {
    "A1": [("platforms/xpu.py", 422, 444)], "A2": [("utils/torch_utils.py", 907, 922)],
    "A3": [("v1/worker/xpu_model_runner.py", 39, 60)], "A4": [("models/deepseek_v4/xpu/xpu_sparse.py", 78, 87)],
    "A5": [("v1/worker/gpu/pp_utils.py", 249, 250)], "A6": [("device_allocator/xpumem.py", 337, 339)],
    "A7": [("distributed/ec_transfer/ec_connector/cpu/worker/descriptor_buffers.py", 16, 56)],
    "A8": [("lora/ops/triton_ops/fused_moe_lora_op.py", 428, 430)],
    "A9": [("v1/attention/ops/triton_unified_attention.py", 362, 369)], "A10": [("v1/engine/utils.py", 600, 611)],
    "A11": [("platforms/xpu.py", 455, 459)],
}
TRACKED = tuple(REAL)
TRUTH = Path(__file__).resolve().parents[2] / "shared" / "reference" / "vllm-census-truth.md"
BAR = 0.85
PLATFORM_CHECK = re.compile(r'is_xpu\(\)|type == "xpu"|PlatformEnum\.XPU')


@pytest.fixture(scope="module")
def census_of():
    """``census_of(release)``: the census of that release's source, taken once per machine: kept in
    the CLI's release cache (tests/support/vllm_harness.py ``release_census``), where the command
    below finds it."""
    taken: dict[str, Census] = {}

    def take(release: str) -> Census:
        if release not in taken:
            taken[release] = vllm_harness.release_census(MANIFEST, release)
        return taken[release]

    return take


def holding(census: Census, places: list[tuple[str, int, int]], root: str = "vllm/") -> list[CountedSite]:
    """The sites of ``census`` that overlap any of ``places``' lines (files under ``root``)."""
    return [c for c in census.sites if any(c.site.file == f"{root}{file}" and c.site.line <= last
                                           and first <= c.site.end_line for file, first, last in places)]


def test_every_tracked_site_of_0_34_0_is_one_site_matched_to_its_entry(census_of):
    census = census_of("0.34.0")
    matched = {name: [c.tracked for c in holding(census, REAL[name])] for name in TRACKED}
    assert all(len(found) == 1 and found[0] is not None for found in matched.values()), matched
    assert sorted(found[0] for found in matched.values()) == sorted(t.id for t in MANIFEST.tracked)
    assert census.unplaced == []


@pytest.mark.parametrize("release", ["0.34.0", "0.29.0"])
def test_against_the_careful_reading_most_real_sites_are_found_and_most_found_are_real(census_of, release):
    if not TRUTH.is_file():
        pytest.skip(f"no careful reading at {TRUTH}: recall and precision are not measured here")
    reading = census_accuracy.read_truth(TRUTH.read_text(encoding="utf-8"))[release]
    census = census_of(release)
    score = census_accuracy.score(census, reading)
    assert score.recall >= BAR, score.missed
    assert score.precision >= BAR, score.wrong
    # One workaround, one site: no site holds two real ones.
    merged = [c.site.where for c in census.sites
              if sum(1 for places in reading.real.values() if holding(Census(None, "", {}, [c]), places, "")) > 1]
    assert merged == []


def test_far_fewer_sites_than_platform_checks_are_listed(census_of):
    root = vllm_harness.release_source("0.34.0")
    checks = sum(len(PLATFORM_CHECK.findall(path.read_text())) for path in (root / "vllm").rglob("*.py"))
    assert checks > 150
    assert len(census_of("0.34.0").sites) < checks / 3


def test_the_dead_tracked_sites_of_0_34_0_are_those_its_xpu_pins_make_dead(census_of):
    census = census_of("0.34.0")
    assert {k: str(v) for k, v in census.pins.items()} == {"torch": "2.15.0", "vllm-xpu-kernels": "0.1.17"}
    dead = {c.tracked for c in census.sites if c.dead}
    assert dead == {t.id for t in MANIFEST.tracked if t.dead_when is not None and not t.remaining}
    partly = [c for c in census.sites if c.tracked and c.dead is False]
    assert partly and all(c.dead_detail is not None and c.dead_detail.startswith("partly dead") for c in partly)


@pytest.mark.parametrize("older, newer", list(zip(CHAIN, CHAIN[1:], strict=False)))
def test_a_tracked_site_is_new_exactly_in_the_first_release_that_carries_it(census_of, older, newer):
    compared = compare(census_of(newer), census_of(older))
    arrived = {t.id for t in MANIFEST.tracked
               if t.carried_in.contains(Version(newer)) and not t.carried_in.contains(Version(older))}
    assert {c.tracked for c in compared.new if c.tracked} == arrived
    assert not [c for c in compared.gone if c.tracked]
    # A site that changed is neither new nor gone: no gone site shares a file and most of its
    # words with a new one (a reworded or split site would).
    for gone in compared.gone:
        words = set(re.findall(r"\w+", gone.site.said.lower()))
        for new in compared.new:
            if new.site.file == gone.site.file and words:
                assert len(words & set(re.findall(r"\w+", new.site.said.lower()))) <= len(words) / 2, (
                    gone.site.where, new.site.where)


def test_since_finds_what_a_release_dropped_and_what_it_brought(census_of):
    compared = compare(census_of("0.32.0"), census_of("0.31.0"))
    # The XPU kernel's uint8-only refusal in mm_input_norm.py, last in 0.31.0.
    assert [c.site.file for c in compared.gone] == ["vllm/model_executor/layers/fusion/mm_input_norm.py"]
    assert [(c.site.file, c.tracked, c.site.kind) for c in compared.new] == [
        ("vllm/device_allocator/xpumem.py", None, "substitute"),
        ("vllm/device_allocator/xpumem.py", "vllm-sleep-mode-pools", "substitute"),
        ("vllm/platforms/xpu.py", None, "fallback"),  # FlashAttnMLA not valid: Triton MLA
        ("vllm/v1/worker/gpu_worker.py", None, "switch-off")]  # the runtime pool, except on XPU


def test_adopting_every_untracked_site_of_0_34_0_gives_each_an_entry_covering_it(census_of, tmp_path):
    census = census_of("0.34.0")
    assert adopted(census, MANIFEST) == []  # the manifest tracks every site that names a reference
    entries = adopted(census, MANIFEST, [(c.site.file, c.site.line) for c in census.sites if c.tracked is None])
    path = tmp_path / "workarounds.toml"
    path.write_text(with_tracked(reader.default_path().read_bytes(), entries, "0.34.0"))
    assert reader.check(path) == []
    root = vllm_harness.release_source("0.34.0")
    again = census_tree(reader.load(path), root)
    assert again.unplaced == [] and len(again.sites) == len(census.sites)
    covering = {c.site.where: c.tracked for c in again.sites}
    # Each has a marker of its own (the communicator's note that repeats itself in a second method
    # is the CUDA communicator's text, no site).
    assert [one.counted.site.where for one in entries if one.warning] == []
    assert {one.counted.site.where: one.id for one in entries if not one.warning} == {
        where: tracked for where, tracked in covering.items() if tracked not in {t.id for t in MANIFEST.tracked}
        and tracked is not None}
    assert check_tree(reader.load(path), root).tracked_problems == []  # each marker is where the entry says


def test_a_release_census_through_the_command_tracks_every_trackable_site_of_the_newest_release(census_of):
    # vllm==X, as a user asks: the reading from the release cache, its census the one kept there
    # by the tests above (``census_of``), as the command keeps its own.
    newest = vllm_harness.release_source(vllm_harness.ALL_RELEASES[-1])
    for release in (vllm_harness.ALL_RELEASES[-1], "0.33.0"):
        census_of(release)
    result = CliRunner().invoke(app, ["census", "--json", "--check", f"vllm=={vllm_harness.ALL_RELEASES[-1]}",
                                      "--since", "vllm==0.33.0"], env={"XPU_WORKAROUNDS_MANIFEST": None})
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["release"] == vllm_harness.ALL_RELEASES[-1]
    assert all(site["tracked"] or not site["references"] for site in document["sites"])
    assert Path(newest, document["sites"][0]["file"]).is_file()
