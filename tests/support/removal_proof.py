"""The full removal proof: a removal's copy of this checkout runs the fast tests (CONTRIBUTING.md "How a removal is proven").

The weekly workflow's ``prove`` job (.github/workflows/retire-workarounds.yml) runs this module as a command
before the bot opens removal PRs: for each retirable workaround, ``removed_copy`` applies its removal, as
``retire --open-prs`` computes it, to a copy of the git-tracked files, and ``pytest_on`` runs the fast tests
there. What it writes (``--out``) is what ``retire --open-prs --proofs`` reads (tracker/retire/proofs.py)::

    python tests/support/removal_proof.py ID [ID ...] [--ids JSON] [--only ID] [--out FILE]

On every push, the static check (tests/test_removal_leftovers.py) sees in seconds what a removal would
leave importing or naming what it deletes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: tests/ holds the ``support`` package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support import repository, vllm_harness
from support.repository import ROOT
from tracker.model import reader
from tracker.retire import MANIFEST_PATH, RemovalError, Snapshot, blob_sha, compute_removal
from tracker.retire.removal import owned_paths

SLOW = ("vllm_e2e", "ray_cluster", "release_matrix")  # the markers of the slow tests: a copy does not run them
FAST = "not slow_session"  # the fast tests: tests/conftest.py marks the slow ones, and those sharing their fixtures
TIMEOUT = 1800.0  # seconds a copy's tests may take
Completed = subprocess.CompletedProcess[str]


def _git_files(root: Path, *which: str) -> list[str]:
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", *which], capture_output=True, check=True)
    return [name for name in listed.stdout.decode().split("\0") if name]


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


def mypy_cache(into: Path, source: Path = ROOT) -> Path:
    """``source``'s mypy cache, brought up to date (the code-quality test then finds it so), copied to ``into``."""
    try:
        with repository.mypy_cache(source) as cache:
            subprocess.run([sys.executable, "-m", "mypy"], cwd=source, capture_output=True, timeout=900)
            shutil.copytree(cache, into, ignore=shutil.ignore_patterns("held.lock"))
    except (OSError, shutil.Error, subprocess.TimeoutExpired):  # no cache: the copies start from none
        shutil.rmtree(into, ignore_errors=True)
    return into


def pytest_on(copy: Path, *arguments: str, timeout: float = TIMEOUT) -> Completed:
    """pytest with ``arguments`` on ``copy``: its code first on PYTHONPATH, a user cache of its own, the tests'
    shared; stopped (with its workers) after ``timeout`` seconds, returning 124 as ``timeout(1)`` does."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(copy), os.environ.get("PYTHONPATH")])),
           "XDG_CACHE_HOME": str(copy.parent / "cache"), "XPU_WORKAROUNDS_TEST_CACHE": str(vllm_harness.cache_root())}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={copy.parent / 'tmp'}", *arguments]
    with subprocess.Popen(command, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            return subprocess.CompletedProcess(command, 124, stdout, stderr + f"\nstopped after {timeout:g} s")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def why_failed(result: Completed) -> str:
    """One line: pytest's summary and the first tests that failed (the job's log has the whole report)."""
    if result.returncode == 124:
        return f"the fast tests did not finish in {TIMEOUT / 60:g} minutes"
    summary = next((line.strip("= ") for line in reversed(result.stdout.splitlines())
                    if re.fullmatch(r"=*\s*\d+ \w+.* in [\d.]+s( \([\d:]+\))?\s*=*", line)), "")
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", result.stdout, flags=re.M)
    named = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
    return "; ".join(filter(None, [summary or f"pytest exited {result.returncode}", named]))


def prove(workaround_ids: list[str], *tests: str, source: Path = ROOT, seed_mypy: bool = True) -> dict[str, object]:
    """Each workaround's removal applied to a copy of ``source``, the fast ``tests`` run there, one copy after
    another: ``{"proven": [...], "failed": {id: why}}`` (tracker/retire/proofs.py reads it). ``seed_mypy``:
    each copy starts from ``source``'s mypy cache, brought up to date once (the code-quality test runs mypy)."""
    proven: list[str] = []
    failed: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="removal-proof-") as scratch:
        cache = mypy_cache(Path(scratch) / "mypy-cache", source) if workaround_ids and seed_mypy else None
        for workaround_id in workaround_ids:
            try:
                copy = removed_copy(workaround_id, Path(scratch) / workaround_id / "repository", cache, source)
            except (Untracked, RemovalError, KeyError) as error:
                failed[workaround_id] = f"the copy could not be made: {error}"
                continue
            result = pytest_on(copy, "-m", FAST, *(tests or ("-n", "auto", "tests")))
            print(f"::group::without {workaround_id}: exit {result.returncode}\n{result.stdout[-20000:]}"
                  f"{result.stderr[-5000:]}\n::endgroup::", flush=True)
            if result.returncode == 0:
                proven.append(workaround_id)
            else:
                failed[workaround_id] = why_failed(result)
    return {"proven": proven, "failed": failed}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Apply each workaround's removal to a copy of this checkout and run "
                                                 "the fast tests there.")
    parser.add_argument("workaround_ids", nargs="*", metavar="ID")
    parser.add_argument("--ids", default="[]", help="more ids, as a JSON list (the retire action's retirable output)")
    parser.add_argument("--only", default="", help="only this id, if among them ('': all)")
    parser.add_argument("--out", type=Path, help="write the result here as JSON (default: standard output)")
    arguments = parser.parse_args(argv)
    try:
        listed = json.loads(arguments.ids or "[]")  # empty: the judge job wrote no output
    except ValueError:
        listed = None
    if not (isinstance(listed, list) and all(isinstance(item, str) for item in listed)):
        parser.error("--ids must be a JSON list of workaround ids")
    ids = [i for i in dict.fromkeys([*arguments.workaround_ids, *listed]) if not arguments.only or i == arguments.only]
    text = json.dumps(prove(ids), separators=(",", ":"))
    if arguments.out is None:
        print(text)
    else:
        arguments.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
