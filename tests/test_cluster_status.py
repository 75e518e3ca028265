"""``status --cluster``: one status for a whole Ray cluster, and what its running processes applied.

The comparison and the reading of live reports are specified first on their own; then
a real Ray cluster of separate ``ray start`` nodes on this machine (tests/support/raycluster.py)
is asked through the installed command: two nodes whose workers see different stacks,
then a third whose Python has Ray but not xpu-workarounds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support import own_workaround, vllm_harness
from support.manifests import workaround, write_manifest
from support.raycluster import LocalRayCluster, free_port
from support.reports import entry, process_report

from tracker.commands import cluster
from tracker.commands.cluster import Node, compare
from tracker.commands.cluster_node import live_reports, node_answer
from tracker.model import reader

SCRIPT = Path(sys.executable).parent / "xpu-workarounds"
TIMEOUT = 300  # seconds for one `status --cluster` on a loaded machine (it takes about 2 s alone)
STEERING = ("XPU_WORKAROUNDS", "RAY_", "PYTHONPATH", "VIRTUAL_ENV")


def clean_env(**variables: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(STEERING)}
    return {**env, **variables}


def answer(monkeypatch, **variables: str) -> dict:
    """node_answer() under these XPU_WORKAROUNDS* variables, as a node's Ray worker would run it."""
    for name in [name for name in os.environ if name.startswith("XPU_WORKAROUNDS")]:
        monkeypatch.delenv(name)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    return node_answer(None)


def node(name: str, result: dict, head: bool = False) -> Node:
    result = dict(result)
    return Node(name * 8, f"10.0.0.{len(name)}", head, result.pop("state"), str(result.pop("detail", "")), result)


# ------------------------------------------------------------- comparison


def test_nodes_with_the_same_stack_agree(monkeypatch):
    same = answer(monkeypatch, XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME="vllm==0.32.0")
    result = compare("test", [node("a", same, head=True), node("b", same), node("c", same)])
    assert result.agree and result.differences == []


def test_the_odd_node_out_is_named_with_its_difference_in_words(monkeypatch, tmp_path):
    # Two synthetic workarounds affected on vLLM 0.23.0 to 0.24.x, whose fix vLLM carries from 0.25.0.
    manifest = str(write_manifest(tmp_path / "w.toml", workaround(id="first-fix"), workaround(id="second-fix")))
    current = answer(monkeypatch, XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME="vllm==0.32.0",
                     XPU_WORKAROUNDS_MANIFEST=manifest)
    older = answer(monkeypatch, XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME="vllm==0.24.0",
                   XPU_WORKAROUNDS_MANIFEST=manifest)
    result = compare("test", [node("a", current, head=True), node("b", older), node("c", current),
                              node("d", current)])
    assert result.differences == [
        "node bbbbbbbb (10.0.0.1): vllm 0.24.0 needs first-fix, second-fix; the other 3 nodes have vllm 0.32.0"]


def test_a_forced_workaround_is_named_as_applied_not_needed(monkeypatch):
    plain = answer(monkeypatch, XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME="vllm==0.32.0")
    # The first shipped workaround vLLM 0.32.0 does not need.
    unneeded = next(w["id"] for w in plain["status"]["workarounds"] if w["decision"] != "apply")
    forced = answer(monkeypatch, XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME="vllm==0.32.0",
                    XPU_WORKAROUNDS_FORCE=unneeded)
    result = compare("test", [node("a", plain, head=True), node("b", forced), node("c", plain)])
    assert result.differences == [f"node bbbbbbbb (10.0.0.1): applies {unneeded} (forced); "
                                  "the other 2 nodes do not"]


def test_in_a_tie_the_head_nodes_side_is_the_reference(monkeypatch):
    current = answer(monkeypatch, XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME="vllm==0.32.0")
    older = answer(monkeypatch, XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME="vllm==0.27.1")
    result = compare("test", [node("b", older), node("a", current, head=True)])
    assert [line.split(":")[0] for line in result.differences] == ["node bbbbbbbb (10.0.0.1)"]


def test_a_node_without_the_package_or_without_an_answer_is_named(monkeypatch):
    current = answer(monkeypatch)
    missing = {"state": "missing", "detail": "xpu-workarounds is not installed (No module named 'tracker')"}
    silent = {"state": "no-answer", "detail": "did not answer within 5 s"}
    result = compare("test", [node("a", current, head=True), node("m", missing), node("s", silent)])
    assert result.differences == [
        "node mmmmmmmm (10.0.0.1): xpu-workarounds is not installed (No module named 'tracker')",
        "node ssssssss (10.0.0.1): did not answer within 5 s"]


def test_a_node_answer_carries_the_status_document_version_and_manifest_sha256(monkeypatch):
    result = answer(monkeypatch, XPU_WORKAROUNDS_PLATFORM="xpu")
    assert result["state"] == "ok"
    assert result["status"]["environment"]["platform"] == "xpu"
    assert [w["id"] for w in result["status"]["workarounds"]] == [w.id for w in reader.load().workarounds]
    assert result["xpu_workarounds_version"] == "0.1.0"
    assert result["manifest_sha256"] == reader.load().sha256  # one name per concept: status --json's tool's
    assert "manifest_digest" not in result


def test_a_node_with_a_bad_setting_answers_an_error_not_a_traceback(monkeypatch):
    result = answer(monkeypatch, XPU_WORKAROUNDS_MANIFEST="/nonexistent/workarounds.toml")
    assert result["state"] == "error" and "manifest" in result["detail"]


# ------------------------------------------------------------ live reports


def report(pid: int, **outcomes: str) -> str:
    return json.dumps(process_report(pid, *(entry(workaround, outcome) for workaround, outcome in outcomes.items())))


def plant(path: Path, content: str) -> None:
    """A file as the plugin leaves a report (0600), whatever it holds."""
    path.write_text(content)
    path.chmod(0o600)


def test_live_reports_are_read_from_running_processes_only(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(ended.stdout)
    plant(tmp_path / f"{os.getpid()}.json", report(os.getpid(), **{"first-fix": "applied", "second-fix": "waiting"}))
    plant(tmp_path / f"{dead}.json", report(dead, **{"first-fix": "applied"}))
    live = live_reports(str(tmp_path))
    assert live["processes"] == [{"pid": os.getpid(), "applied": ["first-fix"],
                                  "partial": [], "waiting": ["second-fix"], "failed": [], "drifted": []}]
    assert (live["ended"], live["ignored"]) == (1, 0)


def shaped(pid: int, change) -> str:
    document = process_report(pid, entry("first-fix", "applied"))
    change(document)
    return json.dumps(document)


@pytest.mark.parametrize("content", [
    lambda pid: "not json", lambda pid: "[]", lambda pid: '{"pid": "1"}', lambda pid: report(1),
    lambda pid: shaped(pid, lambda document: document.update(workarounds={})),
    lambda pid: shaped(pid, lambda document: document["workarounds"][0].update(id=3)),
    lambda pid: shaped(pid, lambda document: document["workarounds"][0].update(outcome="exploded")),
    lambda pid: shaped(pid, lambda document: document.pop("tool")),
    lambda pid: json.dumps(process_report(pid, *[entry("first-fix", "applied")] * 12000)),  # over 1 MiB
], ids=["not-json", "a-list", "pid-a-string", "another-pid", "workarounds-a-table", "id-a-number",
        "unknown-outcome", "no-tool", "too-large"])
def test_malformed_report_files_are_ignored_and_counted(tmp_path, content):
    plant(tmp_path / f"{os.getpid()}.json", content(os.getpid()))
    live = live_reports(str(tmp_path))
    assert (live["processes"], live["ignored"]) == ([], 1)


def test_a_report_that_is_a_symlink_is_ignored(tmp_path):
    elsewhere = tmp_path / "elsewhere.txt"
    plant(elsewhere, report(os.getpid(), **{"first-fix": "applied"}))
    (tmp_path / f"{os.getpid()}.json").symlink_to(elsewhere)
    assert live_reports(str(tmp_path))["ignored"] == 1


def test_a_process_that_applied_other_than_status_would_is_noted(monkeypatch, tmp_path):
    plant(tmp_path / f"{os.getpid()}.json", report(os.getpid(), **{"first-fix": "applied"}))
    here = answer(monkeypatch, XPU_WORKAROUNDS_REPORT=str(tmp_path))
    result = compare("test", [node("a", here, head=True)])
    assert result.agree
    assert result.notes == [f"node aaaaaaaa (10.0.0.1, head): process {os.getpid()} applied first-fix; "
                            "status here would apply nothing"]


# ---------------------------------------------------------------- command


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=TIMEOUT,
                          cwd=cwd, env=env or clean_env())


@pytest.mark.parametrize(("args", "message"), [
    (["--address", "127.0.0.1:1"], "--address goes with --cluster"),
    (["--cluster", "--platform", "xpu"], "with --cluster every node answers for its own"),
    (["--cluster", "--timeout", "0"], "--timeout 0: give a number of seconds"),
    (["--cluster", "--address", "nowhere"], "is not HOST:PORT"),
])
def test_bad_cluster_options_are_one_line_and_exit_2_or_4(args, message):
    result = cli("status", *args)
    assert result.returncode in (2, 4), result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_cluster_nobody_runs_is_unreachable_exit_4():
    result = cli("status", "--cluster", "--address", f"127.0.0.1:{free_port()}")
    assert result.returncode == 4
    assert result.stderr.startswith("xpu-workarounds: error: no Ray cluster at 127.0.0.1:")


def test_a_ray_address_variable_nobody_serves_is_unreachable_exit_4_at_once():
    # Before: ray.init("auto") with RAY_ADDRESS naming a dead port waited for a GCS for minutes.
    nobody = f"127.0.0.1:{free_port()}"
    result = cli("status", "--cluster", env=clean_env(RAY_ADDRESS=nobody))
    assert result.returncode == 4
    assert result.stderr == f"xpu-workarounds: error: no Ray cluster at {nobody}: Connection refused\n"


def test_without_ray_installed_cluster_says_how_to_get_it():
    code = ("import sys; sys.modules['ray'] = None\nfrom tracker.commands.app import main\nsys.argv = "
            "['xpu-workarounds', 'status', '--cluster']\nmain()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env())
    assert result.returncode == 2  # a missing extra is a setup error, not an unreachable cluster
    assert result.stderr == ("xpu-workarounds: error: status --cluster needs the ray extra: "
                             "pip install 'xpu-workarounds[ray]'\n")


# ------------------------------------------------------- a real Ray cluster


@pytest.fixture(scope="module")
def ray_cluster():
    # A short root: Ray's unix sockets live under it, and their paths may not exceed 107 bytes.
    root = Path(tempfile.mkdtemp(prefix="xw-ray-"))
    try:
        with LocalRayCluster(root / "ray") as local:
            yield local
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def own_manifest(ray_cluster) -> Path:
    """The nodes' and the live process's manifest: only the tests' own workaround
    (tests/support/own_workaround.py), affected on vLLM 0.23.0 to 0.24.x, whatever is shipped.
    Its package is in the directory ``own`` beside it, for the live process; not beside the manifest,
    where a node that does not import it would take it for an adopter's folder of modules
    (docs/manifest.md) and decide the shipped workarounds too."""
    own_workaround.package(ray_cluster.root.parent / "own")
    return write_manifest(ray_cluster.root.parent / "own-workarounds.toml", own_workaround.entry())


@pytest.fixture(scope="module")
def live_process(ray_cluster, own_manifest):
    """A running process whose plugin wrote its report where the head node's processes write theirs:
    the tests' own workaround forced, its module found (its package is the working directory) and its
    target not (no vLLM here): drifted."""
    reports = ray_cluster.root.parent / "reports-head"
    reports.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys, tracker.plugin; tracker.plugin.register(); print('up', flush=True); "
                               "sys.stdin.read()"],
        env=clean_env(XPU_WORKAROUNDS_REPORT=str(reports), XPU_WORKAROUNDS_PLATFORM="xpu",
                      XPU_WORKAROUNDS_ASSUME="vllm==0.32.0", XPU_WORKAROUNDS_FORCE=own_workaround.ID,
                      XPU_WORKAROUNDS_MANIFEST=str(own_manifest)),
        cwd=own_manifest.parent / "own", stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "up"
        (reports / "12.json").write_text("{not a report")  # a malformed file beside it
        yield process.pid, reports
    finally:
        process.kill()
        process.wait()


@pytest.mark.ray_cluster
def test_status_cluster_on_two_nodes_flags_exactly_their_difference(ray_cluster, own_manifest, live_process,
                                                                    tmp_path):
    pid, reports = live_process
    ray_cluster.add_node("head", Path(sys.executable), clean_env(
        XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME="vllm==0.32.0", XPU_WORKAROUNDS_REPORT=str(reports),
        XPU_WORKAROUNDS_MANIFEST=str(own_manifest)))
    ray_cluster.add_node("older", Path(sys.executable), clean_env(
        XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_ASSUME="vllm==0.24.0",
        XPU_WORKAROUNDS_MANIFEST=str(own_manifest)))

    # Run from a directory without a tracker/ package: Ray puts the caller's directory on its workers' sys.path.
    result = cli("status", "--cluster", "--address", ray_cluster.address, "--json", cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    document = json.loads(result.stdout)
    nodes = {entry["node_ip"]: entry for entry in document["nodes"]}
    assert set(nodes) == {"127.0.0.2", "127.0.0.3"} and nodes["127.0.0.2"]["head"]
    assert {entry["state"] for entry in nodes.values()} == {"ok"}
    older = nodes["127.0.0.3"]["node_id"][:8]
    assert document["differences"] == [
        f"node {older} (127.0.0.3): vllm 0.24.0 needs {own_workaround.ID}; the other node has vllm 0.32.0"]
    # Would apply (status) against is applied (the running process's own report), on the head node only.
    assert nodes["127.0.0.2"]["live"]["processes"] == [
        {"pid": pid, "applied": [], "partial": [], "waiting": [], "failed": [], "drifted": [own_workaround.ID]}]
    assert nodes["127.0.0.2"]["live"]["ignored"] == 1
    assert nodes["127.0.0.3"]["live"] is None
    assert any(f"process {pid} applied nothing; drifted {own_workaround.ID}" in note for note in document["notes"])

    text = cli("status", "--cluster", "--address", ray_cluster.address, cwd=tmp_path)
    assert text.returncode == 3
    (tmp_path.parent / "status-cluster-two-nodes.txt").write_text(text.stdout)  # what docs/commands.md shows
    assert document["differences"][0] in text.stdout

    # --address wins over RAY_ADDRESS (here naming a port nobody serves); without it RAY_ADDRESS is used.
    nobody = f"127.0.0.1:{free_port()}"
    explicit = cli("status", "--cluster", "--address", ray_cluster.address, "--json", cwd=tmp_path,
                   env=clean_env(RAY_ADDRESS=nobody))
    assert explicit.returncode == 3, explicit.stderr
    assert json.loads(explicit.stdout)["differences"] == document["differences"]
    from_variable = cli("status", "--cluster", "--json", cwd=tmp_path, env=clean_env(RAY_ADDRESS=ray_cluster.address))
    assert from_variable.returncode == 3, from_variable.stderr
    assert json.loads(from_variable.stdout)["differences"] == document["differences"]


@pytest.mark.ray_cluster
def test_status_cluster_names_a_node_whose_workers_lack_xpu_workarounds(ray_cluster, tmp_path):
    assert len(ray_cluster.nodes) == 2, "runs after the two-node test, on the same cluster"
    bare = vllm_harness.venv_python(vllm_harness.bare_ray_venv())
    ray_cluster.add_node("bare", bare, clean_env(XPU_WORKAROUNDS_PLATFORM="xpu"))

    result = cli("status", "--cluster", "--address", ray_cluster.address, "--json", cwd=tmp_path)
    assert result.returncode == 3, result.stdout + result.stderr
    document = json.loads(result.stdout)
    nodes = {entry["node_ip"]: entry for entry in document["nodes"]}
    assert nodes["127.0.0.4"]["state"] == "missing"
    bare_id = nodes["127.0.0.4"]["node_id"][:8]
    assert (f"node {bare_id} (127.0.0.4): xpu-workarounds is not installed (No module named 'tracker')"
            in document["differences"])
    assert [entry["state"] for entry in document["nodes"]].count("ok") == 2


def test_the_probe_module_imports_nothing_of_the_package():
    source = Path(cluster.__file__).with_name("cluster_probe.py").read_text()
    top_level = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert not [line for line in top_level if "tracker" in line and "__future__" not in line]
