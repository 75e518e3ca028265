"""The removal change: which files a workaround owns, its manifest entry cut with every
other line kept, lint against the edited tree, regenerated docs, the evidence digest.

Pure functions (no GitHub here; see test_retire_github.py), over the frozen repository
(tests/support/repository.py), whose workarounds are named; and, without naming any, the
removal of every shipped workaround from this checkout.
"""

from __future__ import annotations

import dataclasses
import tomllib

import pytest
from support import repository

from tracker.model import reader
from tracker.model.catalogue import markdown
from tracker.model.retirement import retirement
from tracker.retire import (
    DOCS_PATH,
    MANIFEST_PATH,
    RemovalError,
    Snapshot,
    blob_sha,
    compute_removal,
    evidence_digest,
    manifest_from_text,
    marker,
    module_name,
    owned_paths,
    read_marker,
    remove_entry,
)

FROZEN = repository.FROZEN_MANIFEST.read_text(encoding="utf-8")
RETIRING_TORCH_FLOOR = FROZEN.replace('torch = "2.10.0"', 'torch = "2.14.0"', 1)


def snapshot(text: str, extra: list[str] = (), files: dict[str, str] | None = None) -> Snapshot:
    """The frozen repository (or ``files``) with ``text`` as its manifest and ``extra`` files."""
    paths = sorted(set(repository.frozen() if files is None else files) | {MANIFEST_PATH, *extra})
    return Snapshot("main", "1" * 40, "2" * 40, {p: blob_sha(p) for p in paths}, {}, text)


def workaround(text: str, workaround_id: str):
    return manifest_from_text(text).get(workaround_id)


# ------------------------------------------------------------------------ owned files


def test_a_workaround_owns_its_module_tests_and_fixtures_by_module_name():
    w = workaround(FROZEN, "static-launcher-uva")
    paths = ["workarounds/static_launcher_uva.py", "tests/test_workaround_static_launcher_uva.py",
             "tests/workarounds/test_static_launcher_uva.py", "tests/fixtures/static_launcher_uva/config.json",
             "tests/fixtures/static_launcher_uva/deep/trace.txt", "tests/fixtures/static_launcher_uva.json"]
    assert owned_paths(w, paths) == sorted(paths)


def test_files_of_other_workarounds_and_shared_files_are_not_owned():
    w = workaround(FROZEN, "uva-view-unpinned")
    paths = ["workarounds/static_launcher_uva.py", "workarounds/uva_view_unpinned_helpers.py",
             "tests/test_workaround_static_launcher_uva.py", "tests/test_runtime.py",
             "tests/fixtures/uva_view_unpinned_more/x.json", "docs/uva_view_unpinned.md",
             "tests/fixtures/uva_view_unpinned_more.json", "workarounds.toml"]
    assert owned_paths(w, paths) == []


# --------------------------------------------------------------------- manifest entry


def test_removing_an_entry_keeps_every_other_line_byte_for_byte():
    edited = remove_entry(FROZEN, "pp-broadcast-sync")
    entry = FROZEN[FROZEN.index('[[workaround]]\nid = "pp-broadcast-sync"'):
                    FROZEN.index('[[workaround]]\nid = "static-launcher-uva"')]
    assert edited == FROZEN.replace(entry, "", 1)


def test_removing_an_entry_leaves_exactly_the_other_workarounds():
    edited = tomllib.loads(remove_entry(FROZEN, "pp-broadcast-sync"))
    original = tomllib.loads(FROZEN)
    assert edited["workaround"] == [w for w in original["workaround"] if w["id"] != "pp-broadcast-sync"]
    assert edited["support"] == original["support"]


def test_a_comment_above_the_next_entry_stays_and_one_above_the_removed_entry_goes():
    text = FROZEN.replace('[[workaround]]\nid = "cuda-event-redirect"',
                           '# Reviewed 2026-11: still needed on 0.24.x.\n[[workaround]]\nid = "cuda-event-redirect"')
    text = text.replace('[[workaround]]\nid = "event-blocking-kwarg"',
                        '# Remove with event-blocking-kwarg.\n[[workaround]]\nid = "event-blocking-kwarg"')
    edited = remove_entry(text, "event-blocking-kwarg")
    assert "# Reviewed 2026-11: still needed on 0.24.x.\n[[workaround]]\nid = \"cuda-event-redirect\"" in edited
    assert "Remove with event-blocking-kwarg" not in edited
    assert "# The single source of truth about every XPU workaround" in edited


def test_removing_the_last_entry_ends_the_file_with_one_newline():
    last = tomllib.loads(FROZEN)["workaround"][-1]["id"]
    edited = remove_entry(FROZEN, last)
    assert edited.endswith('"\n') and not edited.endswith("\n\n")
    assert last not in [w["id"] for w in tomllib.loads(edited)["workaround"]]


def test_removing_an_unknown_entry_is_refused():
    with pytest.raises(RemovalError, match="no-such-fix"):
        remove_entry(FROZEN, "no-such-fix")


# --------------------------------------------------------------------- whole removal


def test_the_removal_deletes_the_owned_files_and_rewrites_manifest_and_docs():
    extra = ["tests/fixtures/static_launcher_uva/offload.json", "tests/test_workaround_static_launcher_uva.py"]
    base = snapshot(RETIRING_TORCH_FLOOR, extra)
    removal = compute_removal(base, workaround(RETIRING_TORCH_FLOOR, "static-launcher-uva"))
    assert set(removal.deleted) == {"workarounds/static_launcher_uva.py", *extra}
    assert set(removal.written) == {MANIFEST_PATH, DOCS_PATH}
    assert removal.written[MANIFEST_PATH] == remove_entry(RETIRING_TORCH_FLOOR, "static-launcher-uva")


def test_the_regenerated_docs_are_the_catalogue_of_the_edited_manifest(tmp_path):
    base = snapshot(RETIRING_TORCH_FLOOR)
    removal = compute_removal(base, workaround(RETIRING_TORCH_FLOOR, "static-launcher-uva"))
    edited = tmp_path / "workarounds.toml"
    edited.write_text(removal.written[MANIFEST_PATH])
    assert removal.written[DOCS_PATH] == markdown(reader.load(edited))
    assert "static-launcher-uva" not in removal.written[DOCS_PATH]


def test_the_edited_manifest_passes_lint(tmp_path):
    base = snapshot(RETIRING_TORCH_FLOOR)
    removal = compute_removal(base, workaround(RETIRING_TORCH_FLOOR, "static-launcher-uva"))
    edited = tmp_path / "workarounds.toml"
    edited.write_text(removal.written[MANIFEST_PATH])
    assert reader.check(edited) == []


def test_a_removal_that_would_leave_another_entry_without_its_module_is_refused():
    # The base lacks uva_view_unpinned's module: lint of the edited tree must fail.
    base = snapshot(RETIRING_TORCH_FLOOR)
    base = dataclasses.replace(base, blobs={p: s for p, s in base.blobs.items()
                                            if p != "workarounds/uva_view_unpinned.py"})
    with pytest.raises(RemovalError, match=r"workaround\[uva-view-unpinned\]\.module"):
        compute_removal(base, workaround(RETIRING_TORCH_FLOOR, "static-launcher-uva"))


def test_the_expected_tree_is_the_base_minus_deleted_plus_written():
    base = snapshot(RETIRING_TORCH_FLOOR)
    removal = compute_removal(base, workaround(RETIRING_TORCH_FLOOR, "static-launcher-uva"))
    expected = removal.expected_blobs(base)
    assert "workarounds/static_launcher_uva.py" not in expected
    assert expected[MANIFEST_PATH] == blob_sha(removal.written[MANIFEST_PATH])
    assert expected["tracker/commands/app.py"] == base.blobs["tracker/commands/app.py"]


def test_blob_sha_is_gits_object_id():
    # `printf 'hello\n' | git hash-object --stdin`
    assert blob_sha("hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"


# ---------------------------------------------------------------- evidence digest


def evidence(text: str, workaround_id: str = "static-launcher-uva") -> str:
    manifest = manifest_from_text(text)
    w = manifest.get(workaround_id)
    return evidence_digest(w, retirement(w, manifest.support), manifest)


def test_the_fingerprint_is_stable_for_the_same_evidence():
    assert evidence(RETIRING_TORCH_FLOOR) == evidence(RETIRING_TORCH_FLOOR)


def test_the_fingerprint_changes_with_an_upstream_state():
    changed = RETIRING_TORCH_FLOOR.replace('ref = "pytorch/pytorch#188240"\nrole = "root-fix"\nstate = "landed"',
                                           'ref = "pytorch/pytorch#188240"\nrole = "root-fix"\nstate = "merged"')
    assert changed != RETIRING_TORCH_FLOOR
    assert evidence(changed) != evidence(RETIRING_TORCH_FLOOR)


def test_the_fingerprint_changes_with_the_support_floor():
    raised = RETIRING_TORCH_FLOOR.replace('vllm = "0.19.0"', 'vllm = "0.20.0"', 1)
    assert evidence(raised) != evidence(RETIRING_TORCH_FLOOR)


def test_the_fingerprint_ignores_other_workarounds():
    other = RETIRING_TORCH_FLOOR.replace('title = "Skip CUDA-graph memory profiling on XPU"',
                                         'title = "Skip CUDA-graph memory profiling on Intel XPU"')
    assert other != RETIRING_TORCH_FLOOR
    assert evidence(other) == evidence(RETIRING_TORCH_FLOOR)


def test_the_marker_reads_back_what_was_written():
    body = f"text\n\n{marker('static-launcher-uva', 'ab12', 'not-retirable')}\n"
    found = read_marker(body)
    assert (found.id, found.evidence, found.closed) == ("static-launcher-uva", "ab12", "not-retirable")
    assert read_marker("a PR someone else wrote") is None


def test_removing_the_last_workaround_keeps_the_tracked_entries_after_it_byte_for_byte():
    # The [[tracked]] entries (vLLM's own inline workarounds) follow the last [[workaround]]; they and
    # the comment block above them belong to no workaround.
    tracked = FROZEN[FROZEN.index("# vLLM's own inline XPU workarounds"):]
    edited = remove_entry(FROZEN, "uva-view-unpinned")
    assert edited.endswith(tracked)
    assert 'id = "uva-view-unpinned"' not in edited
    assert tomllib.loads(edited)["tracked"] == tomllib.loads(FROZEN)["tracked"]


# ------------------------------------------ every shipped workaround, from this checkout

CHECKOUT = repository.checkout()
SHIPPED = reader.load(repository.ROOT / MANIFEST_PATH)


@pytest.fixture(params=[w.id for w in SHIPPED.workarounds])
def shipped_removal(request):
    """The removal of one shipped workaround from this checkout, as retire --open-prs computes it."""
    text = CHECKOUT[MANIFEST_PATH]
    base = snapshot(text, files=CHECKOUT)
    return base, compute_removal(base, workaround(text, request.param))


def test_a_shipped_workaround_owns_its_module_its_own_test_file_and_its_release_scenario(shipped_removal):
    _, removal = shipped_removal
    name = module_name(removal.workaround)
    assert {f"workarounds/{name}.py", f"tests/test_workaround_{name}.py"} <= set(removal.deleted)
    # What it exercises in real vLLM releases (tests/scripts/release_probe.py runs whichever are there).
    scenario = f"tests/fixtures/{name}/release_scenario.py"
    assert (scenario in removal.deleted) == (scenario in CHECKOUT)


def test_removing_a_shipped_workaround_leaves_every_other_entry_with_its_module(shipped_removal):
    base, removal = shipped_removal
    remaining = removal.expected_blobs(base)
    others = [w for w in SHIPPED.workarounds if w.id != removal.workaround.id]
    assert all(f"workarounds/{module_name(w)}.py" in remaining for w in others)
    assert [w.id for w in manifest_from_text(removal.written[MANIFEST_PATH]).workarounds] == [w.id for w in others]


def test_removing_a_shipped_workaround_passes_lint_of_the_edited_tree(shipped_removal):
    base, removal = shipped_removal
    edited = {path: text for path, text in CHECKOUT.items() if path not in removal.deleted}
    edited.update(removal.written)
    assert repository.lint_problems(edited) == []


def test_removing_a_shipped_workaround_regenerates_the_catalogue_of_the_edited_manifest(shipped_removal):
    _, removal = shipped_removal
    assert removal.written[DOCS_PATH] == markdown(manifest_from_text(removal.written[MANIFEST_PATH]))
    assert f"`{removal.workaround.id}`" not in removal.written[DOCS_PATH]


def test_no_shipped_removal_touches_the_frozen_repository(shipped_removal):
    # tests/fixtures/<name>/ belongs to the workaround whose module is <name>: none may be named so.
    _, removal = shipped_removal
    frozen = repository.FROZEN.relative_to(repository.ROOT).as_posix() + "/"
    assert not [path for path in removal.deleted if path.startswith(frozen)]
    assert module_name(removal.workaround) != repository.FROZEN.name


def test_a_removal_drops_the_front_page_rows_that_link_to_its_catalogue_heading():
    """README.md's symptom table links each row to the catalogue's heading; the heading goes with the
    workaround, so its row goes too, and every other line stays as it was."""
    readme = ("# Project\n\n| if you see this | workaround |\n|---|---|\n"
              "| `boom` | [`static-launcher-uva`](docs/workarounds.md#static-launcher-uva) |\n"
              "| `bang` | [`uva-view-unpinned`](docs/workarounds.md#uva-view-unpinned) |\n\n"
              "See [static-launcher-uva](docs/workarounds.md#static-launcher-uva) in prose: kept.\n")
    plain = snapshot(RETIRING_TORCH_FLOOR, extra=["README.md", DOCS_PATH])
    base = dataclasses.replace(plain, read={"README.md": readme}.__getitem__)
    removal = compute_removal(base, workaround(RETIRING_TORCH_FLOOR, "static-launcher-uva"))
    assert removal.written["README.md"] == readme.replace(
        "| `boom` | [`static-launcher-uva`](docs/workarounds.md#static-launcher-uva) |\n", "")
    without_reader = compute_removal(plain, workaround(RETIRING_TORCH_FLOOR, "static-launcher-uva"))
    assert "README.md" not in without_reader.written
