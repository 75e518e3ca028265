"""How every benchmark here measures: repeated runs, medians, ratios within one run.

The machine these run on is shared and noisy, so an absolute time is only an
indication. Each figure is a median over repeated runs, and each target that can
be is stated as a ratio against a baseline measured in the same run, with the
measured runs interleaved (A, B, A, B, ...) so that a burst of load hits both.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Samples:
    """Repeated timings of one thing, in seconds: wall time and, for processes, CPU time.

    CPU time (user + system of the child) is far less disturbed by other load on
    the machine than wall time, so it is shown beside it as the steadier figure.
    """

    name: str
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def cpu_median(self) -> float | None:
        return statistics.median(self.cpu_seconds) if self.cpu_seconds else None

    @property
    def spread(self) -> tuple[float, float]:
        return min(self.seconds), max(self.seconds)

    def as_json(self) -> dict:
        low, high = self.spread
        return {"median_s": self.median, "min_s": low, "max_s": high, "cpu_median_s": self.cpu_median,
                "runs": len(self.seconds)}


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float | None = None


def child_env(extra: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The environment for a measured child process.

    Bytecode caching stays on (``PYTHONDONTWRITEBYTECODE`` is dropped): a user's
    installed copy has its ``.pyc`` files, and compiling the sources on every run
    would measure the compiler, not the project.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def time_process(command: Sequence[str], env: Mapping[str, str], cwd: Path | None = None,
                 check: bool = True) -> Timing:
    """Wall and CPU time of one whole process, start to exit; its output is discarded.

    ``check``: a non-zero exit is an error (``pip show`` of a package that is not
    installed exits 1 after doing all its work, so its baseline does not check).
    """
    started = time.perf_counter()
    process = subprocess.Popen(list(command), env=dict(env), cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    process.stderr.close()
    if check and process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {process.returncode}: "
                           f"{stderr.decode(errors='replace')[-2000:]}")
    return Timing(elapsed, usage.ru_utime + usage.ru_stime)


def interleaved(commands: Mapping[str, Callable[[], Timing | float]], runs: int, warmup: int = 1
                ) -> dict[str, Samples]:
    """Each callable ``runs`` times (after ``warmup`` unrecorded rounds), round-robin."""
    samples = {name: Samples(name) for name in commands}
    for round_number in range(warmup + runs):
        for name, measure in commands.items():
            timing = measure()
            if round_number < warmup:
                continue
            if isinstance(timing, Timing):
                samples[name].seconds.append(timing.wall)
                if timing.cpu is not None:
                    samples[name].cpu_seconds.append(timing.cpu)
            else:
                samples[name].seconds.append(timing)
    return samples


def per_call(function: Callable[[], object], calls: int, repeats: int) -> list[float]:
    """Seconds per call of ``function``: ``repeats`` samples, each averaged over ``calls`` calls."""
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            function()
        timings.append((time.perf_counter() - started) / calls)
    return timings


def test_support(name: str) -> Any:
    """The test helper module ``tests/support/<name>.py`` (the cached vLLM environments, the
    local Ray cluster), imported with ``tests/`` on ``sys.path`` for that import only."""
    import importlib

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    try:
        return importlib.import_module(f"support.{name}")
    finally:
        sys.path.remove(str(REPO_ROOT / "tests"))


def venv_script(name: str) -> str:
    """A console script of the interpreter running the benchmarks (its venv's ``bin``)."""
    candidate = Path(sys.executable).parent / name
    if not candidate.exists():
        raise FileNotFoundError(f"{candidate} not found: install the project in this venv (pip install -e .)")
    return str(candidate)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.3f} µs"


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"
