"""Every removal PR passes this repository's own tests (issue 11, item 7).

For each shipped workaround, its removal as ``retire --open-prs`` commits it
(``compute_removal``: its module, its own tests and fixtures deleted, its entry cut from
``workarounds.toml``, the catalogue regenerated) is applied to a copy of this checkout's
tracked files, and the fast suite runs on the copy with the copy's code first on
``PYTHONPATH``. Marker ``removal_proof``: about 3.5 minutes a workaround, two copies at a
time (README "Tests").

The slow parts (real vLLM, real Ray, the release matrix) are not run on the copies; what
keeps them passing is checked fast, for the whole of ``tests/``: no file names a shipped
workaround (its id or its module's name) unless the workaround owns it (the files its
removal deletes) or it is frozen on purpose (``FROZEN``, each with its reason).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from support.repository import ROOT, tracked_paths

from tracker.model import reader
from tracker.retire import MANIFEST_PATH, Snapshot, blob_sha, compute_removal
from tracker.retire.removal import module_name, owned_paths

# The fast part of the README's test command, less this proof (it does not recurse).
FAST = "not vllm_e2e and not release_matrix and not ray_cluster and not removal_proof"
AT_ONCE = 2  # copies tested at the same time: the machine has 2 cores
MANIFEST = reader.load(ROOT / MANIFEST_PATH)
SHIPPED = [w.id for w in MANIFEST.workarounds]


def removed_copy(workaround_id: str, destination: Path) -> Path:
    """This checkout's tracked files (as in the working tree) with ``workaround_id``'s removal
    applied, committed to a fresh git repository (the tests read ``git ls-files``)."""
    paths = tracked_paths()
    for path in paths:
        (destination / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, destination / path)
    text = (ROOT / MANIFEST_PATH).read_text(encoding="utf-8")
    snapshot = Snapshot("main", "0" * 40, "0" * 40, {p: blob_sha(p) for p in paths}, {}, text)
    removal = compute_removal(snapshot, reader.load(ROOT / MANIFEST_PATH).get(workaround_id))
    for path in removal.deleted:
        (destination / path).unlink()
    for path, written in removal.written.items():
        (destination / path).write_text(written, encoding="utf-8")
    git = ["git", "-C", str(destination), "-c", "user.name=removal proof", "-c", "user.email=proof@localhost"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", f"Retire workaround {workaround_id}"]):
        subprocess.run([*git, *command], check=True, capture_output=True)
    # mypy's incremental cache (not tracked, so not in the commit): mypy checks each module
    # against its source again, so the copy's own changes are checked; the rest is not redone.
    if (ROOT / ".mypy_cache").is_dir():
        shutil.copytree(ROOT / ".mypy_cache", destination / ".mypy_cache", ignore_dangling_symlinks=True)
    return destination


def fast_suite(copy: Path) -> subprocess.CompletedProcess[str]:
    # Each copy has its own user cache directory: the copies run at the same time.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(copy), os.environ.get("PYTHONPATH")])),
           "XDG_CACHE_HOME": str(copy.parent / "cache")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", FAST,
                           f"--basetemp={copy.parent / 'pytest'}"],
                          cwd=copy, env=env, capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def proofs(request, tmp_path_factory):
    """The selected workarounds' copies, all made from the checkout as it is at the first use,
    then tested ``AT_ONCE`` at a time."""
    selected = [item.callspec.params["workaround_id"] for item in request.session.items
                if item.originalname == "test_the_fast_suite_passes_on_a_copy_without_the_workaround"]
    copies = {workaround_id: removed_copy(workaround_id, tmp_path_factory.mktemp(f"without-{workaround_id}") / "repository")
              for workaround_id in selected}
    pool = ThreadPoolExecutor(max_workers=AT_ONCE)
    started: dict[str, Future[subprocess.CompletedProcess[str]]] = {
        workaround_id: pool.submit(fast_suite, copy) for workaround_id, copy in copies.items()}
    yield started
    pool.shutdown(cancel_futures=True)


@pytest.mark.removal_proof
@pytest.mark.parametrize("workaround_id", SHIPPED)
def test_the_fast_suite_passes_on_a_copy_without_the_workaround(proofs, workaround_id):
    result = proofs[workaround_id].result()
    failures = result.stdout[result.stdout.find("= FAILURES ="):]  # pytest's report of each failure
    assert result.returncode == 0, f"without {workaround_id}: {failures[-6000:]}{result.stderr[-2000:]}"


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
    "tests/test_upstream_cli.py": ("upstream on the frozen manifest against its seeded history",
                                   "manifest=FROZEN_MANIFEST"),
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
