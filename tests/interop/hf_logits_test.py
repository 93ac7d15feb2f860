"""Hugging Face interop, end to end, against transformers (fp32, max |logit difference| <= 1e-4):

1. export: a tiny Llama trained by triax (GQA, rope_theta 500000, a vocabulary padded for tp;
   tied and untied) -> `triax convert --to hf` -> LlamaForCausalLM.from_pretrained gives the
   logits triax gives on the same tokens;
2. import: a LlamaForCausalLM made by transformers (GQA, rope_theta 500000; tied and untied) ->
   `triax convert --from hf` -> triax gives transformers' logits; and the same straight from the
   Hugging Face folder through model.init_method.path's loader;
3. training starts from the Hugging Face folder (model.init_method.path) and its loss falls.

usage: hf_logits_test.py TRIAX TRIAX_LOGITS CONFIG WORK_DIR
"""
import json
import os
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from hf_check import HfCheck

triax, triax_logits, config, work = sys.argv[1:5]
check = HfCheck(triax_logits, work, [5, 17, 99, 3, 42, 64, 7, 88, 21, 0, 13, 77])
run, compare = check.run, check.compare

MODEL = ["--set", "model.model_config.vocab_size=100", "--set", "model.make_vocab_size_divisible_by=16",
         "--set", "model.model_config.hidden_size=64", "--set", "model.model_config.intermediate_size=96",
         "--set", "model.model_config.num_attention_heads=4", "--set", "model.model_config.num_key_value_heads=2",
         "--set", "model.model_config.rope_theta=500000.0", "--set", "model.dtype=float32"]

for tied in (True, False):
    name = "tied" if tied else "untied"
    # 1. triax -> Hugging Face
    run_dir = os.path.join(work, f"run_{name}")
    run(triax, "train", config, *MODEL, "--set", f"model.model_config.tie_word_embeddings={str(tied).lower()}",
        "--set", "tokens.train_steps=20", "--set", "checkpoints.checkpoint_interval=20",
        "--set", f"checkpoints.checkpoints_path={run_dir}")
    hf_dir = os.path.join(work, f"exported_{name}")
    run(triax, "convert", "--to", "hf", run_dir, hf_dir, "--dtype", "float32")
    with open(os.path.join(hf_dir, "config.json")) as f:
        exported = json.load(f)
    assert exported["architectures"] == ["LlamaForCausalLM"] and exported["rope_theta"] == 500000.0, exported
    model = LlamaForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32)
    compare(f"export ({name})", check.triax_logits(run_dir), check.hf_logits(model))

    # 2. Hugging Face -> triax
    torch.manual_seed(3)
    made = LlamaForCausalLM(LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, rope_theta=500000.0,
                                        max_position_embeddings=128, tie_word_embeddings=tied,
                                        torch_dtype="float32")).eval()
    made_dir = os.path.join(work, f"made_{name}")
    made.save_pretrained(made_dir, safe_serialization=True)
    imported = os.path.join(work, f"imported_{name}")
    run(triax, "convert", "--from", "hf", made_dir, imported)
    expected = check.hf_logits(made)
    compare(f"import through triax convert ({name})", check.triax_logits(imported), expected)
    compare(f"import straight from the folder ({name})", check.triax_logits(made_dir), expected)

    # 3. training starts from the Hugging Face weights
    out = run(triax, "train", config, *MODEL, "--set", f"model.model_config.tie_word_embeddings={str(tied).lower()}",
              "--set", "model.model_config.num_hidden_layers=2", "--set", "model.model_config.max_position_embeddings=128",
              "--set", f"model.init_method={{path: {made_dir}}}", "--set", "tokens.train_steps=2",
              "--set", "checkpoints.checkpoint_interval=0", "--set", f"checkpoints.checkpoints_path={work}/from_hf_{name}")

check.finish()
