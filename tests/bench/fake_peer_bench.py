#!/usr/bin/env python3
"""Stands in for the peer's peer_bench.py in the test of tools/device/bench.sh: takes the same
flags, prints some noise and then one JSON result line with the peer's fields, computed from the
flags (no torch, no GPU)."""
import argparse
import json

ap = argparse.ArgumentParser()
ap.add_argument("--model", default="360m")
ap.add_argument("--compile", action="store_true")
ap.add_argument("--mbs", type=int, default=8)
ap.add_argument("--seq", type=int, default=2048)
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--warmup", type=int, default=5)
a = ap.parse_args()
print("W1201 a compiler warning that is not JSON")
print("{not json either")
tokens_per_s = 37.0 * a.mbs * a.seq * (2 if a.compile else 1)
print(json.dumps({"peer": "fake" + ("+compile" if a.compile else ""), "model": a.model, "params": 12345,
                  "mbs": a.mbs, "seq": a.seq, "tokens_per_s": round(tokens_per_s), "mfu_989": 0.25,
                  "tflops": round(tokens_per_s * 1e6 / 1e12, 6), "peak_mem_gib": 1.5, "torch": "fake"}))
