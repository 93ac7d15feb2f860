"""Hugging Face interop of the mamba2 plugin, end to end, against transformers' Mamba2ForCausalLM
on CPU (its PyTorch path without mamba-ssm: the reference), fp32, max |logit difference| <= 1e-4:

1. export: a tiny Mamba-2 trained by triax (tied and untied; a chunk size that does not divide the
   14 tokens) -> `triax convert --to hf` -> Mamba2ForCausalLM.from_pretrained gives triax's logits;
2. import: a Mamba2ForCausalLM made by transformers (tied and untied, one with in/out_proj biases
   and a time-step limit) -> `triax convert --from hf` -> triax gives transformers' logits; the
   same straight from the Hugging Face folder through model.init_method.path's loader;
3. refusals: a config.json whose n_groups do not divide num_heads, and one whose heads do not fill
   the mixer, each naming config.json and the key.

usage: hf_mamba2_logits_test.py TRIAX TRIAX_LOGITS CONFIG WORK_DIR
"""
import os
import sys

import torch
from transformers import Mamba2Config, Mamba2ForCausalLM

from hf_check import HfCheck

triax, triax_logits, config, work = sys.argv[1:5]
check = HfCheck(triax_logits, work, [5, 17, 99, 3, 42, 64, 7, 88, 21, 0, 13, 77, 5, 5])
run, compare, refused = check.run, check.compare, check.refused

# vocab 100; 2 layers of 32 channels: 8 heads of 8 in 2 groups, state 8, chunks of 5.
M = "model.model_config."
MODEL = [M + "vocab_size=100", M + "hidden_size=32", M + "num_hidden_layers=2", M + "num_heads=8", M + "head_dim=8",
         M + "state_size=8", M + "chunk_size=5", "model.dtype=float32", "model.init_method.initializer_range=0.3",
         "tokens.sequence_length=16", "tokens.micro_batch_size=2", "tokens.batch_accumulation_per_replica=1"]

for tied in (True, False):
    name = "tied" if tied else "untied"
    # 1. triax -> Hugging Face
    run_dir, hf_dir, exported = check.train_and_export(triax, config, MODEL + [f"{M}tie_word_embeddings={str(tied).lower()}"],
                                                       name)
    assert exported["architectures"] == ["Mamba2ForCausalLM"] and exported["n_groups"] == 2, exported
    assert exported["chunk_size"] == 5 and exported["tie_word_embeddings"] == tied, exported
    model = Mamba2ForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    assert model.config.time_step_limit[1] == float("inf"), model.config.time_step_limit
    compare(f"export ({name})", check.triax_logits(run_dir), check.hf_logits(model))

    # 2. Hugging Face -> triax
    for bias in ((False, True) if not tied else (False,)):
        label = name + (", biases and a time-step limit" if bias else "")
        torch.manual_seed(3)
        limit = (0.05, 0.5) if bias else (0.0, float("inf"))
        made = Mamba2ForCausalLM(Mamba2Config(vocab_size=100, hidden_size=32, num_heads=8, head_dim=8, n_groups=2,
                                              state_size=8, num_hidden_layers=2, conv_kernel=4, chunk_size=4,
                                              use_bias=bias, time_step_limit=limit, tie_word_embeddings=tied,
                                              torch_dtype="float32")).eval()
        with torch.no_grad():  # initialised biases are 0: make them count
            for pname, p in made.named_parameters():
                if pname.endswith("proj.bias") or pname.endswith("conv1d.bias"):
                    p.normal_(0.0, 0.3)
        slug = "made_" + name + ("_biases" if bias else "")
        made_dir = os.path.join(work, slug)
        made.save_pretrained(made_dir, safe_serialization=True)
        imported = os.path.join(work, slug.replace("made", "imported"))
        run(triax, "convert", "--from", "hf", made_dir, imported)
        expected = check.hf_logits(made)
        compare(f"import through triax convert ({label})", check.triax_logits(imported), expected)
        compare(f"import straight from the folder ({label})", check.triax_logits(made_dir), expected)

# 3. refusals
made_dir = os.path.join(work, "made_untied")
def refused_config(what, change, *needles):
    check.refused_config(triax, made_dir, what, change, *needles)


refused_config("groups that do not divide the heads", {"n_groups": 3}, "n_groups", "do not divide num_heads (8)")
refused_config("heads that do not fill the mixer", {"head_dim": 4}, "num_heads", "must equal expand x hidden_size")
refused_config("no chunks", {"chunk_size": 0}, "chunk_size", "must be positive")

check.finish()
