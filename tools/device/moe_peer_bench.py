#!/usr/bin/env python3
"""The peer of configs/bench/moe-1b.yaml: transformers' MixtralForCausalLM of the same shape,
trained on random tokens, one JSON line with its throughput.

Shape (defaults = moe-1b): vocab 49152 tied, hidden 1024, 16 layers, 16 heads over 8 kv heads, 8
experts of 2048 features, top-2. bf16 autocast over fp32 parameters, fused AdamW (lr 3e-4,
betas 0.9/0.95, weight decay 0.01), gradient clipping at 1.0, the router's load-balancing loss
added with coefficient 0.01 (output_router_logits), optionally torch.compile.

MFU on active parameters, the formula triax logs (MoeModel::kFlopsFormula):
  FLOPs/token = 6 * N_active + 12 * L * h * s,
  N_active = L * (h*(q + 2*kv) + q*h + h*E + top_k * 3*h*F) + h * V   (the head; embeddings are lookups)
  MFU = tokens/s * FLOPs/token / 989e12 (H100/H200 dense bf16 peak).

  python3 tools/device/moe_peer_bench.py --mbs 8 --seq 2048 --compile
prints {"model": ..., "tokens_per_s": ..., "tflops": ..., "mfu_989": ..., "peak_mem_gib": ..., "params": ...,
"active_params": ...}: the median over the steps after --warmup.
"""
import argparse
import json
import statistics
import time

import torch
from transformers import MixtralConfig, MixtralForCausalLM


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="moe-1b", help="a name for the JSON line (the shape comes from the flags)")
    p.add_argument("--mbs", type=int, default=8, help="sequences per step (default 8)")
    p.add_argument("--seq", type=int, default=2048, help="sequence length (default 2048)")
    p.add_argument("--steps", type=int, default=30, help="training steps (default 30)")
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the median (default 5)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--vocab", type=int, default=49152)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--expert-features", type=int, default=2048)
    return p.parse_args()


def active_flops_per_token(a):
    h, head_dim = a.hidden, a.hidden // a.heads
    q, kv = a.heads * head_dim, a.kv_heads * head_dim
    per_layer = h * (q + 2 * kv) + q * h + h * a.experts + a.top_k * 3 * h * a.expert_features
    active = a.layers * per_layer + h * a.vocab
    return 6 * active + 12 * a.layers * h * a.seq, active


def main():
    a = parse_args()
    torch.manual_seed(0)
    config = MixtralConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.expert_features,
                           num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                           num_local_experts=a.experts, num_experts_per_tok=a.top_k, max_position_embeddings=a.seq,
                           tie_word_embeddings=True, sliding_window=None, router_aux_loss_coef=0.01,
                           output_router_logits=True, use_cache=False, rms_norm_eps=1e-5)
    device = torch.device("cuda")
    model = MixtralForCausalLM(config).to(device).train()
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.01,
                                  fused=True)
    step_model = torch.compile(model) if a.compile else model
    flops, active = active_flops_per_token(a)
    tokens = a.mbs * a.seq
    times = []
    torch.cuda.reset_peak_memory_stats()
    for step in range(a.steps):
        ids = torch.randint(0, a.vocab, (a.mbs, a.seq), device=device)
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = step_model(input_ids=ids, labels=ids)
        out.loss.backward()  # the LM loss plus router_aux_loss_coef times the balance loss
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times[a.warmup:] if len(times) > a.warmup else times)
    tokens_per_s = tokens / seconds
    tflops = tokens_per_s * flops / 1e12
    print(json.dumps({"model": a.model, "compile": a.compile, "mbs": a.mbs, "seq": a.seq,
                      "tokens_per_s": tokens_per_s, "tflops": tflops, "mfu_989": tflops / 989.0,
                      "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30, "params": params,
                      "active_params": active, "step_s": seconds, "final_loss": float(out.loss)}))


if __name__ == "__main__":
    main()
