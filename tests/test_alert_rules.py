"""The alert rules shipped beside the dashboard (docs/prometheus/xpu-workarounds.rules.yml), checked
by Prometheus's own ``promtool`` (Debian's prometheus package: .ci/install-prometheus) and
evaluated by it over series as vLLM's /metrics exports them. That a real Prometheus loads them and
fires for a real failed workaround is tests/test_vllm_metrics.py's."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parent.parent / "docs" / "prometheus" / "xpu-workarounds.rules.yml"
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (.ci/install-prometheus)")


def series(id: str, outcome: str, instance: str = "a:8000", process: str = "worker") -> str:
    return (f'xpu_workarounds_workaround{{instance="{instance}",id="{id}",decision="apply",reason="affected",'
            f'outcome="{outcome}",process="{process}"}}')


def annotations(alert: str, labels: dict[str, str]) -> dict[str, str]:
    """The summary and description the rules file writes for ``alert``, its templates filled with
    ``labels`` (read from the file's own layout: a quoted summary, a folded description)."""
    block = RULES.read_text().split(f"- alert: {alert}\n", 1)[1].split("- alert:", 1)[0]
    summary = re.search(r'^\s+summary: "(.*)"$', block, flags=re.M).group(1)
    folded = re.search(r"^\s+description: >-\n((?:\s{12}.*\n?)+)", block, flags=re.M).group(1)
    description = " ".join(line.strip() for line in folded.splitlines())
    fill = lambda text: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)  # noqa: E731
    return {"summary": fill(summary), "description": fill(description)}


def promtool_test(tmp_path: Path, inputs: dict[str, str], alerts: dict[str, list[dict]], at: str = "40m") -> None:
    """``promtool test rules`` of ``inputs`` (series -> values) expecting ``alerts`` (name -> labels) at ``at``."""
    case = {"rule_files": [str(RULES)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": [{"series": name, "values": values}
                                                          for name, values in inputs.items()],
                       "alert_rule_test": [{"eval_time": at, "alertname": name,
                                            "exp_alerts": [{"exp_labels": labels,
                                                            "exp_annotations": annotations(name, labels)}
                                                           for labels in expected]}
                                           for name, expected in alerts.items()]}]}
    path = tmp_path / "test.yml"
    path.write_text(json.dumps(case))  # JSON is YAML
    done = subprocess.run([str(PROMTOOL), "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_checks_the_rules():
    done = subprocess.run([str(PROMTOOL), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 4 rules found" in done.stdout


def test_a_failed_or_partial_workaround_alerts_and_an_applied_one_does_not(tmp_path):
    promtool_test(tmp_path, {series("one", "failed"): "1x60", series("two", "partial"): "1x60",
                             series("three", "applied"): "1x60"},
                  {"XpuWorkaroundFailed": [
                      {"severity": "critical", "instance": "a:8000", "id": "one", "process": "worker", "outcome": "failed"},
                      {"severity": "critical", "instance": "a:8000", "id": "two", "process": "worker",
                       "outcome": "partial"}]})


def test_a_drifted_workaround_and_one_waiting_half_an_hour_alert(tmp_path):
    promtool_test(tmp_path, {series("one", "drifted"): "1x60", series("two", "waiting"): "1x60"},
                  {"XpuWorkaroundDrifted": [{"severity": "warning", "instance": "a:8000", "id": "one",
                                             "process": "worker"}],
                   "XpuWorkaroundWaiting": [{"severity": "info", "instance": "a:8000", "id": "two",
                                             "process": "worker"}]})


def test_an_instance_off_the_fleets_common_manifest_alerts(tmp_path):
    info = 'xpu_workarounds_info{{instance="{}",version="0.1.0",manifest_sha256="{}",platform="xpu"}}'
    promtool_test(tmp_path, {info.format("a:8000", "aa"): "1x60", info.format("b:8000", "aa"): "1x60",
                             info.format("c:8000", "bb"): "1x60"},
                  {"XpuWorkaroundsOffTheCommonManifest": [
                      {"severity": "warning", "instance": "c:8000", "version": "0.1.0", "manifest_sha256": "bb",
                       "platform": "xpu"}]})
