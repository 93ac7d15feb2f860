"""Hugging Face interop of the moe plugin, end to end, against transformers (fp32, max |logit
difference| <= 1e-4):

1. export: a tiny MoE trained by triax -> `triax convert --to hf` -> MixtralForCausalLM (no shared
   expert, gates renormalised) and Qwen2MoeForCausalLM (q/k/v biases, a shared expert, raw gates,
   one dense layer) give the logits triax gives on the same tokens;
2. import: a MixtralForCausalLM and a Qwen2MoeForCausalLM made by transformers -> `triax convert
   --from hf` -> triax gives transformers' logits; and the same straight from the folder;
3. a folder whose config.json names more experts than its weights hold is refused, naming the files.

usage: hf_moe_logits_test.py TRIAX TRIAX_LOGITS CONFIG WORK_DIR
"""
import json
import os
import shutil
import sys

import torch
from transformers import MixtralConfig, MixtralForCausalLM, Qwen2MoeConfig, Qwen2MoeForCausalLM

from hf_check import HfCheck

triax, triax_logits, config, work = sys.argv[1:5]
check = HfCheck(triax_logits, work, [5, 17, 99, 3, 42, 64, 7, 88, 21, 0, 13, 77])
run, compare = check.run, check.compare

M = "model.model_config."
COMMON = ["--set", M + "vocab_size=100", "--set", M + "hidden_size=32", "--set", M + "num_attention_heads=4",
          "--set", M + "num_key_value_heads=2", "--set", M + "rope_theta=500000.0", "--set", "model.dtype=float32",
          "--set", M + "tie_word_embeddings=false", "--set", "model.init_method={std: 0.1}"]
SHAPES = {
    # Mixtral: experts of intermediate_size features, every layer, renormalised top-2.
    "mixtral": ["--set", M + "intermediate_size=48", "--set", M + "moe_config.moe_intermediate_size=48",
                "--set", M + "moe_config.enable_shared_expert=false", "--set", M + "moe_config.norm_topk_prob=true"],
    # Qwen2-MoE (Qwen1.5-MoE): q/k/v biases, a shared expert, raw gates, layer 1 of 3 dense.
    "qwen2_moe": ["--set", M + "attention_bias=true", "--set", M + "intermediate_size=40", "--set", M + "num_hidden_layers=3",
                  "--set", M + "moe_config.layers=[0, 2]", "--set", M + "moe_config.moe_intermediate_size=24",
                  "--set", M + "moe_config.shared_expert_intermediate_size=40"],
}
ARCHITECTURE = {"mixtral": "MixtralForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM"}
MODEL_CLASS = {"mixtral": MixtralForCausalLM, "qwen2_moe": Qwen2MoeForCausalLM}

# 1. triax -> Hugging Face
for name, shape in SHAPES.items():
    run_dir = os.path.join(work, f"run_{name}")
    run(triax, "train", config, *COMMON, *shape, "--set", "tokens.train_steps=8",
        "--set", "checkpoints.checkpoint_interval=8", "--set", f"checkpoints.checkpoints_path={run_dir}")
    hf_dir = os.path.join(work, f"exported_{name}")
    run(triax, "convert", "--to", "hf", run_dir, hf_dir, "--dtype", "float32")
    with open(os.path.join(hf_dir, "config.json")) as f:
        exported = json.load(f)
    assert exported["architectures"] == [ARCHITECTURE[name]], exported
    model = MODEL_CLASS[name].from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    compare(f"export to {ARCHITECTURE[name]}", check.triax_logits(run_dir), check.hf_logits(model))

# 2. Hugging Face -> triax
torch.manual_seed(3)
made = {
    "mixtral": MixtralForCausalLM(MixtralConfig(
        vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, rope_theta=10000.0,
        max_position_embeddings=64, tie_word_embeddings=False, sliding_window=None, initializer_range=0.1)),
    "qwen2_moe": Qwen2MoeForCausalLM(Qwen2MoeConfig(
        vocab_size=100, hidden_size=32, intermediate_size=40, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
        shared_expert_intermediate_size=40, mlp_only_layers=[1], norm_topk_prob=False, qkv_bias=True,
        max_position_embeddings=64, tie_word_embeddings=False, initializer_range=0.1)),
}
for name, model in made.items():
    model.eval()
    with torch.no_grad():  # the router transformers initialises to zeros: give it scores that route
        for p in model.parameters():
            if p.dim() >= 2 and float(p.abs().max()) == 0.0:
                p.normal_(0.0, 0.5)
    made_dir = os.path.join(work, f"made_{name}")
    model.save_pretrained(made_dir, safe_serialization=True)
    imported = os.path.join(work, f"imported_{name}")
    run(triax, "convert", "--from", "hf", made_dir, imported)
    expected = check.hf_logits(model)
    compare(f"import {ARCHITECTURE[name]} through triax convert", check.triax_logits(imported), expected)
    compare(f"import {ARCHITECTURE[name]} straight from the folder", check.triax_logits(made_dir), expected)

# 3. config.json says 5 experts, the weights hold 4: refused, naming both files and the shapes.
bad_dir = os.path.join(work, "bad_expert_count")
shutil.copytree(os.path.join(work, "made_mixtral"), bad_dir)
with open(os.path.join(bad_dir, "config.json")) as f:
    bad = json.load(f)
bad["num_local_experts"] = 5
with open(os.path.join(bad_dir, "config.json"), "w") as f:
    json.dump(bad, f)
message = run(triax, "convert", "--from", "hf", bad_dir, os.path.join(work, "bad_out"), expect_failure=True)
print("expert count mismatch:", message.strip().splitlines()[-1])
if not all(part in message for part in ("model.safetensors", "config.json", "[4, 32]", "[5, 32]")):
    check.fail(f"the expert-count mismatch is not named clearly: {message}")

check.finish()
