"""The wheel carries the manifest: an installed copy works with no checkout."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.decisions import stack

from tracker.decision.gates import decide
from tracker.model import reader
from tracker.model.environment import Settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
                   check=True, capture_output=True)
    (path,) = out.glob("xpu_workarounds-*.whl")
    return path


def test_wheel_contains_the_manifest_the_packages_and_the_entry_point(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    assert "tracker/workarounds.toml" in names
    assert "tracker/workarounds.schema.json" in names  # beside the manifest, as its first line says
    assert {"tracker/commands/app.py", "workarounds/__init__.py"} <= names
    assert not any(name.startswith("tests/") for name in names)
    assert "[vllm.general_plugins]\nxpu_workarounds = tracker.plugin:register" in entry_points
    assert "xpu-workarounds = tracker.commands.app:main" in entry_points


def test_installed_wheel_runs_status_outside_the_checkout(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], check=True, capture_output=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XPU_WORKAROUNDS", "PYTHONPATH"))}
    cli = str(venv / "bin" / "xpu-workarounds")
    status = subprocess.run([cli, "status", "--json", "--platform", "xpu", "--assume", "vllm==0.27.1",
                             "--assume", "torch==2.13.0"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert status.returncode == 0, status.stderr
    decisions = {w["id"]: w["reason"] for w in json.loads(status.stdout)["workarounds"]}
    # The installed copy decides what this checkout decides (each workaround's own test file
    # holds the expectation for this stack).
    expected = {w.id: str(decide(w, stack(vllm="0.27.1", torch="2.13.0"), Settings()).reason)
                for w in reader.load().workarounds}
    assert decisions == expected
    lint = subprocess.run([cli, "lint"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    assert "site-packages/tracker/workarounds.toml: ok" in lint.stdout
