"""``census vllm==X`` as whole processes, its sdist cached: the release's source verified against
its recorded sha256 and read in memory (about 3,400 Python files), the files that say ``xpu``
tokenized and parsed. The baseline, interleaved in the same run, is ``check vllm==X`` on the same
cached sdist (the same verification and decompression, a few files read); ``census --since``
reads two releases.

The releases are real ones from the configured index (vLLM 0.34.0, a 51 MB sdist, and 0.33.0),
fetched once into a temporary cache directory that is removed afterwards.
"""

from __future__ import annotations

import shutil
import tempfile

from benchmarks.measure import child_env, interleaved, ms, time_process, venv_script

RELEASE = "0.34.0"
SINCE = "0.33.0"
LIMIT = 5.0  # seconds: a release's census, its source cached


def run(quick: bool = False) -> dict:
    runs = 3 if quick else 7
    script = venv_script("xpu-workarounds")
    cache = tempfile.mkdtemp(prefix="xpu-workarounds-bench-census-")
    env = child_env({"XPU_WORKAROUNDS_CACHE_DIR": cache})
    census = [script, "census", "--quiet", "--json", f"vllm=={RELEASE}"]
    since = [*census, "--since", f"vllm=={SINCE}"]
    check = [script, "check", "--quiet", "--json", f"vllm=={RELEASE}"]
    try:
        first = time_process(since, env, check=False)  # fetches both releases into the empty cache
        samples = interleaved({"census": lambda: time_process(census, env),
                               "since": lambda: time_process(since, env),
                               "check": lambda: time_process(check, env, check=False)}, runs=runs, warmup=0)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    taken, both, baseline = samples["census"], samples["since"], samples["check"]
    target = {"target": f"census vllm=={RELEASE}, its sdist cached, median <= {LIMIT:.0f} s",
              "figure": f"{ms(taken.median)} wall, {ms(taken.cpu_median)} CPU", "met": taken.median <= LIMIT}
    ratio = taken.median / baseline.median
    lines = [
        f"census vllm=={RELEASE}: whole processes, sdists cached (CPU = user+system of the child)",
        f"  census, median of {runs}{ms(taken.median):>36} wall  {ms(taken.cpu_median):>10} CPU"
        f"   ({ms(taken.spread[0])} .. {ms(taken.spread[1])})",
        f"  census --since vllm=={SINCE} (two releases){ms(both.median):>19} wall  {ms(both.cpu_median):>10} CPU",
        f"  baseline: check vllm=={RELEASE}{ms(baseline.median):>31} wall  {ms(baseline.cpu_median):>10} CPU"
        f"   (census / check: {ratio:.2f})",
        f"  first run (--since, empty cache: pip fetches both){ms(first.wall):>12} wall",
    ]
    return {"section": "census (release sources cached)", "lines": lines, "targets": [target],
            "figures": {"first_since": {"wall_s": first.wall, "cpu_s": first.cpu}, "census": taken.as_json(),
                        "since": both.as_json(), "check": baseline.as_json(), "census_over_check": ratio}}
