#!/usr/bin/env bash
# tools/device/bench.sh --family mamba on CPU: a tiny Mamba through the 130m benchmark config
# (overridden by --set) against the family's default peer, tools/device/mamba_ssm_peer.py, run
# on the CPU over a stand-in mamba_ssm package (stand_in_mamba_ssm/). The row must pair the
# triax run with the peer's JSON line at the overridden shape.
#   bench_mamba_family_test.sh <triax executable> <source dir> <python with torch>
set -euo pipefail
TRIAX="$1"
SRC="$2"
PYTHON="$3"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# bench.sh runs `python3`, and the peer with the same interpreter: the environment's, with torch
# (its folder first on PATH; a link elsewhere would not find the environment).
PYTHON_BIN="$(dirname "$PYTHON")"
export PATH="$PYTHON_BIN:$PATH" PYTHONPATH="$SRC/tests/bench/stand_in_mamba_ssm"

OUT="$WORK/out" "$SRC/tools/device/bench.sh" --family mamba --triax "$TRIAX" --single-process --warmup 1 \
  --work "$WORK/runs" --peer-args '--device cpu --steps 1 --warmup 1' \
  --set general.device=cpu --set parallelism.comm_backend=auto --set model.dtype=float32 \
  --set model.model_config.d_model=32 --set model.model_config.num_hidden_layers=2 \
  --set model.model_config.vocab_size=256 --set tokens.sequence_length=32 \
  --set tokens.micro_batch_size=2 --set tokens.train_steps=3 130m >"$WORK/log" 2>&1 ||
  { cat "$WORK/log"; echo "FAIL: the benchmark script failed"; exit 1; }

python3 - "$WORK" <<'PY'
import json, sys
from pathlib import Path
work = Path(sys.argv[1])
rows = json.loads((work / "out/bench.json").read_text())
assert [(r["size"], r["variant"]) for r in rows] == [("130m", "triax")], rows
t, p = rows[0]["triax"], rows[0]["peer"]
assert t["device"] == "cpu" and t["tokens_per_s"] > 0, t
assert (p["peer"], p["model"], p["mbs"], p["seq"]) == ("mamba-ssm", "130m", 2, 32), p
assert p["command"].endswith("--device cpu --steps 1 --warmup 1") and "--compile" not in p["command"], p
assert abs(rows[0]["ratio"] - t["tokens_per_s"] / p["tokens_per_s"]) < 1e-12, rows[0]
md = (work / "out/bench.md").read_text()
assert "Peer: `mamba_ssm_peer.py --device cpu --steps 1 --warmup 1`" in md, md
print("bench.sh --family mamba: OK", round(t["tokens_per_s"]), "against", p["tokens_per_s"], "tok/s")
PY
