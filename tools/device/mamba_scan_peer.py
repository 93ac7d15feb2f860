#!/usr/bin/env python3
"""The peer column of mamba_scan_bench --peer: mamba-ssm's selective_scan_fn forward and backward
timed on the tensors the benchmark saved (torch.save format: u, delta, z, B, C, A, D, delta_bias,
grad_y), the same call the Mamba block makes (D skip, z gate, delta bias and softplus). Prints one
JSON line: forward_ms (no autograd), forward_training_ms (the autograd forward that keeps the
backward's chunk states), backward_ms (torch.autograd.grad of every input).

  python3 mamba_scan_peer.py TENSORS.pt [--iterations 20]
"""
import argparse
import json

import torch


def time_ms(launch, iterations, warmup=3):
    for _ in range(warmup):
        launch()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        launch()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iterations


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tensors")
    ap.add_argument("--iterations", type=int, default=20)
    a = ap.parse_args()
    import mamba_ssm
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn

    # Written by mamba_scan_bench in the same run through LibTorch's pickler, whose type tags the
    # weights-only loader refuses.
    t = {k: v.cuda() for k, v in torch.load(a.tensors, weights_only=False).items()}
    names = ["u", "delta", "A", "B", "C", "D", "z", "delta_bias"]

    def scan(inputs):
        u, delta, A, B, C, D, z, bias = inputs
        return selective_scan_fn(u, delta, A, B, C, D, z, bias, delta_softplus=True)

    plain = [t[n] for n in names]
    with torch.no_grad():
        forward = time_ms(lambda: scan(plain), a.iterations)
    leaves = [x.detach().requires_grad_() for x in plain]
    training = time_ms(lambda: scan(leaves), a.iterations)
    out = scan(leaves)
    backward = time_ms(lambda: torch.autograd.grad(out, leaves, t["grad_y"], retain_graph=True), a.iterations)
    print(json.dumps({"peer": "mamba-ssm " + mamba_ssm.__version__, "dtype": str(t["u"].dtype).replace("torch.", ""),
                      "forward_ms": round(forward, 4), "forward_training_ms": round(training, 4),
                      "backward_ms": round(backward, 4)}), flush=True)


if __name__ == "__main__":
    main()
