#!/usr/bin/env python3
"""How much of an AdamW pass hides under a forward pass on a second CUDA stream.

Times, on the GPU machine, the forward of a 1.7b-shaped stack (24 layers of hidden 2048, ffn 8192,
32 heads, micro-batch 8 x 2048 tokens: the q/k/v, o, gate/up and down products, causal SDPA,
SwiGLU) alone, LibTorch's fused AdamW over as many fp32 parameters (the embedding and each
layer's, one call per layer) alone, the two one after the other, and the two at once: AdamW on
a second stream layer by layer, each layer's forward waiting for that layer's update, as an
optimizer overlapped with the next step's forward would run. It prints one JSON line of
milliseconds (medians of --reps), for each pair of stream priorities.

    python3 tools/device/optimizer_overlap_probe.py [--reps 5]

Not a triax test: it measures the hardware's room for that overlap (docs/step_profile.md).
"""
import argparse
import json

import torch
import torch.nn.functional as F

LAYERS, HIDDEN, FFN, HEADS, BATCH, SEQ, VOCAB = 24, 2048, 8192, 32, 8, 2048, 49152


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    dev, bf16 = "cuda", torch.bfloat16
    x0 = torch.randn(BATCH * SEQ, HIDDEN, device=dev, dtype=bf16)

    def weight(rows, cols):
        return torch.randn(rows, cols, device=dev, dtype=bf16) * 0.02

    weights = [dict(qkv=weight(HIDDEN, 3 * HIDDEN), o=weight(HIDDEN, HIDDEN), gate_up=weight(HIDDEN, 2 * FFN),
                    down=weight(FFN, HIDDEN)) for _ in range(LAYERS)]
    # Optimizer state: parameter, gradient and both moments in fp32, the embedding first.
    sizes = [VOCAB * HIDDEN] + [4 * HIDDEN * HIDDEN + 3 * HIDDEN * FFN] * LAYERS
    state = [[torch.zeros(n, device=dev) for _ in range(4)] for n in sizes]
    steps = [torch.zeros((), device=dev) for _ in sizes]
    for tensors in state:
        tensors[1].normal_()

    def layer(x, w):
        q, k, v = (x @ w["qkv"]).view(BATCH, SEQ, 3, HEADS, HIDDEN // HEADS).permute(2, 0, 3, 1, 4)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + attended.transpose(1, 2).reshape(BATCH * SEQ, HIDDEN) @ w["o"]
        gate, up = (x @ w["gate_up"]).chunk(2, dim=1)
        return x + (F.silu(gate) * up) @ w["down"]

    def forward(updated=None):  # updated[i]: the event after block i's update (0: the embedding)
        x = x0
        for i in range(LAYERS + 1):
            if updated is not None:
                torch.cuda.current_stream().wait_event(updated[i])
            if i > 0:
                x = layer(x, weights[i - 1])
        return x

    def adamw(i):
        p, g, m, v = state[i]
        torch._fused_adamw_([p], [g], [m], [v], [], [steps[i]], lr=1e-4, beta1=0.9, beta2=0.95, weight_decay=0.01,
                            eps=1e-8, amsgrad=False, maximize=False)

    def median_ms(fn):
        for _ in range(2):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(args.reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return sorted(times)[len(times) // 2]

    def overlapped(forward_priority, optimizer_priority):
        main = torch.cuda.Stream(priority=forward_priority)
        side = torch.cuda.Stream(priority=optimizer_priority)

        def run():
            begin = torch.cuda.Event()
            begin.record()
            side.wait_event(begin)
            main.wait_event(begin)
            updated = []
            with torch.cuda.stream(side):
                for i in range(len(state)):
                    adamw(i)
                    updated.append(torch.cuda.Event())
                    updated[-1].record(side)
            with torch.cuda.stream(main):
                forward(updated)
                done = torch.cuda.Event()
                done.record(main)
            torch.cuda.current_stream().wait_event(done)
            torch.cuda.current_stream().wait_event(updated[-1])

        return run

    with torch.no_grad():
        result = {
            "forward_ms": median_ms(forward),
            "adamw_ms": median_ms(lambda: [adamw(i) for i in range(len(state))]),
            "one_after_the_other_ms": median_ms(lambda: ([adamw(i) for i in range(len(state))], forward())),
        }
        # CUDA stream priorities: lower is higher; 0 is the default streams'.
        for name, forward_priority, optimizer_priority in [("overlapped_same_priority_ms", 0, 0),
                                                           ("overlapped_forward_first_ms", -1, 0),
                                                           ("overlapped_optimizer_first_ms", 0, -1)]:
            result[name] = median_ms(overlapped(forward_priority, optimizer_priority))
    best = min(v for k, v in result.items() if k.startswith("overlapped"))
    result["hidden_share_of_adamw"] = (result["one_after_the_other_ms"] - best) / result["adamw_ms"]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
