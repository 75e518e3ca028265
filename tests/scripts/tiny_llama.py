"""Write a tiny random-weight Llama-style model and its tokenizer to a directory.

Run with the e2e venv's python: ``python tiny_llama.py DIR``. Built offline (no hub
download): a word-level tokenizer over a fixed vocabulary, and a two-layer Llama
with head dimension 64, the smallest vLLM's CPU attention handles. Float32: vLLM's CPU
bfloat16 kernels depend on the host's instruction set (AMX, AVX512-BF16) and die with
SIGILL on hosts that advertise AMX without enabling it.
"""

import sys

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL = ["<unk>", "<s>", "</s>"]
WORDS = ("the a an of to in and is was for on with as by at from it this that be are "
         "model token engine worker process report patch event stream graph memory kernel "
         "hello world xpu cpu vllm test run start stop load read write fast slow small large").split()


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {word: index for index, word in enumerate(SPECIAL + WORDS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", model_max_length=256)


def model(vocab_size: int) -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=128, intermediate_size=256,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=256, bos_token_id=1, eos_token_id=2,
                         tie_word_embeddings=False)
    torch.manual_seed(0)
    return LlamaForCausalLM(config).to(torch.float32)


def main(directory: str) -> None:
    tok = tokenizer()
    tok.save_pretrained(directory)
    model(len(tok)).save_pretrained(directory)


if __name__ == "__main__":
    main(sys.argv[1])
