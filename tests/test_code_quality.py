"""The code itself: ruff, mypy and the import contracts (configured in pyproject.toml) pass on the whole checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing():
    result = run("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing():
    # Incremental: the checkout's .mypy_cache (mypy revalidates each module against its source)
    # makes a second run seconds instead of most of a minute; the removal proof seeds each copy with it.
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


# The one import against the layering and the only cycle: the fast path hands over to the full path
# (docs/architecture.md, "Import contracts").
HAND_OVER = {"tracker.plugin -> tracker.runtime.activate", "tracker.plugin -> tracker.runtime.record",
             "tracker.plugin -> tracker.runtime.metrics"}


def lint_imports(where: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = Path(sys.executable).parent / "lint-imports"
    return subprocess.run([str(command), "--no-cache", "--no-logo"], cwd=where, capture_output=True, text=True,
                          timeout=300, env=env)


def test_the_import_contracts_hold():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_plugins_hand_over_is_the_one_declared_exception():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert {contract["type"] for contract in contracts} == {"layers", "forbidden", "acyclic_siblings"}
    for contract in contracts:
        assert set(contract.get("ignore_imports", [])) <= HAND_OVER, contract["name"]


@pytest.mark.parametrize(("module", "line"), [
    pytest.param("tracker/model/vocabulary.py", "import tracker.decision.gates", id="model-imports-decision"),
    pytest.param("tracker/engine/source.py", "import tracker.model.retirement", id="engine-under-model-is-fine"),
    pytest.param("tracker/commands/cluster_node.py", "import tracker.commands.cluster", id="cycle-in-commands"),
    pytest.param("workarounds/pp_broadcast_sync.py", "import tracker.engine.patching", id="workaround-beside-api"),
    pytest.param("tracker/plugin.py", "import tracker.decision.stack", id="plugin-imports-decision"),
])
def test_a_new_import_against_the_contracts_fails_them(tmp_path, module, line):
    # A copy of the checkout with one import added, first on the path (the installed copy is this checkout).
    for name in ("tracker", "workarounds"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with (tmp_path / module).open("a") as stream:
        stream.write(f"\n{line}  # noqa\n")
    result = lint_imports(tmp_path, {**os.environ, "PYTHONPATH": str(tmp_path)})
    kept = module == "tracker/engine/source.py"  # a lower layer: allowed, and the check says so
    assert (result.returncode == 0) == kept, result.stdout + result.stderr
