#!/usr/bin/env python3
"""Peer baseline for the Mamba benchmarks: the training step of state-spaces' mamba-ssm.

What a Mamba user runs: `MambaLMHeadModel` (Mamba-1 layers, RMSNorm, the residual in fp32, the
fused add + norm, tied embeddings, vocab 50280) with mamba-ssm's and causal-conv1d's CUDA
kernels, on the shape of configs/bench/mamba-SIZE.yaml; random tokens, bf16 autocast over fp32
weights, fused AdamW, gradient clipping at 1.0. Prints one JSON line: tokens/s, an MFU
estimate, peak memory (the fields tools/device/bench.py reads). tools/device/build_mamba_peer.sh
builds and installs the two packages on the GPU machine.

  python3 mamba_ssm_peer.py --model 130m|370m|1.4b [--mbs 8] [--seq 2048] [--steps 10] [--warmup 3]

--decode measures generation instead, the peer of `triax generate` (docs/generation-performance.md): the
model in bf16, B rows of the prompt ids 1..P (`triax generate --prompt-ids 1,...,P --repeat B`),
`MambaLMHeadModel.generate(input_ids, max_length=P+N, cg=True, top_k=1)` (greedy, mamba-ssm's
CUDA-graph decoding) after one unmeasured generation at the batch size, then the same with
max_length=P+1 for the prefill's time. One JSON line per batch size:

  {"peer": "mamba-ssm", "mode": "decode", "model": "130m", "batch": 1, "prompt_tokens": 8,
   "new_tokens": 128, "prefill_s": ..., "decode_tokens_per_s": ..., "tokens_per_s": ...}

decode_tokens_per_s counts the tokens after each row's first over the time after the prefill, the
rate `triax generate` prints as "decode".

  python3 mamba_ssm_peer.py --decode --model 130m [--batches 1,32] [--prompt 8] [--new-tokens 128]

--device cpu runs the same loops on the CPU (a stand-in mamba_ssm package in the tests).
tools/device/mamba2_ssm_peer.py runs this loop on mamba-ssm's Mamba-2 layers.
"""
import argparse
import time

import torch

from mamba_peer_common import (D_CONV, D_STATE, EXPAND, MODELS, VOCAB, print_result, timed_result,
                               train_flops_per_token, train_step)


def argument_parser(sizes, default_size, description):
    """The flags of both mamba-ssm peers; `sizes` are the --model choices."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=default_size, choices=sizes)
    ap.add_argument("--mbs", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--peak", type=float, default=989e12, help="bf16 dense peak FLOP/s for the MFU (H100/H200)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    return ap


def build_model(a, dtype=torch.float32):
    from mamba_ssm.models.config_mamba import MambaConfig
    from mamba_ssm.models.mixer_seq_simple import MambaLMHeadModel

    d_model, layers = MODELS[a.model]
    config = MambaConfig(d_model=d_model, d_intermediate=0, n_layer=layers, vocab_size=VOCAB,
                         ssm_cfg=dict(layer="Mamba1", d_state=D_STATE, d_conv=D_CONV, expand=EXPAND),
                         rms_norm=True, residual_in_fp32=True, fused_add_norm=True, pad_vocab_size_multiple=8,
                         tie_embeddings=True)
    return MambaLMHeadModel(config, device=a.device, dtype=dtype)


def timed_generation(a, model, ids, max_length):
    """Seconds of one greedy CUDA-graph generation up to max_length tokens per row."""
    if a.device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    out = model.generate(ids, max_length=max_length, cg=True, top_k=1)
    if a.device == "cuda":
        torch.cuda.synchronize()
    assert tuple(out.shape) == (ids.shape[0], max_length), out.shape
    return time.perf_counter() - start


def decode_and_report(a, model):
    """One JSON line per batch size of a.batches: the generation rates (the module's docstring)."""
    model.eval()
    with torch.inference_mode():
        for batch in (int(b) for b in a.batches.split(",")):
            ids = torch.arange(1, a.prompt + 1, device=a.device).unsqueeze(0).repeat(batch, 1)
            whole_length = a.prompt + a.new_tokens
            timed_generation(a, model, ids, whole_length)  # warm-up: captures this batch size's graphs
            whole = timed_generation(a, model, ids, whole_length)
            prefill = timed_generation(a, model, ids, a.prompt + 1)
            print_result(dict(peer="mamba-ssm", mode="decode", model=a.model, batch=batch, prompt_tokens=a.prompt,
                              new_tokens=a.new_tokens, prefill_s=round(prefill, 5),
                              decode_tokens_per_s=round(batch * (a.new_tokens - 1) / max(whole - prefill, 1e-9), 1),
                              tokens_per_s=round(batch * a.new_tokens / whole, 1), torch=torch.__version__))


def train_and_report(a, model, vocab_size, flops_per_token):
    """Trains `model` on random tokens below `vocab_size` (a.warmup steps, then a.steps timed ones)
    and prints the JSON result line, its MFU from `flops_per_token`."""
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.01, fused=True)
    x = torch.randint(0, vocab_size, (a.mbs, a.seq + 1), device=a.device)
    inp, tgt = x[:, :-1].contiguous(), x[:, 1:].contiguous()

    def step():
        return train_step(torch, model, model, opt, inp, tgt, a.device)

    t0 = time.time()
    for _ in range(a.warmup):
        step()
    if a.device == "cuda":
        torch.cuda.synchronize()
    print_result(timed_result(torch, step, a, "mamba-ssm", params, time.time() - t0, flops_per_token))


def main(argv=None):
    ap = argument_parser(sorted(MODELS), "130m", __doc__)
    ap.add_argument("--decode", action="store_true", help="time generate(cg=True) instead of training")
    ap.add_argument("--batches", default="1,32", help="--decode: the batch sizes, comma-separated")
    ap.add_argument("--prompt", type=int, default=8, help="--decode: prompt length, the ids 1..P")
    ap.add_argument("--new-tokens", type=int, default=128, help="--decode: tokens generated per row")
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    if a.decode:
        decode_and_report(a, build_model(a, dtype=torch.bfloat16))
        return
    d_model, layers = MODELS[a.model]
    train_and_report(a, build_model(a), VOCAB, train_flops_per_token(d_model, layers, a.seq))


if __name__ == "__main__":
    main()
