"""Every workaround against the real source of six vLLM releases, on torch 2.13.0 (CPU build).

For each release, one subprocess (tests/scripts/release_probe.py, run with the e2e
venv's python) imports that release's real Python source, downloaded from PyPI and
cached (tests/support/vllm_harness.py), with the platform forced to xpu and the release's
XPU pins assumed; it calls ``register()`` as vLLM's loader does, imports the target
modules, and prints what happened as JSON. Each release costs one import of vLLM per
session (the ``release_probe`` fixture, tests/conftest.py), shared with each workaround's
own release cases in its tests/test_workaround_<id>.py. The tests here hold for every
workaround of the manifest and name none.

Doubles, all at the device boundary: the compiled vllm-xpu-kernels extensions
(tests/scripts/stand_ins: vllm.platforms.xpu imports them at load), XPU event
construction and XPU streams (they need an XPU device), and vLLM's platform
resolution to XPU (it looks for an XPU device).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import vllm_harness

from tracker.model import reader

pytestmark = pytest.mark.release_matrix


@pytest.fixture(scope="module", autouse=True)
def probed_together(release_probe):
    """Every release's probe started at once, two at a time, while the first test waits for its own."""
    release_probe.start(*vllm_harness.RELEASES)


# ------------------------------------------------------------ every release


@pytest.mark.parametrize("release", vllm_harness.RELEASES)
def test_vllm_imported_is_the_release_source_with_every_target_module(release_probe, release):
    result = release_probe(release)
    assert result["vllm_source"] == result["source_dir"]
    # Only modules this release does not have fail to import (e.g. deepseek_v4 before 0.23.0).
    absent = {name for name in result["import_errors"]
              if not any((Path(result["source_dir"]).parent / (name.replace(".", "/") + suffix)).exists()
                         for suffix in (".py", "/__init__.py"))}
    assert set(result["import_errors"]) == absent, result["import_errors"]
    assert all(error.startswith("ModuleNotFoundError") for error in result["import_errors"].values())
    assert result["report"]["environment"]["platform"] == "xpu"
    assert result["report"]["environment"]["versions"]["vllm"] == release
    assert [entry["id"] for entry in result["report"]["workarounds"]] == [w.id for w in reader.load().workarounds]


@pytest.mark.parametrize("release", vllm_harness.RELEASES)
def test_every_applied_target_wraps_that_release_s_own_function(release_probe, release):
    result = release_probe(release)
    applied = [target["path"] for entry in result["report"]["workarounds"] if entry["outcome"] == "applied"
               for target in entry["targets"] if target["outcome"] == "applied"]
    for path in applied:
        state = result["targets"][path]
        assert state["wrapped"], path
        assert state["source"].startswith(result["source_dir"]), (path, state["source"])
    unapplied = [target["path"] for entry in result["report"]["workarounds"] for target in entry["targets"]
                 if target["outcome"] == "skipped"]
    assert all(not result["targets"][path].get("wrapped") for path in unapplied)


@pytest.mark.parametrize("release", vllm_harness.RELEASES)
def test_no_workaround_fails_or_drifts_on_a_supported_release(release_probe, release):
    outcomes = {entry["id"]: entry["outcome"] for entry in release_probe(release)["report"]["workarounds"]}
    assert not {"failed", "drifted"} & set(outcomes.values()), outcomes
