"""`triax generate` against transformers' generate(), greedy, token for token.

A tiny Llama (broad random weights, a few training steps, so that it says varied tokens) is
trained by triax on real text (the GPL-3 licence, tokenized by tools/tokenize with
a byte-level BPE of 320 tokens whose <|endoftext|> is the model's eos_token_id), exported with
`triax convert --to hf` (which copies the run's tokenizer.json beside it), and then:
1. from the Hugging Face folder, a batch of text prompts of different lengths: the prompt ids equal
   transformers' tokenizer's, the new ids equal LlamaForCausalLM.generate(do_sample=False) on each
   prompt alone, and the text equals the tokenizer's decoding of them;
2. from the triax checkpoint (its tokenizer found through the config's dataset folder), the same
   tokens, from the text prompts and from their token ids;
3. sampling from the Hugging Face folder is reproducible with its seed.

usage: generate_test.py TRIAX SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import torch
from tokenizers import Tokenizer
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

triax, source, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
PROMPTS = ["This License", "You may convey", "the", "The GNU General Public License is a free, copyleft license"]
NEW_TOKENS = 24
failures = []


def run(*args):
    result = subprocess.run(list(args), capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout + result.stderr


def generated(model, *extra):
    out = os.path.join(work, "out.jsonl")
    log = run(triax, "generate", model, "--max-new-tokens", str(NEW_TOKENS), "--output", out, *extra)
    with open(out) as lines:
        return [json.loads(line) for line in lines], log


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(f"{what}: {detail}")


tokens = os.path.join(work, "tokens")
text = os.path.join(work, "text")
os.makedirs(text)
shutil.copy("/usr/share/common-licenses/GPL-3", os.path.join(text, "GPL-3.txt"))
run(sys.executable, os.path.join(source, "tools", "tokenize"), "--tokenizer", "bpe:320", "--output", tokens, text)
tokenizer_file = os.path.join(tokens, "tokenizer.json")
eos = Tokenizer.from_file(tokenizer_file).token_to_id("<|endoftext|>")
run_dir = os.path.join(work, "run")
run(triax, "train", "--config", os.path.join(source, "configs", "tiny_llama_text.yaml"),
    "--set", f"checkpoints.checkpoints_path={run_dir}", "--set", "tokens.train_steps=10",
    "--set", "model.init_method.std=0.3",
    "--set", f"data_stages.0.data.dataset.dataset_folder={tokens}", "--set", "model.model_config.vocab_size=320",
    "--set", f"model.model_config.eos_token_id={eos}", "--set", "model.dtype=float32")
hf = os.path.join(work, "hf")
converted = run(triax, "convert", "--to", "hf", run_dir, hf)
check("the export carries the run's tokenizer.json", os.path.isfile(os.path.join(hf, "tokenizer.json")) and
      open(os.path.join(hf, "tokenizer.json")).read() == open(tokenizer_file).read(), converted)

prompt_flags = [flag for p in PROMPTS for flag in ("--prompt", p)]
ours, log = generated(hf, *prompt_flags)
check("the log states tokens/s", "tokens/s" in log, log)
model = LlamaForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()
hf_tokenizer = PreTrainedTokenizerFast(tokenizer_file=tokenizer_file)
for i, prompt in enumerate(PROMPTS):
    ids = hf_tokenizer(prompt).input_ids
    check(f"prompt {i}: ids equal the tokenizer's", ours[i]["prompt_ids"] == ids, f"{ours[i]['prompt_ids']} vs {ids}")
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             do_sample=False, max_new_tokens=NEW_TOKENS, eos_token_id=eos, pad_token_id=eos)
    theirs = out[0, len(ids):].tolist()
    check(f"prompt {i}: greedy tokens equal transformers' generate()", ours[i]["new_ids"] == theirs,
          f"triax {ours[i]['new_ids']}\ntransformers {theirs}")
    # Broad random weights (std 0.3, a few steps): varied tokens, so that equality means something.
    check(f"prompt {i}: the model says more than one token", len(set(theirs)) >= 4, theirs)
    check(f"prompt {i}: text equals the tokenizer's decoding",
          ours[i]["text"] == hf_tokenizer.decode(theirs, skip_special_tokens=True), ours[i]["text"])
    print(f"  {prompt!r} -> {ours[i]['text']!r}")

from_checkpoint, log = generated(run_dir, *prompt_flags)
check("checkpoint, text prompts: the Hugging Face folder's tokens",
      [s["new_ids"] for s in from_checkpoint] == [s["new_ids"] for s in ours], log)
check("checkpoint: the tokenizer found through the config's dataset folder", tokenizer_file in log, log)
id_flags = [flag for s in ours for flag in ("--prompt-ids", ",".join(map(str, s["prompt_ids"])))]
from_ids, _ = generated(run_dir, *id_flags)
check("checkpoint, token-id prompts: the same tokens", [s["new_ids"] for s in from_ids] == [s["new_ids"] for s in ours])

sampling = ["--temperature", "0.9", "--top-p", "0.95", "--seed", "5"]
first, _ = generated(hf, *prompt_flags, *sampling)
again, _ = generated(hf, *prompt_flags, *sampling)
check("sampling is reproducible with a seed", first == again)

# A file the tokenizers library cannot read is refused naming it.
bad = os.path.join(work, "not_a_tokenizer.json")
with open(bad, "w") as f:
    f.write("{}")
refused = subprocess.run([triax, "generate", hf, "--tokenizer", bad, "--prompt", "Hi"], capture_output=True, text=True)
check("a broken tokenizer.json is refused naming it",
      refused.returncode != 0 and f"{bad}: not a tokenizer.json the tokenizers library reads" in refused.stderr,
      refused.stderr)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("triax generate matches transformers' generate()")
