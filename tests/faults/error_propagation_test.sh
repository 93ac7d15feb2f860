#!/usr/bin/env bash
# A rank that stops on an error tells its peers through the liveness store, so that every rank
# leaves within seconds naming that first error, with the default communication timeout of 300 s
# (docs/reliability.md):
#   - an error injected on rank 1 of a dp=2 run at step 3 (inside the engine's micro-batch feed);
#   - resuming at tp=2 from a checkpoint whose rank-1 file is truncated;
#   - a launch whose mesh does not match refuses every rank with status 2 and no PMIx noise.
#   error_propagation_test.sh TRIAX CONFIG OUT_DIR
set -uo pipefail
triax=$1 config=$2 out=$3
source "$(dirname "$0")/lib.sh"
rm -rf "$out"
mkdir -p "$out"
LIMIT=30  # seconds; a rank waiting out the timeout would take 300

# launch_timed NAME RANKS ARGS...: runs `triax launch -n RANKS -- triax train ARGS` into $out/NAME,
# sets $status, $output and $seconds.
launch_timed() {
  local name=$1 ranks=$2
  shift 2
  local start
  start=$(now)
  timeout 400 "$triax" launch -n "$ranks" -- "$triax" train --config "$config" \
    --set "checkpoints.checkpoints_path=$out/$name" "$@" >"$out/$name.log" 2>&1
  status=$?
  seconds=$(seconds_since "$start")
  output=$(cat "$out/$name.log")
}

TRIAX_FAULT=error:1:3 launch_timed injected 2 --set parallelism.dp=2 --set tokens.batch_accumulation_per_replica=4 \
  --set tokens.train_steps=6
[[ $status -eq 1 ]] || fail "injected: the launcher exited $status, expected 1 (rank 1's). Output: $output"
grep -q "triax launch: rank 0 exited with status 4" <<<"$output" || fail "injected: rank 0 should exit 4. Output: $output"
grep -q "triax launch: rank 1 exited with status 1" <<<"$output" || fail "injected: rank 1 should exit 1. Output: $output"
grep -qE "triax train: communication failed: rank 0: step 3: .* abandoned: rank 1 stopped: .*TRIAX_FAULT: an injected error at step 3" \
  <<<"$output" || fail "injected: rank 0 should name rank 1's error. Output: $output"
awk -v s="$seconds" -v l=$LIMIT 'BEGIN { exit !(s < l) }' || fail "injected: the ranks took ${seconds}s to leave"
echo "injected error on rank 1: every rank left after ${seconds}s in all (launcher status $status)"

# The issue's case: a truncated rank-1 file, resumed at tp=2.
tp2=(--set parallelism.tp=2 --set tokens.train_steps=4 --set checkpoints.checkpoint_interval=4)
launch_timed source 2 "${tp2[@]}"
[[ $status -eq 0 ]] || fail "source: the tp=2 run failed. Output: $output"
file="$out/source/step_00000004/rank_00001.h5"
truncate -s $(($(stat -c %s "$file") / 2)) "$file"
launch_timed corrupt 2 "${tp2[@]}" --set tokens.train_steps=6 --set "checkpoints.resume_checkpoint_path=$out/source"
[[ $status -ne 0 && $status -ne 4 ]] || fail "corrupt: the launcher exited $status, expected the reading rank's error. Output: $output"
grep -q "rank_00001.h5" <<<"$output" || fail "corrupt: no message names the truncated file. Output: $output"
[[ $(grep -c "^triax train: " <<<"$output") -ge 2 ]] || fail "corrupt: both ranks should say why they stop. Output: $output"
awk -v s="$seconds" -v l=$LIMIT 'BEGIN { exit !(s < l) }' || fail "corrupt: the ranks took ${seconds}s to leave"
echo "truncated rank-1 file at tp=2: every rank left after ${seconds}s in all (launcher status $status)"

# A refused 8-rank launch: every rank says why, status 2, and nothing else.
launch_timed refused 8
[[ $status -eq 2 ]] || fail "refused: the launcher exited $status, expected 2. Output: $output"
[[ $(grep -c "but the world size is 8" <<<"$output") -eq 8 ]] || fail "refused: every rank should say why. Output: $output"
grep -q "PMIX ERROR" <<<"$output" && fail "refused: PMIx noise in the output: $output"
echo "refused 8-rank launch: status 2, $(wc -l <<<"$output") lines of output"
finish
