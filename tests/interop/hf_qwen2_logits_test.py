"""Hugging Face interop of the qwen2 plugin, end to end, against transformers (fp32, max |logit
difference| <= 1e-4):

1. export: a tiny Qwen2 trained by triax with q/k/v biases -> `triax convert --to hf` ->
   Qwen2ForCausalLM, and one without biases and every 2nd layer NoPE -> SmolLM3ForCausalLM, each
   also with a sliding window of 4; each loads in transformers and gives the logits triax gives
   on the same tokens;
2. import: a Qwen2ForCausalLM and a SmolLM3ForCausalLM (NoPE layers 2 and 5 of 6) made by
   transformers, with and without a sliding window on every layer -> `triax convert --from hf` ->
   triax gives transformers' logits; and the same straight from the folder;
3. refusals: a SmolLM3 whose NoPE layers are no interval, and a qwen2 model with biases and NoPE
   layers (no Hugging Face architecture holds both), each naming the key.

usage: hf_qwen2_logits_test.py TRIAX TRIAX_LOGITS CONFIG WORK_DIR
"""
import json
import os
import shutil
import sys

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM, SmolLM3Config, SmolLM3ForCausalLM

from hf_check import HfCheck

triax, triax_logits, config, work = sys.argv[1:5]
check = HfCheck(triax_logits, work, [5, 17, 99, 3, 42, 64, 7, 88, 21, 0, 13, 77])
run, compare = check.run, check.compare

M = "model.model_config."
COMMON = ["--set", "model.dtype=float32", "--set", "model.init_method={std: 0.1}", "--set", "tokens.train_steps=8",
          "--set", "checkpoints.checkpoint_interval=8"]
SHAPES = {
    "qwen2": ("Qwen2ForCausalLM", Qwen2ForCausalLM, ["--set", M + "attention_bias=true", "--set", M + "no_rope_layer=null"]),
    "smollm3": ("SmolLM3ForCausalLM", SmolLM3ForCausalLM,
                ["--set", M + "attention_bias=false", "--set", M + "no_rope_layer=2"]),
    # A window of 4 keys is shorter than the 12 compared tokens: a wrong window changes the logits.
    "qwen2_window": ("Qwen2ForCausalLM", Qwen2ForCausalLM, ["--set", M + "attention_bias=true", "--set",
                                                            M + "no_rope_layer=null", "--set", M + "sliding_window_size=4"]),
    "smollm3_window": ("SmolLM3ForCausalLM", SmolLM3ForCausalLM, ["--set", M + "attention_bias=false", "--set",
                                                                  M + "no_rope_layer=2", "--set", M + "sliding_window_size=4"]),
}

# 1. triax -> Hugging Face
for name, (architecture, model_class, shape) in SHAPES.items():
    run_dir = os.path.join(work, f"run_{name}")
    run(triax, "train", config, *COMMON, *shape, "--set", f"checkpoints.checkpoints_path={run_dir}")
    hf_dir = os.path.join(work, f"exported_{name}")
    run(triax, "convert", "--to", "hf", run_dir, hf_dir, "--dtype", "float32")
    with open(os.path.join(hf_dir, "config.json")) as f:
        exported = json.load(f)
    assert exported["architectures"] == [architecture], exported
    model = model_class.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    if name == "smollm3":
        assert list(model.config.no_rope_layers) == [1, 0], model.config.no_rope_layers
    if name.endswith("_window"):
        assert exported["sliding_window"] == 4 and set(model.config.layer_types) == {"sliding_attention"}, exported
    compare(f"export {name} to {architecture}", check.triax_logits(run_dir), check.hf_logits(model))

# 2. Hugging Face -> triax
torch.manual_seed(5)
common = dict(vocab_size=100, hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2,
              rope_theta=10000.0, max_position_embeddings=64, tie_word_embeddings=False, initializer_range=0.1,
              bos_token_id=1, eos_token_id=2, pad_token_id=None)
made = {
    "Qwen2ForCausalLM": Qwen2ForCausalLM(Qwen2Config(num_hidden_layers=3, use_sliding_window=False, **common)),
    "SmolLM3ForCausalLM": SmolLM3ForCausalLM(SmolLM3Config(num_hidden_layers=6, no_rope_layer_interval=3,
                                                           use_sliding_window=False, **common)),
    "Qwen2ForCausalLM_window": Qwen2ForCausalLM(Qwen2Config(num_hidden_layers=3, use_sliding_window=True,
                                                            sliding_window=4, max_window_layers=0, **common)),
    "SmolLM3ForCausalLM_window": SmolLM3ForCausalLM(SmolLM3Config(
        num_hidden_layers=6, no_rope_layer_interval=3, use_sliding_window=True, sliding_window=4,
        layer_types=["sliding_attention"] * 6, **common)),
}
for architecture, model in made.items():
    model.eval()
    with torch.no_grad():  # transformers initialises biases to zeros: give them values that count
        for n, p in model.named_parameters():
            if n.endswith(".bias"):
                p.normal_(0.0, 0.5)
    check.import_and_compare(triax, model, architecture)

# 3. Refusals.
bad_dir = os.path.join(work, "bad_no_rope_layers")
shutil.copytree(os.path.join(work, "made_SmolLM3ForCausalLM"), bad_dir)
with open(os.path.join(bad_dir, "config.json")) as f:
    bad = json.load(f)
bad["no_rope_layers"] = [1, 0, 0, 1, 1, 1]
with open(os.path.join(bad_dir, "config.json"), "w") as f:
    json.dump(bad, f)
check.refused("NoPE layers that are no interval", [triax, "convert", "--from", "hf", bad_dir,
                                                   os.path.join(work, "bad_out")], "no_rope_layers", "interval")
both_dir = os.path.join(work, "run_bias_and_nope")
run(triax, "train", config, *COMMON, "--set", M + "attention_bias=true", "--set", M + "no_rope_layer=2",
    "--set", f"checkpoints.checkpoints_path={both_dir}")
check.refused("biases with NoPE layers", [triax, "convert", "--to", "hf", both_dir, os.path.join(work, "both_out")],
              "attention_bias", "SmolLM3ForCausalLM")

check.finish()
