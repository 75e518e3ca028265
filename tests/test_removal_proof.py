"""The full removal proof, as the weekly workflow's ``prove`` job runs it (tests/support/removal_proof.py).

A removal, as ``retire --open-prs`` computes it, applied to a copy of this checkout's tracked files; the
fast tests run there; the result is what ``retire --open-prs --proofs`` reads (whether the bot opens the
PR: tests/test_retire_github.py). Here a copy is made and one planted test runs on it, not the whole suite:
the whole suite on every removal is the workflow's job. What a removal leaves behind is checked on every
push, statically (tests/test_removal_leftovers.py).
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from support import removal_proof, repository
from support.repository import ROOT, tracked_paths

from tracker.model import reader
from tracker.retire import MANIFEST_PATH, read_proofs
from tracker.retire.removal import module_name, owned_paths


def shipped() -> list[str]:
    return reader.load(ROOT / MANIFEST_PATH).ids


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A copy without the manifest's last workaround, to plant tests in: a git repository of its own."""
    return removal_proof.removed_copy(shipped()[-1], tmp_path_factory.mktemp("planted") / "repository")


def test_the_copy_is_the_checkout_without_what_the_removal_deletes(planted):
    last = reader.load(ROOT / MANIFEST_PATH).workarounds[-1]
    copied = set(tracked_paths(planted))
    assert set(owned_paths(last, tracked_paths())) & copied == set()
    assert last.id not in reader.load(planted / MANIFEST_PATH).ids
    assert {path for path in tracked_paths() if path not in owned_paths(last, tracked_paths())} == copied


def test_a_removal_that_breaks_a_test_fails_its_proof_and_says_which(planted, tmp_path):
    """The copy is what the proof tests: its own manifest and code, not this checkout's. A test that needs
    a workaround (here: that it is shipped) passes on a copy with it and fails on the copy without it;
    the result names the failing test, in the shape ``--proofs`` reads."""
    needed, other = reader.load(planted / MANIFEST_PATH).ids[:2]
    (planted / "tests" / "test_needs_the_workaround.py").write_text(
        f"from tracker.model import reader\n\n\ndef test_it_is_shipped():\n    assert {needed!r} in reader.load().ids\n",
        encoding="utf-8")
    subprocess.run(["git", "-C", str(planted), "add", "tests/test_needs_the_workaround.py"], check=True)
    try:
        result = removal_proof.prove([needed, other], "tests/test_needs_the_workaround.py", source=planted,
                                      seed_mypy=False)
    finally:
        subprocess.run(["git", "-C", str(planted), "rm", "-q", "-f", "tests/test_needs_the_workaround.py"], check=True)
    assert result["proven"] == [other]
    assert list(result["failed"]) == [needed]
    assert re.fullmatch(r"1 failed in [\d.]+s; tests/test_needs_the_workaround.py::test_it_is_shipped.*",
                        result["failed"][needed]), result
    written = tmp_path / "proofs.json"
    written.write_text(json.dumps(result))
    proofs = read_proofs(written)
    assert proofs.unproven(other) is None
    assert proofs.unproven(needed) == f"its removal fails the repository's tests ({result['failed'][needed]})"


def test_a_workarounds_file_that_git_does_not_track_is_named_with_the_fix(planted, tmp_path):
    """The bot's removal is computed from git's files: one that exists but is not tracked (a new
    workaround not yet added) is named, with the command that adds it."""
    first = reader.load(planted / MANIFEST_PATH).workarounds[0]
    module = f"workarounds/{module_name(first)}.py"
    subprocess.run(["git", "-C", str(planted), "rm", "-q", "--cached", module], check=True)
    try:
        with pytest.raises(removal_proof.Untracked, match=re.escape(f"{module}: not tracked by git: run git add {module}")):
            removal_proof.removed_copy(first.id, tmp_path / "repository", source=planted)
    finally:
        subprocess.run(["git", "-C", str(planted), "add", module], check=True)


def test_the_command_takes_the_retirable_ids_as_json_and_writes_the_result(tmp_path, capsys):
    """Nothing retirable (the ``--only`` id is not among them): no copy is made, and the result says so."""
    out = tmp_path / "proofs.json"
    assert removal_proof.main(["--ids", json.dumps(shipped()[:2]), "--only", "not-retirable", "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == {"proven": [], "failed": {}}
    assert removal_proof.main(["--ids", "", "--out", str(out)]) == 0  # the judge job wrote no output
    assert json.loads(out.read_text()) == {"proven": [], "failed": {}}
    for wrong in ('{"a": 1}', "[1, 2", '[1]'):
        with pytest.raises(SystemExit):
            removal_proof.main(["--ids", wrong])
        assert "--ids must be a JSON list" in capsys.readouterr().err


# Each shipped workaround named by id or module name (``workarounds.x``, ``test_workaround_x.py``),
# not inside a longer name (``vllm-x`` is a [[tracked]] entry's).
def named_patterns() -> dict[str, re.Pattern[str]]:
    return {w.id: re.compile(rf"(?<![\w-]){re.escape(w.id)}(?![\w-])"
                             rf"|(?<![A-Za-z0-9]){re.escape(module_name(w))}(?![A-Za-z0-9_])")
            for w in reader.load(ROOT / MANIFEST_PATH).workarounds}


SLOW_MARK = re.compile(rf"\bmark\.({'|'.join(removal_proof.SLOW)})\b")


def test_no_file_a_slow_test_runs_names_a_shipped_workaround_it_does_not_own():
    """The copies run no slow test (vLLM, Ray, the release matrix): those read the workarounds from the
    manifest, or bring their own. So no file under tests/ names a shipped workaround, by id or
    module name, unless the workaround owns it (its removal deletes it), it is the frozen
    repository (its manifest is the frozen one's), or it is a test file with no slow test (the copies
    run it)."""
    paths = [path for path in tracked_paths() if path.startswith("tests/") and (ROOT / path).is_file()]
    manifest = reader.load(ROOT / MANIFEST_PATH)
    owner = {path: w.id for w in manifest.workarounds for path in owned_paths(w, paths)}
    patterns, naming = named_patterns(), {}
    for path in paths:
        text = (ROOT / path).read_bytes().decode("utf-8", "replace")
        if (ROOT / path).is_relative_to(repository.FROZEN) or (
                re.fullmatch(r"tests/test_[^/]*\.py", path) and not SLOW_MARK.search(text)):
            continue
        named = {workaround_id for workaround_id, pattern in patterns.items() if pattern.search(text)} - {owner.get(path)}
        if named:
            naming[path] = sorted(named)
    assert naming == {}, "retiring these workarounds would break these files (read the ids from the manifest, " \
                         f"bring the tests' own workaround, or move the case into the owner's test file): {naming}"
