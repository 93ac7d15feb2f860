#!/usr/bin/env python3
"""Time share of a training step by kind of GPU work, from a triax profiler trace.

    python3 tools/device/step_profile.py TRACE.pt.trace.json[.gz] [--steps N] [--top K] [--by-op K]
                                         [--gaps K]

TRACE is a Chrome trace that the `profiler` config section writes
(`<profiler_export_path>/rank<R>_steps<A>-<B>.pt.trace.json`); the number of steps it covers is
read from that name unless --steps says it. Every GPU kernel, copy and fill is put into one kind
by its name (KINDS below, first match wins); "host gaps" is the time inside the traced window in
which the GPU ran nothing. Prints a markdown table: milliseconds per step and share of the
window per kind, then the K longest kernels (default 12) with their kind. With --by-op K, also the
K ATen ops (with the input shapes, when the trace recorded them: `profiler.record_shapes`) whose
GPU work took longest, and the rate of those that are matrix products (TFLOP/s from the shapes).
With --gaps K, also where the GPU sat idle: the idle time summed by what the host was doing
(the traced range, such as `backward 0` or `block layer N`, around the op that launched the work
after the gap) and the K longest gaps one by one, with the kernels on either side and the
longest CUDA runtime call inside each (a synchronisation or an allocation shows there).
"""
import argparse
import gzip
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

# (kind, pattern over the kernel's name), first match wins. Names are those of cuBLAS/CUTLASS,
# LibTorch's flash attention, triax's fused kernels (sdk/src/kernels) and ATen's generic kernels.
KINDS = [
    ("communication", r"nccl"),
    ("attention", r"flash|fmha|attention|sdp"),
    ("GEMM", r"gemm|cutlass|xmma|nvjet|cublas|sm90_|wgmma"),
    ("loss", r"cross_entropy|log_softmax|nll_loss|softmax"),
    ("optimizer", r"adam|multi_tensor|foreach|amp_update|lerp"),
    ("fused elementwise (triax)", r"rms_norm|swiglu|rotary|triax"),
    ("copies and fills", r"^memcpy|^memset|copy_kernel|fill_kernel|Memcpy|Memset"),
    ("other elementwise and reductions", r"."),
]
GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}


def kind_of(name):
    for kind, pattern in KINDS:
        if re.search(pattern, name, re.IGNORECASE):
            return kind
    return KINDS[-1][0]


def load_trace(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            trace = json.load(f)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as error:
        sys.exit(f"{path}: not a readable Chrome trace ({error})")
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def gpu_events(trace):
    return [e for e in trace if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES and "dur" in e]


def matmul_flops(name, dims):
    """FLOPs of a matrix product from its ATen op's input shapes, or None for other ops."""
    try:
        if name in ("aten::mm", "aten::bmm") or name.startswith("aten::_scaled_mm"):
            a, b = dims[0], dims[1]
            batch = a[0] if len(a) == 3 else 1
            return 2 * batch * a[-2] * a[-1] * b[-1]
        if name in ("aten::addmm",):
            a, b = dims[1], dims[2]
            return 2 * a[0] * a[1] * b[1]
    except (IndexError, TypeError):
        return None
    return None


def cpu_ops(trace):
    """The host-side ATen ops, as events."""
    return [e for e in trace if e.get("ph") == "X" and e.get("cat") == "cpu_op"]


def launchers(trace):
    """Kineto's External id -> the (innermost) host op that launched the GPU work carrying it."""
    return {e["args"]["External id"]: e for e in cpu_ops(trace) if e.get("args", {}).get("External id") is not None}


def launcher_of(ops, gpu_event):
    return ops.get(gpu_event.get("args", {}).get("External id"))


def by_op(trace, gpu, steps, top):
    """GPU time grouped by the CPU-side ATen op that launched it (the innermost one, through
    Kineto's External id) and its input shapes."""
    def key_and_dims(e):
        dims = e.get("args", {}).get("Input Dims")
        return (e["name"], json.dumps(dims) if dims else ""), dims

    calls = defaultdict(int)
    for e in cpu_ops(trace):
        calls[key_and_dims(e)[0]] += 1
    ops = launchers(trace)
    per_op = defaultdict(lambda: [0.0, 0, None])
    for e in gpu:
        op = launcher_of(ops, e)
        key, dims = key_and_dims(op) if op is not None else (("(no op)", ""), None)
        per_op[key][0] += e["dur"]
        per_op[key][1] += 1
        per_op[key][2] = dims
    print("\nlongest ops (GPU time summed per op and input shapes, per step):\n")
    print("| op | input shapes | ms per step | GPU operations per step | TFLOP/s |")
    print("|---|---|---|---|---|")
    gemm_us = gemm_flops = 0.0
    rows = sorted(per_op.items(), key=lambda kv: -kv[1][0])
    for rank, (key, (us, count, dims)) in enumerate(rows):
        flops = matmul_flops(key[0], dims)
        total_flops = flops * calls[key] if flops else 0  # us sums every call's kernels
        if total_flops:
            gemm_us += us
            gemm_flops += total_flops
        if rank < top:
            rate = f"{total_flops / (us * 1e6):.0f}" if total_flops else ""
            print(f"| `{key[0]}` | {key[1][:80]} | {us / 1e3 / steps:.2f} | {count / steps:.0f} | {rate} |")
    if gemm_us:
        print(f"\nmatrix products with shapes: {gemm_us / 1e3 / steps:.1f} ms per step at "
              f"{gemm_flops / (gemm_us * 1e6):.0f} TFLOP/s")


def innermost(ranges, t):
    """The shortest of the (start, end, name) ranges that holds time t, or None."""
    holding = [r for r in ranges if r[0] <= t <= r[1]]
    return min(holding, key=lambda r: r[1] - r[0])[2] if holding else None


def idle_intervals(gpu):
    """(start, end, kernel before, kernel after) for every stretch in which no GPU work ran."""
    out, end, before = [], None, None
    for e in sorted(gpu, key=lambda e: e["ts"]):
        if end is not None and e["ts"] > end:
            out.append((end, e["ts"], before, e))
        if end is None or e["ts"] + e["dur"] > end:
            end, before = e["ts"] + e["dur"], e
    return out


def gaps(trace, gpu, steps, top):
    """The GPU's idle time by what the host was doing, then the longest idle stretches."""
    ops = launchers(trace)
    ranges = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in trace
              if e.get("ph") == "X" and e.get("cat") == "user_annotation" and "dur" in e
              and not e["name"].startswith("ProfilerStep")]
    runtime = [e for e in trace if e.get("ph") == "X" and e.get("cat") == "cuda_runtime" and "dur" in e]

    def host_side(kernel):
        op = launcher_of(ops, kernel)
        if op is None:
            return "(no op)", "(no range)"
        return op["name"], innermost(ranges, op["ts"]) or "(outside any range)"

    idle = idle_intervals(gpu)
    per_place = defaultdict(lambda: [0.0, 0])
    for start, end, _, after in idle:
        op, place = host_side(after)
        key = (re.sub(r"\d+", "N", place), op)
        per_place[key][0] += end - start
        per_place[key][1] += 1
    total = sum(end - start for start, end, _, _ in idle)
    print(f"\nGPU idle time by where the host was: the traced range around the op that launched the work "
          f"after each gap ({total / 1e3 / steps:.2f} ms per step, {len(idle)} gaps in {steps} step(s)):\n")
    print("| range | op launching after the gap | idle ms per step | gaps per step |")
    print("|---|---|---|---|")
    for (place, op), (us, count) in sorted(per_place.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"| {place} | `{op}` | {us / 1e3 / steps:.3f} | {count / steps:.1f} |")
    print("\nlongest gaps:\n")
    print("| idle us | kernel before | kernel after | op after, in range | longest CUDA runtime call inside |")
    print("|---|---|---|---|---|")
    for start, end, before, after in sorted(idle, key=lambda g: g[0] - g[1])[:top]:
        inside = [r for r in runtime if r["ts"] < end and r["ts"] + r["dur"] > start]
        call = max(inside, key=lambda r: r["dur"]) if inside else None
        op, place = host_side(after)
        call_text = f"`{call['name']}` {call['dur']:.0f} us" if call else ""
        print(f"| {end - start:.0f} | `{before['name'][:40]}` | `{after['name'][:40]}` | `{op}` in {place} | {call_text} |")


def steps_from_name(path):
    m = re.search(r"_steps(\d+)-(\d+)\.pt\.trace\.json", Path(path).name)
    return int(m.group(2)) - int(m.group(1)) + 1 if m else None


def main(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--steps", type=int, default=None, help="steps the trace covers (default: from its name)")
    p.add_argument("--top", type=int, default=12, help="longest kernels to list (default 12)")
    p.add_argument("--by-op", type=int, default=0, metavar="K",
                   help="also list the K ops whose GPU work took longest, with their input shapes")
    p.add_argument("--gaps", type=int, default=0, metavar="K",
                   help="also list where the GPU sat idle: by host range and op, and the K longest gaps")
    a = p.parse_args(argv)
    steps = a.steps or steps_from_name(a.trace)
    if not steps:
        p.error(f"{a.trace}: the name does not say how many steps it covers (rank<R>_steps<A>-<B>...): give --steps")
    trace = load_trace(a.trace)
    events = gpu_events(trace)
    if not events:
        sys.exit(f"{a.trace}: no GPU events (a trace of a CPU run, or the CUDA activity was not recorded)")
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    window = end - start
    per_kind = defaultdict(float)
    per_kernel = defaultdict(lambda: [0.0, 0])
    for e in events:
        kind = kind_of(e["name"])
        per_kind[kind] += e["dur"]
        per_kernel[e["name"]][0] += e["dur"]
        per_kernel[e["name"]][1] += 1
    idle = sum(gap_end - gap_start for gap_start, gap_end, _, _ in idle_intervals(events))
    print(f"{Path(a.trace).name}: {steps} step(s), {window / 1e3 / steps:.2f} ms of GPU window per step, "
          f"{len(events) / steps:.0f} GPU operations per step\n")
    print("| kind | ms per step | share |")
    print("|---|---|---|")
    rows = sorted(per_kind.items(), key=lambda kv: -kv[1])
    # Kernels on different streams may overlap: the shares are of the summed kernel time plus the idle gaps.
    total = sum(per_kind.values()) + idle
    for kind, us in rows:
        print(f"| {kind} | {us / 1e3 / steps:.2f} | {100 * us / total:.1f}% |")
    print(f"| host gaps (GPU idle) | {idle / 1e3 / steps:.2f} | {100 * idle / total:.1f}% |")
    print(f"\nlongest kernels (summed over the window, per step):\n")
    print("| kernel | kind | ms per step | launches per step |")
    print("|---|---|---|---|")
    for name, (us, count) in sorted(per_kernel.items(), key=lambda kv: -kv[1][0])[: a.top]:
        short = name if len(name) <= 90 else name[:87] + "..."
        print(f"| `{short}` | {kind_of(name)} | {us / 1e3 / steps:.2f} | {count / steps:.0f} |")
    if a.by_op:
        by_op(trace, events, steps, a.by_op)
    if a.gaps:
        gaps(trace, events, steps, a.gaps)


if __name__ == "__main__":
    main(sys.argv[1:])
