"""The code itself: ruff, mypy and the import contracts (configured in pyproject.toml) pass on the whole checkout."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support import repository

import tracker
from tracker.model import reader

ROOT = Path(__file__).resolve().parent.parent


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing():
    result = run("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing():
    # Incremental: the checkout's .mypy_cache (mypy revalidates each module against its source)
    # makes a second run seconds instead of most of a minute; the removal proof brings it up to
    # date when it starts and seeds each copy with it (tests/support/repository.py ``mypy``).
    result = repository.mypy(ROOT)
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


def test_the_circle_the_hand_over_makes_holds_at_most_five_modules():
    # The fast path hands over to the full path, which uses the fast path's key, log and state:
    # one circle of imports, kept to the modules that need each other (lazy imports included).
    import grimp

    graph = grimp.build_graph("tracker", cache_dir=None)
    reaching_plugin = graph.find_upstream_modules("tracker.plugin")
    circle = {"tracker.plugin"} | (graph.find_downstream_modules("tracker.plugin") & reaching_plugin)
    # tracker.runtime itself is the contract's facade: it imports activate only when report() is looked up.
    circle.discard("tracker.runtime")
    assert circle == {"tracker.plugin", "tracker.runtime.activate", "tracker.runtime.metrics",
                      "tracker.runtime.planning", "tracker.runtime.record"}


# Any shipped workaround's module (read from the manifest: no test names a shipped workaround it does not own).
WORKAROUND_MODULE = reader.load().workarounds[0].module.replace(".", "/") + ".py"


@pytest.mark.parametrize(("module", "line"), [
    pytest.param("tracker/model/vocabulary.py", "import tracker.decision.gates", id="model-imports-decision"),
    pytest.param("tracker/engine/source.py", "import tracker.model.retirement", id="engine-under-model-is-fine"),
    pytest.param("tracker/commands/cluster_node.py", "import tracker.commands.cluster", id="cycle-in-commands"),
    pytest.param(WORKAROUND_MODULE, "import tracker.engine.patching", id="workaround-beside-api"),
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


# Where the process environment may be touched at all (docs/architecture.md, "One home per rule"):
# every variable is read and parsed in tracker/model/environment.py; the fast path reads its few
# without importing the model; two modules only hand this process's environment on.
ENVIRONMENT_READERS = {
    "tracker/model/environment.py": "every variable, parsed (Settings, OutsideVariables)",
    "tracker/paths.py": "the fast path: the cache directory",
    "tracker/plugin.py": "the fast path: the raw decision variables its key holds",
    "tracker/runtime/activate.py": "hands this process's environment to Settings",
    "tracker/runtime/metrics.py": "in vLLM's API server, without the model: vLLM's metrics directory, and the "
                                  "report directory it sets for the processes that server starts",
    "tracker/release/fetch.py": "hands the environment on to the pip it runs",
}


def environment_uses(tree: ast.AST) -> list[int]:
    """Lines that name ``os.environ`` or call ``os.getenv``."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute)
            and node.attr in ("environ", "getenv") and isinstance(node.value, ast.Name) and node.value.id == "os"]


def test_the_process_environment_is_read_in_one_module_and_the_fast_paths():
    found = {}
    for path in sorted((ROOT / "tracker").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        lines = environment_uses(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[relative] = lines
    assert set(found) <= set(ENVIRONMENT_READERS), found


VARIABLE_PREFIXES = ("XPU_WORKAROUNDS", "GITHUB_", "RAY_")


def test_variable_names_are_spelled_only_in_the_package_top():
    names = {value for name, value in vars(tracker).items()
             if name.isupper() and isinstance(value, str) and value.isupper() and value.startswith(VARIABLE_PREFIXES)}
    assert {tracker.KILL_SWITCH, tracker.GITHUB_TOKEN, tracker.RAY_ADDRESS} <= names
    spelled = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in sorted((ROOT / "tracker").rglob("*.py"))
               if path.name != "__init__.py" or path.parent != ROOT / "tracker"
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.Constant) and node.value in names]
    assert spelled == []


# A module past this has grown a second job: split it along the seam that names the job
# (docs/architecture.md), rather than raising the bound.
MODULE_LINES = 450


def test_no_module_of_tracker_is_longer_than_the_bound():
    longer = {path.relative_to(ROOT).as_posix(): count for path in sorted((ROOT / "tracker").rglob("*.py"))
              if (count := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES}
    assert longer == {}
