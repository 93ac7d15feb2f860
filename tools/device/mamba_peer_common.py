"""What the Mamba peer scripts share: the Mamba-1 model shapes of configs/bench/mamba-SIZE.yaml and
their FLOPs count, the training step, and the timed steps with their one JSON result line (the
fields tools/device/bench.py reads: tokens_per_s, mfu_989, peak_mem_gib, params, tflops,
flops_per_token)."""
import json
import math
import time

# d_model, layers of state-spaces' checkpoints; every one: vocab 50280, d_state 16, d_conv 4, expand 2.
MODELS = {"130m": (768, 24), "370m": (1024, 48), "1.4b": (2048, 48)}
VOCAB, D_STATE, D_CONV, EXPAND = 50280, 16, 4, 2


def train_flops_per_token(d_model, layers, seq):
    """3x the forward's multiply-adds x 2: the projections, the conv, the scan, the lm_head."""
    inner, rank = EXPAND * d_model, math.ceil(d_model / 16)
    proj = d_model * 2 * inner + inner * (rank + 2 * D_STATE) + rank * inner + inner * d_model
    conv = inner * D_CONV
    scan = 3 * inner * D_STATE  # decay-times-state, input, output contraction per position
    forward = 2 * layers * (proj + conv + scan) + 2 * d_model * VOCAB
    return 3 * forward


def train_step(torch, forward, model, opt, inp, tgt, device):
    """One training step: bf16 autocast over the fp32 weights, the loss in fp32, clipping at 1.0."""
    with torch.autocast(device, dtype=torch.bfloat16):
        logits = forward(input_ids=inp).logits
    loss = torch.nn.functional.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def timed_result(torch, step, a, peer, params, warm_s, flops_per_token):
    """Runs a.steps steps between two CUDA events (peak memory counted from here on) and returns
    the result line's fields, the MFU from `flops_per_token` (training FLOPs per token); the
    caller adds its own and prints json.dumps of it."""
    timing = a.device == "cuda"
    if timing:
        torch.cuda.reset_peak_memory_stats()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    t0 = time.time()
    for _ in range(a.steps):
        loss = step()
    if timing:
        end.record()
        torch.cuda.synchronize()
        ms = start.elapsed_time(end) / a.steps
        peak = torch.cuda.max_memory_allocated() / 2**30
    else:
        ms, peak = (time.time() - t0) * 1e3 / a.steps, 0.0
    tps = a.mbs * a.seq / (ms / 1e3)
    fpt = flops_per_token
    return dict(peer=peer, model=a.model, params=params, mbs=a.mbs, seq=a.seq, step_ms=round(ms, 2),
                tokens_per_s=round(tps), mfu_989=round(tps * fpt / a.peak, 4), tflops=round(tps * fpt / 1e12, 1),
                flops_per_token=round(fpt), peak_mem_gib=round(peak, 2), warmup_s=round(warm_s, 1),
                loss=round(loss.item(), 3), torch=torch.__version__)


def print_result(result):
    print(json.dumps(result), flush=True)
