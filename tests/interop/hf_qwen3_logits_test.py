"""Hugging Face interop of the qwen3 and qwen3_moe plugins, end to end, against transformers (fp32,
max |logit difference| <= 1e-4):

1. export: a tiny Qwen3 trained by triax (4 heads of 32 features over hidden_size 64), also with
   biases on q, k, v and o_proj and with a sliding window of 4, and a tiny Qwen3-MoE (8 experts,
   top-2 renormalised; also raw gates with layer 1 dense) -> `triax convert --to hf` ->
   Qwen3ForCausalLM / Qwen3MoeForCausalLM load in transformers and give triax's logits;
2. import: a Qwen3ForCausalLM and a Qwen3MoeForCausalLM made by transformers (head_dim 16 over
   hidden_size 32 and 4 heads, q_norm and k_norm weights away from ones) -> `triax convert --from
   hf` -> triax gives transformers' logits; and the same straight from the folder; `triax
   generate` decodes the same greedy tokens as transformers' generate() (the inference cache);
3. refusals: a folder without a layer's q_norm weight (naming the tensor), a config.json with an
   odd head_dim (naming the key), and a Qwen3-MoE with a shared expert exported (naming the key).

usage: hf_qwen3_logits_test.py TRIAX TRIAX_LOGITS CONFIG WORK_DIR (CONFIG: configs/tiny_qwen3.yaml;
configs/tiny_qwen3_moe.yaml is found beside it)
"""
import json
import os
import shutil
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

from hf_check import HfCheck

triax, triax_logits, config, work = sys.argv[1:5]
moe_config = os.path.join(os.path.dirname(config), "tiny_qwen3_moe.yaml")
check = HfCheck(triax_logits, work, [5, 17, 99, 3, 42, 64, 7, 88, 21, 0, 13, 77])
run, compare = check.run, check.compare

M = "model.model_config."
COMMON = ["model.dtype=float32", "model.init_method={std: 0.1}", M + "tie_word_embeddings=false"]
SHAPES = {
    "qwen3": (config, Qwen3ForCausalLM, []),
    "qwen3_bias": (config, Qwen3ForCausalLM, [M + "attention_bias=true"]),
    # A window of 4 keys is shorter than the 12 compared tokens: a wrong window changes the logits.
    "qwen3_window": (config, Qwen3ForCausalLM, [M + "sliding_window_size=4"]),
    "qwen3_moe": (moe_config, Qwen3MoeForCausalLM, []),
    "qwen3_moe_raw_gates": (moe_config, Qwen3MoeForCausalLM, [
        M + "moe_config.norm_topk_prob=false", M + "num_hidden_layers=3", M + "moe_config.layers=[0, 2]"]),
}

# 1. triax -> Hugging Face
for name, (source, model_class, shape) in SHAPES.items():
    run_dir, hf_dir, exported = check.train_and_export(triax, source, COMMON + shape, name)
    assert exported["architectures"] == [model_class.__name__] and exported["head_dim"] == 32, exported
    model = model_class.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    if name == "qwen3_moe_raw_gates":
        assert list(model.config.mlp_only_layers) == [1] and not model.config.norm_topk_prob, model.config
    compare(f"export {name} to {model_class.__name__}", check.triax_logits(run_dir), check.hf_logits(model))

# 2. Hugging Face -> triax
torch.manual_seed(7)
common = dict(vocab_size=100, hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, max_position_embeddings=64, tie_word_embeddings=False, initializer_range=0.3)
made = {
    "Qwen3ForCausalLM": Qwen3ForCausalLM(Qwen3Config(num_hidden_layers=3, attention_bias=True, **common)),
    "Qwen3MoeForCausalLM": Qwen3MoeForCausalLM(Qwen3MoeConfig(
        num_hidden_layers=3, num_experts=6, num_experts_per_tok=2, moe_intermediate_size=24, norm_topk_prob=True,
        mlp_only_layers=[1], **common)),
}
for architecture, model in made.items():
    model.eval()
    with torch.no_grad():  # transformers starts norms at ones, biases and the router at zeros
        for n, p in model.named_parameters():
            if n.endswith("norm.weight") or n.endswith(".bias") or n.endswith("mlp.gate.weight"):
                p.normal_(1.0 if n.endswith("norm.weight") else 0.0, 0.5)
    made_dir = check.import_and_compare(triax, model, architecture)
    # Decoding through the inference cache (qk-norm on each new token's q and k) picks transformers' tokens.
    out = os.path.join(work, f"generated_{architecture}.jsonl")
    run(triax, "generate", made_dir, "--prompt-ids", "5,17,99,3", "--max-new-tokens", "12", "--ignore-eos",
        "--output", out)
    with open(out) as f:
        ours = json.loads(f.readline())["new_ids"]
    with torch.no_grad():
        theirs = model.generate(torch.tensor([[5, 17, 99, 3]]), attention_mask=torch.ones(1, 4, dtype=torch.long),
                                do_sample=False, max_new_tokens=12, min_new_tokens=12)[0, 4:].tolist()
    if ours != theirs or len(set(theirs)) < 3:
        check.fail(f"greedy decoding of {architecture}: triax {ours}, transformers {theirs}")
    else:
        print(f"greedy decoding of {architecture}: the same 12 tokens as transformers' generate()")

# 3. Refusals.
def changed_copy(name, source, edit_config=None, drop_tensor=None):
    folder = os.path.join(work, name)
    shutil.copytree(os.path.join(work, source), folder)
    if edit_config:
        with open(os.path.join(folder, "config.json")) as f:
            config_json = json.load(f)
        edit_config(config_json)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config_json, f)
    if drop_tensor:
        weights = os.path.join(folder, "model.safetensors")
        tensors = load_file(weights)
        del tensors[drop_tensor]
        save_file(tensors, weights, metadata={"format": "pt"})
    return folder


missing = changed_copy("missing_q_norm", "made_Qwen3ForCausalLM", drop_tensor="model.layers.1.self_attn.q_norm.weight")
check.refused("a layer's q_norm weight missing", [triax, "convert", "--from", "hf", missing, os.path.join(work, "out_1")],
              "model.layers.1.self_attn.q_norm.weight")
missing_moe = changed_copy("missing_k_norm", "made_Qwen3MoeForCausalLM",
                           drop_tensor="model.layers.2.self_attn.k_norm.weight")
check.refused("a Qwen3-MoE layer's k_norm weight missing",
              [triax, "convert", "--from", "hf", missing_moe, os.path.join(work, "out_2")],
              "model.layers.2.self_attn.k_norm.weight")
odd = changed_copy("odd_head_dim", "made_Qwen3ForCausalLM", edit_config=lambda c: c.update(head_dim=15))
check.refused("an odd head_dim", [triax, "convert", "--from", "hf", odd, os.path.join(work, "out_3")],
              "config.json", "head_dim", "15")
shared_dir = os.path.join(work, "run_shared_expert")
run(triax, "train", moe_config, *[arg for s in COMMON for arg in ("--set", s)], "--set", "tokens.train_steps=2",
    "--set", M + "moe_config.enable_shared_expert=true", "--set", M + "moe_config.shared_expert_intermediate_size=32",
    "--set", f"checkpoints.checkpoints_path={shared_dir}")
check.refused("a shared expert exported", [triax, "convert", "--to", "hf", shared_dir, os.path.join(work, "out_4")],
              "enable_shared_expert", "Qwen3MoeForCausalLM")

check.finish()
