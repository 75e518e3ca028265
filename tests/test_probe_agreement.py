"""The CLI and the plugin decide alike on the same stack, source probe included.

Real vLLM release sources from PyPI (cached by tests/support/vllm_harness.py) on PYTHONPATH, the
stack described by XPU_WORKAROUNDS_PLATFORM / XPU_WORKAROUNDS_ASSUME (as for a source build):
``status --json`` and a plugin process read the same source without importing vLLM, and
must give each workaround the same decision, reason and ``decided_by``: every shipped
workaround (read from the manifest), and the tests' own (tests/support/own_workaround.py:
the frozen manifest's pipeline-parallel broadcast entry, whose marker is vllm#47253's code in
``PPHandler.broadcast``), for the decisions a probe can change whichever workarounds ship.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import own_workaround, vllm_harness
from support.manifests import write_manifest

from tracker.model import reader

pytestmark = pytest.mark.release_matrix

PLUGIN = ("import json, sys, tracker.plugin\n"
          "from tracker import runtime\n"
          "tracker.plugin.register()\n"
          "print(json.dumps({'report': runtime.report(), 'vllm_imported': 'vllm' in sys.modules}))\n")
OWN = own_workaround.ID


def stack_env(tmp_path: Path, release_source: str, assume: str, own: bool) -> dict[str, str]:
    """The described stack; with ``own``, the tests' own workaround is the whole manifest and its
    package comes first (the children run in ``tmp_path``, so the checkout's is not found first)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("XPU_WORKAROUNDS")}
    env.update(PYTHONPATH=release_source, XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME=assume,
               XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"))
    if own:
        site = own_workaround.package(tmp_path / "own")
        env.update(PYTHONPATH=os.pathsep.join([str(site), release_source]),
                   XPU_WORKAROUNDS_MANIFEST=str(write_manifest(site / "workarounds.toml", own_workaround.entry())))
    return env


def decisions(entries: list[dict]) -> dict[str, tuple[str, str, str]]:
    return {entry["id"]: (entry["decision"], entry["reason"], entry["decided_by"]) for entry in entries}


def both(tmp_path: Path, release: str, assume: str, own: bool = False) -> tuple[dict, dict]:
    env = stack_env(tmp_path, str(vllm_harness.release_source(release)), assume, own)
    cli = subprocess.run([sys.executable, "-m", "tracker.commands", "status", "--json"], env=env, capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    plugin = subprocess.run([sys.executable, "-c", PLUGIN], env=env, capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert cli.returncode == 0 and plugin.returncode == 0, cli.stderr + plugin.stderr
    result = json.loads(plugin.stdout.strip().splitlines()[-1])
    assert result["vllm_imported"] is False  # the probe reads the source; it never imports it
    return decisions(json.loads(cli.stdout)["workarounds"]), decisions(result["report"]["workarounds"])


@pytest.mark.parametrize("release", ["0.24.0", "0.27.1"])
def test_cli_and_plugin_agree_on_every_shipped_workaround(tmp_path, release):
    cli, plugin = both(tmp_path, release, f"vllm=={release},torch==2.13.0")
    assert cli == plugin
    assert list(cli) == [w.id for w in reader.load().workarounds]


def test_cli_and_plugin_agree_on_a_release_whose_source_lacks_the_fix(tmp_path):
    cli, plugin = both(tmp_path, "0.24.0", "vllm==0.24.0,torch==2.13.0", own=True)
    assert cli == plugin == {OWN: ("apply", "affected", "version")}


def test_cli_and_plugin_agree_on_every_shipped_workaround_over_a_backport(tmp_path):
    # 0.28.0's code under a version string that says 0.27.1 (a source build with fixes backported).
    cli, plugin = both(tmp_path, "0.28.0", "vllm==0.27.1,torch==2.13.0")
    assert cli == plugin
    assert list(cli) == [w.id for w in reader.load().workarounds]


def test_cli_and_plugin_both_see_a_backport_in_the_source(tmp_path):
    # 0.28.0's code under a version string that says 0.24.0: vllm#47253's synchronize is in it.
    cli, plugin = both(tmp_path, "0.28.0", "vllm==0.24.0,torch==2.13.0", own=True)
    assert cli == plugin == {OWN: ("skip", "vllm-carries-fix", "probe")}


def test_status_says_not_probed_for_a_described_vllm_it_does_not_have(tmp_path):
    env = stack_env(tmp_path, str(vllm_harness.release_source("0.28.0")), "torch==2.13.0", own=True)
    cli = subprocess.run([sys.executable, "-m", "tracker.commands", "status", "--json", "--assume", "vllm==0.24.0"],
                         env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    (entry,) = json.loads(cli.stdout)["workarounds"]
    assert (entry["id"], entry["decision"], entry["reason"], entry["decided_by"]) == (OWN, "apply", "affected",
                                                                                      "version")
    assert entry["detail"].endswith("vLLM's own source not probed (vllm==0.24.0 is described by --assume; "
                                    "vLLM is not installed here).")
