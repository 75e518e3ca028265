"""What the metrics cost a vLLM server: start-up with and without them, and a scrape.

    .venv/bin/python benchmarks/bench_metrics.py [--runs N] [--json PATH]

Start-up: fresh interpreters, as vLLM's API server is when it loads plugins (prometheus_client
already imported), each calling ``tracker.plugin.register()`` and then, in the runs with
metrics, ``tracker.runtime.metrics.install()`` as ``register()`` does in that process; the two
variants interleaved (A, B, A, B ...), medians. The report directory is left unset, so the runs
with metrics also make the private directory the engine core and workers inherit.

Per request: nothing of this package runs on a request (the collector is registered with the
registry and asked only when ``/metrics`` is scraped); the run checks what ``install()`` adds to
the process (one collector, no thread, no import hook) and times one scrape's collection with an
engine core and a worker reporting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.measure import REPO_ROOT, child_env  # bytecode kept, as an installed copy has it

CHILD = textwrap.dedent('''
    import json, sys, threading, time
    import atexit, logging, shutil, tempfile  # noqa: F401 - so has a vLLM server when it loads plugins,
    import prometheus_client  # and this
    started = time.perf_counter()
    import tracker.plugin
    tracker.plugin.register()
    registered = time.perf_counter()
    collectors, threads, finders = (len(prometheus_client.REGISTRY._collector_to_names), threading.active_count(),
                                    len(sys.meta_path))
    if sys.argv[1] == "with":
        from tracker.runtime import metrics
        metrics.install()
    done = time.perf_counter()
    print(json.dumps({"register_ms": (registered - started) * 1e3, "metrics_ms": (done - registered) * 1e3,
                      "total_ms": (done - started) * 1e3,
                      "collectors_added": len(prometheus_client.REGISTRY._collector_to_names) - collectors,
                      "threads_added": threading.active_count() - threads,
                      "import_hooks_added": len(sys.meta_path) - finders}))
''')

SCRAPE = textwrap.dedent('''
    import json, os, subprocess, sys, time
    import tracker.plugin
    from prometheus_client import CollectorRegistry, generate_latest
    from tracker.runtime.metrics import Collector
    tracker.plugin.register()
    directory = sys.argv[1]
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(2)]
    try:
        for child, role in zip(children, ("engine_core", "worker")):
            report = dict(tracker.plugin.report() if tracker.plugin.replayed is not None else
                          __import__("tracker.runtime.activate", fromlist=["report"]).report())
            report.update(pid=child.pid, process=role, parent=os.getpid())
            tracker.plugin.write_report(directory, report)
        registry = CollectorRegistry()
        registry.register(Collector(directory))
        samples = []
        for _ in range(int(sys.argv[2])):
            started = time.perf_counter()
            generate_latest(registry)
            samples.append((time.perf_counter() - started) * 1e3)
        print(json.dumps({"scrape_ms": sorted(samples)[len(samples) // 2],
                          "series": generate_latest(registry).decode().count("xpu_workarounds_workaround{")}))
    finally:
        for child in children:
            child.kill()
            child.wait()
''')


def environment(cache: str) -> dict[str, str]:
    return child_env({"XPU_WORKAROUNDS_PLATFORM": "cpu", "XPU_WORKAROUNDS_CACHE_DIR": cache,
                      "PYTHONPATH": str(REPO_ROOT)})


def child(variant: str, env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, variant], capture_output=True, text=True, env=env,
                          timeout=300, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run(runs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="xw-bench-metrics-") as scratch:
        env = environment(os.path.join(scratch, "cache"))
        child("without", env)  # the first process stores the answer; every measured one replays it
        samples: dict[str, list[dict]] = {"without": [], "with": []}
        for _ in range(runs):
            for variant in ("without", "with"):
                samples[variant].append(child(variant, env))
        reports = os.path.join(scratch, "reports")
        scrape = subprocess.run([sys.executable, "-c", SCRAPE, reports, "200"], capture_output=True, text=True,
                                env=env, timeout=300, check=True)
    median = {variant: {key: statistics.median(sample[key] for sample in found) for key in found[0]}
              for variant, found in samples.items()}
    return {"runs": runs, "median": median,
            "metrics_added_ms": median["with"]["metrics_ms"],
            "totals_apart_ms": median["with"]["total_ms"] - median["without"]["total_ms"],
            "scrape": json.loads(scrape.stdout.strip().splitlines()[-1])}


def render(result: dict) -> str:
    without, with_ = result["median"]["without"], result["median"]["with"]
    scrape = result["scrape"]
    return "\n".join([
        f"Metrics in a serving process (medians of {result['runs']} interleaved fresh interpreters, replay path):",
        f"  start-up without metrics: register() {without['total_ms']:.2f} ms",
        f"  start-up with metrics:    register() {with_['register_ms']:.2f} ms + install() {with_['metrics_ms']:.2f} ms"
        f" = {with_['total_ms']:.2f} ms",
        f"  added by the metrics:     {result['metrics_added_ms']:.2f} ms, install() timed in each run (target: "
        f"under 1 ms); the two totals' medians are {result['totals_apart_ms']:.2f} ms apart",
        f"  per request:              nothing runs (install() adds {with_['collectors_added']:.0f} collector, "
        f"{with_['threads_added']:.0f} threads, {with_['import_hooks_added']:.0f} import hooks)",
        f"  one scrape's collection:  {scrape['scrape_ms']:.2f} ms for {scrape['series']} series "
        "(front end, engine core and worker reports)",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = run(args.runs)
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
