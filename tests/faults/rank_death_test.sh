#!/usr/bin/env bash
# Rank deaths (docs/reliability.md): one rank SIGKILLs itself (TRIAX_FAULT) at a step and point
# drawn from a fixed seed, over topologies with data, tensor and pipeline parallelism. Every
# other rank must leave within the communication timeout with status 4 and a message naming the
# lost peer, no trial may hang, and the launcher must exit 1 (the killed rank's, the cause).
#   rank_death_test.sh TRIAX CONFIG OUT_DIR SEED TRIALS POINTS...
set -uo pipefail
triax=$1 config=$2 out=$3 seed=$4 trials=$5
shift 5
points=("$@")
source "$(dirname "$0")/lib.sh"
rm -rf "$out"
mkdir -p "$out"
TIMEOUT=3
# name ranks --set...: dp, tp, pp (both engines) and mixes; 8 micro-batches of the global batch.
topologies=(
  "dp2 2 --set parallelism.dp=2 --set tokens.batch_accumulation_per_replica=4"
  "tp2 2 --set parallelism.tp=2"
  "pp2_afab 2 --set parallelism.pp=2"
  "pp2_1f1b 2 --set parallelism.pp=2 --set parallelism.pp_engine=1f1b"
  "dp2_pp2_1f1b 4 --set parallelism.dp=2 --set parallelism.pp=2 --set parallelism.pp_engine=1f1b --set tokens.batch_accumulation_per_replica=4"
  "tp2_pp2 4 --set parallelism.tp=2 --set parallelism.pp=2"
  "dp2_tp2_zero1 4 --set parallelism.dp=2 --set parallelism.tp=2 --set optimizer.zero_stage=1 --set tokens.batch_accumulation_per_replica=4"
)
# trial NAME RANKS POINT VICTIM STEP SETTINGS: one kill, checked; prints its summary line or FAIL lines,
# and returns the number of failed checks.
trial() {
  local name=$1 ranks=$2 point=$3 victim=$4 step=$5 settings=$6
  local failures=0  # this trial's own count (fail adds to it), returned to the loop below
  local log="$out/$name.log"
  # shellcheck disable=SC2086
  TRIAX_FAULT="$point:$victim:$step" timeout 120 "$triax" launch -n "$ranks" --comm-timeout $TIMEOUT -- \
    "$triax" train --config "$config" --set "checkpoints.checkpoints_path=$out/$name" \
    --set tokens.train_steps=8 --set checkpoints.checkpoint_interval=2 $settings >"$log" 2>&1
  local status=$?
  local ended; ended=$(now)
  local output; output=$(cat "$log")
  if [[ $status -eq 124 ]]; then
    fail "$name: hung (killed after 120 s). Output: $output"
    return $failures
  fi
  local killed_at
  killed_at=$(grep -o "killing rank $victim at '$point' of step $step (unix time [0-9.]*)" <<<"$output" | grep -o '[0-9.]*)' | tr -d ')')
  [[ -n "$killed_at" ]] || { fail "$name: the fault did not fire. Output: $output"; return $failures; }
  local seconds; seconds=$(awk -v a="$killed_at" -v b="$ended" 'BEGIN { printf "%.1f", b - a }')
  [[ $status -eq 1 ]] || fail "$name: the launcher exited $status, expected 1 (the killed rank's). Output: $output"
  grep -q "triax launch: rank $victim left no exit status (killed or crashed)" <<<"$output" ||
    fail "$name: the launcher does not name rank $victim. Output: $output"
  local rank
  for ((rank = 0; rank < ranks; rank++)); do
    ((rank == victim)) && continue
    grep -q "triax launch: rank $rank exited with status 4" <<<"$output" ||
      fail "$name: rank $rank did not exit with status 4. Output: $output"
  done
  # Each survivor names the lost peer: its own timeout's explanation or the first survivor's.
  local lost="rank $victim last seen [0-9.]+ s ago at step [0-9]+ \(dead or hung[^)]*\)"
  ((victim == 0)) && lost="rank 0's liveness store at [^ ]+ does not answer \(.*\): rank 0 is dead or hung"
  local named; named=$(grep -cE "^triax train: communication failed: .*$lost" <<<"$output")
  ((named == ranks - 1)) || fail "$name: $named of $((ranks - 1)) survivors name the lost rank. Output: $output"
  local noise; noise=$(grep -cE "TCPStore|Exception raised from|frame #|\[W[0-9]|PMIX ERROR" <<<"$output")
  ((noise == 0)) || fail "$name: $noise lines of library noise. Output: $output"
  awk -v s="$seconds" -v t="$TIMEOUT" 'BEGIN { exit !(s < t + 5) }' ||
    fail "$name: the launcher returned ${seconds}s after the kill (timeout ${TIMEOUT}s)"
  echo "$name: launcher exit $status ${seconds}s after the kill"
  return $failures
}

# The trials run two at a time: each mostly waits (process starts, the timeout), about a quarter
# of a core busy, so two side by side keep half a core busy and halve the wall time.
PARALLEL_TRIALS=2
RANDOM=$seed
running=0
for ((trial_index = 0; trial_index < trials; trial_index++)); do
  read -r topology ranks settings <<<"${topologies[RANDOM % ${#topologies[@]}]}"
  point=${points[trial_index % ${#points[@]}]}
  victim=$((RANDOM % ranks))
  step=$((2 + RANDOM % 5))  # steps 2..6
  [[ $point == *rank_file* ]] && step=$((2 * (1 + RANDOM % 3)))  # a save: every 2 steps
  name="$trial_index.$topology.$point.rank$victim.step$step"
  if ((running == PARALLEL_TRIALS)); then
    wait -n; failures=$((failures + $?)); running=$((running - 1))
  fi
  trial "$name" "$ranks" "$point" "$victim" "$step" "$settings" >"$out/$name.result" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n; failures=$((failures + $?)); running=$((running - 1))
done
cat "$out"/*.result
finish
