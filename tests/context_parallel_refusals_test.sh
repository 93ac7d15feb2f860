#!/usr/bin/env bash
# Context parallelism's bad input through the command line, each refused before step 1 with the
# key's name (exit 2): a sequence length that 2 x cp chunks do not split (at --check already), a
# model whose scan's state no cp rank passes on (mamba, mamba2, nemotron_h, naming the plugin) on
# the two ranks the mesh asks for, and a cp attention that is neither all_gather nor ring (at --check).
#   context_parallel_refusals_test.sh TRIAX MPIEXEC SOURCE_DIR
set -uo pipefail
TRIAX=$1 MPIEXEC=$2 SRC=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source "$(dirname "$0")/refusal_expect.sh"
expect_command 2 "parallelism.context_parallel_size: 3 ranks cannot split tokens.sequence_length = 64 into 2 x 3 equal chunks" \
  -- "$TRIAX" train --check --config "$SRC/configs/tiny_llama.yaml" --set parallelism.context_parallel_size=3
for refusal in "mamba:has no attention to split a sequence over" "mamba2:has no attention to split a sequence over" \
  "nemotron_h:does not split a sequence over cp ranks"; do
  model=${refusal%%:*}
  expect_command 2 "parallelism.context_parallel_size is 2, but the model plugin '$model' ${refusal#*:}" \
    -- "$MPIEXEC" -n 2 --oversubscribe --bind-to none "$TRIAX" train --config "$SRC/configs/tiny_$model.yaml" \
    --set "checkpoints.checkpoints_path=$WORK/run_$model" --set parallelism.context_parallel_size=2
done
expect_command 2 "parallelism.context_parallel_attention: expected one of: all_gather, ring; got 'rings'" \
  -- "$TRIAX" train --check --config "$SRC/configs/tiny_llama.yaml" --set parallelism.context_parallel_size=2 \
  --set parallelism.context_parallel_attention=rings
exit $((failures > 0))
