#!/usr/bin/env bash
# tools/device/bench.sh --family mamba2 on CPU: a tiny Mamba-2 through the 780m benchmark config
# (overridden by --set) against the family's default peer, tools/device/mamba2_ssm_peer.py, run on
# the CPU over a stand-in mamba_ssm package (stand_in_mamba_ssm/) with --config naming the same
# tiny shape. The row must pair the triax run with the peer's JSON line, and the two sides must
# count the same parameters and the same training FLOPs per token (no note under the table).
#   bench_mamba2_family_test.sh <triax executable> <source dir> <python with torch>
set -euo pipefail
TRIAX="$1"
SRC="$2"
PYTHON="$3"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# bench.sh runs `python3`, and the peer with the same interpreter: the environment's, with torch.
export PATH="$(dirname "$PYTHON"):$PATH" PYTHONPATH="$SRC/tests/bench/stand_in_mamba_ssm"

# One tiny shape for both sides: --set for triax, the same values in the peer's config file.
shape=(hidden_size=32 num_hidden_layers=2 vocab_size=256 num_heads=4 head_dim=16 state_size=8 n_groups=2
  chunk_size=8)
cp "$SRC/configs/bench/mamba2-780m.yaml" "$WORK/tiny.yaml"
sets=()
for kv in "${shape[@]}"; do
  sed -E -i "s/^( +${kv%%=*}:).*/\1 ${kv#*=}/" "$WORK/tiny.yaml"
  sets+=(--set "model.model_config.$kv")
done

OUT="$WORK/out" "$SRC/tools/device/bench.sh" --family mamba2 --triax "$TRIAX" --single-process --warmup 1 \
  --work "$WORK/runs" --peer-args "--device cpu --steps 1 --warmup 1 --config $WORK/tiny.yaml" \
  --set general.device=cpu --set parallelism.comm_backend=auto --set model.dtype=float32 "${sets[@]}" \
  --set tokens.sequence_length=32 --set tokens.micro_batch_size=2 --set tokens.train_steps=3 780m >"$WORK/log" 2>&1 ||
  { cat "$WORK/log"; echo "FAIL: the benchmark script failed"; exit 1; }

python3 - "$WORK" <<'PY'
import json, sys
from pathlib import Path
work = Path(sys.argv[1])
rows = json.loads((work / "out/bench.json").read_text())
assert [(r["size"], r["variant"]) for r in rows] == [("780m", "triax")], rows
t, p = rows[0]["triax"], rows[0]["peer"]
assert t["device"] == "cpu" and t["tokens_per_s"] > 0, t
assert (p["peer"], p["model"], p["mbs"], p["seq"]) == ("mamba-ssm", "780m", 2, 32), p
assert "mamba2_ssm_peer.py" in p["command"] and "--compile" not in p["command"], p
# triax's logged counts against the peer's: the stand-in has the real model's parameters.
assert t["params"] == p["params"] and t["flops_per_token"] == p["flops_per_token"], (t, p)
assert abs(rows[0]["ratio"] - t["tokens_per_s"] / p["tokens_per_s"]) < 1e-12, rows[0]
md = (work / "out/bench.md").read_text()
assert "Peer: `mamba2_ssm_peer.py --device cpu" in md and "note:" not in md, md
print("bench.sh --family mamba2: OK", t["params"], "parameters,", t["flops_per_token"], "FLOPs per token on both sides")
PY
