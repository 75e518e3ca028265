"""Run-time cost of this checkout against earlier commits, interleaved in one run.

    .venv/bin/python benchmarks/compare.py [--runs 7] COMMIT [COMMIT ...]

Each commit is checked out into a temporary worktree (this checkout is measured as it is
on disk, uncommitted changes included). Per round, for each of them in turn: the plugin in
a vLLM process (``plugin_child.py`` with vLLM 0.22.1's source, as ``bench_plugin``) where
nothing applies (replayed), with every workaround forced as a later process runs it and as
a first process runs it (an empty cache per process), and ``status --json`` as a whole
process. Medians and minimums in ms: "no figure worse than before" is read from here
(``compare.py b78eba4`` against the commit before the fast path's rework).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_plugin import OLDEST_RELEASE, vllm_environment
from benchmarks.measure import REPO_ROOT, child_env
from tracker.model.reader import load

MODES = ("replayed", "forced, later process", "forced, first process", "status --json")


def plugin(python: Path, source: Path, root: Path, mode: str) -> float:
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-compare-") as cache:
        variables = {"PYTHONPATH": f"{source}:{root}", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                     "VIRTUAL_ENV": None, "XPU_WORKAROUNDS_CACHE_DIR": cache}
        if mode.startswith("forced"):
            variables.update(XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_FORCE=",".join(load().ids),
                             XPU_WORKAROUNDS_ASSUME=f"vllm=={OLDEST_RELEASE}")
        command = [str(python), str(root / "benchmarks" / "plugin_child.py")]
        if mode != "forced, first process":
            subprocess.run(command, env=child_env(variables), capture_output=True)  # stores the answer
        result = subprocess.run(command, env=child_env(variables), capture_output=True, text=True)
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        if result.returncode != 0 or not lines:
            raise RuntimeError(f"plugin_child in {root} exited {result.returncode}: {result.stderr[-2000:]}")
        seconds: float = json.loads(lines[-1])["register_s"]
        return seconds


def status(root: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tracker.commands", "status", "--json"], env=child_env({"PYTHONPATH": str(root)}),
                   cwd=root, capture_output=True, check=True)
    return time.perf_counter() - started


def measure(root: Path, mode: str, python: Path, source: Path) -> float:
    return status(root) if mode == "status --json" else plugin(python, source, root, mode)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commits", nargs="+", help="earlier commits to compare this checkout with")
    parser.add_argument("--runs", type=int, default=7)
    arguments = parser.parse_args()
    python, source = vllm_environment()
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-worktrees-") as directory:
        roots = {}
        for commit in arguments.commits:
            root = Path(directory) / commit
            subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", str(root), commit],
                           check=True, capture_output=True)
            roots[commit] = root
        roots["this checkout"] = REPO_ROOT
        try:
            samples: dict[str, dict[str, list[float]]] = {name: {mode: [] for mode in MODES} for name in roots}
            for round_number in range(arguments.runs + 1):  # the first round warms bytecode and is dropped
                for name, root in roots.items():
                    for mode in MODES:
                        seconds = measure(root, mode, python, source)
                        if round_number:
                            samples[name][mode].append(seconds)
            print(f"medians (min) in ms of {arguments.runs} interleaved rounds; load average "
                  f"{', '.join(f'{load:.1f}' for load in os.getloadavg())}")
            for mode in MODES:
                print(f"  {mode}: " + "; ".join(
                    f"{name} {statistics.median(values[mode]) * 1e3:.1f} ({min(values[mode]) * 1e3:.1f})"
                    for name, values in samples.items()))
        finally:
            for root in roots.values():
                if root != REPO_ROOT:
                    subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(root)],
                                   capture_output=True)


if __name__ == "__main__":
    main()
