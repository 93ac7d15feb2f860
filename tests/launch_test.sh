#!/usr/bin/env bash
# `triax launch`, rendezvous and the no-hang guarantee, end to end with real processes:
#   - two data-parallel ranks train and the launcher exits 0;
#   - a command other than triax: the launcher exits with its failing rank's status (mpirun
#     --enable-recovery returns 0 whatever its ranks returned), 1 for a rank killed by a signal;
#   - a mesh that does not match the launch, an unknown backend, the mpi backend under torchrun's
#     variables, partial launcher variables: exit 2 before any work, reported by every rank;
#   - one rank killed mid-training: the other exits non-zero within the timeout, naming the step
#     and the dead peer, and the launcher exits non-zero;
#   - `triax inspect mesh` prints the rank table and the groups (with --ep and --cp too).
#   launch_test.sh <triax executable> <source dir>
set -uo pipefail
TRIAX="$1"
SRC="$2"
WORK="$(mktemp -d)"
LAUNCHER=""
cleanup() {
  [[ -n "$LAUNCHER" ]] && kill "$LAUNCHER" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
export OMP_NUM_THREADS=1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
CONFIG="$SRC/configs/tiny_llama.yaml"
TRAIN=(train --config "$CONFIG" --set "checkpoints.checkpoints_path=$WORK/run")

# expect <exit status> <text> <times the text must appear> -- <command...>
expect() {
  local status="$1" text="$2" times="$3"; shift 4
  local out; out="$("$@" 2>&1)"; local got=$?
  [[ $got -eq $status ]] || fail "$* exited $got, expected $status. Output:
$out"
  local count; count=$(grep -oF -- "$text" <<<"$out" | wc -l)
  [[ $count -ge $times ]] || fail "$* says '$text' $count time(s), expected $times. Output:
$out"
}

# Two data-parallel ranks train; rank 0 logs the steps.
expect 0 "step 3/3" 1 -- "$TRIAX" launch -n 2 -- "$TRIAX" "${TRAIN[@]}" --set parallelism.dp=2 --set tokens.train_steps=3
[[ $(wc -l <"$WORK/run/metrics.jsonl") -eq 3 ]] || fail "metrics.jsonl of the dp=2 run should hold 3 lines"

# Bad input stops every rank before any work.
expect 2 "but the world size is 2" 2 -- "$TRIAX" launch -n 2 -- "$TRIAX" "${TRAIN[@]}"
expect 2 "but the world size is 3" 3 -- "$TRIAX" launch -n 3 -- "$TRIAX" "${TRAIN[@]}" --set parallelism.dp=2
expect 2 "parallelism.comm_backend" 2 -- "$TRIAX" launch -n 2 -- "$TRIAX" "${TRAIN[@]}" --set parallelism.dp=2 \
  --set parallelism.comm_backend=gloo
# ... and so do impossible splits of the model and schedules (tiny_llama: 2 layers, 4 heads
# over 2 KV heads, 2 micro-batches per step).
expect 2 "num_key_value_heads (line 29): 2 is not divisible by the tensor parallel size 4" 4 -- \
  "$TRIAX" launch -n 4 -- "$TRIAX" "${TRAIN[@]}" --set parallelism.tp=4
expect 2 "cannot fill a pipeline of parallelism.pp = 3" 3 -- \
  "$TRIAX" launch -n 3 -- "$TRIAX" "${TRAIN[@]}" --set parallelism.pp=3
expect 2 "1f1b needs at least pp - 1 = 3 micro-batches per step, got 2" 4 -- \
  "$TRIAX" launch -n 4 -- "$TRIAX" "${TRAIN[@]}" --set parallelism.pp=4 --set parallelism.pp_engine=1f1b \
  --set model.model_config.num_hidden_layers=4
expect 3 "unknown engine plugin 'zigzag'" 2 -- \
  "$TRIAX" launch -n 2 -- "$TRIAX" "${TRAIN[@]}" --set parallelism.pp=2 --set parallelism.pp_engine=zigzag
expect 2 "nccl needs general.device cuda" 1 -- "$TRIAX" "${TRAIN[@]}" --set parallelism.comm_backend=nccl
expect 2 "triax launch -n 2" 1 -- "$TRIAX" "${TRAIN[@]}" --set parallelism.dp=2
expect 2 "torchrun starts GPU ranks (nccl); on CPU start them with \`triax launch -n 2 -- triax train" 1 -- env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29555 \
  "$TRIAX" "${TRAIN[@]}" --set parallelism.dp=2 --set parallelism.comm_backend=mpi
expect 2 "RANK is set but WORLD_SIZE is not" 1 -- env RANK=1 "$TRIAX" "${TRAIN[@]}"
expect 2 "-n N (N >= 1) is required" 1 -- "$TRIAX" launch -- "$TRIAX" version

# Commands that are not triax: each rank's own exit status counts, and a killed rank fails the launch.
expect 0 "rank done" 2 -- "$TRIAX" launch -n 2 -- sh -c 'echo rank done'
expect 1 "rank 0 exited with status 1" 1 -- "$TRIAX" launch -n 2 -- false
expect 3 "rank 1 exited with status 3" 1 -- "$TRIAX" launch -n 2 -- sh -c 'exit $((OMPI_COMM_WORLD_RANK * 3))'
expect 1 "rank 1 left no exit status (killed or crashed)" 1 -- \
  "$TRIAX" launch -n 2 -- sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then kill -9 $$; fi'

# One rank killed mid-training: the survivor names the step and the peer within the timeout.
TIMEOUT=4
"$TRIAX" launch -n 2 --comm-timeout $TIMEOUT -- "$TRIAX" "${TRAIN[@]}" --set parallelism.dp=2 \
  --set tokens.train_steps=40 --set "checkpoints.checkpoints_path=$WORK/killed" >"$WORK/killed.log" 2>&1 &
LAUNCHER=$!
victim=""
for _ in $(seq 1 600); do  # until rank 0 has logged 3 steps, then find rank 1 among mpirun's children
  if [[ -f "$WORK/killed/metrics.jsonl" && $(wc -l <"$WORK/killed/metrics.jsonl") -ge 3 ]]; then
    for mpirun in $(pgrep -P "$LAUNCHER"); do
      for rank in $(pgrep -P "$mpirun"); do
        tr '\0' '\n' <"/proc/$rank/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$rank
      done
    done
    break
  fi
  sleep 0.05
done
if [[ -z "$victim" ]]; then
  fail "could not find rank 1 of the running job. Output: $(cat "$WORK/killed.log")"
else
  kill -9 "$victim"
  killed_at=$(date +%s%N)
  wait "$LAUNCHER"
  status=$?
  LAUNCHER=""
  elapsed_ms=$((($(date +%s%N) - killed_at) / 1000000))
  elapsed="$((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000)))"
  log="$(cat "$WORK/killed.log")"
  [[ $status -ne 0 ]] || fail "the launcher exited 0 although rank 1 was killed. Output: $log"
  grep -q "rank 0 exited with status 4" <<<"$log" || fail "rank 0 should exit 4 (communication). Output: $log"
  grep -q "rank 1 left no exit status (killed or crashed)" <<<"$log" || fail "the launcher should name rank 1. Output: $log"
  grep -Eq "communication failed: rank 0: step [0-9]+: .* got no answer for $TIMEOUT s: rank 1 last seen [0-9.]+ s ago at step [0-9]+ \(dead or hung\)" <<<"$log" ||
    fail "the survivor's message should name the step and the dead peer. Output: $log"
  # The survivor's next gradient reduction waits for the dead peer, at most the timeout; allow
  # a few seconds for mpirun to notice and the launcher to collect the statuses.
  ((elapsed_ms < (TIMEOUT + 10) * 1000)) || fail "the survivor took ${elapsed}s to give up (timeout ${TIMEOUT}s)"
  echo "killed rank 1; the launcher returned after ${elapsed}s with status $status"
fi

# The mesh, printed.
expect 0 "dp groups: [0 4] [1 5] [2 6] [3 7]" 1 -- "$TRIAX" inspect mesh --dp 2 --tp 2 --pp 2
expect 0 "   5   1   0   1     -     7" 1 -- "$TRIAX" inspect mesh --dp 2 --tp 2 --pp 2
expect 2 "must divide parallelism.dp" 1 -- "$TRIAX" inspect mesh --dp 3 --ep 2
# dp 4 = ep 2 x edp 2, ep fastest: rank 3 is ep rank 1, edp rank 1.
expect 0 "ep groups: [0 1] [2 3]" 1 -- "$TRIAX" inspect mesh --dp 4 --ep 2
expect 0 "edp groups: [0 2] [1 3]" 1 -- "$TRIAX" inspect mesh --dp 4 --ep 2
expect 0 "   3   3   0   0   1   1" 1 -- "$TRIAX" inspect mesh --dp 4 --ep 2
# cp 2 next to tp 2, inside dp: cp rank 1 of tp rank 0 is world rank 2.
expect 0 "cp groups: [0 2] [1 3] [4 6] [5 7]" 1 -- "$TRIAX" inspect mesh --dp 2 --tp 2 --cp 2
expect 0 "rank = tp_rank + cp_rank*2 + pp_rank*4 + dp_rank*4" 1 -- "$TRIAX" inspect mesh --dp 2 --tp 2 --cp 2

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "all launch checks passed"
