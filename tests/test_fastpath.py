"""The replay of an activation that applied nothing, each case in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tracker.paths import shipped_manifest

PROCESS = (
    "import json, logging, os, sys\n"
    "logging.basicConfig(level=logging.INFO, format='%(name)s %(message)s')\n"
    "import tracker.plugin\n"
    "tracker.plugin.register(); tracker.plugin.register()\n"
    "from tracker.runtime import fastpath\n"
    "full = 'tracker.runtime.activate' in sys.modules\n"
    "from tracker import runtime\n"
    "print(json.dumps({'replayed': fastpath.replayed(), 'full': full, 'report': runtime.report()}))\n"
)


def start(cache, extra_path=None, **env: str) -> tuple[dict, list[str]]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS") and k != "PYTHONPATH"}
    clean.update(env, XPU_WORKAROUNDS_CACHE_DIR=str(cache))
    if extra_path is not None:
        clean["PYTHONPATH"] = str(extra_path)
    result = subprocess.run([sys.executable, "-c", PROCESS], capture_output=True, text=True, env=clean, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("vllm.xpu_workarounds")]
    return json.loads(result.stdout), lines


def without_pid(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "pid"}


def test_a_second_process_replays_the_first_ones_answer(tmp_path):
    first, first_lines = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    second, second_lines = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert (first["replayed"], first["full"]) == (False, True)
    assert (second["replayed"], second["full"]) == (True, False)
    assert without_pid(second["report"]) == without_pid(first["report"])
    assert second["report"]["pid"] != first["report"]["pid"]
    assert second_lines == first_lines and len(second_lines) == 1


def test_a_replayed_process_writes_its_own_report_file(tmp_path):
    start(tmp_path / "cache", XPU_WORKAROUNDS_PLATFORM="cpu")
    second, _ = start(tmp_path / "cache", XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_REPORT=str(tmp_path / "r"))
    written = json.loads((tmp_path / "r" / f"{second['report']['pid']}.json").read_text())
    assert second["replayed"] and written == second["report"]


def test_a_changed_variable_takes_the_full_path(tmp_path):
    start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    second, _ = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_DISABLE="pp-broadcast-sync")
    assert not second["replayed"]
    assert {w["id"]: w["reason"] for w in second["report"]["workarounds"]}["pp-broadcast-sync"] == "disabled"


def test_an_edited_manifest_takes_the_full_path(tmp_path):
    manifest = tmp_path / "workarounds.toml"
    manifest.write_text(Path(shipped_manifest()).read_text())
    start(tmp_path / "cache", XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_MANIFEST=str(manifest))
    manifest.write_text(manifest.read_text().replace('platform = "xpu"', 'platform = "cpu"', 1))
    second, _ = start(tmp_path / "cache", XPU_WORKAROUNDS_PLATFORM="cpu", XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert not second["replayed"]
    assert second["report"]["workarounds"][0]["reason"] != "platform"


def test_installing_a_distribution_takes_the_full_path(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    start(tmp_path / "cache", extra_path=site, XPU_WORKAROUNDS_PLATFORM="cpu")
    dist = site / "vllm-0.27.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.27.1\n")
    second, _ = start(tmp_path / "cache", extra_path=site, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert not second["replayed"] and second["report"]["environment"]["versions"]["vllm"] == "0.27.1"


def test_a_process_that_applies_something_is_never_replayed(tmp_path):
    xpu = {"XPU_WORKAROUNDS_PLATFORM": "xpu", "XPU_WORKAROUNDS_ASSUME": "vllm==0.24.0,torch==2.12.0"}
    start(tmp_path, **xpu)
    second, _ = start(tmp_path, **xpu)
    assert not second["replayed"] and second["full"]
    assert list(tmp_path.iterdir()) == []


def test_a_corrupt_store_takes_the_full_path_silently(tmp_path):
    start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    (stored,) = tmp_path.iterdir()
    stored.write_text("{not json")
    second, lines = start(tmp_path, XPU_WORKAROUNDS_PLATFORM="cpu")
    assert not second["replayed"] and len(lines) == 1

