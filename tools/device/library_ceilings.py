#!/usr/bin/env python3
"""What cuBLAS and cuDNN give a bench shape's GEMMs and attention on this GPU, alone.

    python3 tools/device/library_ceilings.py [--sizes 135m,1.7b,3b] [--what gemm,attention]

GEMMs: each linear layer of one micro-batch (the bench configs' tokens, hidden and ffn) in the
three products of a training step as triax calls them (forward x·Wᵀ, input gradient g·W, weight
gradient gᵀ·x), in bf16, milliseconds and TFLOP/s, and their sum over the layers. Attention:
PyTorch's scaled_dot_product_attention, causal, in attention's [batch, seq, heads, head_dim]
storage, forward and backward per layer and summed over the layers, for each backend that takes
the shape, with grouped key/value heads as they are (enable_gqa) and expanded to every query
head. Together with a profile (step_profile.py) these say how much of a step the libraries leave
to the rest. Prints one JSON line per measurement. Needs torch with CUDA.
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench import config_path, config_value  # tools/device/bench.py: the bench configs


def shape(size):
    """layers, tokens of a micro-batch, seq, hidden, heads, kv_heads, ffn, vocab of a bench config."""
    text = config_path("llama", size).read_text()

    def model(key):
        return config_value(text, "model", key)

    seq, mbs = config_value(text, "tokens", "sequence_length"), config_value(text, "tokens", "micro_batch_size")
    return (model("num_hidden_layers"), mbs * seq, seq, model("hidden_size"), model("num_attention_heads"),
            model("num_key_value_heads"), model("intermediate_size"), model("vocab_size"))


def milliseconds(fn, iterations=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iterations


def gemms(size):
    layers, tokens, _, hidden, heads, kv_heads, ffn, vocab = shape(size)
    head_dim = hidden // heads
    linears = [("qkv", hidden, (heads + 2 * kv_heads) * head_dim, layers), ("o", heads * head_dim, hidden, layers),
               ("gate_up", hidden, 2 * ffn, layers), ("down", ffn, hidden, layers), ("lm_head", hidden, vocab, 1)]
    total = 0.0
    for name, fan_in, fan_out, count in linears:
        x = torch.randn(tokens, fan_in, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(fan_out, fan_in, device="cuda", dtype=torch.bfloat16)
        g = torch.randn(tokens, fan_out, device="cuda", dtype=torch.bfloat16)
        flops = 2 * tokens * fan_in * fan_out
        times = {"forward": milliseconds(lambda: x @ w.t()), "input_grad": milliseconds(lambda: g @ w),
                 "weight_grad": milliseconds(lambda: g.t() @ x)}
        total += count * sum(times.values())
        print(json.dumps({"size": size, "gemm": name, "m_k_n": [tokens, fan_in, fan_out],
                          **{k: {"ms": round(v, 3), "tflops": round(flops / v / 1e9)} for k, v in times.items()}}))
        del x, w, g
    print(json.dumps({"size": size, "gemms_ms_per_micro_batch": round(total, 1)}), flush=True)


def attention(size):
    layers, tokens, seq, hidden, heads, kv_heads, _, _ = shape(size)
    batch, head_dim = tokens // seq, hidden // heads

    def stored(h):  # [batch, seq, h, head_dim] storage seen as [batch, h, seq, head_dim]
        return torch.randn(batch, seq, h, head_dim, device="cuda", dtype=torch.bfloat16).transpose(1, 2)

    q, k, v = (stored(n).requires_grad_() for n in (heads, kv_heads, kv_heads))
    grad = stored(heads)
    modes = ["gqa", "expanded"] if kv_heads != heads else ["mha"]
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
        for mode in modes:
            def step(backward):
                with sdpa_kernel([backend]):
                    if mode == "expanded":
                        repeat = heads // kv_heads
                        out = F.scaled_dot_product_attention(q, k.repeat_interleave(repeat, 1),
                                                             v.repeat_interleave(repeat, 1), is_causal=True)
                    else:
                        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=mode == "gqa")
                    if backward:
                        out.backward(grad)
            try:
                forward, both = milliseconds(lambda: step(False)), milliseconds(lambda: step(True))
                print(json.dumps({"size": size, "backend": backend.name, "kv_heads": mode, "forward_ms": round(forward, 3),
                                  "backward_ms": round(both - forward, 3), "ms_per_micro_batch": round(both * layers, 1)}),
                      flush=True)
            except RuntimeError as error:  # the backend does not take this shape
                print(json.dumps({"size": size, "backend": backend.name, "kv_heads": mode, "refused": str(error)[:120]}))
            q.grad = k.grad = v.grad = None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="135m,1.7b,3b")
    parser.add_argument("--what", default="gemm,attention")
    args = parser.parse_args()
    for size in args.sizes.split(","):
        if "gemm" in args.what:
            gemms(size)
        if "attention" in args.what:
            attention(size)


if __name__ == "__main__":
    main()
