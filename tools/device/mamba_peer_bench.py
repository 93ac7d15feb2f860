#!/usr/bin/env python3
"""Peer baseline for the Mamba benchmarks: the training step of Hugging Face's MambaForCausalLM.

A user without the mamba-ssm and causal-conv1d packages gets transformers' PyTorch path (the
scan as a loop over the sequence). This script builds MambaForCausalLM with the shape of
configs/bench/mamba-SIZE.yaml (state-spaces' mamba-130m/370m/1.4b), trains it on random tokens
with bf16 autocast over fp32 weights, fused AdamW and gradient clipping at 1.0, and prints one
JSON line: tokens/s, an MFU estimate, peak memory (the fields tools/device/bench.py reads).

  python3 mamba_peer_bench.py --model 130m|370m|1.4b [--compile] [--mbs 8] [--seq 2048] [--steps 5]

Measured on one H200 (eager, 130m, mbs 1, seq 2048): about 28 s per step and 21.5 GiB, so keep
--steps small; the memory grows with mbs (the loop keeps every position's state for the backward
pass), so mbs 8 may not fit in eager mode (not measured).

--compile wraps the model in torch.compile; when compiling fails or the warm-up steps take longer
than --compile-timeout seconds, the run falls back to eager mode and the JSON says so
("compile": "failed: ..." and "peer": "hf-mamba").
"""
import argparse
import signal
import time

import torch

from mamba_peer_common import (D_CONV, D_STATE, EXPAND, MODELS, VOCAB, print_result, timed_result,
                               train_flops_per_token, train_step)


class CompileTimeout(Exception):
    pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="130m", choices=sorted(MODELS))
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--compile-timeout", type=float, default=240.0)
    ap.add_argument("--mbs", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--peak", type=float, default=989e12, help="bf16 dense peak FLOP/s for the MFU (H100/H200)")
    a = ap.parse_args()
    a.device = "cuda"
    from transformers import MambaConfig, MambaForCausalLM

    d_model, layers = MODELS[a.model]
    cfg = MambaConfig(vocab_size=VOCAB, hidden_size=d_model, state_size=D_STATE, num_hidden_layers=layers,
                      expand=EXPAND, conv_kernel=D_CONV, layer_norm_epsilon=1e-5, residual_in_fp32=True,
                      use_bias=False, use_conv_bias=True, time_step_rank="auto", tie_word_embeddings=True,
                      use_cache=False)
    torch.manual_seed(0)
    dev = "cuda"
    model = MambaForCausalLM(cfg).to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.01, fused=True)
    x = torch.randint(0, VOCAB, (a.mbs, a.seq + 1), device=dev)
    inp, tgt = x[:, :-1].contiguous(), x[:, 1:].contiguous()
    compile_note = None
    fwd = model
    if a.compile:
        fwd = torch.compile(model)
        compile_note = "ok"

    def step(forward):
        return train_step(torch, forward, model, opt, inp, tgt, "cuda")

    def on_alarm(signum, frame):
        raise CompileTimeout()

    t0 = time.time()
    try:
        if a.compile:
            signal.signal(signal.SIGALRM, on_alarm)
            signal.alarm(max(1, int(a.compile_timeout)))
        for _ in range(a.warmup):
            step(fwd)
        torch.cuda.synchronize()
    except CompileTimeout:
        compile_note = f"failed: warm-up took over {a.compile_timeout:.0f} s; eager instead"
    except Exception as e:  # noqa: BLE001 - any compile failure falls back to eager mode
        if not a.compile or isinstance(e, torch.cuda.OutOfMemoryError):
            raise
        compile_note = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}; eager instead"
    finally:
        if a.compile:
            signal.alarm(0)
    if compile_note and compile_note.startswith("failed"):
        print(f"[peer] torch.compile {compile_note}", flush=True)
        fwd = model
        opt.zero_grad(set_to_none=True)
        for _ in range(a.warmup):
            step(fwd)
        torch.cuda.synchronize()
    warm_s = time.time() - t0
    compiled = a.compile and compile_note == "ok"
    res = timed_result(torch, lambda: step(fwd), a, "hf-mamba" + ("+compile" if compiled else ""), nparams, warm_s,
                       train_flops_per_token(d_model, layers, a.seq))
    if compile_note:
        res["compile"] = compile_note
    print_result(res)


if __name__ == "__main__":
    main()
