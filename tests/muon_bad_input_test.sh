#!/usr/bin/env bash
# The muon plugin's refusals through the command line: each exits 2 naming the key (and the
# parameter where one is concerned) before any training step.
#   muon_bad_input_test.sh TRIAX SOURCE_DIR
set -uo pipefail
TRIAX=$1 SRC=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
CONFIG="$SRC/configs/tiny_llama.yaml"
F=optimizer.optimizer_factory
failures=0
# expect TEXT -- overrides... (every message names the key: checked once more below)
expect() {
  local text=$1
  shift 2
  local out status
  out=$("$TRIAX" train --config "$CONFIG" --set "checkpoints.checkpoints_path=$WORK/run" --set $F.name=muon "$@" 2>&1)
  status=$?
  if [[ $status -ne 2 || "$out" != *"$text"* || "$out" == *"step 1/"* ]]; then
    echo "FAIL: $* exited $status (expected 2) or does not say '$text':"
    echo "$out" | tail -5
    failures=$((failures + 1))
  else
    echo "ok: $* -> $(grep -m1 -F -- "$text" <<<"$out" | cut -c1-200)"
  fi
}
expect "'.*norm' names parameter model.layers.0.input_layernorm.weight of shape [64], which Muon cannot orthogonalise: 1-D, not a matrix" \
  -- --set "$F.muon_named_params=['.*norm']"
expect "'model.embed_tokens' names parameter model.embed_tokens.weight of shape [256, 64], which Muon cannot orthogonalise: its matrix of 256 x 64 elements exceeds max_muon_matrix_elements (10000)" \
  -- --set "$F.muon_named_params=[model.embed_tokens]" --set $F.max_muon_matrix_elements=10000
expect "$F.ns_coefficients: expected one of: quintic, cubic" -- --set $F.ns_coefficients=polar_express
expect "$F.momentum: expected a value in [0, 1), got -0.9" -- --set $F.momentum=-0.9
# QK-clip needs a model that reports its attention logits: Mamba has none.
out=$("$TRIAX" train --config "$SRC/configs/tiny_mamba.yaml" --set "checkpoints.checkpoints_path=$WORK/run" \
  --set $F.name=muon --set $F.qk_clip_threshold=50 2>&1)
status=$?
if [[ $status -ne 2 || "$out" != *"$F.qk_clip_threshold: QK-clip needs the attention logits of model plugin 'mamba'"* ]]; then
  echo "FAIL: QK-clip on mamba exited $status: $out"
  failures=$((failures + 1))
fi
# ZeRO-3 has no muon form: no such plugin (exit 3), naming the stage.
out=$("$TRIAX" train --config "$CONFIG" --set "checkpoints.checkpoints_path=$WORK/run" --set $F.name=muon \
  --set optimizer.zero_stage=3 2>&1)
status=$?
if [[ $status -ne 3 || "$out" != *"zero3_muon"* ]]; then
  echo "FAIL: zero_stage 3 exited $status: $out"
  failures=$((failures + 1))
fi
# --check reads the factory as the run does.
out=$("$TRIAX" train --check --config "$CONFIG" --set $F.name=muon --set $F.ns_steps=0 2>&1)
status=$?
if [[ $status -ne 2 || "$out" != *"$F.ns_steps: expected 1 to 100 steps, got 0"* ]]; then
  echo "FAIL: --check with ns_steps 0 exited $status: $out"
  failures=$((failures + 1))
fi
exit $((failures > 0))
