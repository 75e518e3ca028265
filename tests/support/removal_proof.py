"""The removal proof (CONTRIBUTING.md "How a removal is proven"): every removal PR passes the tests.

A test that reads what a removal changes (``changed``) is marked ``reads_shipped``; a workaround's own tests are
marked by their place. ``proofs`` applies each removal, as ``retire --open-prs`` computes it, to a copy of this
checkout and runs the marked fast tests there. ``Catch``, a plugin of every session, fails an unmarked test that
reads any of it, as every Python process of the session records (tests/support/recorder/sitecustomize.py)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from support import repository, vllm_harness
from support.recorder import sitecustomize as recorder
from support.repository import ROOT
from tracker.model import reader
from tracker.model.manifest import ManifestError
from tracker.retire import DOCS_PATH, MANIFEST_PATH, Snapshot, blob_sha, compute_removal
from tracker.retire.removal import README, owned_paths

MARKER, AT_ONCE = "reads_shipped", 2  # AT_ONCE: copies tested at the same time (the machine has 2 cores)
SLOW = ("vllm_e2e", "ray_cluster", "release_matrix")  # the markers of what a copy does not run
ON_A_COPY = " and ".join([MARKER, "not removal_proof", *(f"not {marker}" for marker in SLOW)])
Completed = subprocess.CompletedProcess[str]


def _git_files(root: Path, *which: str) -> list[str]:
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", *which], capture_output=True, check=True)
    return [name for name in listed.stdout.decode().split("\0") if name]


def changed(root: Path = ROOT) -> tuple[set[str], set[str]]:
    """What a removal can change in ``root`` (absolute paths): the manifest, the catalogue, README and
    every file a workaround owns, tracked by git or not (git may not be on PATH); and the workarounds' module names."""
    try:
        workarounds = reader.load(root / MANIFEST_PATH).workarounds
    except ManifestError:  # the tests that lint it say what is wrong
        workarounds = ()
    files = [path.relative_to(root).as_posix() for path in (*(root / "workarounds").rglob("*"), *(root / "tests").rglob("*"))]
    owned = {path for w in workarounds for path in owned_paths(w, files)}
    return {str(root / path) for path in {MANIFEST_PATH, DOCS_PATH, README, *owned}}, {w.module for w in workarounds}


class Untracked(Exception):
    """A workaround's file exists but git does not track it: the bot's removal would not see it."""


def removed_copy(workaround_id: str, destination: Path, mypy_cache: Path | None = None, source: Path = ROOT) -> Path:
    """``source``'s tracked files with ``workaround_id``'s removal applied as the bot computes it, committed anew."""
    manifest, paths = reader.load(source / MANIFEST_PATH), _git_files(source)
    untracked = {p for w in manifest.workarounds for p in owned_paths(w, _git_files(source, "--others", "--exclude-standard"))}
    if untracked:
        raise Untracked("; ".join(f"{path}: not tracked by git: run git add {path}" for path in sorted(untracked)))
    snapshot = Snapshot("main", "0" * 40, "0" * 40, {p: blob_sha(p) for p in paths}, {},
                        (source / MANIFEST_PATH).read_text(encoding="utf-8"),
                        read=lambda path: (source / path).read_text(encoding="utf-8"))
    removal = compute_removal(snapshot, manifest.get(workaround_id))
    for path in paths:
        if path not in removal.deleted:
            (destination / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / path, destination / path)
    for path, written in removal.written.items():
        (destination / path).write_text(written, encoding="utf-8")
    git = ["git", "-C", str(destination), "-c", "user.name=removal proof", "-c", "user.email=proof@localhost"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", f"Retire workaround {workaround_id}"]):
        subprocess.run([*git, *command], check=True, capture_output=True)
    # Untracked, so not committed: mypy checks each module against its source again, and redoes only what changed.
    if mypy_cache is not None and mypy_cache.is_dir():
        shutil.copytree(mypy_cache, destination / ".mypy_cache")
    return destination


def mypy_cache(into: Path) -> Path:
    """The checkout's mypy cache, brought up to date (the code-quality test then finds it so), copied to ``into``."""
    try:
        with repository.mypy_cache() as cache:
            subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, timeout=900)
            shutil.copytree(cache, into, ignore=shutil.ignore_patterns("held.lock"))
    except (OSError, shutil.Error):  # the checkout's cache cannot be written: the copies start from none
        shutil.rmtree(into, ignore_errors=True)
    return into


def pytest_on(copy: Path, *arguments: str, running: set[subprocess.Popen[str]] | None = None) -> Completed:
    """pytest with ``arguments`` on ``copy``: its code first on PYTHONPATH, a user cache of its own, the tests' shared."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(copy), os.environ.get("PYTHONPATH")])),
           "XDG_CACHE_HOME": str(copy.parent / "cache"), "XPU_WORKAROUNDS_TEST_CACHE": str(vllm_harness.cache_root())}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={copy.parent / 'tmp'}", *arguments]
    with subprocess.Popen(command, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        running = set() if running is None else running
        running.add(process)
        try:
            stdout, stderr = process.communicate()
        finally:
            running.discard(process)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@contextlib.contextmanager
def proofs(workaround_ids: list[str]) -> Iterator[dict[str, Future[Completed]]]:
    """Each workaround's copy, its marked fast tests run ``AT_ONCE`` copies at a time from now on;
    when it ends, copies not yet tested are dropped, and copies being tested stopped."""
    directory, running = Path(tempfile.mkdtemp(prefix="removal-proof-")), set[subprocess.Popen[str]]()
    cache = mypy_cache(directory / "mypy-cache") if workaround_ids else None

    def prove(workaround_id: str) -> Completed:
        copy = removed_copy(workaround_id, directory / workaround_id / "repository", cache)
        return pytest_on(copy, "-m", ON_A_COPY, "tests", running=running)

    with ThreadPoolExecutor(max_workers=AT_ONCE, thread_name_prefix="removal-proof") as pool:
        try:
            yield {workaround_id: pool.submit(prove, workaround_id) for workaround_id in workaround_ids}
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            for process in list(running):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
    shutil.rmtree(directory, ignore_errors=True)


class Catch:
    """Fails each unmarked test that reads what a removal changes, in its own process or a child's, while
    it runs or while its module is imported; a pytest plugin (tests/conftest.py registers it)."""

    def __init__(self, directory: Path) -> None:
        self.owned, self.modules = changed()  # a test file among those paths is a workaround's own
        self.log = directory / "reads"
        (directory / "reads.watched").write_text("".join(f"{what}\n" for what in sorted(self.owned | self.modules)))
        self.offset, self.reads = 0, defaultdict[str, set[str]](set)
        os.environ.pop("PYTEST_CURRENT_TEST", None)  # a session of a test's (a copy's) has tests of its own
        os.environ[recorder.LOG] = str(self.log)  # and the recorder's directory first on PYTHONPATH: children run it
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(recorder.__file__).parent), os.environ.get("PYTHONPATH")]))
        recorder.record(str(self.log), root=str(ROOT))

    def read_by(self, nodeid: str) -> set[str]:
        with open(self.log, "a+", encoding="utf-8") as log:  # created if nothing was recorded yet
            log.seek(self.offset)
            for line in log.readlines():
                test, _, what = line.rstrip("\n").partition("\t")
                self.reads[test].add(what.removeprefix(f"{ROOT}{os.sep}"))
            self.offset = log.tell()
        return self.reads[nodeid]

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> object:
        recorder.collecting = collector.nodeid if isinstance(collector, pytest.Module) else recorder.collecting
        try:
            return (yield)
        finally:
            recorder.collecting = ""

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if str(item.path) in self.owned:
                item.add_marker(MARKER)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> object:
        """An unmarked test runs without the workaround modules imported (put back afterwards), so that importing one
        is seen, however many tests imported it before; and with the tracker's caches empty, so that no read is served from one."""
        if item.get_closest_marker(MARKER):
            return (yield)
        for module in [module for name, module in list(sys.modules.items()) if name.partition(".")[0] == "tracker"]:
            for cached in [value for value in vars(module).values() if hasattr(value, "cache_clear")]:
                cached.cache_clear()
        package = vars(sys.modules["workarounds"]) if "workarounds" in sys.modules else {}
        hidden = {name: sys.modules.pop(name) for name in self.modules if name in sys.modules}
        # ... and not an attribute of their package, which ``from workarounds import x`` reads first
        bound = {name: package.pop(name) for name in (module.rpartition(".")[2] for module in hidden) if name in package}
        try:
            return (yield)
        finally:
            sys.modules.update(hidden)
            package.update(bound)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
        report: pytest.TestReport = yield
        if call.when != "teardown" or item.get_closest_marker(MARKER):
            return report
        read = self.read_by(item.nodeid) | self.read_by(item.nodeid.partition("::")[0])
        if read:
            report.outcome, report.longrepr = "failed", (
                f"{item.nodeid} reads what a removal changes ({', '.join(sorted(read))}) without the {MARKER} marker: "
                f"mark it (@pytest.mark.{MARKER}), and the removal proof runs it on every removal")
        return report
