#!/usr/bin/env bash
# The named auxiliary losses of the expert_toy run reach metrics.jsonl by name: every step's line
# holds "aux_losses" with both names and positive finite values (the model computes them from
# squares of non-zero activations), and the two differ (they come from different blocks).
#   check_aux_metrics.sh RUN_DIR
set -euo pipefail
metrics=$1/metrics.jsonl
python3 - "$metrics" <<'PY'
import json, math, sys
lines = [json.loads(line) for line in open(sys.argv[1])]
assert lines, "no step in " + sys.argv[1]
for m in lines:
    aux = m["aux_losses"]
    assert set(aux) == {"embedding_l2", "expert_output_l2"}, f"step {m['step']}: {aux}"
    for name, value in aux.items():
        assert value is not None and math.isfinite(value) and value > 0, f"step {m['step']}: {name} = {value}"
    assert aux["embedding_l2"] != aux["expert_output_l2"], f"step {m['step']}: {aux}"
print(f"{len(lines)} steps with aux_losses {sorted(lines[-1]['aux_losses'])}: ok")
PY
