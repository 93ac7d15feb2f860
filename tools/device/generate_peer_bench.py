#!/usr/bin/env python3
"""Peer baseline for `triax generate`: transformers' generate() on the same shape and prompts.

Builds LlamaForCausalLM with the shape of configs/bench/smollm-SIZE.yaml, random weights drawn
from a seeded normal of std 0.02 (as the bench config's init_method), in bf16 on the GPU, and
decodes greedily from the prompts `triax generate --prompt-ids 1,2,...,P --repeat B` uses: B rows
of the ids 1..P. Prints one JSON line per (mode, batch):

  {"peer": "transformers", "mode": "eager"|"static-compile", "model": "135m", "batch": 1,
   "prompt_tokens": 8, "new_tokens": 128, "prefill_s": ..., "decode_tokens_per_s": ...,
   "tokens_per_s": ...}

decode_tokens_per_s counts the tokens after each row's first, over the time after the prefill
(the time of a one-token generate() subtracted), the rate `triax generate` prints as "decode".

  python3 generate_peer_bench.py --model 135m [--batches 1,32] [--new-tokens 128] [--prompt 8]
                                 [--modes eager,static-compile]

static-compile is generate(cache_implementation="static"), transformers' documented fast path:
with a static cache generate() compiles the decoding forward itself (torch.compile with CUDA
graphs; wrapping model.forward in torch.compile as well makes its CUDA graphs' outputs be
overwritten between steps, an error in transformers 5.17). When a mode fails, its line says so
("error": ...) and the other modes still run.
"""
import argparse
import json
import time

import torch

# hidden, intermediate, layers, heads, kv heads of configs/bench/smollm-*.yaml (vocab 49152, tied).
MODELS = {
    "135m": (576, 1536, 30, 9, 3),
    "360m": (960, 2560, 32, 15, 5),
    "1.7b": (2048, 8192, 24, 32, 32),
}


def build(size, max_positions):
    from transformers import LlamaConfig, LlamaForCausalLM

    hidden, inter, layers, heads, kv = MODELS[size]
    config = LlamaConfig(vocab_size=49152, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=max_positions,
                         rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True, hidden_act="silu",
                         initializer_range=0.02, bos_token_id=None, eos_token_id=None, pad_token_id=0)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16).eval()
    return model


def timed_generate(model, ids, new_tokens, **extra):
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                         min_new_tokens=new_tokens, do_sample=False, **extra)
    torch.cuda.synchronize()
    assert out.shape[1] == ids.shape[1] + new_tokens, out.shape
    return time.perf_counter() - start


def measure(model, batch, prompt, new_tokens, repeats, **extra):
    ids = torch.arange(1, prompt + 1, device="cuda").unsqueeze(0).repeat(batch, 1)
    for _ in range(2):  # warm-up (and compilation)
        timed_generate(model, ids, new_tokens, **extra)
        timed_generate(model, ids, 1, **extra)
    whole = min(timed_generate(model, ids, new_tokens, **extra) for _ in range(repeats))
    prefill = min(timed_generate(model, ids, 1, **extra) for _ in range(repeats))
    return {"prefill_s": round(prefill, 5),
            "decode_tokens_per_s": round(batch * (new_tokens - 1) / max(whole - prefill, 1e-9), 1),
            "tokens_per_s": round(batch * new_tokens / whole, 1)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="135m", choices=sorted(MODELS))
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--prompt", type=int, default=8, help="prompt length: the ids 1..P")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--modes", default="eager,static-compile")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    model = build(a.model, max(2048, a.prompt + a.new_tokens))
    for mode in a.modes.split(","):
        extra = {}
        if mode == "static-compile":
            extra["cache_implementation"] = "static"
        elif mode != "eager":
            raise SystemExit(f"--modes: unknown mode {mode!r} (eager, static-compile)")
        for batch in (int(b) for b in a.batches.split(",")):
            line = {"peer": "transformers", "mode": mode, "model": a.model, "batch": batch,
                    "prompt_tokens": a.prompt, "new_tokens": a.new_tokens}
            try:
                line.update(measure(model, batch, a.prompt, a.new_tokens, a.repeats, **extra))
            except Exception as e:  # noqa: BLE001 - report the failure, keep measuring the rest
                line["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
