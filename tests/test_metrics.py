"""The workarounds in a vLLM server's ``/metrics`` (tracker/runtime/metrics.py), without vLLM.

A server is played by a fresh interpreter that registers the plugin and installs the metrics as
the plugin does in vLLM's API server, then starts real processes with ``multiprocessing`` under
the names vLLM gives its own (``EngineCore``, which starts ``VllmWorker-0``), each registering
the plugin too; the scrape is prometheus_client's own text exposition of the global registry,
the one vLLM serves. The whole thing inside real vLLM is tests/test_vllm_metrics.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.reports import entry, process_report

from tracker import plugin
from tracker.model import reader

SERVER = textwrap.dedent('''
    import json, multiprocessing, os, sys, time
    import prometheus_client
    import tracker.plugin
    from tracker.runtime import metrics

    def live_while_parent_does():
        parent = multiprocessing.parent_process().pid  # not os.getppid(): the parent may be gone already
        while os.getppid() == parent:
            time.sleep(0.05)

    def worker(ready):
        tracker.plugin.register()
        ready.set()
        live_while_parent_does()

    def engine_core(ready):
        tracker.plugin.register()
        context = multiprocessing.get_context("spawn")
        context.Process(target=worker, name="VllmWorker-0", args=(ready,)).start()
        live_while_parent_does()

    if __name__ == "__main__":
        tracker.plugin.register()
        metrics.install()
        metrics.install()
        context = multiprocessing.get_context("spawn")
        ready = context.Event()
        core = context.Process(target=engine_core, name="EngineCore", args=(ready,))
        core.start()
        assert ready.wait(120)
        directory = os.environ["XPU_WORKAROUNDS_REPORT"]
        child = os.fork()
        if child == 0:  # a forked child that exits normally (its atexit handlers run)
            sys.exit(0)
        os.waitpid(child, 0)
        deadline = time.monotonic() + 60
        while len(os.listdir(directory)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        sys.stdout.write(json.dumps({"pid": os.getpid(), "reports": directory, "kept": os.path.isdir(directory),
                                     "mode": oct(os.stat(directory).st_mode & 0o777),
                                     "scrape": prometheus_client.generate_latest().decode()}))
        core.kill()
        core.join()
''')


def serve(tmp_path: Path, **variables: str) -> dict:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    env = {name: value for name, value in os.environ.items() if not name.startswith("XPU_WORKAROUNDS")}
    env.update(XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"), **variables)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def series(scrape: str, name: str) -> list[dict[str, str]]:
    return [sample.labels for family in text_string_to_metric_families(scrape) for sample in family.samples
            if sample.name == name and sample.value == 1]


def test_the_scrape_shows_every_workaround_for_the_server_its_engine_core_and_its_worker(tmp_path):
    served = serve(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    ids = [w.id for w in reader.load().workarounds]
    found = series(served["scrape"], "xpu_workarounds_workaround")
    assert sorted((labels["process"], labels["id"]) for labels in found) == sorted(
        (process, workaround) for process in ("api_server", "engine_core", "worker") for workaround in ids)
    assert {(labels["decision"], labels["reason"], labels["outcome"]) for labels in found} == {
        ("skip", "platform", "skipped")}


def test_with_the_kill_switch_every_series_says_kill_switch(tmp_path):
    served = serve(tmp_path, XPU_WORKAROUNDS="0")
    found = series(served["scrape"], "xpu_workarounds_workaround")
    assert {labels["process"] for labels in found} == {"api_server", "engine_core", "worker"}
    assert {(labels["decision"], labels["reason"], labels["outcome"]) for labels in found} == {
        ("skip", "kill-switch", "skipped")}


def test_the_info_series_names_the_version_the_manifest_digest_and_the_platform(tmp_path):
    import hashlib
    from importlib.metadata import version

    from tracker.paths import shipped_manifest

    served = serve(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    (info,) = series(served["scrape"], "xpu_workarounds_info")
    digest = hashlib.sha256(Path(shipped_manifest()).read_bytes()).hexdigest()
    assert info == {"version": version("xpu-workarounds"), "manifest_sha256": digest, "platform": "cpu"}


def test_without_a_report_directory_the_server_makes_a_private_one_its_processes_inherit(tmp_path):
    served = serve(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert served["mode"] == "0o700"
    assert served["kept"]  # a forked child's exit left it alone
    assert not os.path.exists(served["reports"])  # removed when the server exited


def test_reports_of_processes_the_server_did_not_start_are_not_counted(tmp_path):
    reports = tmp_path / "reports"
    stranger = process_report(os.getpid(), entry("stranger-fix", "failed"), process="worker", parent=os.getppid())
    plugin.write_report(str(reports), stranger)  # a running process of another server, sharing the directory
    served = serve(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_REPORT=str(reports))
    assert served["reports"] == str(reports)
    found = series(served["scrape"], "xpu_workarounds_workaround")
    assert {labels["process"] for labels in found} == {"api_server", "engine_core", "worker"}
    assert "stranger-fix" not in served["scrape"]


def test_a_process_role_is_the_name_vllm_gives_the_process(tmp_path):
    code = ("import multiprocessing, tracker.plugin\n"
            "def role(queue): queue.put(tracker.plugin.process_role())\n"
            "if __name__ == '__main__':\n"
            "    context = multiprocessing.get_context('spawn'); queue = context.Queue(); found = {}\n"
            "    for name in ('EngineCore', 'EngineCore_DP1', 'VllmWorker-3', 'ApiServer_0', 'Process-1'):\n"
            "        process = context.Process(target=role, name=name, args=(queue,)); process.start()\n"
            "        found[name] = queue.get(timeout=60); process.join()\n"
            "    found['MainProcess'] = tracker.plugin.process_role(); print(found)\n")
    script = tmp_path / "roles.py"
    script.write_text(code)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str({"EngineCore": "engine_core", "EngineCore_DP1": "engine_core",
                                         "VllmWorker-3": "worker", "ApiServer_0": "api_server", "Process-1": "main",
                                         "MainProcess": "main"})


def test_a_process_that_serves_no_metrics_imports_neither_prometheus_nor_the_collector():
    env = {name: value for name, value in os.environ.items() if not name.startswith("XPU_WORKAROUNDS")}
    result = subprocess.run([sys.executable, "-c", "import sys, tracker.plugin; tracker.plugin.register(); "
                             "print(sorted(m for m in sys.modules if 'prometheus' in m or m.endswith('metrics')))"],
                            capture_output=True, text=True, env={**env, "XPU_WORKAROUNDS_PLATFORM": "cpu"}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("outcome", ["waiting", "applied", "partial"])
def test_the_scrape_shows_a_reports_outcome_as_it_is_now(tmp_path, outcome):
    from prometheus_client import CollectorRegistry, generate_latest

    from tracker.runtime.metrics import Collector

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        report = process_report(child.pid, entry("first-fix", "waiting"), process="worker", parent=os.getpid())
        plugin.write_report(str(tmp_path), report)
        registry = CollectorRegistry()
        registry.register(Collector(str(tmp_path)))
        if outcome != "waiting":  # the worker imported the target and rewrote its report
            report["workarounds"][0]["outcome"] = outcome
            plugin.write_report(str(tmp_path), report)
        found = series(generate_latest(registry).decode(), "xpu_workarounds_workaround")
    finally:
        child.kill()
        child.wait()
    assert [labels for labels in found if labels["process"] == "worker"] == [
        {"id": "first-fix", "decision": "apply", "reason": "affected", "outcome": outcome, "process": "worker"}]


# ------------------------------------------------------------ the dashboard

DASHBOARD = Path(__file__).resolve().parents[1] / "docs" / "grafana" / "xpu-workarounds.json"
TARGET_LABELS = {"instance", "job"}  # what Prometheus adds to every scraped series
NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"


def dashboard_queries() -> list[str]:
    document = json.loads(DASHBOARD.read_text())
    queries = [target["expr"] for panel in document["panels"] for target in panel.get("targets", [])]
    for variable in document["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"])
    return queries


def test_the_dashboard_is_importable_grafana_json_with_a_prometheus_input():
    document = json.loads(DASHBOARD.read_text())
    assert document["__inputs"][0]["pluginId"] == "prometheus" and document["uid"] == "xpu-workarounds"
    assert [panel["id"] for panel in document["panels"]] == list(range(1, len(document["panels"]) + 1))
    assert all(panel["datasource"]["uid"] == "${datasource}" for panel in document["panels"])


def test_every_dashboard_query_names_metrics_and_labels_the_plugin_exports(tmp_path):
    import re

    served = serve(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    exported = {family.name: set() for family in text_string_to_metric_families(served["scrape"])}
    for family in text_string_to_metric_families(served["scrape"]):
        for sample in family.samples:
            exported[family.name] |= set(sample.labels)
    ours = {name: labels for name, labels in exported.items() if name.startswith("xpu_workarounds")}
    assert set(ours) == {"xpu_workarounds_info", "xpu_workarounds_workaround"}
    queries = dashboard_queries()
    assert len(queries) >= 8
    for query in queries:
        named = set(re.findall(rf"\bxpu_workarounds_{NAME}", query))
        assert named and named <= set(ours), query
        labels = set(re.findall(rf"({NAME})\s*(?:=~|!~|!=|=)\s*\"", query))
        for grouping in re.findall(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)", query):
            labels |= {label.strip() for label in grouping.split(",") if label.strip()}
        labels |= set(re.findall(rf"label_values\(\s*{NAME}\s*,\s*({NAME})\s*\)", query))
        allowed = set().union(*(ours[name] for name in named)) | TARGET_LABELS
        assert labels <= allowed, (query, labels - allowed)


def test_without_prometheus_the_dashboard_test_fails_with_one_line_saying_how_to_install_it(tmp_path):
    # The test that proves the dashboard on a real Prometheus (tests/test_vllm_metrics.py), run where no
    # prometheus is on PATH: it fails, before any vLLM starts, and says how to get one; never a skip or a pass.
    from support.prometheus import MISSING

    empty = tmp_path / "bin"
    empty.mkdir()
    tests = Path(__file__).resolve().parent
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-rA",
         str(tests / "test_vllm_metrics.py"), "-k", "the_instance_variable_offers_every_instance"],
        capture_output=True, text=True, timeout=300, cwd=tests.parent, env={**os.environ, "PATH": str(empty)})
    assert result.returncode == 1, result.stdout
    # The error's own line, once (pytest's short summary repeats it after "Failed: ", cut to the
    # terminal's width except where pytest sees a CI environment variable).
    assert result.stdout.splitlines().count(MISSING) == 1 and "1 error" in result.stdout, result.stdout
    assert "Traceback" not in result.stdout and "skipped" not in result.stdout and "passed" not in result.stdout


# ------------------------------------------------------------ planted files beside real reports


def child_with_report(directory: Path):
    """A running process started by this one, its report written as the plugin writes it."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    plugin.write_report(str(directory), process_report(child.pid, entry("first-fix", "applied"), process="worker",
                                                       parent=os.getpid()))
    return child


def scrape(directory: Path) -> str:
    """prometheus_client's exposition of a registry holding vLLM-like metrics of its own and the collector."""
    from prometheus_client import CollectorRegistry, Counter, generate_latest

    from tracker.runtime.metrics import Collector

    registry = CollectorRegistry()
    Counter("vllm:request_success", "vLLM's own series, which must survive the collector", registry=registry).inc()
    registry.register(Collector(str(directory)))
    return generate_latest(registry).decode()


@pytest.mark.parametrize("name", ["².json", "0PID.json", "0.json", f"{2 ** 64}.json", "99999999.json"])
def test_a_planted_report_name_leaves_the_scrape_whole_with_the_real_reports(tmp_path, name):
    child = child_with_report(tmp_path)
    try:
        planted = tmp_path / name.replace("PID", str(child.pid))
        planted.write_bytes((tmp_path / f"{child.pid}.json").read_bytes())
        planted.chmod(0o600)
        exposition = scrape(tmp_path)
    finally:
        child.kill()
        child.wait()
    assert series(exposition, "vllm:request_success_total") == [{}]
    assert [labels for labels in series(exposition, "xpu_workarounds_workaround") if labels["process"] == "worker"] == [
        {"id": "first-fix", "decision": "apply", "reason": "affected", "outcome": "applied", "process": "worker"}]


def test_a_report_directory_others_may_write_is_not_read_and_the_scrape_stays_whole(tmp_path):
    child = child_with_report(tmp_path)
    try:
        tmp_path.chmod(0o777)  # the plugin would not write its report here
        exposition = scrape(tmp_path)
    finally:
        tmp_path.chmod(0o700)
        child.kill()
        child.wait()
    assert series(exposition, "vllm:request_success_total") == [{}]
    assert {labels["process"] for labels in series(exposition, "xpu_workarounds_workaround")} <= {"api_server"}
    assert series(exposition, "xpu_workarounds_info")
