"""What xpu-workarounds costs the people who run it: every figure of docs/benchmarks.md in one run.

    .venv/bin/python benchmarks/run.py [--quick] [--json PATH] [--only SECTION ...]

Sections: plugin (register() in a vLLM process), hotpath (wrapper overhead per call),
cli (status latency), check (``check vllm==X`` with its release source
cached; downloads one vLLM sdist), census (``census vllm==X`` with its sdist cached, against
``check``; downloads two vLLM sdists), loop (a contributor's loop on the warm release cache:
``check --supported``, one workaround's, a census whose result is kept), census-growth (the census on inputs 1x, 4x and 16x as large,
in three shapes), github (requests to keep current; benchmarks/bench_upstream.py),
scale (cli, plugin and github with a generated 500-workaround manifest), cluster
(``status --cluster`` on a local Ray cluster of 1, 2 and 3 nodes). Figures are
medians over repeated runs, with ratios against baselines measured in the same run.
``--quick``: fewer repetitions, for checking the runner works (figures are rougher).
Exit status 0 whatever the figures say: these are measurements, not tests.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import inspect
import json
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import scale_manifest
from benchmarks.measure import verdict

SECTIONS = ("plugin", "hotpath", "cli", "check", "census", "loop", "census-growth", "github", "scale", "cluster")


def machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown") \
        if Path("/proc/cpuinfo").exists() else platform.processor()
    return {"date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "host": platform.node(),
            "cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
            "system": f"{platform.system()} {platform.release()}",
            "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None}


def upstream_section(quick: bool, manifest: Path | None, label: str) -> dict:
    """H3's benchmarks/bench_upstream.py ``run()``, shown as it reports."""
    try:
        bench_upstream = importlib.import_module("benchmarks.bench_upstream")
    except ModuleNotFoundError as error:
        if error.name != "benchmarks.bench_upstream":
            raise
        return {"section": f"GitHub cost ({label})", "lines": ["  benchmarks/bench_upstream.py is not there yet"],
                "targets": [], "figures": {}}
    parameters = inspect.signature(bench_upstream.run).parameters
    kwargs = {}
    if "quick" in parameters:
        kwargs["quick"] = quick
    if "label" in parameters:
        kwargs["label"] = label
    if manifest is not None:
        if "manifest" not in parameters:
            return {"section": f"GitHub cost ({label})", "targets": [], "figures": {},
                    "lines": ["  bench_upstream.run() takes no manifest: the scale refresh is not measured"]}
        kwargs["manifest"] = manifest
    result = bench_upstream.run(**kwargs)
    if "lines" in result and "targets" in result:
        return {"section": f"GitHub cost ({label})", **{k: v for k, v in result.items() if k != "section"}}
    lines = [f"  {line}" for line in json.dumps(result, indent=2, default=str).splitlines()]
    return {"section": f"GitHub cost ({label})", "lines": lines, "targets": result.get("targets", []),
            "figures": result}


def run_section(name: str, quick: bool, scale_path: Path | None) -> list[dict]:
    if name == "plugin":
        from benchmarks import bench_plugin
        return [bench_plugin.run(quick)]
    if name == "hotpath":
        from benchmarks import bench_hotpath
        return [bench_hotpath.run(quick)]
    if name == "cli":
        from benchmarks import bench_cli
        return [bench_cli.run(quick)]
    if name == "check":
        from benchmarks import bench_check
        return [bench_check.run(quick)]
    if name == "census":
        from benchmarks import bench_census
        return [bench_census.run(quick)]
    if name == "loop":
        from benchmarks import bench_loop
        return [bench_loop.run(quick)]
    if name == "census-growth":
        from benchmarks import bench_census_growth
        return [bench_census_growth.run(quick)]
    if name == "github":
        return [upstream_section(quick, None, "shipped manifest")]
    if name == "cluster":
        from benchmarks import bench_cluster
        return [bench_cluster.run(quick)]
    if name == "scale":
        from benchmarks import bench_cli, bench_plugin
        label = "scale: 500 workarounds, 50 repositories"
        return [bench_cli.run(quick, manifest=scale_path, label=label),
                bench_plugin.run(quick, manifest=scale_path, label=label),
                upstream_section(quick, scale_path, label)]
    raise ValueError(name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (checks the runner works)")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    arguments = parser.parse_args(argv)
    sections = arguments.only or list(SECTIONS)

    facts = machine()
    print(f"xpu-workarounds benchmarks, {facts['date']}, {facts['host']}: {facts['cpu']} x{facts['cpus']}, "
          f"Python {facts['python']}, {facts['system']}; load average {facts['load_average']}"
          + ("; QUICK mode: rough figures" if arguments.quick else ""))
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="xpu-workarounds-scale-") as scratch:
        scale_path = scale_manifest.generate(Path(scratch) / "scale.toml") if "scale" in sections else None
        for name in sections:
            started = time.monotonic()
            try:
                produced = run_section(name, arguments.quick, scale_path)
            except Exception as error:  # noqa: BLE001 - one broken section must not hide the others
                produced = [{"section": name, "error": f"{type(error).__name__}: {error}",
                             "lines": ["  could not run:", *("    " + line for line in
                                                              traceback.format_exc().splitlines()[-6:])],
                             "targets": [], "figures": {}}]
            for result in produced:
                result["key"] = name
                result["group_seconds"] = round(time.monotonic() - started, 1)  # the whole --only group
                results.append(result)
                print(f"\n== {result['section']}")
                print("\n".join(result["lines"]))
    facts["load_average_after"] = os.getloadavg() if hasattr(os, "getloadavg") else None

    print("\n== Targets")
    for result in results:
        for target in result["targets"]:
            print(f"  [{verdict(target['met'])}] {target['target']}: {target['figure']}")
        if "error" in result:
            print(f"  [NOT RUN] {result['section']}: {result['error']}")
    if arguments.json is not None:
        arguments.json.write_text(json.dumps({"machine": facts, "quick": arguments.quick, "sections": results},
                                             indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
