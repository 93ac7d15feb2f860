"""The GPT-2 example plugin (sdk/examples/gpt2) against transformers' GPT2LMHeadModel, on CPU,
fp32, max |logit difference| <= 1e-4:

1. export: a tiny GPT-2 trained by triax (tied and untied embeddings) -> `triax convert --to hf`
   -> GPT2LMHeadModel.from_pretrained gives triax's logits;
2. import: a GPT2LMHeadModel made by transformers, biases drawn at random -> `triax convert --from hf`
   -> triax gives transformers' logits, also straight from the Hugging Face folder;
3. generation with the cache: `triax generate` on the imported folder, greedy, equals
   GPT2LMHeadModel.generate(do_sample=False) token for token, for prompts of different lengths;
4. refusals: a config.json whose attention scaling the plugin lacks, naming config.json and the key.

The plugin is found through TRIAX_PLUGIN_PATH (the example's build folder).

usage: hf_gpt2_test.py TRIAX TRIAX_LOGITS CONFIG PLUGIN_DIR WORK_DIR
"""
import json
import os
import shutil
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
from hf_check import HfCheck  # noqa: E402

triax, triax_logits, config, plugin_dir, work = sys.argv[1:6]
os.environ["TRIAX_PLUGIN_PATH"] = plugin_dir
check = HfCheck(triax_logits, work, [5, 17, 99, 3, 42, 64, 7, 88, 21, 0, 13, 77, 5, 5])
run = check.run


# 1. triax -> Hugging Face, after 10 steps at broad initial weights (so that logits differ a lot).
for tied in (True, False):
    name = "tied" if tied else "untied"
    run_dir = os.path.join(work, f"run_{name}")
    run(triax, "train", "--config", config, "--set", f"plugins.paths=[{plugin_dir}]",
        "--set", f"model.model_config.tie_word_embeddings={str(tied).lower()}", "--set", "model.init_method.std=0.3",
        "--set", "checkpoints.checkpoint_interval=10", "--set", f"checkpoints.checkpoints_path={run_dir}")
    hf_dir = os.path.join(work, f"exported_{name}")
    run(triax, "convert", "--to", "hf", run_dir, hf_dir, "--dtype", "float32")
    with open(os.path.join(hf_dir, "config.json")) as f:
        exported = json.load(f)
    assert exported["architectures"] == ["GPT2LMHeadModel"] and exported["n_inner"] == 256, exported
    assert exported["tie_word_embeddings"] == tied, exported
    model = GPT2LMHeadModel.from_pretrained(hf_dir, dtype=torch.float32).eval()
    check.compare(f"export ({name})", check.triax_logits(run_dir), check.hf_logits(model))

# 2. Hugging Face -> triax
torch.manual_seed(3)
made = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=32, n_embd=64, n_layer=2, n_head=4,
                                  bos_token_id=1, eos_token_id=2)).eval()
with torch.no_grad():  # broad weights, so that greedy choices are clear; biases and norms that count
    for pname, p in made.named_parameters():
        p.add_(torch.randn_like(p) * (0.3 if p.dim() == 2 else 0.2))
made_dir = os.path.join(work, "made")
made.save_pretrained(made_dir, safe_serialization=True)
imported = os.path.join(work, "imported")
run(triax, "convert", "--from", "hf", made_dir, imported)
expected = check.hf_logits(made)
check.compare("import through triax convert", check.triax_logits(imported), expected)
check.compare("import straight from the folder", check.triax_logits(made_dir), expected)

# 3. greedy generation with the cache, against transformers' (which uses its own cache).
prompts = [[5, 17, 99], [42], [7, 88, 21, 0, 13, 77, 5]]
out = os.path.join(work, "generated.jsonl")
flags = [flag for p in prompts for flag in ("--prompt-ids", ",".join(map(str, p)))]
run(triax, "generate", made_dir, "--max-new-tokens", "12", "--output", out, *flags)
with open(out) as lines:
    ours = [json.loads(line)["new_ids"] for line in lines]
for i, prompt in enumerate(prompts):
    with torch.no_grad():
        theirs = made.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                               do_sample=False, max_new_tokens=12, eos_token_id=2, pad_token_id=2)
    theirs = theirs[0, len(prompt):].tolist()
    ok = ours[i] == theirs and len(set(theirs)) >= 3
    print(f"generate, prompt {i}: {'equal' if ok else 'DIFFERENT'}: triax {ours[i]}, transformers {theirs}")
    if not ok:
        check.fail(f"generate, prompt {i}: triax {ours[i]} vs transformers {theirs}")

# 4. a feature the plugin lacks is refused naming config.json and the key
bad = os.path.join(work, "bad")
shutil.copytree(made_dir, bad)
with open(os.path.join(bad, "config.json")) as f:
    cfg = json.load(f)
cfg["scale_attn_by_inverse_layer_idx"] = True
with open(os.path.join(bad, "config.json"), "w") as f:
    json.dump(cfg, f)
check.refused("scale_attn_by_inverse_layer_idx", [triax, "convert", "--from", "hf", bad, os.path.join(work, "refused")],
              "config.json", "scale_attn_by_inverse_layer_idx")

check.finish()
