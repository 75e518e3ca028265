"""Generate a few tokens with vLLM's offline ``LLM`` and print them as JSON on the last line.

Run with the e2e venv's python: ``python generate.py MODEL_DIR [ray PP TP]``. The entry
guard matters: vLLM starts its engine core and worker as spawned processes, which
re-import this file. ``dtype="float32"``: vLLM's CPU bfloat16 kernels are chosen by the
host's instruction set (AMX, AVX512-BF16) and kill the worker with SIGILL where a VM
advertises AMX without enabling it; float32 runs the same code on every x86 host.

With ``ray PP TP``: vLLM's Ray executor on the Ray cluster ``RAY_ADDRESS`` names, with
that pipeline- and tensor-parallel size; the JSON line also holds, per worker, its pid,
node and ranks (asked of the workers themselves through ``collective_rpc``).
"""

import json
import sys


def whoami(worker) -> dict:
    """Run inside each worker by ``collective_rpc``: which process, node and ranks it is."""
    import os

    import ray
    from vllm.distributed import parallel_state

    return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
            "pp_rank": parallel_state.get_pp_group().rank_in_group,
            "tp_rank": parallel_state.get_tp_group().rank_in_group}


def main(model_dir: str, backend: str = "mp", pipeline: str = "1", tensor: str = "1") -> None:
    from vllm import LLM, SamplingParams

    llm = LLM(model=model_dir, dtype="float32", max_model_len=128, max_num_seqs=2, enforce_eager=True,
              distributed_executor_backend=backend, pipeline_parallel_size=int(pipeline),
              tensor_parallel_size=int(tensor), seed=0)
    params = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    outputs = llm.generate(["hello world", "the engine is"], params, use_tqdm=False)
    result: dict = {"outputs": [list(output.outputs[0].token_ids) for output in outputs]}
    if backend == "ray":
        result["workers"] = llm.collective_rpc(whoami)
    print(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:])
