#!/usr/bin/env bash
# The moe plugin's refusals through the command line: each exits 2 naming the key and what was
# expected, before any training step. Then nanotron's marker selecting the plugin.
#   moe_bad_input_test.sh TRIAX MPIEXEC SOURCE_DIR
set -uo pipefail
TRIAX=$1 MPIEXEC=$2 SRC=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
CONFIG="$SRC/configs/tiny_moe.yaml"
failures=0
# expect RANKS TEXT -- overrides...
expect() {
  local ranks=$1 text=$2
  shift 3
  local out status
  if ((ranks == 1)); then
    out=$("$TRIAX" train --config "$CONFIG" --set "checkpoints.checkpoints_path=$WORK/run" "$@" 2>&1)
  else
    out=$("$MPIEXEC" -n "$ranks" --oversubscribe --bind-to none "$TRIAX" train --config "$CONFIG" \
          --set "checkpoints.checkpoints_path=$WORK/run" "$@" 2>&1)
  fi
  status=$?
  if [[ $status -ne 2 || "$out" != *"$text"* || "$out" == *"step 1/"* ]]; then
    echo "FAIL: $* exited $status (expected 2) or does not say '$text':"
    echo "$out" | tail -5
    failures=$((failures + 1))
  else
    echo "ok: $* -> $(grep -m1 -F -- "$text" <<<"$out" | cut -c1-160)"
  fi
}
M=model.model_config.moe_config
expect 1 "$M.top_k: 5 is larger than num_experts (4)" -- --set $M.top_k=5
expect 1 "$M.token_dispatcher_type: expected one of: alltoall, allgather; got 'ring'" -- --set $M.token_dispatcher_type=ring
expect 1 "parallelism.expert_parallel_size (2) must divide parallelism.dp (1)" -- --set parallelism.expert_parallel_size=2
expect 1 "$M.layers (line 41): layer 7 is outside" -- --set "$M.layers=[7]"
# 4 experts over 3 ep ranks.
expect 3 "$M.num_experts: 4 is not divisible by parallelism.expert_parallel_size (3)" -- \
  --set parallelism.dp=3 --set parallelism.expert_parallel_size=3 --set tokens.batch_accumulation_per_replica=1
# Without model.plugin, nanotron's Qwen2 marker with a moe_config selects the plugin.
sed -e '/^  plugin: moe$/d' -e 's/^  model_config:$/  model_config:\n    is_qwen2_config: true/' "$CONFIG" >"$WORK/nanotron.yaml"
out=$("$TRIAX" train --config "$WORK/nanotron.yaml" --set tokens.train_steps=1 --set "checkpoints.checkpoints_path=$WORK/marker" 2>&1)
if [[ "$out" != *"model moe:"* || "$out" != *"step 1/1"* ]] || grep -q "plugin: moe" "$WORK/nanotron.yaml"; then
  echo "FAIL: is_qwen2_config with a moe_config did not select the moe plugin:"
  echo "$out" | tail -5
  failures=$((failures + 1))
fi
((failures == 0)) || exit 1
echo "every refusal exits 2 with its key: ok"
