#!/usr/bin/env bash
# The qwen3 and qwen3_moe plugins through the command line: without model.plugin, is_qwen3_config
# selects qwen3, and with a moe_config qwen3_moe; then their refusals, each exit 2 naming the key
# before any step (a head_dim that is odd or not positive, a moe_config given to the dense plugin,
# the marker set to false).
#   qwen3_bad_input_test.sh TRIAX SOURCE_DIR
set -uo pipefail
TRIAX=$1 SRC=$2
source "$(dirname "$0")/refusal_expect.sh"

for pair in "tiny_qwen3:qwen3" "tiny_qwen3_moe:qwen3_moe"; do
  name=${pair%%:*} plugin=${pair##*:}
  sed -e "/^  plugin: $plugin\$/d" "$SRC/configs/$name.yaml" >"$WORK/$name.yaml"
  expect_command 0 "the configuration is valid (model $plugin," -- "$TRIAX" train --check --config "$WORK/$name.yaml"
done

M=model.model_config
expect 2 "$M.head_dim: 7 must be even for rotary embeddings" tiny_qwen3.yaml -- --set $M.head_dim=7
expect 2 "$M.head_dim: must be positive, got 0" tiny_qwen3_moe.yaml -- --set $M.head_dim=0
expect 2 "is a mixture of experts: the qwen3_moe model plugin's (model.plugin: qwen3_moe" tiny_qwen3.yaml -- \
  --set "$M.moe_config={num_experts: 4}"
expect 2 "$M.is_qwen3_config: the qwen3 model plugin needs is_qwen3_config: true" tiny_qwen3.yaml -- \
  --set $M.is_qwen3_config=false
expect 2 "$M.is_qwen3_config: the qwen3_moe model plugin needs is_qwen3_config: true" tiny_qwen3_moe.yaml -- \
  --set $M.is_qwen3_config=false

((failures == 0)) || exit 1
echo "the qwen3 plugins' selection and refusals: ok"
