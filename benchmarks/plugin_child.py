"""One measured vLLM-like process for bench_plugin: run by the vLLM venv's python.

Imports vLLM (which imports torch) as a vLLM process does, resolves vLLM's platform
(vLLM has by the time it loads general plugins), then imports the entry point's
module and calls ``register()``, timing each step; prints one JSON object.
"""

import importlib
import json
import os
import sys
import time

started, started_cpu = time.perf_counter(), time.thread_time()
import vllm  # noqa: E402  - timed: this is the baseline

imported, imported_cpu = time.perf_counter(), time.thread_time()
from vllm.platforms import current_platform  # noqa: E402

platform_type = current_platform.device_type  # resolve it, as vLLM has before it loads plugins
resolved = time.perf_counter()

before = set(sys.modules)
# A split process (bench_plugin's measured reason for a target): the modules named here are
# imported first, each timed, then register() is timed for what remains.
preimported: dict[str, float] = {}
for name in filter(None, os.environ.get("XPU_WORKAROUNDS_BENCH_PREIMPORT", "").split(",")):
    started_import = time.perf_counter()
    importlib.import_module(name)
    preimported[name] = time.perf_counter() - started_import
t0, t0_cpu = time.perf_counter(), time.thread_time()
from tracker.plugin import register  # noqa: E402  - what vLLM's entry-point loader imports

register()
t1, t1_cpu = time.perf_counter(), time.thread_time()
added = sorted(set(sys.modules) - before)
register()  # idempotent: a second call returns at once
t2 = time.perf_counter()

from tracker import runtime  # noqa: E402

report = runtime.report()
outcomes: dict[str, int] = {}
for entry in report["workarounds"]:
    outcomes[entry["outcome"]] = outcomes.get(entry["outcome"], 0) + 1
print(json.dumps({
    "import_vllm_s": imported - started,
    "import_vllm_cpu_s": imported_cpu - started_cpu,  # CPU time of this thread: steadier under load
    "resolve_platform_s": resolved - imported,
    "register_s": t1 - t0,
    "preimported_s": preimported,
    "register_cpu_s": t1_cpu - t0_cpu,
    "second_register_s": t2 - t1,
    "added_modules": added,
    "vllm_file": vllm.__file__,
    "vllm_platform": platform_type or "unspecified",
    "environment": report["environment"],
    "outcomes": outcomes,
    "warnings": report["warnings"],
    "workarounds": [{k: entry[k] for k in ("id", "decision", "reason", "outcome")} for entry in report["workarounds"]]
    if len(report["workarounds"]) <= 10 else [],
}))
