#!/usr/bin/env bash
# Settings a model plugin must declare support for (its table's capabilities), through the command
# line: a plugin without it is refused before any step with exit status 3, naming the plugin and
# the key. Spectral muP (model.init_method.use_mup; std beside it exits 2 naming
# model.init_method.std) and the MLP activation's recomputation (parallelism.recompute_mlp_activation:
# mamba has no MLP; moe's routed experts do not recompute theirs).
#   capability_refusals_test.sh TRIAX SOURCE_DIR
set -uo pipefail
TRIAX=$1 SRC=$2
source "$(dirname "$0")/refusal_expect.sh"
expect 3 "model.init_method.use_mup: model plugin 'mamba' does not support spectral muP" tiny_mamba.yaml -- \
  --set "model.init_method={use_mup: true}"
expect 2 "model.init_method.std: does not apply with use_mup: true" tiny_llama.yaml -- \
  --set "model.init_method={use_mup: true, std: 0.02}"
expect 3 "parallelism.recompute_mlp_activation: model plugin 'mamba' does not support it" tiny_mamba.yaml -- \
  --set parallelism.recompute_mlp_activation=true
expect 3 "parallelism.recompute_mlp_activation: model plugin 'moe' does not support it" tiny_moe.yaml -- \
  --set parallelism.recompute_mlp_activation=true
exit $((failures > 0))
