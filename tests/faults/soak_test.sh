#!/usr/bin/env bash
# Soak run (docs/reliability.md): STEPS steps of a tiny Llama at dp=2 x pp=2 (1f1b), a checkpoint
# every INTERVAL steps, and a SIGKILL of a random rank every ~KILL_EVERY steps (drawn from SEED);
# each time the launcher fails, this script starts the run again from the run folder's `latest`.
# It must end with the uninterrupted run's losses for every step and its final parameters, bit
# for bit (both final checkpoints exported to Hugging Face safetensors and compared byte by byte).
#   soak_test.sh TRIAX CONFIG OUT_DIR STEPS INTERVAL KILL_EVERY SEED
set -uo pipefail
triax=$1 config=$2 out=$3 steps=$4 interval=$5 kill_every=$6 seed=$7
source "$(dirname "$0")/lib.sh"
rm -rf "$out"
mkdir -p "$out"
LAUNCHER=""
trap '[[ -n "$LAUNCHER" ]] && kill "$LAUNCHER" 2>/dev/null' EXIT
settings=(--set parallelism.dp=2 --set parallelism.pp=2 --set parallelism.pp_engine=1f1b
          --set tokens.batch_accumulation_per_replica=4 --set "tokens.train_steps=$steps"
          --set "checkpoints.checkpoint_interval=$interval" --set checkpoints.keep_last=2
          --set parallelism.comm_timeout_seconds=3 --set logging.tensorboard=false)
train() {  # train RUN_FOLDER [--set ...]...
  local folder=$1
  shift
  "$triax" launch -n 4 -- "$triax" train --config "$config" --set "checkpoints.checkpoints_path=$folder" \
    "${settings[@]}" "$@"
}

start=$(now)
train "$out/whole" >"$out/whole.log" 2>&1 || fail "the uninterrupted run failed: $(tail -5 "$out/whole.log")"
whole_seconds=$(seconds_since "$start")

RANDOM=$seed
start=$(now)
run="$out/killed"
next_kill=0 kills=0 segment=0
while :; do
  resume=()
  [[ -f "$run/latest" ]] && resume=(--set "checkpoints.resume_checkpoint_path=$run")
  segment=$((segment + 1))
  train "$run" "${resume[@]}" >"$out/segment$segment.log" 2>&1 &
  LAUNCHER=$!
  next_kill=$((next_kill + kill_every * 5 / 6 + RANDOM % (kill_every / 3 + 1)))
  victim=$((RANDOM % 4))
  # A kill near the end can come after the run's last steps: on a loaded machine the poll may see
  # the step late. Then no rank is left to kill, and the segment ends as the uninterrupted one.
  if ((next_kill < steps)) && wait_for_step "$run/metrics.jsonl" "$next_kill" 600 &&
    pid=$(rank_pid "$LAUNCHER" "$victim") && kill -9 "$pid" 2>/dev/null; then
    wait "$LAUNCHER"
    status=$?
    LAUNCHER=""
    kills=$((kills + 1))
    [[ $status -ne 0 ]] || fail "segment $segment: the launcher exited 0 although rank $victim was killed"
    echo "segment $segment: killed rank $victim after step $next_kill; the launcher exited $status; latest $(cat "$run/latest")"
    ((segment < 50)) || { fail "no end after 50 segments"; break; }
    continue
  fi
  wait "$LAUNCHER"
  status=$?
  LAUNCHER=""
  [[ $status -eq 0 ]] || { fail "segment $segment exited $status: $(tail -5 "$out/segment$segment.log")"; break; }
  break
done
killed_seconds=$(seconds_since "$start")
((kills > 0)) || fail "no kill landed in $segment segment(s): the drill resumed nothing"

diff <(losses "$out/whole/metrics.jsonl") <(losses "$run/metrics.jsonl") >"$out/losses.diff" ||
  fail "the losses differ from the uninterrupted run's: $(head -5 "$out/losses.diff")"
[[ $(losses "$run/metrics.jsonl" | wc -l) -eq $steps ]] || fail "metrics.jsonl should hold $steps steps"
final=$(printf 'step_%08d' "$steps")
for name in whole killed; do
  "$triax" convert --to hf "$out/$name/$final" "$out/$name.hf" >"$out/$name.convert.log" 2>&1 ||
    fail "exporting $name failed: $(cat "$out/$name.convert.log")"
done
cmp "$out/whole.hf/model.safetensors" "$out/killed.hf/model.safetensors" ||
  fail "the final parameters differ from the uninterrupted run's"
echo "soak: $steps steps, $kills kills, $segment segments in ${killed_seconds}s (uninterrupted: ${whole_seconds}s);" \
  "losses and final parameters bit for bit"
finish
