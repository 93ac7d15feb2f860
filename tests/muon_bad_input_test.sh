#!/usr/bin/env bash
# The muon plugin's refusals through the command line: each exits 2 naming the key (and the
# parameter where one is concerned) before any training step; a ZeRO stage muon lacks exits 3.
#   muon_bad_input_test.sh TRIAX SOURCE_DIR
set -uo pipefail
TRIAX=$1 SRC=$2
source "$(dirname "$0")/refusal_expect.sh"
F=optimizer.optimizer_factory
MUON=(--set $F.name=muon)
expect 2 "$F.muon_named_params (line 48): '.*norm' names parameter model.layers.0.input_layernorm.weight of shape [64], which Muon cannot orthogonalise: 1-D, not a matrix" \
  tiny_llama.yaml -- "${MUON[@]}" --set "$F.muon_named_params=['.*norm']"
expect 2 "'model.embed_tokens' names parameter model.embed_tokens.weight of shape [256, 64], which Muon cannot orthogonalise: its matrix of 256 x 64 elements exceeds max_muon_matrix_elements (10000)" \
  tiny_llama.yaml -- "${MUON[@]}" --set "$F.muon_named_params=[model.embed_tokens]" --set $F.max_muon_matrix_elements=10000
expect 2 "$F.ns_coefficients: expected one of: quintic, cubic; got 'polar_express'" tiny_llama.yaml -- \
  "${MUON[@]}" --set $F.ns_coefficients=polar_express
expect 2 "$F.momentum: expected a value in [0, 1), got -0.9" tiny_llama.yaml -- "${MUON[@]}" --set $F.momentum=-0.9
# QK-clip needs a model that reports its attention logits: Mamba has none.
expect 2 "$F.qk_clip_threshold: QK-clip needs the model's attention logits: model plugin 'mamba': the model has no attention layer" tiny_mamba.yaml -- \
  "${MUON[@]}" --set $F.qk_clip_threshold=50
# ZeRO-3 has no muon form: no such plugin, naming the stage.
expect 3 "with optimizer.zero_stage 3: unknown optimizer plugin 'zero3_muon'" tiny_llama.yaml -- "${MUON[@]}" --set optimizer.zero_stage=3
# --check reads the factory as the run does.
expect_command 2 "$F.ns_steps: expected 1 to 100 steps, got 0" -- "$TRIAX" train --check \
  --config "$SRC/configs/tiny_llama.yaml" "${MUON[@]}" --set $F.ns_steps=0
exit $((failures > 0))
