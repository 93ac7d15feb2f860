#!/usr/bin/env bash
# A (dp 4, ep 2) checkpoint of the expert_toy model stores each piece once: every dense parameter
# in one rank file, each layer's experts in two (the two ep shards, 2 of the 4 experts each), and
# the same for their optimizer state.
#   check_expert_shards.sh TRIAX STEP_FOLDER
set -euo pipefail
listing=$("$1" inspect checkpoint "$2" --datasets)
count() { grep -c -- " $1 " <<<"$listing" || true; }
fail=0
expect() {  # expect DATASET COPIES SHAPE
  local found shapes
  found=$(count "$1")
  shapes=$(grep -- " $1 " <<<"$listing" | sed -E 's/^ *dataset [^ ]+ [^ ]+ //' | sort -u)
  if [[ "$found" != "$2" || "$shapes" != "$3" ]]; then
    echo "$1: stored $found times with shapes '$shapes', expected $2 times with shape $3" >&2
    fail=1
  fi
}
expect /model/model.embed 1 "[32, 16]"
expect /model/model.head 1 "[32, 16]"
for layer in 0 1; do
  expect "/model/model.layers_${layer}_gate" 1 "[16]"
  expect "/model/model.layers_${layer}_experts" 2 "[2, 16, 16]"
  expect "/optimizer/model.layers_${layer}_experts/exp_avg" 2 "[512]"
done
if ((fail)); then
  echo "$listing" >&2
  exit 1
fi
echo "each dense parameter stored once, each layer's experts once per ep shard (2 shards): ok"
