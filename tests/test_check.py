"""``xpu-workarounds check``: the manifest against one vLLM release's source, before an upgrade.

The real releases are the release matrix's cached source distributions (tests/support/vllm_harness.py);
the tests marked ``release_matrix`` check the frozen manifest against them (``--manifest``), so
they hold whichever workarounds ship. The others need no download: bad input, a release pip
cannot fetch, archives read without running or trusting them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support import vllm_harness
from support.manifests import workaround, write_manifest
from support.packages import sdist_bytes
from support.repository import FROZEN_MANIFEST
from typer.testing import CliRunner

from tracker.commands.app import app
from tracker.model import reader
from tracker.release import compare
from tracker.release.archive import unpack

MANIFEST = reader.load()
# The release cases check the frozen manifest (the shipped one of 2026-12-04, which no retirement
# changes) against real releases: what they test is the command, whichever workarounds ship.
FROZEN = reader.load(FROZEN_MANIFEST)
UVA_TARGET = "vllm.utils.torch_utils:get_accelerator_view_from_cpu_tensor"
CHECK_AND_UPDATE = "vllm.platforms.xpu:XPUPlatform.check_and_update_config"
PP_BROADCAST = "vllm.v1.worker.gpu.pp_utils:PPHandler.broadcast"


def aiming_at(target: str) -> str:
    """The id of the frozen workaround whose target is ``target``."""
    (found,) = [w.id for w in FROZEN.workarounds if any(t.path == target for t in w.targets)]
    return found


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"XPU_WORKAROUNDS_MANIFEST": None})


def check_frozen(*args: str):
    return run("--manifest", str(FROZEN_MANIFEST), "check", *args)


def release(version: str) -> Path:
    return vllm_harness.release_tree(version, compare.needed_files(MANIFEST) | compare.needed_files(FROZEN))


# ------------------------------------------------------------- real releases


@pytest.mark.release_matrix
def test_a_release_that_needs_two_workarounds_shows_no_drift_and_exits_0(tmp_path):
    result = check_frozen("--json", str(release("0.27.1")))
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert (document["vllm"], document["drift"]) == ("0.27.1", False)
    assert document["xpu_pins"] == {"torch": "2.13.0", "vllm-xpu-kernels": "0.1.12"}
    decided = {w["id"]: w["decision_at_pins"]["reason"] for w in document["workarounds"]}
    assert decided[aiming_at(CHECK_AND_UPDATE)] == decided[aiming_at(UVA_TARGET)] == "affected"
    uva = next(w for w in document["workarounds"] if w["id"] == aiming_at(UVA_TARGET))
    assert uva["targets"] == [{"path": UVA_TARGET, "found": "same",
                               "detail": f"{UVA_TARGET}: function (cpu_tensor)"}]


@pytest.mark.release_matrix
def test_a_release_carrying_its_own_fixes_says_so_from_its_source():
    document = json.loads(check_frozen("--json", str(release("0.28.0"))).stdout)
    fixes = {w["id"]: w["vllm_carries_fix"] for w in document["workarounds"]}
    uva = fixes[aiming_at(UVA_TARGET)]
    assert uva["source"] is True and uva["manifest"] is True
    assert "vllm#51770" in fixes[aiming_at(CHECK_AND_UPDATE)]["probe"]


@pytest.mark.release_matrix
def test_a_drifted_target_is_named_and_exits_3(tmp_path):
    tree = shutil.copytree(release("0.27.1"), tmp_path / "tree")
    source = tree / "vllm" / "utils" / "torch_utils.py"
    text = source.read_text()
    assert "def get_accelerator_view_from_cpu_tensor(cpu_tensor: torch.Tensor)" in text
    source.write_text(text.replace("def get_accelerator_view_from_cpu_tensor(cpu_tensor: torch.Tensor)",
                                   "def get_accelerator_view_from_cpu_tensor(tensor, *, non_blocking=False)"))
    result = check_frozen(str(tree))
    assert result.exit_code == 3, result.output
    assert (f"{aiming_at(UVA_TARGET)}: drifted: {UVA_TARGET} is a function taking (tensor, non_blocking); the "
            "manifest says a function taking (cpu_tensor)") in result.stdout


@pytest.mark.release_matrix
def test_a_target_module_that_does_not_parse_is_named(tmp_path):
    tree = shutil.copytree(release("0.27.1"), tmp_path / "tree")
    (tree / "vllm" / "utils" / "torch_utils.py").write_text("def get_accelerator_view_from_cpu_tensor(:\n")
    result = check_frozen(str(tree))
    assert result.exit_code == 3
    assert f"{UVA_TARGET}: vllm/utils/torch_utils.py does not parse as Python in this release" in result.stdout


@pytest.mark.release_matrix
def test_a_vanished_target_exits_3(tmp_path):
    tree = shutil.copytree(release("0.24.0"), tmp_path / "tree")
    (tree / "vllm" / "v1" / "worker" / "gpu" / "pp_utils.py").unlink()
    result = check_frozen("--json", str(tree))
    assert result.exit_code == 3
    problems = next(w for w in json.loads(result.stdout)["workarounds"] if w["id"] == aiming_at(PP_BROADCAST))["problems"]
    assert problems[0].startswith(f"vanished: {PP_BROADCAST}: no such module")
    assert f"would apply at the XPU pins, but {PP_BROADCAST} is absent" in problems


# ------------------------------------------------------------ without a download


def test_neither_a_release_nor_a_path_is_bad_input_in_one_line(tmp_path):
    for what in ("vllm>=0.30", str(tmp_path / "missing.whl"), "torch==2.14.0"):
        result = run("check", what)
        assert result.exit_code == 2, (what, result.output)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


def test_a_tree_without_a_vllm_package_is_bad_input(tmp_path):
    result = run("check", str(tmp_path))
    assert result.exit_code == 2 and result.stderr == f"xpu-workarounds: error: {tmp_path}: no vllm/ package in it\n"


@pytest.mark.parametrize("command", ["check", "census"])  # the census gets a release the same way
def test_a_release_pip_cannot_fetch_exits_4_in_one_line(tmp_path, command):
    # No index and no links: pip fails as it would with no network. The real command, in its own process.
    env = {**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "",
           "PIP_FIND_LINKS": "", "PIP_NO_INDEX": "1", "PIP_RETRIES": "0", "PIP_TIMEOUT": "2",
           "XPU_WORKAROUNDS_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "tracker.commands", command, "vllm==0.34.0"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 4, done.stderr
    assert done.stderr.startswith("xpu-workarounds: error: pip download vllm==0.34.0 failed: ")
    assert done.stderr.count("\n") == 1 and done.stdout == ""


def test_an_sdist_is_read_for_the_needed_files_only_and_never_outside_the_tree(tmp_path):
    frozen = FROZEN  # one of whose workarounds aims at vllm/utils/torch_utils.py
    archive = tmp_path / "vllm-0.99.0.tar.gz"
    archive.write_bytes(sdist_bytes({
        "vllm-0.99.0/PKG-INFO": b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.99.0\n",
        "vllm-0.99.0/requirements/xpu.txt": b"torch==2.15.0+xpu\n",
        "vllm-0.99.0/vllm/utils/torch_utils.py": b"def get_accelerator_view_from_cpu_tensor(cpu_tensor):\n    pass\n",
        "vllm-0.99.0/vllm/unrelated.py": b"x = 1\n",
        "vllm-0.99.0/../escape.py": b"x = 1\n",
    }))
    root = unpack(archive, tmp_path / "tree", compare.needed_files(frozen).__contains__)
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == [
        "PKG-INFO", "requirements/xpu.txt", "vllm/utils/torch_utils.py"]
    assert not (tmp_path / "escape.py").exists()
    result = compare.check_tree(frozen, root)
    assert (result.vllm, {k: str(v) for k, v in result.pins.items()}) == ("0.99.0", {"torch": "2.15.0"})
    uva = next(w for w in result.workarounds if w.id == aiming_at(UVA_TARGET))
    assert uva.targets[0].found == "same"


MEMORY_TARGET = "vllm.worker.memory:get_memory_info"


def memory_manifest(path: Path) -> Path:
    """A manifest of one workaround on ``MEMORY_TARGET``, a module-level function, and one on a method."""
    related = [{"ref": "vllm-project/vllm#33868", "role": "related", "state": "merged", "note": "nothing to fix"}]
    return write_manifest(path, workaround(
        "memory-seen", targets=[{"path": MEMORY_TARGET, "kind": "function", "params": ["device"]}],
        affected=[{"vllm": ">=0.19.0"}], vllm_carries_fix=None, upstream=related), workaround(
        "reader-seen", targets=[{"path": "vllm.worker.memory:Reader.read", "kind": "method", "params": ["self"]}],
        affected=[{"vllm": ">=0.19.0"}], vllm_carries_fix=None, upstream=related))


def test_check_says_where_the_release_binds_a_target_under_another_name(tmp_path):
    archive = tmp_path / "vllm-0.99.0.tar.gz"
    archive.write_bytes(sdist_bytes({
        "vllm-0.99.0/PKG-INFO": b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.99.0\n",
        "vllm-0.99.0/vllm/worker/memory.py": b"def get_memory_info(device=None):\n    return 1, 2\n\n\n"
                                            b"class Reader:\n    def read(self):\n        pass\n",
        # Neither a target's module nor a file that says xpu: kept because it names the target.
        "vllm-0.99.0/vllm/worker/installs.py": b"import torch\n\nimport vllm.worker.memory as memory\n"
                                              b"from vllm.worker.memory import Reader, get_memory_info\n\n"
                                              b"torch.accelerator.get_memory_info = get_memory_info\n\n\n"
                                              b"class Holder:\n    fetch = staticmethod(memory.get_memory_info)\n"
                                              b"    read = Reader.read\n",
        "vllm-0.99.0/vllm/worker/unrelated.py": b"get_memory_info = None\n",
    }))
    manifest = memory_manifest(tmp_path / "workarounds.toml")
    result = run("--manifest", str(manifest), "check", "--json", str(archive))
    assert result.exit_code == 0, result.output
    memory, reader_check = json.loads(result.stdout)["workarounds"]
    assert memory["bindings"] == [
        {"target": MEMORY_TARGET, "file": "vllm/worker/installs.py", "line": 6, "name": "torch.accelerator.get_memory_info"},
        {"target": MEMORY_TARGET, "file": "vllm/worker/installs.py", "line": 10, "name": "vllm.worker.installs.Holder.fetch"}]
    assert reader_check["bindings"] == [{"target": "vllm.worker.memory:Reader.read", "file": "vllm/worker/installs.py",
                                         "line": 11, "name": "vllm.worker.installs.Holder.read"}]
    text = run("--manifest", str(manifest), "check", str(archive)).stdout
    assert (f"note: memory-seen: vllm/worker/installs.py:6 binds {MEMORY_TARGET} as torch.accelerator.get_memory_info: "
            "callers through that name reach the wrapper too (the plugin redirects the function itself)") in text
    assert ("note: reader-seen: vllm/worker/installs.py:11 binds vllm.worker.memory:Reader.read as "
            "vllm.worker.installs.Holder.read: callers through that name reach the original (a method is wrapped on "
            "its class only)") in text


def test_a_name_a_release_binds_a_target_under_reaches_the_terminal_as_text(tmp_path):
    # setattr's name is any string the release's source holds: an escape sequence, a line break and a
    # workflow command after it stay text on the note's one line (the table's cells already did).
    archive = tmp_path / "vllm-0.99.0.tar.gz"
    archive.write_bytes(sdist_bytes({
        "vllm-0.99.0/PKG-INFO": b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.99.0\n",
        "vllm-0.99.0/vllm/worker/memory.py": b"def get_memory_info(device=None):\n    return 1, 2\n\n\n"
                                            b"class Reader:\n    def read(self):\n        pass\n",
        "vllm-0.99.0/vllm/worker/installs.py": b"import torch\nfrom vllm.worker.memory import get_memory_info\n\n"
                                              b"setattr(torch, 'f\\x1b]0;pwned\\x07\\n::warning::forged', get_memory_info)\n",
    }))
    result = run("--manifest", str(memory_manifest(tmp_path / "workarounds.toml")), "check", str(archive))
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert not any(line.startswith("::") for line in result.stdout.splitlines())
    assert ("note: memory-seen: vllm/worker/installs.py:4 binds vllm.worker.memory:get_memory_info as "
            "torch.f\\x1b]0;pwned\\x07\\n::warning::forged: callers through that name reach the wrapper too") in result.stdout


def test_a_wheel_is_read_with_its_metadata_as_the_version(tmp_path):
    wheel = tmp_path / "vllm-0.99.0-cp38-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("vllm-0.99.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: vllm\nVersion: 0.99.0\n")
        archive.writestr("vllm/utils/torch_utils.py", "def get_accelerator_view_from_cpu_tensor(cpu_tensor):\n    pass\n")
    result = run("check", "--json", str(wheel))
    document = json.loads(result.stdout)
    assert document["vllm"] == "0.99.0" and document["xpu_pins"] == {}
    # A wheel has no requirements/xpu.txt: no decision at pins; every other target vanished.
    assert all(w["decision_at_pins"] is None for w in document["workarounds"])
    assert result.exit_code == 3


def test_a_corrupt_archive_is_bad_input(tmp_path):
    broken = tmp_path / "vllm-0.99.0.tar.gz"
    broken.write_bytes(b"not gzip")
    result = run("check", str(broken))
    assert result.exit_code == 2 and "cannot be read" in result.stderr and "Traceback" not in result.output
