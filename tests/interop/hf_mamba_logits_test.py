"""Hugging Face interop of the mamba plugin, end to end, against transformers' MambaForCausalLM on
CPU (its slow path without mamba-ssm: the reference), fp32, max |logit difference| <= 1e-4:

1. export: a tiny Mamba trained by triax (a vocabulary padded by pad_vocab_size_multiple; tied and
   untied) -> `triax convert --to hf` -> MambaForCausalLM.from_pretrained gives triax's logits;
2. import: a MambaForCausalLM made by transformers (tied and untied, one with in/out_proj biases)
   -> `triax convert --from hf` -> triax gives transformers' logits; the same straight from the
   Hugging Face folder through model.init_method.path's loader;
3. refusals: a Mamba-1 folder labelled Mamba2ForCausalLM (the mamba2 plugin reads that
   architecture and refuses its config.json: heads of Mamba2Config's default size do not fill the
   mixer) and a config.json whose intermediate_size is not expand x hidden_size, each naming
   config.json and the key.

usage: hf_mamba_logits_test.py TRIAX TRIAX_LOGITS CONFIG WORK_DIR
"""
import json
import os
import shutil
import sys

import torch
from transformers import MambaConfig, MambaForCausalLM

from hf_check import HfCheck

triax, triax_logits, config, work = sys.argv[1:5]
check = HfCheck(triax_logits, work, [5, 17, 99, 3, 42, 64, 7, 88, 21, 0, 13, 77, 5, 5])
run, compare, refused = check.run, check.compare, check.refused

# vocab 100 padded to 104 by pad_vocab_size_multiple 8; 2 layers of 32 channels.
MODEL = ["model.model_config.vocab_size=100", "model.model_config.d_model=32", "model.model_config.num_hidden_layers=2",
         "model.dtype=float32", "model.init_method.initializer_range=0.3", "tokens.sequence_length=16",
         "tokens.micro_batch_size=2", "tokens.batch_accumulation_per_replica=1"]

for tied in (True, False):
    name = "tied" if tied else "untied"
    # 1. triax -> Hugging Face
    run_dir, hf_dir, exported = check.train_and_export(
        triax, config, MODEL + [f"model.model_config.tie_word_embeddings={str(tied).lower()}"], name)
    assert exported["architectures"] == ["MambaForCausalLM"] and exported["vocab_size"] == 104, exported
    assert exported["intermediate_size"] == 64 and exported["tie_word_embeddings"] == tied, exported
    model = MambaForCausalLM.from_pretrained(hf_dir, torch_dtype=torch.float32).eval()
    compare(f"export ({name})", check.triax_logits(run_dir), check.hf_logits(model))

    # 2. Hugging Face -> triax
    for bias in ((False, True) if not tied else (False,)):
        label = name + (", biases" if bias else "")
        torch.manual_seed(3)
        made = MambaForCausalLM(MambaConfig(vocab_size=100, hidden_size=32, state_size=8, num_hidden_layers=2,
                                            expand=2, conv_kernel=4, time_step_rank=3, use_bias=bias,
                                            tie_word_embeddings=tied, torch_dtype="float32")).eval()
        with torch.no_grad():  # initialised biases are 0: make them count
            for pname, p in made.named_parameters():
                if pname.endswith("proj.bias") and "dt_proj" not in pname:
                    p.normal_(0.0, 0.3)
        made_dir = os.path.join(work, f"made_{label.replace(', ', '_')}")
        made.save_pretrained(made_dir, safe_serialization=True)
        imported = os.path.join(work, f"imported_{label.replace(', ', '_')}")
        run(triax, "convert", "--from", "hf", made_dir, imported)
        expected = check.hf_logits(made)
        compare(f"import through triax convert ({label})", check.triax_logits(imported), expected)
        compare(f"import straight from the folder ({label})", check.triax_logits(made_dir), expected)

# 3. refusals
made_dir = os.path.join(work, "made_untied")
bad = os.path.join(work, "bad_intermediate")
shutil.copytree(made_dir, bad)
with open(os.path.join(bad, "config.json")) as f:
    cfg = json.load(f)
cfg["intermediate_size"] = 96
with open(os.path.join(bad, "config.json"), "w") as f:
    json.dump(cfg, f)
def convert_from(folder):
    return [triax, "convert", "--from", "hf", folder, os.path.join(work, "refused")]


refused("mismatched intermediate_size", convert_from(bad), "config.json", "intermediate_size", "expand x hidden_size")

mamba2 = os.path.join(work, "mamba2")
shutil.copytree(made_dir, mamba2)
cfg = dict(cfg, architectures=["Mamba2ForCausalLM"], model_type="mamba2", intermediate_size=64)
with open(os.path.join(mamba2, "config.json"), "w") as f:
    json.dump(cfg, f)
# Read by the mamba2 plugin, whose refusal names config.json and the architecture.
refused("a Mamba-2 folder", convert_from(mamba2), "config.json", "Mamba2ForCausalLM")
# model.plugin: mamba with the folder as the weights and the model_config: the plugin's own refusal.
refused("a Mamba-2 folder given to the mamba plugin",
        [triax, "train", config, "--set", "model.model_config=null", "--set", f"model.init_method={{path: {mamba2}}}",
         "--set", f"checkpoints.checkpoints_path={work}/refused_run"],
        "config.json", "Mamba2ForCausalLM (Mamba-2) is not supported")

check.finish()
