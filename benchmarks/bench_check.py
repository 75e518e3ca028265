"""``check vllm==X`` as whole processes: the first run (pip fetches the sdist into an empty cache,
from the index or pip's own cache) and the runs after it (the cached sdist verified against its
recorded sha256, unpacked, checked).

The release is a real one from the configured index (vLLM 0.32.0: a 45 MB sdist), fetched
once into a temporary cache directory that is removed afterwards.
"""

from __future__ import annotations

import shutil
import tempfile

from benchmarks.measure import child_env, interleaved, ms, time_process, venv_script

RELEASE = "0.32.0"
LIMIT = 3.0  # seconds: a second check of the same release


def run(quick: bool = False) -> dict:
    runs = 3 if quick else 10
    script = venv_script("xpu-workarounds")
    cache = tempfile.mkdtemp(prefix="xpu-workarounds-bench-check-")
    env = child_env({"XPU_WORKAROUNDS_CACHE_DIR": cache})
    command = [script, "check", "--quiet", "--json", f"vllm=={RELEASE}"]
    try:
        first = time_process(command, env, check=False)  # exit 3 would be drift: a figure all the same
        samples = interleaved({"again": lambda: time_process(command, env, check=False)}, runs=runs, warmup=0)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    again = samples["again"]
    met = again.median <= LIMIT
    target = {"target": f"check vllm=={RELEASE} again (sdist cached) median <= {LIMIT:.0f} s",
              "figure": f"{ms(again.median)} wall, {ms(again.cpu_median)} CPU", "met": met}
    lines = [
        f"check vllm=={RELEASE}: whole processes (CPU = user+system of the child, pip's included)",
        f"  first run (empty cache: pip downloads it, or takes it from its own cache){ms(first.wall):>12} wall  {ms(first.cpu):>10} CPU",
        f"  again, median of {runs}{ms(again.median):>31} wall  {ms(again.cpu_median):>10} CPU"
        f"   ({ms(again.spread[0])} .. {ms(again.spread[1])})",
    ]
    return {"section": "check (release sources cached)", "lines": lines, "targets": [target],
            "figures": {"first": {"wall_s": first.wall, "cpu_s": first.cpu}, "again": again.as_json()}}
