#!/usr/bin/env bash
# A (dp 2, ep 2) checkpoint of the MoE parity model stores each piece once: every dense
# parameter (attention, router, shared expert) in one rank file, each MoE layer's expert
# projections in two (the two ep shards, 2 of the 4 experts each), and the same for their
# optimizer state.
#   check_moe_expert_shards.sh TRIAX STEP_FOLDER
set -euo pipefail
listing=$("$1" inspect checkpoint "$2" --datasets)
fail=0
expect() {  # expect DATASET COPIES SHAPE
  local found shapes
  found=$(grep -c -- " $1 " <<<"$listing" || true)
  shapes=$(grep -- " $1 " <<<"$listing" | sed -E 's/^ *dataset [^ ]+ [^ ]+ //' | sort -u)
  if [[ "$found" != "$2" || "$shapes" != "$3" ]]; then
    echo "$1: stored $found times with shapes '$shapes', expected $2 times with shape $3" >&2
    fail=1
  fi
}
expect /model/model.embed_tokens.weight 1 "[64, 32]"
for layer in 0 1 3; do
  p=/model/model.layers.$layer.mlp
  expect "$p.gate.weight" 1 "[4, 32]"
  expect "$p.shared_expert_gate.weight" 1 "[1, 32]"
  expect "$p.shared_expert.down_proj.weight" 1 "[32, 32]"
  expect "$p.experts.gate_proj" 2 "[2, 24, 32]"
  expect "$p.experts.up_proj" 2 "[2, 24, 32]"
  expect "$p.experts.down_proj" 2 "[2, 32, 24]"
  expect "/optimizer/model.layers.$layer.mlp.experts.down_proj/exp_avg" 2 "[1536]"
done
expect /model/model.layers.2.mlp.down_proj.weight 1 "[32, 48]"
if ((fail)); then
  echo "$listing" >&2
  exit 1
fi
echo "each dense parameter stored once, each MoE layer's experts once per ep shard (2 shards): ok"
