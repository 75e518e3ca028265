"""``xpu-workarounds status --cluster`` against the number of nodes.

A real local Ray cluster (tests/support/raycluster.py: one ``ray start`` per node, each on
its own 127.0.0.x address, the dev venv's Python and Ray) grows from 1 to 3 nodes; at each
size ``status --cluster --json`` runs as a whole process, interleaved with plain ``status
--json`` (the baseline: the same evaluation on one machine, without Ray), and the ratio
of their medians is reported. No target is set by the issue; the figure says what an
operator waits for per node.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.measure import child_env, interleaved, ms, test_support, time_process, venv_script

NODES = (1, 2, 3)


def run(quick: bool = False) -> dict:
    raycluster = test_support("raycluster")
    runs = 3 if quick else 7
    script = venv_script("xpu-workarounds")
    root = Path(tempfile.mkdtemp(prefix="xw-bench-ray-"))  # short: Ray's socket paths are bounded
    env = child_env({"RAY_ADDRESS": None})
    node_env = child_env({"XPU_WORKAROUNDS_PLATFORM": "xpu", "RAY_ADDRESS": None})
    lines = [f"status --cluster --json against nodes: medians of {runs} interleaved runs (whole processes),"
             " baseline plain status --json in the same run"]
    figures: dict[str, dict] = {}
    try:
        with raycluster.LocalRayCluster(root / "ray") as cluster:
            for count in NODES:
                while len(cluster.nodes) < count:
                    cluster.add_node(f"n{len(cluster.nodes)}", Path(sys.executable), node_env)
                cluster_command = [script, "status", "--cluster", "--address", cluster.address, "--json"]
                check = subprocess.run(cluster_command, env=env, capture_output=True, text=True, cwd=root)
                answered = len(json.loads(check.stdout)["nodes"]) if check.stdout.startswith("{") else 0
                samples = interleaved({
                    "cluster": lambda command=cluster_command: time_process(command, env, cwd=root, check=False),
                    "plain": lambda: time_process([script, "status", "--json"], env, cwd=root),
                }, runs=runs)
                cluster_median, plain_median = samples["cluster"].median, samples["plain"].median
                figures[f"{count} nodes"] = {"cluster": samples["cluster"].as_json(),
                                             "plain": samples["plain"].as_json(), "nodes_answered": answered,
                                             "exit": check.returncode}
                lines.append(f"  {count} node{'s' if count > 1 else ' '}: status --cluster {ms(cluster_median):>10} "
                             f"wall ({ms(samples['cluster'].cpu_median)} CPU), {answered} answered, exit "
                             f"{check.returncode}; plain status {ms(plain_median)}: "
                             f"{cluster_median / plain_median:.1f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    per_node = ""
    if len(figures) >= 2:
        first, last = figures[f"{NODES[0]} nodes"], figures[f"{NODES[-1]} nodes"]
        slope = (last["cluster"]["median_s"] - first["cluster"]["median_s"]) / (NODES[-1] - NODES[0])
        per_node = f"{slope * 1e3:+.0f} ms per added node"
        lines.append(f"  growth: {per_node}")
    return {"section": "Ray cluster status", "figures": figures, "lines": lines,
            "targets": [{"target": f"status --cluster answers for every node ({', '.join(map(str, NODES))})",
                         "figure": ", ".join(f"{f['nodes_answered']}/{k}" for k, f in figures.items()),
                         "met": all(f["nodes_answered"] == int(k.split()[0]) for k, f in figures.items())}]}
