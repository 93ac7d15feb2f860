#!/usr/bin/env python3
"""tools/device/step_profile.py on a small hand-made trace of two steps, run as its docstring says
(`python3 tools/device/step_profile.py TRACE ...`): the time per kind, the longest kernels, the GPU
time by launching op, and the idle GPU time put where the host was.

    python3 tests/bench/step_profile_test.py PROJECT_SOURCE_DIR
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def kernel(name, ts, dur, ext):
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "args": {"External id": ext}}


def op(name, ts, dur, ext):
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "args": {"External id": ext}}


def annotation(name, ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": name, "ts": ts, "dur": dur}


def step_events(t0, ext0):
    """One step: a GEMM in layer 3's forward, a 300 us gap waiting on a synchronisation, an RMSNorm
    kernel launched inside layer 7, a 100 us gap, then the optimizer in no range at all."""
    return [
        annotation("ProfilerStep#1", t0, 2000),  # never a place: it holds every step
        annotation("forward 0", t0, 1000),
        annotation("block layer 3", t0, 400),
        op("aten::mm", t0 + 10, 20, ext0),
        kernel("nvjet_sm90_tst_128x256_gemm", t0 + 50, 500, ext0),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": t0 + 560, "dur": 280},
        annotation("block layer 7", t0 + 700, 250),
        op("triax::rms_norm", t0 + 840, 5, ext0 + 1),
        kernel("triax::kernels::rms_norm_forward_kernel", t0 + 850, 150, ext0 + 1),
        op("triax::adamw_step", t0 + 1050, 10, ext0 + 2),
        kernel("fused_adamw_kernel", t0 + 1100, 400, ext0 + 2),
    ]


def main(source_dir):
    trace = {"traceEvents": step_events(0, 10) + step_events(2050, 20)}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rank0_steps7-8.pt.trace.json"
        path.write_text(json.dumps(trace))
        result = subprocess.run(["python3", str(Path(source_dir) / "tools/device/step_profile.py"), str(path),
                                 "--by-op", "5", "--gaps", "5"], capture_output=True, text=True, check=False)
    out = result.stdout
    print(out, result.stderr)
    failures = []

    def expect(text):
        if text not in out:
            failures.append(f"missing from the output: {text!r}")

    if result.returncode != 0:
        failures.append(f"exit status {result.returncode}")
    expect("2 step(s)")
    # The GPU window of the two steps: 50 .. 3550 us, of which 2 x 1050 us busy.
    expect("| GEMM | 0.50 |")
    expect("| optimizer | 0.40 |")
    expect("| fused elementwise (triax) | 0.15 |")
    # Idle: 300 + 100 us in each step, and 600 us between the steps (from the first step's
    # optimizer to the next GEMM, launched inside `block layer 3`).
    expect("| host gaps (GPU idle) | 0.70 |")
    expect("0.70 ms per step, 5 gaps in 2 step(s)")
    expect("| block layer N | `triax::rms_norm` | 0.300 | 1.0 |")
    expect("| (outside any range) | `triax::adamw_step` | 0.100 | 1.0 |")
    expect("| block layer N | `aten::mm` | 0.300 | 0.5 |")
    # GPU time by the op that launched it (no shapes recorded: no TFLOP/s).
    expect("| `aten::mm` |  | 0.50 | 1 |  |")
    expect("| `triax::rms_norm` |  | 0.15 | 1 |  |")
    # The longest gap is the one between the steps; the sync sits inside the 300 us ones.
    expect("| 600 | `fused_adamw_kernel` | `nvjet_sm90_tst_128x256_gemm` | `aten::mm` in block layer 3 |  |")
    expect("| 300 | `nvjet_sm90_tst_128x256_gemm` | `triax::kernels::rms_norm_forward_kernel` | "
           "`triax::rms_norm` in block layer 7 | `cudaStreamSynchronize` 280 us |")
    # A file that is no trace: its name and why, not a traceback.
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "rank0_steps1-2.pt.trace.json"
        bad.write_text("{ cut short")
        refused = subprocess.run(["python3", str(Path(source_dir) / "tools/device/step_profile.py"), str(bad)],
                                 capture_output=True, text=True, check=False)
    if refused.returncode == 0 or f"{bad}: not a readable Chrome trace" not in refused.stderr \
            or "Traceback" in refused.stderr:
        failures.append(f"a broken trace gave status {refused.returncode} and: {refused.stderr!r}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
