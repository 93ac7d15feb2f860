#!/usr/bin/env bash
# optimizer.zero_stage through the command line: a stage without an optimizer plugin, an optimizer
# without a ZeRO-3 variant, a ZeRO-3 optimizer at another stage and a model that cannot keep its
# parameters as ZeRO-3 shards (a plugin not built on CausalLm) are refused before any step,
# naming the key and the plugin.
#   zero3_refusals_test.sh TRIAX SOURCE_DIR TEST_PLUGINS_DIR
set -uo pipefail
TRIAX=$1 SRC=$2 TEST_PLUGINS=$3
source "$(dirname "$0")/refusal_expect.sh"
expect 2 "optimizer.zero_stage: triax implements ZeRO stages 0, 1 and 3, got 2" tiny_llama.yaml -- \
  --set optimizer.zero_stage=2
expect 3 "optimizer.optimizer_factory.name with optimizer.zero_stage 3: unknown optimizer plugin 'zero3_abi_1_0_optimizer'" \
  tiny_llama.yaml -- --set "plugins.paths=[$TEST_PLUGINS/abi_1_0]" \
  --set "optimizer.optimizer_factory={name: abi_1_0_optimizer}" --set optimizer.zero_stage=3
expect 3 "optimizer.zero_stage: 0 selects the optimizer plugin 'zero3_adamw', which takes ZeRO-3 parameter shards" \
  tiny_llama.yaml -- --set "optimizer.optimizer_factory.name=zero3_adamw"
# A model plugin that keeps its parameters whole (the expert-parallel test model, not a CausalLm).
expect 3 "optimizer.zero_stage: model plugin 'expert_toy' keeps parameter model.embed whole at zero_stage 3" \
  ../tests/parity/expert_toy_parity.yaml -- --set "plugins.paths=[$TEST_PLUGINS/expert_toy]" \
  --set optimizer.zero_stage=3
exit $((failures > 0))
