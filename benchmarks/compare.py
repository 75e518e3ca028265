"""Run-time cost of this checkout against earlier commits, interleaved in one run.

    .venv/bin/python benchmarks/compare.py [--runs 7] [--scale] COMMIT [COMMIT ...]

Each commit is checked out into a temporary worktree (this checkout is measured as it is
on disk, uncommitted changes included). Per round, for each of them in turn: the plugin in
a vLLM process (``plugin_child.py`` with vLLM 0.22.1's source, as ``bench_plugin``) where
nothing applies (replayed), with every workaround forced as a later process runs it and as
a first process runs it (an empty cache per process), and ``status --json`` as a whole
process. Medians and minimums of wall time in ms, and medians of CPU time (the measured thread's
for the plugin, the whole process's for ``status``; steadier on a shared machine): "no figure worse
than before" is read from here (``compare.py b78eba4`` against the commit before the fast path's
rework). ``--scale``: with the generated 500-workaround manifest (``scale_manifest.py``) instead of
the shipped one, the same manifest for every commit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import scale_manifest
from benchmarks.bench_plugin import OLDEST_RELEASE, vllm_environment
from benchmarks.measure import REPO_ROOT, Timing, child_env, time_process
from tracker.model.reader import load

MODES = ("replayed", "forced, later process", "forced, first process", "status --json")


def plugin(python: Path, source: Path, root: Path, mode: str, manifest: Path | None) -> Timing:
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-compare-") as cache:
        modules = [str(scale_manifest.modules_path(manifest))] if manifest is not None else []
        variables = {"PYTHONPATH": ":".join([str(source), *modules, str(root)]), "VLLM_NO_USAGE_STATS": "1",
                     "DO_NOT_TRACK": "1", "VIRTUAL_ENV": None, "XPU_WORKAROUNDS_CACHE_DIR": cache,
                     "XPU_WORKAROUNDS_MANIFEST": str(manifest) if manifest is not None else None}
        if mode.startswith("forced"):
            variables.update(XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_FORCE=",".join(load(manifest).ids),
                             XPU_WORKAROUNDS_ASSUME=f"vllm=={OLDEST_RELEASE}")
        command = [str(python), str(root / "benchmarks" / "plugin_child.py")]
        if mode != "forced, first process":
            subprocess.run(command, env=child_env(variables), capture_output=True)  # stores the answer
        result = subprocess.run(command, env=child_env(variables), capture_output=True, text=True)
        lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
        if result.returncode != 0 or not lines:
            raise RuntimeError(f"plugin_child in {root} exited {result.returncode}: {result.stderr[-2000:]}")
        measured = json.loads(lines[-1])
        return Timing(measured["register_s"], measured["register_cpu_s"])


def status(root: Path, manifest: Path | None) -> Timing:
    return time_process([sys.executable, "-m", "tracker.commands", "status", "--json"], cwd=root, env=child_env(
        {"PYTHONPATH": str(root), "XPU_WORKAROUNDS_MANIFEST": str(manifest) if manifest is not None else None}))


def measure(root: Path, mode: str, python: Path, source: Path, manifest: Path | None) -> Timing:
    return status(root, manifest) if mode == "status --json" else plugin(python, source, root, mode, manifest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commits", nargs="+", help="earlier commits to compare this checkout with")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--scale", action="store_true", help="the generated 500-workaround manifest")
    arguments = parser.parse_args()
    python, source = vllm_environment()
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-worktrees-") as directory:
        manifest = scale_manifest.generate(Path(directory) / "scale" / "scale.toml") if arguments.scale else None
        roots = {}
        for commit in arguments.commits:
            root = Path(directory) / commit
            subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", str(root), commit],
                           check=True, capture_output=True)
            roots[commit] = root
        roots["this checkout"] = REPO_ROOT
        try:
            samples: dict[str, dict[str, list[Timing]]] = {name: {mode: [] for mode in MODES} for name in roots}
            for round_number in range(arguments.runs + 1):  # the first round warms bytecode and is dropped
                for name, root in roots.items():
                    for mode in MODES:
                        timing = measure(root, mode, python, source, manifest)
                        if round_number:
                            samples[name][mode].append(timing)
            print(f"medians (min) of wall time, and medians of CPU time, in ms of {arguments.runs} interleaved rounds"
                  f"{' with the 500-workaround manifest' if manifest else ''}; load average "
                  f"{', '.join(f'{load:.1f}' for load in os.getloadavg())}")
            for mode in MODES:
                print(f"  {mode}: " + "; ".join(
                    f"{name} {statistics.median(t.wall for t in values[mode]) * 1e3:.1f} "
                    f"({min(t.wall for t in values[mode]) * 1e3:.1f}), "
                    f"CPU {statistics.median(t.cpu or 0.0 for t in values[mode]) * 1e3:.1f}"
                    for name, values in samples.items()))
        finally:
            for root in roots.values():
                if root != REPO_ROOT:
                    subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(root)],
                                   capture_output=True)


if __name__ == "__main__":
    main()
