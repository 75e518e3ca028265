"""The removal proof's copies (tests/test_removal_proof.py): for each shipped workaround, this
checkout with that workaround's removal applied, and the test files whose outcome a removal can
change run on it; and one bare copy, lacking every file some removal changes, on which every
other test file runs once, to show that it reads none of them.

The copies start when the session's tests start (tests/conftest.py ``pytest_runtestloop``),
``AT_ONCE`` at a time, in processes of their own beside the session's other tests; each
proof test waits for its copy's result. One mypy run, before the copies, fills the cache
every copy starts from.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from support import repository
from support.repository import ROOT, tracked_paths
from tracker.model import reader
from tracker.retire import MANIFEST_PATH, Removal, Snapshot, blob_sha, compute_removal

# The fast part of the README's test command, less this proof (it does not recurse).
FAST = "not vllm_e2e and not release_matrix and not ray_cluster and not removal_proof"
AT_ONCE = 2  # copies tested at the same time: the machine has 2 cores
NICE = ["nice", "-n", "10"] if shutil.which("nice") else []
# Test files whose outcome a removal can change, run on every copy: they read the shipped manifest,
# a workaround's module or test, the catalogue or README (or run a command that does). A
# workaround's own test files run there too. Every other test file is shown to read none of it:
# the files in FROZEN_ONLY by their text (below), the rest by one run on the bare copy, where
# those files do not exist and every process records what it opens (``BARE``). A test file that
# starts to read them fails there, naming itself: add it here.
READS_SHIPPED = (
    "tests/test_census.py", "tests/test_census_adopt.py", "tests/test_census_releases.py", "tests/test_check.py",
    "tests/test_cli.py", "tests/test_cli_conventions.py", "tests/test_cluster_status.py", "tests/test_code_quality.py",
    "tests/test_decision.py", "tests/test_declared.py", "tests/test_fastpath.py", "tests/test_hostile_cli.py",
    "tests/test_hostile_files.py", "tests/test_hostile_manifest.py", "tests/test_lint.py", "tests/test_manifest.py",
    "tests/test_manifest_discovery.py", "tests/test_metrics.py", "tests/test_plugin.py",
    "tests/test_release_sources.py", "tests/test_removal_proof.py", "tests/test_retire_removal.py",
    "tests/test_runtime.py", "tests/test_schema.py", "tests/test_tracked.py", "tests/test_upstream.py",
    "tests/test_user_docs.py", "tests/test_wheel.py", "tests/test_workflow.py",
)
# Test files that run on the frozen repository or an adopter built from the frozen manifest
# (tests/support/repository.py), never the shipped manifest, and the checkout's tracker/ code,
# which no removal touches: shown by their text (tests/test_removal_proof.py), run neither on
# the copies nor on the bare copy. Together over half of the fast suite's time.
FROZEN_ONLY = ("tests/test_action.py", "tests/test_retire_github.py", "tests/test_lifecycle.py",
               "tests/test_upstream_cli.py", "tests/test_hostile_github.py", "tests/test_lookahead.py",
               "tests/test_index_address.py")
# What reads the shipped manifest or this checkout's own workarounds: none of it in those files.
SHIPPED_READERS = ("default_path(", "reader.load()", "ROOT / MANIFEST_PATH", "checkout()", "SHIPPED",
                   "from workarounds", "import workarounds")
BARE = ":bare"  # the key of the bare copy's run among the workaround ids
# Where the bare copy's processes record what they read; not named XPU_WORKAROUNDS_*, which tests
# clear from their children's environments.
READS = "REMOVAL_PROOF_READS"
# The bare copy's sitecustomize: every Python process started with the copy on PYTHONPATH records
# each watched file it opens and each shipped workaround module it imports, with the test that
# ran (pytest's PYTEST_CURRENT_TEST, which child processes inherit).
RECORDER = '''"""Written by the removal proof into its bare copy (tests/support/removal_proof.py)."""
import json
import os
import sys
import threading


def _record():
    log = os.environ.get("REMOVAL_PROOF_READS")
    if not log:
        return
    with open(log + ".watched", encoding="utf-8") as listed:
        watched = json.load(listed)
    paths, modules = frozenset(watched["paths"]), frozenset(watched["modules"])
    busy = threading.local()

    def hook(event, args):
        if getattr(busy, "on", False) or event not in ("open", "import"):
            return
        if event == "import":
            what = args[0]
            if what not in modules:
                return
        else:
            if args[0] is None or isinstance(args[0], int):
                return
            try:
                what = os.path.abspath(os.fsdecode(args[0]))
            except (TypeError, ValueError, OSError):
                return
            if what not in paths:
                return
        busy.on = True
        try:
            with open(log, "a", encoding="utf-8") as out:
                out.write(json.dumps([os.environ.get("PYTEST_CURRENT_TEST", "(collection)"), what]) + "\\n")
        finally:
            busy.on = False

    sys.addaudithook(hook)


_record()
'''
PROOF_TEST = "test_the_fast_suite_passes_on_a_copy_without_the_workaround"
BARE_TEST = "test_the_files_the_copies_skip_read_nothing_a_removal_changes"
STARTED = pytest.StashKey["Proofs"]()  # the session's proofs, started by tests/conftest.py


def _copied(destination: Path, paths: list[str]) -> None:
    for path in paths:
        (destination / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, destination / path)


def _committed(destination: Path, message: str) -> Path:
    """``destination`` committed to a fresh git repository (the tests read ``git ls-files``)."""
    git = ["git", "-C", str(destination), "-c", "user.name=removal proof", "-c", "user.email=proof@localhost"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", message]):
        subprocess.run([*git, *command], check=True, capture_output=True)
    return destination


def _removals(workaround_ids: list[str], paths: list[str]) -> list[Removal]:
    """Each of ``workaround_ids``' removals from this checkout's working tree, as the bot computes it."""
    text = (ROOT / MANIFEST_PATH).read_text(encoding="utf-8")
    snapshot = Snapshot("main", "0" * 40, "0" * 40, {p: blob_sha(p) for p in paths}, {}, text,
                        read=lambda path: (ROOT / path).read_text(encoding="utf-8"))
    manifest = reader.load(ROOT / MANIFEST_PATH)
    return [compute_removal(snapshot, manifest.get(workaround_id)) for workaround_id in workaround_ids]


def removed_copy(workaround_id: str, destination: Path, mypy_cache: Path | None = None) -> Path:
    """This checkout's tracked files (as in the working tree) with ``workaround_id``'s removal
    applied, committed to a fresh git repository."""
    paths = tracked_paths()
    _copied(destination, paths)
    (removal,) = _removals([workaround_id], paths)
    for path in removal.deleted:
        (destination / path).unlink()
    for path, written in removal.written.items():
        (destination / path).write_text(written, encoding="utf-8")
    _committed(destination, f"Retire workaround {workaround_id}")
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


def changed_by_removals() -> set[str]:
    """Every path that some shipped workaround's removal deletes or writes."""
    removals = _removals(list(reader.load(ROOT / MANIFEST_PATH).ids), tracked_paths())
    return {path for removal in removals for path in (*removal.deleted, *removal.written)}


def bare_copy(destination: Path, changed: set[str]) -> Path:
    """This checkout's tracked files less ``changed``, committed to a fresh git repository, with the
    recorder (``RECORDER``) as its ``sitecustomize`` (untracked) and, beside it, what the recorder
    watches: the paths ``changed`` in the copy and in this checkout, the shipped workaround modules."""
    _copied(destination, [path for path in tracked_paths() if path not in changed])
    _committed(destination, "Without every file a removal changes")
    (destination / "sitecustomize.py").write_text(RECORDER, encoding="utf-8")
    watched = {"paths": sorted(os.path.abspath(root / path) for root in (destination, ROOT) for path in changed),
               "modules": sorted(w.module for w in reader.load(ROOT / MANIFEST_PATH).workarounds)}
    (destination.parent / "reads.watched").write_text(json.dumps(watched), encoding="utf-8")
    return destination


def proved_files(changed: set[str]) -> tuple[list[str], list[str]]:
    """The test files of this checkout the copies run (``READS_SHIPPED`` and the workarounds' own,
    which their removals delete) and those the bare copy runs (all others but ``FROZEN_ONLY``)."""
    tests = [path for path in tracked_paths() if re.fullmatch(r"tests/test_[^/]*\.py", path)]
    on_copies = [path for path in tests if path in READS_SHIPPED or path in changed]
    return on_copies, [path for path in tests if path not in on_copies and path not in FROZEN_ONLY]


def fast_suite(copy: Path, files: list[str] | tuple[Path, ...], running: set[subprocess.Popen[str]] | None = None,
               variables: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The fast part of the test ``files`` on ``copy`` (those that exist there), the copy's code first
    on ``PYTHONPATH``; the process is in ``running`` while it runs (to be stopped when the session
    ends early)."""
    running = set() if running is None else running
    # Each copy has its own user cache directory: the copies run at the same time.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(copy), os.environ.get("PYTHONPATH")])),
           "XDG_CACHE_HOME": str(copy.parent / "cache"), **(variables or {})}
    present = [str(file) for file in files if (copy / file).is_file()]
    # At a lower priority than the session's own tests: a copy takes what they leave of the
    # machine (the slow tests leave a core idle for minutes) instead of slowing them down.
    command = [*NICE, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", FAST,
               f"--basetemp={copy.parent / 'pytest'}", *present]
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


@dataclass(frozen=True)
class BareRun:
    """The bare copy's run: pytest's result, and each (test, file or module) its processes read of
    what a removal changes."""

    result: subprocess.CompletedProcess[str]
    reads: list[tuple[str, str]]


def bare_suite(copy: Path, files: list[str], running: set[subprocess.Popen[str]]) -> BareRun:
    log = copy.parent / "reads"
    result = fast_suite(copy, files, running, {READS: str(log)})
    lines = log.read_text(encoding="utf-8").splitlines() if log.is_file() else []
    return BareRun(result, sorted({(test.removesuffix(" (call)").removesuffix(" (setup)").removesuffix(" (teardown)"),
                                    what) for test, what in map(json.loads, lines)}))


class Proofs:
    """The copies of ``keys`` (workaround ids, and ``BARE`` for the bare copy), made in the
    background from the checkout as it is now, then tested ``AT_ONCE`` at a time; ``result(id)``
    and ``bare()`` wait for one."""

    def __init__(self, keys: list[str]) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="removal-proof-"))
        self.pool = ThreadPoolExecutor(max_workers=AT_ONCE, thread_name_prefix="removal-proof")
        self.starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="removal-proof-copies")
        self.started: dict[str, Future[Any]] = {}
        self.running: set[subprocess.Popen[str]] = set()
        self.copied = self.starter.submit(self._start, list(keys))

    def _start(self, keys: list[str]) -> None:
        changed = changed_by_removals()
        on_copies, on_bare = proved_files(changed)
        if BARE in keys:  # first: it is the shortest, and what it finds holds for every copy
            copy = bare_copy(self.directory / "bare" / "repository", changed)
            self.started[BARE] = self.pool.submit(bare_suite, copy, on_bare, self.running)
        cache = mypy_cache(self.directory / "mypy-cache")
        for workaround_id in (key for key in keys if key != BARE):
            copy = removed_copy(workaround_id, self.directory / f"without-{workaround_id}" / "repository", cache)
            self.started[workaround_id] = self.pool.submit(fast_suite, copy, on_copies, self.running)

    def result(self, workaround_id: str) -> subprocess.CompletedProcess[str]:
        self.copied.result()  # raises what making the copies raised
        return cast(subprocess.CompletedProcess[str], self.started[workaround_id].result())

    def bare(self) -> BareRun:
        self.copied.result()
        return cast(BareRun, self.started[BARE].result())

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
    """What the proof tests among ``items`` wait for: the workarounds whose copy they test, and
    ``BARE`` when the bare copy's test is among them."""
    names = {getattr(item, "originalname", "") for item in items}
    return [item.callspec.params["workaround_id"] for item in items if getattr(item, "originalname", "") == PROOF_TEST] \
        + ([BARE] if BARE_TEST in names else [])
