"""Every removal PR passes this repository's own tests (issue 11, item 7).

For each shipped workaround, its removal as ``retire --open-prs`` commits it
(``compute_removal``: its module, its own tests and fixtures deleted, its entry cut from
``workarounds.toml``, the catalogue regenerated) is applied to a copy of this checkout's
tracked files, and the fast suite runs on the copy with the copy's code first on
``PYTHONPATH``. Marker ``removal_proof``: about 3.5 minutes a workaround, two copies at a
time (README "Tests").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from support.repository import ROOT, tracked_paths

from tracker.model import reader
from tracker.retire import MANIFEST_PATH, Snapshot, blob_sha, compute_removal

pytestmark = pytest.mark.removal_proof

# The fast part of the README's test command, less this proof (it does not recurse).
FAST = "not vllm_e2e and not release_matrix and not ray_cluster and not removal_proof"
AT_ONCE = 2  # copies tested at the same time: the machine has 2 cores
SHIPPED = [w.id for w in reader.load(ROOT / MANIFEST_PATH).workarounds]


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


@pytest.mark.parametrize("workaround_id", SHIPPED)
def test_the_fast_suite_passes_on_a_copy_without_the_workaround(proofs, workaround_id):
    result = proofs[workaround_id].result()
    failures = result.stdout[result.stdout.find("= FAILURES ="):]  # pytest's report of each failure
    assert result.returncode == 0, f"without {workaround_id}: {failures[-6000:]}{result.stderr[-2000:]}"
