"""The sliding window (model_config.sliding_window_size) against transformers, whose Mixtral
`sliding_window` and Qwen2-MoE `layer_types`/`sliding_window` mean what nanotron's key means (a
query sees itself and the window - 1 tokens before it). fp32, max |logit difference| <= 1e-4 on
12 tokens with a window of 4 (so the window cuts most queries):

1. import: a MixtralForCausalLM and a Qwen2MoeForCausalLM with windowed layers, made by
   transformers -> triax (straight from the folder) gives transformers' logits, and these differ
   from the same weights without a window;
2. export: a tiny MoE with sliding_window_size 4 trained by triax -> `triax convert --to hf` ->
   transformers gives triax's logits, for both architectures;
3. refusals: a window on some layers only (layer_types, max_window_layers), naming the key, and
   a window longer than the run's sequence.

usage: hf_sliding_window_test.py TRIAX TRIAX_LOGITS CONFIG WORK_DIR
"""
import json
import os
import sys

import torch
from transformers import MixtralConfig, MixtralForCausalLM, Qwen2MoeConfig, Qwen2MoeForCausalLM

from hf_check import HfCheck

triax, triax_logits, config, work = sys.argv[1:5]
check = HfCheck(triax_logits, work, [5, 17, 99, 3, 42, 64, 7, 88, 21, 0, 13, 77])
run, compare = check.run, check.compare
WINDOW = 4

SHAPE = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             num_experts_per_tok=2, max_position_embeddings=64, tie_word_embeddings=False, initializer_range=0.1)


def mixtral(window):
    return MixtralForCausalLM(MixtralConfig(**SHAPE, intermediate_size=48, num_local_experts=4, sliding_window=window))


def qwen2_moe(window):
    extra = dict(use_sliding_window=True, sliding_window=window, layer_types=["sliding_attention"] * 2) if window else {}
    return Qwen2MoeForCausalLM(Qwen2MoeConfig(**SHAPE, intermediate_size=40, num_experts=4, moe_intermediate_size=24,
                                              shared_expert_intermediate_size=40, norm_topk_prob=False,
                                              qkv_bias=False, **extra))


# 1. Hugging Face -> triax
for name, make in (("mixtral", mixtral), ("qwen2_moe", qwen2_moe)):
    torch.manual_seed(3)
    model = make(WINDOW).eval()
    with torch.no_grad():  # the router transformers initialises to zeros: give it scores that route
        for p in model.parameters():
            if p.dim() >= 2 and float(p.abs().max()) == 0.0:
                p.normal_(0.0, 0.5)
    folder = os.path.join(work, f"made_{name}")
    model.save_pretrained(folder, safe_serialization=True)
    expected = check.hf_logits(model)
    compare(f"import {name} with a window of {WINDOW}", check.triax_logits(folder), expected)
    unwindowed = make(None).eval()
    unwindowed.load_state_dict(model.state_dict())
    if abs(check.hf_logits(unwindowed) - expected).max() < 1e-3:
        check.fail(f"{name}: the window changes nothing on these tokens; the comparison proves nothing")

# 2. triax -> Hugging Face
M = "model.model_config."
COMMON = ["--set", M + "vocab_size=100", "--set", M + "hidden_size=32", "--set", M + "num_attention_heads=4",
          "--set", M + "num_key_value_heads=2", "--set", "model.dtype=float32", "--set", M + "tie_word_embeddings=false",
          "--set", "model.init_method={std: 0.1}", "--set", M + f"sliding_window_size={WINDOW}"]
SHAPES = {
    "mixtral": ["--set", M + "intermediate_size=48", "--set", M + "moe_config.moe_intermediate_size=48",
                "--set", M + "moe_config.enable_shared_expert=false", "--set", M + "moe_config.norm_topk_prob=true"],
    "qwen2_moe": ["--set", M + "intermediate_size=40", "--set", M + "moe_config.moe_intermediate_size=24",
                  "--set", M + "moe_config.shared_expert_intermediate_size=40"],
}
CLASSES = {"mixtral": MixtralForCausalLM, "qwen2_moe": Qwen2MoeForCausalLM}
for name, shape in SHAPES.items():
    run_dir = os.path.join(work, f"run_{name}")
    run(triax, "train", config, *COMMON, *shape, "--set", "tokens.train_steps=4",
        "--set", "checkpoints.checkpoint_interval=4", "--set", f"checkpoints.checkpoints_path={run_dir}")
    hf_dir = os.path.join(work, f"exported_{name}")
    run(triax, "convert", "--to", "hf", run_dir, hf_dir, "--dtype", "float32")
    with open(os.path.join(hf_dir, "config.json")) as f:
        print(f"exported {name}:", {k: v for k, v in json.load(f).items() if "window" in k or k == "layer_types"})
    model = CLASSES[name].from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    compare(f"export {name} with a window of {WINDOW}", check.triax_logits(run_dir), check.hf_logits(model))

# 3. Refusals.
for key, change in (("layer_types", {"layer_types": ["sliding_attention", "full_attention"]}),
                    ("use_sliding_window", {"layer_types": None})):
    folder = os.path.join(work, f"bad_{key}")
    run("cp", "-r", os.path.join(work, "made_qwen2_moe"), folder)
    with open(os.path.join(folder, "config.json")) as f:
        bad = json.load(f)
    bad.update(change)
    bad = {k: v for k, v in bad.items() if v is not None}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(bad, f)
    check.refused(f"qwen2_moe {key}", [triax, "convert", "--from", "hf", folder, folder + "_out"], key)
check.refused("a window longer than the sequence",
              [triax, "train", config, *COMMON, *SHAPES["mixtral"], "--set", M + "sliding_window_size=4096",
               "--set", "tokens.train_steps=1", "--set", f"checkpoints.checkpoints_path={work}/too_long"],
              "sliding_window_size", "longer than tokens.sequence_length")

check.finish()
