"""Generate a few tokens with vLLM's offline ``LLM`` and print them as JSON on the last line.

Run with the e2e venv's python: ``python generate.py MODEL_DIR``. The entry guard
matters: vLLM starts its engine core and worker as spawned processes, which
re-import this file. ``dtype="float32"``: vLLM's CPU bfloat16 kernels are chosen by the
host's instruction set (AMX, AVX512-BF16) and kill the worker with SIGILL where a VM
advertises AMX without enabling it; float32 runs the same code on every x86 host.
"""

import json
import sys


def main(model_dir: str) -> None:
    from vllm import LLM, SamplingParams

    llm = LLM(model=model_dir, dtype="float32", max_model_len=128, max_num_seqs=2, enforce_eager=True,
              distributed_executor_backend="mp", seed=0)
    params = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    outputs = llm.generate(["hello world", "the engine is"], params, use_tqdm=False)
    print(json.dumps({"outputs": [list(output.outputs[0].token_ids) for output in outputs]}))


if __name__ == "__main__":
    main(sys.argv[1])
