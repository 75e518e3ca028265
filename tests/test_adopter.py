"""An adopter's own workarounds: a serving repository's ``workarounds.toml`` and ``workarounds/`` folder.

The repository is made here as an adopter has it: a manifest with one entry of its own
(``xpu-total-memory``), its module in ``workarounds/`` beside the manifest, and the module's target in
a module of the serving stack (``serving_stack``, on ``PYTHONPATH``: a real function a wrapper
doubles). Each process is a real one: ``tracker.plugin.register()``, as vLLM calls it, in a
subprocess with this checkout installed as it is and the shipped ``workarounds`` package beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import manifests
from typer.testing import CliRunner

from tracker.commands.app import app
from tracker.model import adopter, reader
from tracker.paths import shipped_manifest

ROOT = Path(__file__).resolve().parent.parent
ID = "xpu-total-memory"
OWN_NAME = "_xpu_workarounds_own.xpu_total_memory"
# The adopter's module: a wrapper that doubles what its target returns, by a factor a module beside
# it holds (a relative import), and a line in the file ``RAN`` names each time its code runs.
MODULE = '''"""torch.xpu reports half of the device's memory: the adopter's own workaround."""
import os

from .factors import FACTOR

with open(os.environ["RAN"], "a") as ran:
    ran.write("ran\\n")


def make_wrapper(context):
    def scaled(function, instance, args, kwargs):
        return FACTOR * function(*args, **kwargs)

    return scaled
'''
PROCESS = """
import json, logging, sys
logging.basicConfig(level=logging.INFO, format='%(name)s %(message)s')
import tracker.plugin
tracker.plugin.register()
import serving_stack
from tracker import runtime
print(json.dumps({"memory": serving_stack.total_memory(), "report": runtime.report(),
                  "modules": sorted(m for m in sys.modules if "workarounds" in m.partition(".")[0])}))
"""
# vLLM 0.22.1 at its XPU pins: where the shipped workarounds apply (their targets are vLLM's, absent here).
OLD_STACK = "vllm==0.22.1,torch==2.11.0,vllm-xpu-kernels==0.1.8"


def own_entry(workaround_id: str = ID) -> dict:
    return manifests.workaround(
        workaround_id, title="Report the device's whole memory", symptom="vLLM sizes its cache for half the memory",
        why="The driver reports half.", how="Double what it reports.", vllm_carries_fix=None,
        affected=[{"vllm": ">=0.19.0"}], targets=[{"path": "serving_stack:total_memory", "kind": "function", "params": []}],
        upstream=[{"ref": "intel/compute-runtime#1", "role": "cause", "state": "open"}])


def serving_repository(tmp_path: Path, *entries: dict, module: str = MODULE) -> Path:
    """The adopter's repository: its manifest, its module and the module beside it; returns the manifest."""
    repository = tmp_path / "serving"
    (repository / "workarounds").mkdir(parents=True)
    for entry in entries or (own_entry(),):
        (repository / "workarounds" / f"{adopter.short_name(entry['id'])}.py").write_text(module)
    (repository / "workarounds" / "factors.py").write_text("FACTOR = 2\n")
    stack = tmp_path / "stack"
    stack.mkdir()
    (stack / "serving_stack.py").write_text("def total_memory():\n    return 100\n")
    return manifests.write_manifest(repository / "workarounds.toml", *(entries or (own_entry(),)))


def vllm_process(tmp_path: Path, *, cwd: Path | None = None, **variables: str) -> tuple[dict, list[str]]:
    """One process as vLLM starts it: what it reports, and its log lines."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS") and k != "PYTHONPATH"}
    env.update(PYTHONPATH=os.pathsep.join([str(tmp_path / "stack"), str(ROOT)]), RAN=str(tmp_path / "ran"),
               XPU_WORKAROUNDS_CACHE_DIR=str(tmp_path / "cache"), XPU_WORKAROUNDS_PLATFORM="xpu",
               XPU_WORKAROUNDS_ASSUME=OLD_STACK, **variables)
    done = subprocess.run([sys.executable, "-c", PROCESS], cwd=cwd or tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), [line for line in done.stderr.splitlines() if "xpu-workarounds" in line]


def entry(result: dict, workaround_id: str = ID) -> dict:
    (found,) = [w for w in result["report"]["workarounds"] if w["id"] == workaround_id]
    return found


def ran(tmp_path: Path) -> int:
    """How many times the adopter's module code ran."""
    marker = tmp_path / "ran"
    return len(marker.read_text().splitlines()) if marker.exists() else 0


# ------------------------------------------------------------------ in a vLLM process


@pytest.mark.reads_shipped
def test_an_adopters_workaround_applies_beside_the_shipped_ones(tmp_path):
    manifest = serving_repository(tmp_path)
    result, _ = vllm_process(tmp_path, XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert entry(result)["outcome"] == "applied" and result["memory"] == 200
    shipped = reader.load()
    assert [w["id"] for w in result["report"]["workarounds"]] == [*shipped.ids, ID]
    applying = [w for w in result["report"]["workarounds"] if w["decision"] == "apply" and w["id"] != ID]
    for workaround in applying:  # each shipped module imported from the shipped package, none failed
        assert workaround["outcome"] != "failed", workaround
        assert f"workarounds.{adopter.short_name(workaround['id'])}" in result["modules"]
    assert result["report"]["tool"]["manifest"] == str(manifest)


def test_an_adopters_module_loads_under_a_name_of_its_own_with_its_neighbours(tmp_path):
    manifest = serving_repository(tmp_path)
    result, _ = vllm_process(tmp_path, XPU_WORKAROUNDS_MANIFEST=str(manifest))
    # Never ``workarounds.xpu_total_memory``: that name is the shipped package's.
    assert OWN_NAME in result["modules"] and "_xpu_workarounds_own.factors" in result["modules"]
    assert "workarounds.xpu_total_memory" not in result["modules"] and ran(tmp_path) == 1


def test_a_manifest_named_by_a_relative_path_runs_none_of_its_folders_modules(tmp_path):
    manifest = serving_repository(tmp_path)
    result, lines = vllm_process(tmp_path, cwd=manifest.parent, XPU_WORKAROUNDS_MANIFEST="workarounds.toml")
    assert ran(tmp_path) == 0 and result["memory"] == 100
    found = entry(result)
    assert found["outcome"] == "failed" and "named by a relative path (workarounds.toml)" in found["error"]
    warning = ("the modules of workarounds/ beside workarounds.toml are not run: the manifest is named by a relative "
               "path (workarounds.toml), which each vLLM process resolves in the directory it starts in; name it by an "
               "absolute path")
    assert warning in result["report"]["warnings"]
    assert any(line.endswith(f"xpu-workarounds: {warning}") for line in lines)


@pytest.mark.reads_shipped
def test_the_plugin_never_reads_a_manifest_in_the_working_directory(tmp_path):
    manifest = serving_repository(tmp_path)
    result, _ = vllm_process(tmp_path, cwd=manifest.parent)
    assert ran(tmp_path) == 0 and result["memory"] == 100
    assert result["report"]["tool"]["manifest"] == shipped_manifest()
    assert ID not in [w["id"] for w in result["report"]["workarounds"]]


@pytest.mark.reads_shipped
def test_an_entry_with_a_shipped_id_replaces_that_workaround_and_says_so(tmp_path):
    shipped_id = reader.load().ids[0]
    manifest = serving_repository(tmp_path, own_entry(shipped_id))
    result, lines = vllm_process(tmp_path, XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert [w["id"] for w in result["report"]["workarounds"]].count(shipped_id) == 1
    assert entry(result, shipped_id)["outcome"] == "applied" and result["memory"] == 200
    name = adopter.short_name(shipped_id)
    assert f"_xpu_workarounds_own.{name}" in result["modules"] and f"workarounds.{name}" not in result["modules"]
    said = f"{shipped_id}: the shipped workaround replaced by {manifest}'s own entry and module"
    assert any(warning.startswith(said) for warning in result["report"]["warnings"])
    assert any(f"xpu-workarounds: {said}" in line for line in lines)


def test_a_missing_module_fails_naming_where_it_was_looked_for(tmp_path):
    manifest = serving_repository(tmp_path)
    (manifest.parent / "workarounds" / "xpu_total_memory.py").unlink()
    result, _ = vllm_process(tmp_path, XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert entry(result)["outcome"] == "failed"
    assert entry(result)["error"] == f"no module workarounds/xpu_total_memory.py beside the manifest ({manifest.parent})"


def test_a_folder_other_users_may_write_runs_none_of_its_modules(tmp_path):
    manifest = serving_repository(tmp_path)
    folder = manifest.parent / "workarounds"
    folder.chmod(0o777)
    result, _ = vllm_process(tmp_path, XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert ran(tmp_path) == 0 and result["memory"] == 100
    assert entry(result)["error"] == f"{folder} is writable by other users: its code is not run"


def test_a_manifest_in_a_folder_anyone_may_write_runs_none_of_its_modules(tmp_path):
    manifest = serving_repository(tmp_path)
    manifest.parent.chmod(0o777)  # anyone could have put workarounds/ there
    result, _ = vllm_process(tmp_path, XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert ran(tmp_path) == 0 and entry(result)["outcome"] == "failed"
    assert entry(result)["error"] == (f"{manifest.parent} is writable by other users, who could put a workarounds/ "
                                      "folder there: its code is not run")


def test_a_folder_that_is_a_link_runs_none_of_its_modules(tmp_path):
    manifest = serving_repository(tmp_path)
    folder = manifest.parent / "workarounds"
    folder.rename(tmp_path / "elsewhere")
    folder.symlink_to(tmp_path / "elsewhere")
    result, _ = vllm_process(tmp_path, XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert ran(tmp_path) == 0
    assert entry(result)["error"] == f"{folder} is a link (to {tmp_path / 'elsewhere'}): its code is not run"


def test_a_module_that_links_out_of_the_folder_is_not_run(tmp_path):
    manifest = serving_repository(tmp_path)
    module = manifest.parent / "workarounds" / "xpu_total_memory.py"
    elsewhere = tmp_path / "elsewhere.py"
    module.rename(elsewhere)
    module.symlink_to(elsewhere)
    result, _ = vllm_process(tmp_path, XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert ran(tmp_path) == 0 and entry(result)["outcome"] == "failed"
    assert entry(result)["error"].endswith(f"leads out of {module.parent} (to {elsewhere}): not run")


def test_a_named_manifest_without_a_folder_beside_it_is_read_instead_of_the_shipped_one(tmp_path):
    manifest = manifests.write_manifest(tmp_path / "elsewhere.toml", own_entry())
    (tmp_path / "stack").mkdir()
    (tmp_path / "stack" / "serving_stack.py").write_text("def total_memory():\n    return 100\n")
    result, _ = vllm_process(tmp_path, XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert [w["id"] for w in result["report"]["workarounds"]] == [ID]  # as before: no shipped workaround added
    assert entry(result)["error"] == "ModuleNotFoundError: No module named 'workarounds.xpu_total_memory'"


def test_a_folder_that_appears_beside_the_manifest_is_seen_by_the_next_process(tmp_path):
    manifest = serving_repository(tmp_path)
    folder = manifest.parent / "workarounds"
    folder.rename(tmp_path / "later")
    first, _ = vllm_process(tmp_path, XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert entry(first)["outcome"] == "failed"  # a manifest read instead of the shipped one: no module of that name
    (tmp_path / "later").rename(folder)
    second, _ = vllm_process(tmp_path, XPU_WORKAROUNDS_MANIFEST=str(manifest))
    assert entry(second)["outcome"] == "applied" and second["memory"] == 200


# ------------------------------------------------------------------ the commands


def cli(*args: str, cwd: Path):
    done = subprocess.run([sys.executable, "-m", "tracker.commands", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if not k.startswith("XPU_WORKAROUNDS")})
    return done


def test_lint_reads_an_adopters_modules_beside_a_manifest_outside_any_repository(tmp_path):
    manifest = serving_repository(tmp_path)
    assert cli("lint", str(manifest), cwd=tmp_path).stdout == f"{manifest}: ok\n"
    (manifest.parent / "workarounds" / "xpu_total_memory.py").write_text('"""Half the memory."""\n')
    done = cli("lint", str(manifest), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout.endswith("workaround[xpu-total-memory].module: module workarounds.xpu_total_memory has no "
                                "top-level make_wrapper(context)\n")


def test_lint_names_a_module_missing_from_the_folder_beside_the_manifest(tmp_path):
    manifest = serving_repository(tmp_path)
    (manifest.parent / "workarounds" / "xpu_total_memory.py").unlink()
    done = cli("lint", str(manifest), cwd=manifest.parent)
    assert done.returncode == 1 and "module workarounds.xpu_total_memory does not exist: no " \
                                    "workarounds/xpu_total_memory.py or workarounds/xpu_total_memory/__init__.py" \
                                    in done.stdout


def test_check_compares_an_adopters_targets_with_a_releases_source(tmp_path):
    entry_ = own_entry()
    entry_["targets"] = [{"path": "vllm.v1.worker.cpu.shm:get_memory_info", "kind": "function", "params": ["device"]}]
    manifest = serving_repository(tmp_path, entry_)
    tree = tmp_path / "vllm-0.32.0"
    (tree / "vllm" / "v1" / "worker" / "cpu").mkdir(parents=True)
    (tree / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n")
    shm = tree / "vllm" / "v1" / "worker" / "cpu" / "shm.py"
    shm.write_text("def get_memory_info(device):\n    return 0, 0\n")
    same = cli("--manifest", str(manifest), "check", str(tree), "--json", cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    (checked,) = json.loads(same.stdout)["workarounds"]
    assert checked["id"] == ID and not checked["problems"]
    shm.write_text("def get_memory_info(device, stream):\n    return 0, 0\n")
    drifted = cli("--manifest", str(manifest), "check", str(tree), cwd=tmp_path)
    assert drifted.returncode == 3 and f"{ID}: drifted: vllm.v1.worker.cpu.shm:get_memory_info is a function taking " \
                                      "(device, stream)" in drifted.stdout


@pytest.mark.reads_shipped
def test_status_decides_an_adopters_manifest_with_the_shipped_workarounds_as_the_plugin_does(tmp_path):
    manifest = serving_repository(tmp_path)
    result = CliRunner().invoke(app, ["--manifest", str(manifest), "status", "--json", "--platform", "xpu",
                                      "--assume", "vllm==0.32.0"], env={"XPU_WORKAROUNDS_MANIFEST": None})
    assert result.exit_code == 0, result.output
    assert [w["id"] for w in json.loads(result.stdout)["workarounds"]] == [*reader.load().ids, ID]
