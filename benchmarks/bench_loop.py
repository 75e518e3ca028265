"""A contributor's loop on a warm release cache, as whole processes: ``check --supported`` over every
supported vLLM release, the same for one workaround (what ``.ci/check-workaround`` runs), and a
release's census kept in the cache.

The cache is the user's own release cache (``xpu-workarounds cache`` shows it), the one the CLI and
the tests share: a run first makes sure it holds every supported release (a cold one downloads
some 800 MB; that run is reported, not counted). Baselines in the same run, interleaved:
``pip index versions vllm`` (the one index question ``check --supported`` asks: what no warm run
can go below) and ``census vllm==X`` with its kept result removed before each run (the census
read from the cached reading: what the result cache saves).
"""

from __future__ import annotations

import glob
import os

from benchmarks.measure import child_env, interleaved, ms, time_process, venv_script

RELEASE = "0.34.0"
WORKAROUND = "pp-broadcast-sync"
SUPPORTED_LIMIT = 30.0  # seconds: a warm check --supported over the support range
CENSUS_LIMIT = 1.0  # seconds: a census whose result is kept


def _census_results() -> str:
    from tracker import paths

    return os.path.join(paths.cache_dir(), "releases", "census", "*.json")


def run(quick: bool = False) -> dict:
    runs = 3 if quick else 5
    script, pip = venv_script("xpu-workarounds"), venv_script("pip")
    env = child_env({})
    supported = [script, "check", "--supported", "--quiet", "--json"]
    one = [*supported, "--workaround", WORKAROUND]
    census = [script, "census", "--quiet", "--json", f"vllm=={RELEASE}"]
    warming = time_process(supported, env, check=False)  # fills a cold cache; a warm one: one more sample
    time_process(census, env, check=False)

    def census_computed() -> object:
        for kept in glob.glob(_census_results()):
            os.unlink(kept)
        return time_process(census, env, check=False)

    samples = interleaved({"supported": lambda: time_process(supported, env, check=False),
                           "one": lambda: time_process(one, env, check=False),
                           "index": lambda: time_process([pip, "index", "versions", "vllm"], env, check=False),
                           "census": lambda: time_process(census, env, check=False),
                           "census computed": census_computed}, runs=runs, warmup=0)
    time_process(census, env, check=False)  # leaves the result kept, as a user's cache has it
    every, alone, index, kept, computed = (samples[name] for name in ("supported", "one", "index", "census",
                                                                        "census computed"))
    targets = [
        {"target": f"check --supported, warm, median <= {SUPPORTED_LIMIT:.0f} s",
         "figure": f"{ms(every.median)} wall, {ms(every.cpu_median)} CPU", "met": every.median <= SUPPORTED_LIMIT},
        {"target": f"census vllm=={RELEASE}, its result kept, median <= {CENSUS_LIMIT:.0f} s",
         "figure": f"{ms(kept.median)} wall, {ms(kept.cpu_median)} CPU", "met": kept.median <= CENSUS_LIMIT},
    ]
    lines = [
        "a contributor's loop, warm release cache: whole processes (CPU = user+system of the child)",
        f"  check --supported (every release){ms(every.median):>28} wall  {ms(every.cpu_median):>10} CPU"
        f"   ({ms(every.spread[0])} .. {ms(every.spread[1])})",
        f"  check --supported --workaround {WORKAROUND}{ms(alone.median):>12} wall  {ms(alone.cpu_median):>10} CPU",
        f"  baseline: pip index versions vllm{ms(index.median):>27} wall  {ms(index.cpu_median):>10} CPU",
        f"  census vllm=={RELEASE}, result kept{ms(kept.median):>25} wall  {ms(kept.cpu_median):>10} CPU",
        f"  baseline: the same, result computed{ms(computed.median):>25} wall  {ms(computed.cpu_median):>10} CPU"
        f"   (kept / computed: {kept.median / computed.median:.2f})",
        f"  first check --supported of this run (cold cache: downloads){ms(warming.wall):>6} wall",
    ]
    return {"section": "loop (warm release cache)", "lines": lines, "targets": targets,
            "figures": {"warming": {"wall_s": warming.wall, "cpu_s": warming.cpu}, "supported": every.as_json(),
                        "one": alone.as_json(), "index": index.as_json(), "census_kept": kept.as_json(),
                        "census_computed": computed.as_json()}}
