"""The removal proof's copies (tests/test_removal_proof.py): for each shipped workaround, this
checkout with that workaround's removal applied, and the fast part of the suite run on it.

The copies start when the session's tests start (tests/conftest.py ``pytest_runtestloop``),
``AT_ONCE`` at a time, in processes of their own beside the session's other tests; each
proof test waits for its copy's result. One mypy run, before the copies, fills the cache
every copy starts from.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from support import repository
from support.repository import ROOT, tracked_paths
from tracker.model import reader
from tracker.retire import MANIFEST_PATH, Snapshot, blob_sha, compute_removal

# The fast part of the README's test command, less this proof (it does not recurse).
FAST = "not vllm_e2e and not release_matrix and not ray_cluster and not removal_proof"
AT_ONCE = 2  # copies tested at the same time: the machine has 2 cores
# Test files a removal cannot change the outcome of, not run on the copies: each runs on the frozen
# repository or an adopter built from the frozen manifest (tests/support/repository.py), never
# reads the shipped manifest, and runs the checkout's tracker/ code, which no removal touches; the
# session runs them on the checkout itself. tests/test_removal_proof.py checks what they read.
# Together over a third of the fast suite's time, saved on every copy.
INDEPENDENT = ("tests/test_action.py", "tests/test_retire_github.py", "tests/test_lifecycle.py",
               "tests/test_upstream_cli.py", "tests/test_hostile_github.py", "tests/test_lookahead.py")
# What reads the shipped manifest or this checkout's own workarounds: none of it in those files.
SHIPPED_READERS = ("default_path(", "reader.load()", "ROOT / MANIFEST_PATH", "checkout()", "SHIPPED",
                   "from workarounds", "import workarounds")
PROOF_TEST = "test_the_fast_suite_passes_on_a_copy_without_the_workaround"
STARTED = pytest.StashKey["Proofs"]()  # the session's proofs, started by tests/conftest.py


def removed_copy(workaround_id: str, destination: Path, mypy_cache: Path | None = None) -> Path:
    """This checkout's tracked files (as in the working tree) with ``workaround_id``'s removal
    applied, committed to a fresh git repository (the tests read ``git ls-files``)."""
    paths = tracked_paths()
    for path in paths:
        (destination / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, destination / path)
    text = (ROOT / MANIFEST_PATH).read_text(encoding="utf-8")
    snapshot = Snapshot("main", "0" * 40, "0" * 40, {p: blob_sha(p) for p in paths}, {}, text,
                        read=lambda path: (ROOT / path).read_text(encoding="utf-8"))
    removal = compute_removal(snapshot, reader.load(ROOT / MANIFEST_PATH).get(workaround_id))
    for path in removal.deleted:
        (destination / path).unlink()
    for path, written in removal.written.items():
        (destination / path).write_text(written, encoding="utf-8")
    git = ["git", "-C", str(destination), "-c", "user.name=removal proof", "-c", "user.email=proof@localhost"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", f"Retire workaround {workaround_id}"]):
        subprocess.run([*git, *command], check=True, capture_output=True)
    # mypy's incremental cache (untracked, so not in the commit): mypy checks every module
    # against its source again, so what the removal changed is checked; the rest is not redone.
    if mypy_cache is not None and mypy_cache.is_dir():
        shutil.copytree(mypy_cache, destination / ".mypy_cache")
    return destination


def mypy_cache(into: Path) -> Path:
    """A mypy cache of this checkout in ``into``: the checkout's own cache, brought up to date by
    one mypy run (its verdict is the code-quality test's business, not this one's), which that
    test's own run then finds up to date."""
    try:
        with repository.mypy_cache() as cache:
            subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, timeout=900)
            shutil.copytree(cache, into, ignore=shutil.ignore_patterns("held.lock"))
    except (OSError, shutil.Error):  # the checkout's cache cannot be written: the copies start from none
        shutil.rmtree(into, ignore_errors=True)
    return into


def fast_suite(copy: Path, running: set[subprocess.Popen[str]] | None = None,
               only: tuple[Path, ...] = ()) -> subprocess.CompletedProcess[str]:
    """The fast part of the suite on ``copy`` (or of the test files ``only``), the copy's code
    first on ``PYTHONPATH``; the process is in ``running`` while it runs (to be stopped when
    the session ends early)."""
    running = set() if running is None else running
    # Each copy has its own user cache directory: the copies run at the same time.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(copy), os.environ.get("PYTHONPATH")])),
           "XDG_CACHE_HOME": str(copy.parent / "cache")}
    skipped = [] if only else [f"--ignore={path}" for path in INDEPENDENT]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", FAST,
               f"--basetemp={copy.parent / 'pytest'}", *skipped, *map(str, only)]
    with subprocess.Popen(command, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        running.add(process)
        try:
            stdout, stderr = process.communicate(timeout=3600)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
        finally:
            running.discard(process)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


class Proofs:
    """The copies of ``workaround_ids``, made in the background from the checkout as it is
    now, then tested ``AT_ONCE`` at a time; ``result(id)`` waits for one."""

    def __init__(self, workaround_ids: list[str]) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="removal-proof-"))
        self.pool = ThreadPoolExecutor(max_workers=AT_ONCE, thread_name_prefix="removal-proof")
        self.starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="removal-proof-copies")
        self.started: dict[str, Future[subprocess.CompletedProcess[str]]] = {}
        self.running: set[subprocess.Popen[str]] = set()
        self.copied = self.starter.submit(self._start, list(workaround_ids))

    def _start(self, workaround_ids: list[str]) -> None:
        cache = mypy_cache(self.directory / "mypy-cache")
        for workaround_id in workaround_ids:
            copy = removed_copy(workaround_id, self.directory / f"without-{workaround_id}" / "repository", cache)
            self.started[workaround_id] = self.pool.submit(fast_suite, copy, self.running)

    def result(self, workaround_id: str) -> subprocess.CompletedProcess[str]:
        self.copied.result()  # raises what making the copies raised
        return self.started[workaround_id].result()

    def close(self) -> None:
        """Waits for nothing more: copies not yet tested are dropped, copies being tested stopped
        (in a finished session every result was already read)."""
        self.pool.shutdown(wait=False, cancel_futures=True)  # a copy made from now on is not tested
        self.starter.shutdown(wait=True, cancel_futures=True)
        for process in list(self.running):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        self.pool.shutdown(wait=True)
        shutil.rmtree(self.directory, ignore_errors=True)


def selected(items: list) -> list[str]:
    """The workarounds whose proof test is among ``items``."""
    return [item.callspec.params["workaround_id"] for item in items if getattr(item, "originalname", "") == PROOF_TEST]
