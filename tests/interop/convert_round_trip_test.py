"""`triax convert` both ways and back, for every model plugin with a Hugging Face mapping:

1. triax -> Hugging Face -> triax: a checkpoint trained by triax, exported and imported again,
   holds the same parameters, bit for bit, with the same names, shapes and dtypes;
2. Hugging Face -> triax -> Hugging Face: that exported folder, imported and exported again,
   holds the same safetensors tensors bit for bit and the same config.json; and so does a folder
   transformers made (save_pretrained of a small model), imported and exported again;
3. each command exits 0, and a tokenizer.json travels both ways.

usage: convert_round_trip_test.py TRIAX INTEROP_TOOL SOURCE_DIR WORK_DIR
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file

triax, interop_tool, source, work = sys.argv[1], sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])

# A model plugin with a Hugging Face mapping joins with one line: a name, a training config with
# its overrides, and a small model of an architecture it reads, as transformers makes it.
T = transformers
SMALL = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2)
ATTENTION = dict(SMALL, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                 tie_word_embeddings=False)
M = "model.model_config."
MODELS = [
    ("llama", "configs/tiny_llama.yaml", [], lambda: T.LlamaForCausalLM(T.LlamaConfig(**ATTENTION))),
    ("mamba", "configs/tiny_mamba.yaml", [],
     lambda: T.MambaForCausalLM(T.MambaConfig(**SMALL, state_size=8, expand=2))),
    ("mamba2", "configs/tiny_mamba2.yaml", [],
     lambda: T.Mamba2ForCausalLM(T.Mamba2Config(**SMALL, num_heads=8, head_dim=8, n_groups=2, state_size=8))),
    ("moe", "configs/tiny_moe.yaml", [],
     lambda: T.MixtralForCausalLM(T.MixtralConfig(**ATTENTION, num_local_experts=4, num_experts_per_tok=2))),
    # The qwen2 plugin's two architectures: Qwen2 (q/k/v biases) and SmolLM3 (NoPE layers).
    ("qwen2", "configs/tiny_qwen2.yaml", [M + "no_rope_layer=null", M + "sliding_window_size=4"],
     lambda: T.Qwen2ForCausalLM(T.Qwen2Config(**ATTENTION, use_sliding_window=False))),
    ("smollm3", "configs/tiny_qwen2.yaml", [M + "attention_bias=false"],
     lambda: T.SmolLM3ForCausalLM(T.SmolLM3Config(**ATTENTION, no_rope_layer_interval=2, pad_token_id=None,
                                                   bos_token_id=1, eos_token_id=2))),
    # qk-norm and a head_dim of their own (16 over hidden_size 32 and 4 heads).
    ("qwen3", "configs/tiny_qwen3.yaml", [], lambda: T.Qwen3ForCausalLM(T.Qwen3Config(**ATTENTION, head_dim=16))),
    ("qwen3_moe", "configs/tiny_qwen3_moe.yaml", [],
     lambda: T.Qwen3MoeForCausalLM(T.Qwen3MoeConfig(**ATTENTION, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                                     moe_intermediate_size=24, norm_topk_prob=True))),
]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def run(*args):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    output = result.stdout + result.stderr
    if result.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(str, args))} exited {result.returncode}:\n{output}")
    return output


def checkpoint_tensors(checkpoint, name):
    file = work / f"{name}.safetensors"
    run(interop_tool, "checkpoint-tensors", checkpoint, file)
    return load_file(str(file))


def hf_tensors(folder):
    tensors = {}
    for file in sorted(Path(folder).glob("*.safetensors")):
        tensors.update(load_file(str(file)))
    return tensors


def same_bits(label, ours, theirs):
    check(sorted(ours) == sorted(theirs), f"{label}: the tensor names differ: {sorted(ours)} vs {sorted(theirs)}")
    for name in sorted(set(ours) & set(theirs)):
        a, b = ours[name], theirs[name]
        same = a.dtype == b.dtype and a.shape == b.shape and torch.equal(
            a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))
        check(same, f"{label}: {name} differs ({a.dtype} {tuple(a.shape)} vs {b.dtype} {tuple(b.shape)})")
    return len(ours)


if work.exists():
    shutil.rmtree(work)
work.mkdir(parents=True)
compared = 0
torch.manual_seed(0)
for plugin, config, overrides, make_model in MODELS:
    trained = work / f"{plugin}_run"
    sets = [arg for override in overrides for arg in ("--set", override)]
    run(triax, "train", source / config, "--set", "tokens.train_steps=2", "--set", "checkpoints.checkpoint_interval=2",
        "--set", f"checkpoints.checkpoints_path={trained}", *sets)
    (trained / "tokenizer.json").write_text('{"stands for": "the tokenizer the data was made with"}')

    # 1. triax -> Hugging Face -> triax
    exported = work / f"{plugin}_hf"
    said = run(triax, "convert", "--to", "hf", trained, exported)
    check("wrote the Hugging Face folder" in said, f"{plugin}: the export does not say it wrote the folder: {said}")
    imported = work / f"{plugin}_imported"
    said = run(triax, "convert", "--from", "hf", exported, imported)
    check("wrote the triax checkpoint" in said, f"{plugin}: the import does not say it wrote the checkpoint: {said}")
    compared += same_bits(f"{plugin}: triax -> HF -> triax", checkpoint_tensors(trained, f"{plugin}_trained"),
                          checkpoint_tensors(imported, f"{plugin}_imported"))
    check((imported / "tokenizer.json").is_file(), f"{plugin}: the import left the folder's tokenizer.json behind")

    # 2. Hugging Face -> triax -> Hugging Face (the checkpoint convert --from hf wrote, exported)
    again = work / f"{plugin}_hf_again"
    run(triax, "convert", "--to", "hf", imported, again)
    compared += same_bits(f"{plugin}: HF -> triax -> HF", hf_tensors(exported), hf_tensors(again))
    first, second = (json.loads((folder / "config.json").read_text()) for folder in (exported, again))
    check(first == second, f"{plugin}: config.json differs after the round trip: {first} vs {second}")
    check((again / "tokenizer.json").read_text() == (trained / "tokenizer.json").read_text(),
          f"{plugin}: the tokenizer.json did not come back")

    # 2b. the same from a folder transformers wrote
    made = work / f"{plugin}_made"
    make_model().save_pretrained(made, safe_serialization=True)
    run(triax, "convert", "--from", "hf", made, work / f"{plugin}_made_imported")
    run(triax, "convert", "--to", "hf", work / f"{plugin}_made_imported", work / f"{plugin}_made_again")
    compared += same_bits(f"{plugin}: transformers' HF -> triax -> HF", hf_tensors(made),
                          hf_tensors(work / f"{plugin}_made_again"))

print("convert round trips:", "FAILED" if failures else f"ok ({compared} tensors compared, {len(MODELS)} models)")
sys.exit(1 if failures else 0)
