"""Every named auxiliary loss of a candidate run equals the reference run's, step by step.

usage: compare_aux_losses.py REFERENCE_METRICS CANDIDATE_METRICS [TOLERANCE]

Both files are metrics.jsonl of runs over the same steps; each step's aux_losses must name the
same losses, with values within TOLERANCE relative (default 1e-5; 1e-9 absolute below that).
"""
import json
import sys

reference, candidate = sys.argv[1:3]
tolerance = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
ref = [json.loads(line) for line in open(reference)]
cand = [json.loads(line) for line in open(candidate)]
if not ref or len(ref) != len(cand):
    sys.exit(f"{len(ref)} reference steps, {len(cand)} candidate steps")
worst = 0.0
for r, c in zip(ref, cand):
    if set(r["aux_losses"]) != set(c["aux_losses"]):
        sys.exit(f"step {r['step']}: aux losses {sorted(r['aux_losses'])} vs {sorted(c['aux_losses'])}")
    for name, expected in r["aux_losses"].items():
        got = c["aux_losses"][name]
        diff = abs(got - expected)
        worst = max(worst, diff / max(abs(expected), 1e-12))
        if diff > max(tolerance * abs(expected), 1e-9):
            sys.exit(f"step {r['step']}: {name} {got!r} differs from the reference's {expected!r}")
print(f"compared {len(ref)} steps of {len(ref[0]['aux_losses'])} auxiliary losses (worst relative {worst:.2e}): ok")
