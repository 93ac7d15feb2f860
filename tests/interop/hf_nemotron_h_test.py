"""Hugging Face interop of the nemotron_h plugin, end to end, against transformers'
NemotronHForCausalLM on CPU (its PyTorch path: the reference), fp32, max |logit difference| <= 1e-4:

1. export: a tiny hybrid trained by triax -> `triax convert --to hf` ->
   NemotronHForCausalLM.from_pretrained gives triax's logits; a tied one is refused (transformers'
   NemotronHForCausalLM never ties its lm_head);
2. import: a NemotronHForCausalLM made by transformers (one with MLP and Mamba biases, one with E
   layers: grouped sigmoid routing with a nonzero e_score_correction_bias) -> `triax convert --from
   hf` -> triax gives transformers' logits, also straight from the folder; exported back, every
   tensor is bit-identical to the one imported;
3. generation: `triax generate` with the cache (conv and SSM state per Mamba-2 layer, K/V per
   attention layer, nothing for MLP and E layers) gives transformers' greedy generate() tokens;
4. refusals: E layers without n_routed_experts, moe_latent_size set, groups that do not divide the
   heads and chunk_size 0, each naming config.json and the key.

usage: hf_nemotron_h_test.py TRIAX TRIAX_LOGITS CONFIG WORK_DIR
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import NemotronHConfig, NemotronHForCausalLM

from hf_check import HfCheck

triax, triax_logits, config, work = sys.argv[1:5]
check = HfCheck(triax_logits, work, [5, 17, 99, 3, 42, 64, 7, 88, 21, 0, 13, 77, 5, 5])
run, compare, refused = check.run, check.compare, check.refused

M = "model.model_config."
MODEL = [M + "vocab_size=100", M + "hidden_size=32", M + "mamba_num_heads=8", M + "mamba_head_dim=8",
         M + "ssm_state_size=8", M + "chunk_size=5", M + "num_attention_heads=4", M + "num_key_value_heads=2",
         M + "head_dim=8", M + "intermediate_size=48", "model.dtype=float32", "model.init_method.initializer_range=0.3",
         "tokens.sequence_length=16", "tokens.micro_batch_size=2", "tokens.batch_accumulation_per_replica=1"]

# 1. triax -> Hugging Face
run_dir, hf_dir, exported = check.train_and_export(triax, config, MODEL, "untied")
assert exported["architectures"] == ["NemotronHForCausalLM"], exported
assert exported["layers_block_type"][-1] == "moe" and exported["n_routed_experts"] == 4, exported
model = NemotronHForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
assert model.config.hybrid_override_pattern == "M-M*E", model.config.hybrid_override_pattern
compare("export", check.triax_logits(run_dir), check.hf_logits(model))
tied_run = os.path.join(work, "run_tied")
run(triax, "train", config, *[arg for s in MODEL for arg in ("--set", s)], "--set", f"{M}tie_word_embeddings=true",
    "--set", "tokens.train_steps=2", "--set", "checkpoints.checkpoint_interval=2",
    "--set", f"checkpoints.checkpoints_path={tied_run}")
refused("export of tied embeddings", [triax, "convert", "--to", "hf", tied_run, os.path.join(work, "refused_tied")],
        "tie_word_embeddings", "never ties")


# E layers: 8 experts in 4 groups, 3 per token from the best 2 groups, renormalised and scaled.
MOE = dict(n_routed_experts=8, num_experts_per_tok=3, n_group=4, topk_group=2, norm_topk_prob=True,
           routed_scaling_factor=2.5, moe_intermediate_size=24, moe_shared_expert_intermediate_size=40)


def made_model(pattern, bias, tied, seed=3, time_step_min=0.01):
    torch.manual_seed(seed)
    made = NemotronHForCausalLM(NemotronHConfig(
        vocab_size=100, hidden_size=32, hybrid_override_pattern=pattern, num_attention_heads=4, num_key_value_heads=2,
        head_dim=8, intermediate_size=48, mlp_bias=bias, mamba_num_heads=8, mamba_head_dim=8, ssm_state_size=8,
        n_groups=2, conv_kernel=4, chunk_size=4, use_bias=bias, tie_word_embeddings=tied, initializer_range=0.3,
        time_step_min=time_step_min, pad_token_id=0, bos_token_id=1, eos_token_id=2, dtype="float32",
        **MOE)).eval()
    with torch.no_grad():  # initialised biases are 0: make them count; the routing bias changes choices
        for pname, p in made.named_parameters():
            if pname.endswith(".bias"):
                p.normal_(0.0, 0.3)
        for bname, b in made.named_buffers():
            if bname.endswith("e_score_correction_bias"):
                b.normal_(0.0, 0.2)
    return made


# 2. Hugging Face -> triax, and back
for pattern, bias, tied in (("M*-M-*", False, False), ("*M-M", True, True), ("M*EM-E", False, False)):
    # tie_word_embeddings in config.json: transformers still keeps lm_head apart, and so does the import.
    name = pattern.replace("*", "A").replace("-", "P") + ("_bias" if bias else "")
    made_dir = check.import_and_compare(triax, made_model(pattern, bias, tied), name)
    imported = os.path.join(work, f"imported_{name}")
    label = f"{pattern}{', biases' if bias else ''}{', tie_word_embeddings' if tied else ''}"
    back = os.path.join(work, f"back_{name}")
    run(triax, "convert", "--to", "hf", imported, back, "--dtype", "float32")
    original = load_file(os.path.join(made_dir, "model.safetensors"))
    returned = load_file(os.path.join(back, "model.safetensors"))
    different = [k for k in original if k not in returned or not torch.equal(original[k], returned[k])]
    different += sorted(set(returned) - set(original))
    if different:
        check.fail(f"round trip ({label}): tensors differ, are missing or extra: {different}")
    else:
        print(f"round trip ({label}): {len(original)} tensors bit-identical")

# 3. greedy generation through the caches against transformers' generate()
# transformers clamps dt at time_step_min in its chunked scan but not in its one-token decoding
# step, and triax clamps in both: a minimum of 1e-6 keeps the clamp from deciding a token.
PROMPTS = [[5, 17, 99, 3, 42, 64, 7], [88, 21], [13, 77, 5, 5, 9, 31, 40, 41, 60, 70, 3]]
for pattern in ("M*-M-*", "M*EM-E"):
    made = made_model(pattern, False, False, seed=5, time_step_min=1e-6)
    gen_dir = os.path.join(work, "made_generate_" + pattern.replace("*", "A").replace("-", "P"))
    made.save_pretrained(gen_dir, safe_serialization=True)
    out = os.path.join(gen_dir, "generated.jsonl")
    run(triax, "generate", gen_dir, "--max-new-tokens", "12", "--output", out,
        *[arg for p in PROMPTS for arg in ("--prompt-ids", " ".join(map(str, p)))])
    with open(out) as lines:
        ours = [json.loads(line)["new_ids"] for line in lines]
    for i, prompt in enumerate(PROMPTS):
        with torch.no_grad():
            theirs = made.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                   max_new_tokens=12, do_sample=False)[0, len(prompt):].tolist()
        if ours[i] != theirs:
            check.fail(f"generation {pattern}, prompt {i}: triax {ours[i]} != transformers {theirs}")
        else:
            print(f"generation {pattern}, prompt {i}: {len(theirs)} greedy tokens equal transformers' generate()")

# 4. refusals
made_dir = os.path.join(work, "made_MAPMPA")


def refused_config(what, change, *needles, folder=made_dir):
    check.refused_config(triax, folder, what, change, *needles)


moe_dir = os.path.join(work, "made_MAEMPE")
refused_config("E layers without their experts", {"n_routed_experts": None}, "n_routed_experts", folder=moe_dir)
refused_config("a latent projection", {"moe_latent_size": 16}, "moe_latent_size", "no latent projection",
               folder=moe_dir)
refused_config("groups that do not divide the heads", {"n_groups": 3}, "n_groups", "do not divide mamba_num_heads (8)")
refused_config("no chunks", {"chunk_size": 0}, "chunk_size", "must be positive")

check.finish()
