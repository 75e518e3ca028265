"""Tracked-only entries (``[[tracked]]``): vLLM's own inline XPU workarounds, described, never patched.

What ``lint`` says about them, how ``upstream`` judges them at vLLM's pins, how ``check``
finds their markers, and that ``docs`` lists them beside the workarounds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from tracker.model import reader
from tracker.model.catalogue import markdown
from tracker.release import compare
from tracker.upstream.audit import tracked_verdict

SHIPPED = reader.default_path().read_text(encoding="utf-8")
MANIFEST = reader.load()
ENTRY = SHIPPED[SHIPPED.index('[[tracked]]\nid = "vllm-ec-uint64-pointers"'):]
ENTRY = ENTRY[:ENTRY.index("\n\n")]


def problems_with(tmp_path, old: str, new: str) -> list[tuple[int, str, str]]:
    assert old in ENTRY
    text = SHIPPED.replace(ENTRY, ENTRY.replace(old, new), 1)
    path = tmp_path / "workarounds.toml"
    path.write_text(text, encoding="utf-8")
    return [(p.line, p.field, p.message) for p in reader.check(path)]


def test_the_shipped_manifest_tracks_the_census_eleven():
    assert len(MANIFEST.tracked) == 11
    assert all(inline.file.startswith("vllm/") and inline.marker for inline in MANIFEST.tracked)


@pytest.mark.parametrize(("old", "new", "field", "words"), [
    ('file = "vllm/distributed', 'file = "distributed', "tracked[vllm-ec-uint64-pointers].file", "vllm/platforms/xpu.py"),
    ('waits_on = "pytorch/pytorch#191458"', 'waits_on = "pytorch#191458"', ".waits_on", "OWNER/REPO#NUMBER"),
    ('dead_when = "torch>=2.14.0"', 'dead_when = "torch 2.14"', ".dead_when", "COMPONENT>=VERSION"),
    ('carried_in = ">=0.29.0"', 'carried_in = "from 0.29"', ".carried_in", "not a PEP 440 specifier"),
    ('dead_when = "torch>=2.14.0"', 'remaining = "x"', ".remaining", "only an entry with dead_when"),
    ('carried_in = ">=0.29.0"', 'carried_in = ">=0.29.0"\nowner = "x"', ".owner", "unknown key"),
    ('id = "vllm-ec-uint64-pointers"', 'id = "vllm-pp-broadcast-sync"', ".id", "duplicate id"),
    ('id = "vllm-ec-uint64-pointers"', f'id = "{MANIFEST.workarounds[0].id}"', ".id",
     "the id of a [[workaround]] too (line "),
    ('id = "vllm-ec-uint64-pointers"', 'id = "import"', ".id", "is a Python keyword"),
])
def test_lint_points_at_the_line_of_a_broken_tracked_entry(tmp_path, old, new, field, words):
    found = problems_with(tmp_path, old, new)
    hits = [(number, name) for number, name, message in found if name.endswith(field.split("]")[-1]) and words in message]
    assert hits, found
    first = new.splitlines()[-1].partition(" =")[0]
    text = SHIPPED.replace(ENTRY, ENTRY.replace(old, new), 1).splitlines()
    assert text[hits[0][0] - 1].startswith(first), (hits, text[hits[0][0] - 1])


def test_a_missing_marker_is_required(tmp_path):
    found = problems_with(tmp_path, 'marker = "TODO(torch>=2.14)"\n', "")
    assert any(name.endswith(".marker") and message == "required" for _, name, message in found)


def pins(torch: str, kernels: str) -> dict[str, Version]:
    return {"torch": Version(torch), "vllm-xpu-kernels": Version(kernels)}


def test_dead_once_vllm_pins_the_release_that_makes_it_dead():
    ec = next(inline for inline in MANIFEST.tracked if inline.id == "vllm-ec-uint64-pointers")
    assert tracked_verdict(ec, "main", pins("2.15.0", "0.1.17"), {}).dead
    alive = tracked_verdict(ec, "v0.30.0", pins("2.13.0", "0.1.14.1"), {})
    assert not alive.dead and "torch 2.13.0" in alive.evidence and "only in torch>=2.14.0" in alive.evidence
    assert alive.tracked and "vLLM 0.30.0" in alive.evidence


def test_a_fix_that_leaves_part_of_it_makes_it_partly_dead():
    events = next(inline for inline in MANIFEST.tracked if inline.id == "vllm-xpu-event-keywords")
    verdict = tracked_verdict(events, "main", pins("2.15.0", "0.1.17"), {})
    assert (verdict.dead, verdict.partial) == (False, True) and "external keyword" in verdict.evidence


@pytest.mark.parametrize(("release", "kernels"), [("v0.31.0", "0.1.15.4"), ("v0.34.0", "0.1.17")])
def test_vllms_uva_copy_is_wholly_dead_once_its_pins_keep_strides(release, kernels):
    # vllm-xpu-kernels#564 (strides kept) is first in 0.1.15.1; vLLM pins 0.1.15.4 from 0.31.0.
    uva = next(inline for inline in MANIFEST.tracked if inline.id == "vllm-uva-view-unpinned")
    verdict = tracked_verdict(uva, release, pins("2.14.0", kernels), {})
    assert (verdict.dead, verdict.partial) == (True, False), verdict.evidence
    assert "#564" in uva.note and "0.1.15.1" in uva.note


def test_no_known_release_keeps_it_needed():
    redirect = next(inline for inline in MANIFEST.tracked if inline.id == "vllm-deepseek-v4-event-redirect")
    verdict = tracked_verdict(redirect, "main", pins("2.15.0", "0.1.17"), {})
    assert not verdict.dead and verdict.evidence.startswith("Waits on pytorch/pytorch#189017")


def write(root, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_check_finds_a_marker_where_the_manifest_says_and_notes_one_vllm_removed(tmp_path):
    write(tmp_path, "PKG-INFO", "Metadata-Version: 2.1\nName: vllm\nVersion: 0.30.0\n")
    write(tmp_path, "vllm/distributed/ec_transfer/ec_connector/cpu/worker/descriptor_buffers.py",
          '"""TODO(torch>=2.14): drop these numpy aliases."""\n')
    result = compare.check_tree(MANIFEST, tmp_path)
    by_id = {t.id: t for t in result.tracked}
    assert by_id["vllm-ec-uint64-pointers"].found and by_id["vllm-ec-uint64-pointers"].problem is None
    # 0.30.0 should carry the UCX setting (>=0.19.0): its file is not in this tree.
    assert by_id["vllm-ucx-memtype-cache"].problem.endswith("vLLM removed or moved it")
    # A marker in a release the manifest says does not carry it (the lora one is >=0.31.0).
    write(tmp_path, "vllm/lora/ops/triton_ops/fused_moe_lora_op.py", "# intel/intel-xpu-backend-for-triton/issues/8121\n")
    again = {t.id: t for t in compare.check_tree(MANIFEST, tmp_path).tracked}
    assert "but the manifest says vllm>=0.31.0 carries it" in again["vllm-lora-moe-single-program"].problem


def test_docs_show_the_workarounds_and_the_tracked_entries():
    text = markdown(MANIFEST)
    assert all(f"## {w.id}\n" in text for w in MANIFEST.workarounds)
    assert "## vLLM's own XPU workarounds (tracked, not patched)" in text
    assert "| `vllm-ec-uint64-pointers` |" in text and "`torch>=2.14.0`" in text


# The tracked-only manifest docs/action.md gives a vLLM fork to copy.
ACTION_DOCS = Path(__file__).resolve().parent.parent / "docs" / "action.md"


def action_docs_example() -> str:
    text = ACTION_DOCS.read_text(encoding="utf-8")
    start = text.index("```toml\nschema = 1\n\n[[tracked]]") + len("```toml\n")
    return text[start:text.index("```", start)]


@pytest.fixture
def tracked_only(tmp_path):
    """A vLLM fork's manifest (docs/action.md): [[tracked]] entries only, no [support], no [[workaround]]."""
    path = tmp_path / "workarounds.toml"
    path.write_text(action_docs_example(), encoding="utf-8")
    return path


def xpu_workarounds(*args: str):
    from typer.testing import CliRunner

    from tracker.commands.app import app

    return CliRunner().invoke(app, list(args), env={"XPU_WORKAROUNDS_MANIFEST": None})


def test_docs_of_a_tracked_only_manifest_list_the_entries_without_an_empty_workaround_table(tracked_only):
    text = markdown(reader.load(tracked_only))
    assert "Support floor" not in text and "| id | title | affected" not in text
    assert "| `empty-cache-before-graph` |" in text


def test_status_of_a_tracked_only_manifest_says_there_is_nothing_to_decide(tracked_only):
    result = xpu_workarounds("--manifest", str(tracked_only), "status", "--platform", "xpu")
    assert result.exit_code == 0
    assert result.stdout.splitlines()[1:] == [
        "", "no workarounds in this manifest: nothing to decide (its [[tracked]] entries: xpu-workarounds docs)"]


def test_explain_of_a_tracked_entry_says_it_is_one(tracked_only):
    result = xpu_workarounds("--manifest", str(tracked_only), "explain", "empty-cache-before-graph")
    assert result.exit_code == 2
    assert result.stderr == ("xpu-workarounds: error: 'empty-cache-before-graph' is a [[tracked]] entry, not a "
                             "workaround: xpu-workarounds docs lists it\n")


def test_explain_of_an_unknown_id_in_a_manifest_without_workarounds_says_there_are_none(tracked_only):
    result = xpu_workarounds("--manifest", str(tracked_only), "explain", "nope")
    assert result.exit_code == 2
    assert result.stderr == "xpu-workarounds: error: unknown workaround id 'nope' (this manifest has none)\n"


def test_retire_of_a_tracked_only_manifest_says_there_is_nothing_to_retire(tracked_only):
    result = xpu_workarounds("--manifest", str(tracked_only), "retire")
    assert result.exit_code == 0
    assert result.stdout == ("no workarounds in this manifest: nothing to retire (whether its [[tracked]] entries "
                             "are dead code: xpu-workarounds upstream)\n")
