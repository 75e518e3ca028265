"""Every removal PR passes this repository's own tests (CONTRIBUTING.md "How a removal is proven").

For each shipped workaround, its removal as ``retire --open-prs`` commits it
(``compute_removal``: its module, its own tests and fixtures deleted, its entry cut from
``workarounds.toml``, the catalogue regenerated) is applied to a copy of this checkout's
tracked files, and the fast tests whose outcome a removal can change (``removal_proof.READS_SHIPPED``
and the workarounds' own) run on the copy with the copy's code first on ``PYTHONPATH``
(tests/support/removal_proof.py). Every other test file is shown to read nothing a removal
changes: once, on a bare copy that lacks all of it and records what its processes open, or, for
the files that run only on the frozen repository, by their text (both checked below). Marker
``removal_proof``: the copies start with the session's tests, two at a time, and each proof test
waits for its copy's result.

The slow parts (real vLLM, real Ray, the release matrix) are not run on the copies; what
keeps them passing is checked fast, for the whole of ``tests/``: no file names a shipped
workaround (its id or its module's name) unless the workaround owns it (the files its
removal deletes) or it is frozen on purpose (``FROZEN``, each with its reason).
"""

from __future__ import annotations

import re

import pytest
from support import removal_proof
from support.repository import ROOT, tracked_paths

from tracker.model import reader
from tracker.retire import MANIFEST_PATH
from tracker.retire.removal import module_name, owned_paths

MANIFEST = reader.load(ROOT / MANIFEST_PATH)
SHIPPED = [w.id for w in MANIFEST.workarounds]
SHIPPED_MODULE = MANIFEST.workarounds[0].module


@pytest.fixture(scope="module")
def proofs(request):
    """The copies started with the session's tests (tests/conftest.py), or started now when
    the session did not start them."""
    started = request.config.stash.get(removal_proof.STARTED, None)
    if started is not None:
        yield started
        return
    started = removal_proof.Proofs(removal_proof.selected(request.session.items))
    try:
        yield started
    finally:
        started.close()


def failures(result) -> str:
    """pytest's report of each failure, and the end of stderr."""
    return result.stdout[result.stdout.find("= FAILURES ="):][-6000:] + result.stderr[-2000:]


@pytest.mark.removal_proof
@pytest.mark.parametrize("workaround_id", SHIPPED)
def test_the_fast_suite_passes_on_a_copy_without_the_workaround(proofs, workaround_id):
    result = proofs.result(workaround_id)
    assert result.returncode == 0, f"without {workaround_id}: {failures(result)}"


@pytest.mark.removal_proof
def test_the_files_the_copies_skip_read_nothing_a_removal_changes(proofs):
    """The test files neither the copies nor the frozen-only text check cover pass on a copy with no
    file that any removal changes, and none of their processes opened one (in the copy or in this
    checkout) or imported a shipped workaround's module: their outcome is the same on every copy."""
    run = proofs.bare()
    readers = sorted({test.partition("::")[0] for test, _ in run.reads})
    assert run.reads == [], (f"these tests read what a removal changes: add {readers} to "
                             f"removal_proof.READS_SHIPPED (the copies run those): {run.reads[:20]}")
    assert run.result.returncode == 0, f"without any removal-changed file: {failures(run.result)}"


def test_a_removal_that_breaks_a_test_fails_its_proof(tmp_path):
    """The copy is what the proof tests: its own manifest and code, not this checkout's. A test
    that needs the removed workaround (here: that it is shipped) passes here and fails there."""
    victim = MANIFEST.workarounds[-1].id
    copy = removal_proof.removed_copy(victim, tmp_path / "repository")
    needs_it = copy / "tests" / "test_needs_the_workaround.py"
    needs_it.write_text("from tracker.model import reader\n\n\n"
                        f"def test_it_is_shipped():\n    assert {victim!r} in reader.load().ids\n", encoding="utf-8")
    assert victim in reader.load().ids
    result = removal_proof.fast_suite(copy, (needs_it,))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout and "test_it_is_shipped" in result.stdout


def test_the_bare_copy_names_each_test_that_reads_what_a_removal_changes(tmp_path):
    """The recorder sees a read that a test forgives (the file is missing there) and a read in a
    child process; a test that reads nothing of it is not named."""
    changed = removal_proof.changed_by_removals()
    copy = removal_proof.bare_copy(tmp_path / "repository", changed)
    assert not (copy / MANIFEST_PATH).exists() and (copy / "tracker").is_dir()
    planted = copy / "tests" / "test_planted.py"
    planted.write_text(
        "import os, subprocess, sys\n\n"
        "def test_forgiving():\n    try:\n        open('workarounds.toml')\n    except OSError:\n        pass\n\n"
        "def test_in_a_child():\n"  # started as tests start theirs: the project's variables cleared
        "    env = {k: v for k, v in os.environ.items() if not k.startswith('XPU_WORKAROUNDS')}\n"
        "    subprocess.run([sys.executable, '-c', 'import contextlib\\nwith contextlib.suppress(ImportError): "
        "import " + SHIPPED_MODULE + "'], check=True, env=env)\n\n"
        "def test_innocent():\n    open('pyproject.toml').close()\n", encoding="utf-8")
    run = removal_proof.bare_suite(copy, ["tests/test_planted.py"], set())
    assert run.result.returncode == 0, failures(run.result)
    assert run.reads == [("tests/test_planted.py::test_forgiving", str(copy / MANIFEST_PATH)),
                         ("tests/test_planted.py::test_in_a_child", SHIPPED_MODULE)], run.reads


def test_the_file_lists_name_test_files_that_exist_once():
    for path in (*removal_proof.READS_SHIPPED, *removal_proof.FROZEN_ONLY):
        assert (ROOT / path).is_file(), path
    assert not set(removal_proof.READS_SHIPPED) & set(removal_proof.FROZEN_ONLY)


# ------------------------------------------------- fast: no test names a shipped workaround

# Files under tests/ that name workarounds because they are frozen on purpose: what they name
# is the frozen manifest's (tests/fixtures/frozen_repository/workarounds.toml, the shipped one
# of 2026-12-04), which no retirement changes, so a removal leaves them passing (the removal
# proof above runs them). Each gives its reason and a text that shows it (checked below).
FROZEN = {
    "tests/fixtures/frozen_repository/": ("the frozen repository's manifest and catalogue themselves", ""),
    "tests/support/repository.py": ("builds the frozen repository from that manifest", "FROZEN_MANIFEST = "),
    "tests/support/upstream_history.py": ("the upstream history seeded for the frozen manifest's references and the "
                                          "audit expected of it", "frozen_repository/workarounds.toml"),
    "tests/test_manifest.py": ("its cases edit the frozen manifest's text", "TEXT = FROZEN_MANIFEST.read_text("),
    "tests/test_lifecycle.py": ("runs the bot's weeks over the frozen repository", "files = frozen()"),
    "tests/test_retire_github.py": ("retires the frozen repository's workarounds", "files = frozen()"),
    "tests/test_retire_removal.py": ("computes removals over the frozen repository",
                                     "FROZEN = repository.FROZEN_MANIFEST.read_text("),
    "tests/test_action.py": ("an adopter's repository built from the frozen manifest",
                             "text = FROZEN_MANIFEST.read_text("),
    "tests/test_upstream_cli.py": ("upstream on the frozen manifest against its seeded history",
                                   "manifest=FROZEN_MANIFEST"),
    "tests/test_hostile_github.py": ("upstream on the frozen manifest and the bot on the frozen repository, "
                                     "against answers that are not GitHub's", "shutil.copyfile(FROZEN_MANIFEST, "),
    "tests/test_lookahead.py": ("the bot's look-ahead on the frozen repository, pins read with the frozen manifest",
                                "files={**frozen(), "),
    "tests/test_index_address.py": ("the look-ahead on the frozen repository, check with the frozen manifest",
                                    "files={**frozen(), "),
}


# Each shipped workaround named by id or module name (``workarounds.x``, ``test_workaround_x.py``),
# not inside a longer name (``vllm-x`` is a [[tracked]] entry's).
NAMED = {w.id: re.compile(rf"(?<![\w-]){re.escape(w.id)}(?![\w-])"
                          rf"|(?<![A-Za-z0-9]){re.escape(module_name(w))}(?![A-Za-z0-9_])")
         for w in MANIFEST.workarounds}


def names_in(text: str) -> set[str]:
    """The shipped workarounds ``text`` names."""
    return {workaround_id for workaround_id, pattern in NAMED.items() if pattern.search(text)}


def test_no_test_names_a_shipped_workaround_it_does_not_own():
    paths = [path for path in tracked_paths() if path.startswith("tests/") and (ROOT / path).is_file()]
    owner = {path: w.id for w in MANIFEST.workarounds for path in owned_paths(w, paths)}
    naming = {}
    for path in paths:
        if any(path.startswith(frozen) for frozen in FROZEN):
            continue
        named = names_in((ROOT / path).read_bytes().decode("utf-8", "replace")) - {owner.get(path)}
        if named:
            naming[path] = sorted(named)
    assert naming == {}, "retiring these workarounds would break these tests (read the ids from the manifest, " \
                         f"bring the tests' own workaround, or move the case into the owner's test file): {naming}"


def test_every_frozen_exemption_is_what_its_reason_says():
    for path, (reason, shown_by) in FROZEN.items():
        assert (ROOT / path).exists(), (path, reason)
        if shown_by:
            assert shown_by in (ROOT / path).read_text(encoding="utf-8"), (path, reason, shown_by)


def test_the_files_a_copy_skips_read_only_the_frozen_manifest():
    """A file the copies skip runs on the frozen repository or manifest and reads nothing a removal
    changes: not the shipped manifest, not this checkout's workaround modules."""
    for path in removal_proof.FROZEN_ONLY:
        text = (ROOT / path).read_text(encoding="utf-8")
        assert "FROZEN_MANIFEST" in text or "frozen()" in text, path
        assert [reader for reader in removal_proof.SHIPPED_READERS if reader in text] == [], path
        assert path in FROZEN, f"{path} must name only the frozen manifest's workarounds"
