#!/usr/bin/env bash
# Preemption, end to end through `triax launch` (docs/reliability.md):
#   - SIGTERM to rank 1 of a dp=2 run: every rank stops at the next step boundary, saves a
#     checkpoint and exits 0 with a line saying so; resuming gives the uninterrupted run's losses
#     bit for bit;
#   - SIGUSR1 to rank 0 of a pp=2 (1f1b) run, with general.preemption_signals: [SIGUSR1]: the same;
#   - SIGTERM to `triax launch` itself (tp=2), which hands it to every rank: the same;
#   - a second signal before that save completes aborts it: the previous checkpoint stays latest;
#   - SIGTERM to rank 1 of a dp=2 run saving in the background (checkpoints.async_save) while the
#     save of step 4 is still being written (slow_write: 1 s): the stop waits for it, saves, exits 0.
#   preemption_test.sh TRIAX CONFIG OUT_DIR CASE... (CASE: dp2_sigterm pp2_sigusr1 tp2_launcher_sigterm
#                      second_signal async_write_in_flight)
set -uo pipefail
triax=$1 config=$2 out=$3
shift 3
cases=" $* "
source "$(dirname "$0")/lib.sh"
rm -rf "$out"
mkdir -p "$out"
LAUNCHER=""
trap '[[ -n "$LAUNCHER" ]] && kill "$LAUNCHER" 2>/dev/null' EXIT

# Enough steps that the run is still going when the signal sent after step 5 arrives: the tiny
# model's steps take milliseconds, and a loaded machine delays finding the rank's process.
steps=48
common=(--set tokens.train_steps=$steps --set checkpoints.checkpoint_interval=4 --set parallelism.comm_timeout_seconds=20)
train() {  # train NAME TOPOLOGY... : a 2-rank run into $out/NAME
  local name=$1
  shift
  "$triax" launch -n 2 -- "$triax" train --config "$config" --set "checkpoints.checkpoints_path=$out/$name" \
    "${common[@]}" "$@"
}

# preempt NAME SIGNAL RANK TOPOLOGY...: the whole run, then a run signalled after step 5, resumed.
preempt() {
  local name=$1 signal=$2 rank=$3
  shift 3
  train "$name.whole" "$@" >"$out/$name.whole.log" 2>&1 || fail "$name: the uninterrupted run failed: $(tail -5 "$out/$name.whole.log")"
  train "$name" "$@" >"$out/$name.log" 2>&1 &
  LAUNCHER=$!
  wait_for_step "$out/$name/metrics.jsonl" 5 || fail "$name: the run did not reach step 5"
  local pid
  if [[ $rank == launcher ]]; then  # `triax launch` hands the signal to every rank
    pid=$(launcher_pid "$LAUNCHER") || fail "$name: the launcher not found"
  else
    pid=$(rank_pid "$LAUNCHER" "$rank") || fail "$name: rank $rank not found"
  fi
  kill "-$signal" "$pid"
  wait "$LAUNCHER"
  local status=$?
  LAUNCHER=""
  local log
  log=$(cat "$out/$name.log")
  [[ $status -eq 0 ]] || fail "$name: the launcher exited $status after $signal, expected 0. Output: $log"
  grep -q "triax train: preempted by SIG$signal: every rank stopped at a step boundary and saved a checkpoint; exiting 0" \
    <<<"$log" || fail "$name: no line saying the run was preempted. Output: $log"
  local latest
  latest=$(cat "$out/$name/latest")
  local stopped=$((10#${latest#step_}))
  ((stopped >= 5 && stopped < steps)) || fail "$name: latest is $latest, expected the step the signal stopped at"
  "$triax" inspect checkpoint "$out/$name/$latest" >"$out/$name.inspect" 2>&1 ||
    fail "$name: $latest does not pass triax inspect: $(cat "$out/$name.inspect")"
  train "$name" "$@" --set "checkpoints.resume_checkpoint_path=$out/$name" >"$out/$name.resume.log" 2>&1 ||
    fail "$name: resuming failed: $(tail -5 "$out/$name.resume.log")"
  diff <(losses "$out/$name.whole/metrics.jsonl") <(losses "$out/$name/metrics.jsonl") >/dev/null ||
    fail "$name: the resumed losses differ from the uninterrupted run's"
  [[ $(losses "$out/$name/metrics.jsonl" | wc -l) -eq $steps ]] || fail "$name: metrics.jsonl should hold $steps steps"
  echo "$name: $signal to $([[ $rank == launcher ]] && echo "the launcher" || echo "rank $rank") stopped every rank after step $stopped with a checkpoint, exit 0; resumed bit for bit"
}

# A save in the background still being written when the signal comes (slow_write: 1 s): the stop
# waits for it, then saves its own.
async_write_in_flight() {
  TRIAX_FAULT=slow_write:*:4 preempt async_write_in_flight TERM 1 --set parallelism.dp=2 \
    --set tokens.batch_accumulation_per_replica=4 --set checkpoints.async_save=true
  local log
  log=$(cat "$out/async_write_in_flight.log")
  # The signal came while step 4's file was written: its save completed before the stop's own.
  grep -q "checkpoint: step 4 saved to .*written in the background" <<<"$log" ||
    fail "async_write_in_flight: the save in flight did not complete. Output: $log"
  "$triax" inspect checkpoint "$out/async_write_in_flight/step_00000004" >/dev/null 2>&1 ||
    fail "async_write_in_flight: step 4 does not pass triax inspect"
}

# A second signal before the save completes: aborted, latest stays the last periodic checkpoint
# before the aborted one (step 4 when the signals arrive before step 8's periodic save).
second_signal() {
  local name=second_signal pid start status log elapsed aborted expected folder
  train "$name" --set parallelism.dp=2 --set tokens.batch_accumulation_per_replica=4 >"$out/$name.log" 2>&1 &
  LAUNCHER=$!
  wait_for_step "$out/$name/metrics.jsonl" 5 || fail "$name: the run did not reach step 5"
  pid=$(rank_pid "$LAUNCHER" 1) || fail "$name: rank 1 not found"
  start=$(now)
  kill -TERM "$pid"
  kill -USR1 "$pid"  # another signal: two SIGTERMs could merge into one pending signal
  wait "$LAUNCHER"
  status=$?
  LAUNCHER=""
  log=$(cat "$out/$name.log")
  elapsed=$(seconds_since "$start")
  [[ $status -ne 0 ]] || fail "$name: the launcher exited 0 although the save was aborted. Output: $log"
  grep -q "aborted by a second preemption signal" <<<"$log" || fail "$name: no message about the abort. Output: $log"
  aborted=$(grep -o 'checkpoint of step [0-9]*: aborted' <<<"$log" | head -1 | grep -o '[0-9]*')
  [[ -n $aborted ]] || fail "$name: no message naming the aborted checkpoint's step. Output: $log"
  expected=$(printf 'step_%08d' $(((aborted - 1) / 4 * 4)))  # checkpoint_interval 4
  [[ "$(cat "$out/$name/latest")" == "$expected" ]] ||
    fail "$name: latest is $(cat "$out/$name/latest"), expected $expected (the save of step $aborted was aborted)"
  for folder in "$out/$name"/step_*; do
    "$triax" inspect checkpoint "$folder" >/dev/null 2>&1 || fail "$name: $folder does not pass triax inspect"
  done
  echo "$name: the save of step $aborted was aborted, latest stays $expected; every rank left ${elapsed}s after the signals (status $status)"
}

# The cases asked for run side by side, each in a subshell with its own launcher and failure count
# (its lines kept in OUT/CASE.result until all are done): each mostly waits on process starts and
# saves, about half a core busy.
names=() pids=()
start_case() {  # start_case NAME COMMAND...
  local name=$1
  shift
  [[ $cases == *" $name "* ]] || return 0
  (
    failures=0 LAUNCHER=""
    trap '[[ -n "$LAUNCHER" ]] && kill "$LAUNCHER" 2>/dev/null' EXIT
    "$@"
    exit "$failures"
  ) >"$out/$name.result" 2>&1 &
  names+=("$name")
  pids+=($!)
}
start_case dp2_sigterm preempt dp2_sigterm TERM 1 --set parallelism.dp=2 --set tokens.batch_accumulation_per_replica=4
start_case pp2_sigusr1 preempt pp2_sigusr1 USR1 0 --set parallelism.pp=2 --set parallelism.pp_engine=1f1b \
  --set 'general.preemption_signals=[SIGUSR1]'
start_case tp2_launcher_sigterm preempt tp2_launcher_sigterm TERM launcher --set parallelism.tp=2
start_case async_write_in_flight async_write_in_flight
start_case second_signal second_signal
for i in "${!pids[@]}"; do
  wait "${pids[i]}"
  failures=$((failures + $?))
  cat "$out/${names[i]}.result"
done
finish
