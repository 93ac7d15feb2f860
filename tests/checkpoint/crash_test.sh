#!/usr/bin/env bash
# Crash safety: a rank killed at each of the 11 points of a save (TRIAX_FAULT, see
# docs/reliability.md), keep_last pruning included, leaves `latest` naming a complete checkpoint
# (the previous one until `latest` moved) and never a part of a checkpoint under a final name;
# a new run then resumes from the checkpoints folder and finishes with the uninterrupted run's
# losses, bit for bit (same topology).
#   crash_test.sh RUNNER MPIEXEC TRIAX CONFIG OUT_DIR [POINT:RANK...] [--set KEY=VALUE]...
# (the settings apply to every run: checkpoints.async_save=true kills the background save's points)
set -euo pipefail
runner=$1 mpiexec=$2 triax=$3 config=$4 out=$5
rm -rf "$out"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
shift 5
# keep_last 1: the save of step 4 prunes step 2 once `latest` names step 4.
settings=(--set parallelism.dp=2 --set optimizer.zero_stage=1 --set tokens.batch_accumulation_per_replica=4
          --set tokens.train_steps=6 --set checkpoints.checkpoint_interval=2 --set checkpoints.keep_last=1
          --set parallelism.comm_timeout_seconds=3)
faults=()
while (($#)); do
  if [[ $1 == --set ]]; then
    settings+=("$1" "$2")
    shift 2
  else
    faults+=("$1")
    shift
  fi
done
fail() { echo "FAILED: $*" >&2; exit 1; }
run() {  # run DIR [more --set]...: two ranks training into DIR/run
  local dir=$1
  shift
  "$mpiexec" -n 2 --oversubscribe --bind-to none \
    "$runner" run --config "$config" --out "$dir" --set "checkpoints.checkpoints_path=$dir/run" "${settings[@]}" "$@"
}

run "$out/whole" > "$out/whole.log" 2>&1 || fail "the uninterrupted run failed: $(tail -5 "$out/whole.log")"

# check_fault POINT:RANK: a run killed there, its folder checked, then resumed and compared.
check_fault() {
  local fault=$1 point dir expected from
  point=${fault%:*}
  dir="$out/fault_${fault//:/_}"
  if TRIAX_FAULT="$fault:4" run "$dir" > "$dir.log" 2>&1; then fail "$fault: the run did not fail"; fi
  grep -q "TRIAX_FAULT: killing rank ${fault#*:} at '$point' of step 4" "$dir.log" || fail "$fault: the fault did not fire"
  # `latest` had moved, or every file was durable and rank 0 alive to complete the save.
  case $fault in
    after_latest:* | mid_prune:* | after_prune:* | after_agreement:[1-9]*) expected=step_00000004 ;;
    *) expected=step_00000002 ;;
  esac
  [[ "$(cat "$dir/run/latest")" == "$expected" ]] || fail "$fault: latest is '$(cat "$dir/run/latest")', expected $expected"
  for folder in "$dir"/run/step_*; do  # every folder under a final name is complete and intact
    "$triax" inspect checkpoint "$folder" > "$dir.inspect" 2>&1 || fail "$fault: $folder: $(cat "$dir.inspect")"
  done
  case $fault in
    after_rename:* | after_latest:* | mid_prune:* | after_prune:* | after_agreement:[1-9]*)
      [[ -f "$dir/run/step_00000004/metadata.yaml" ]] || fail "$fault: step 4 should be complete" ;;
    *)
      [[ ! -e "$dir/run/step_00000004" ]] || fail "$fault: a partial step 4 is visible under its final name"
      [[ -d "$dir/run/.step_00000004.partial" ]] || fail "$fault: the interrupted save left no partial folder" ;;
  esac
  # A new run resumes from the folder (through latest) and finishes like the uninterrupted one.
  run "$dir/resumed" --set "checkpoints.resume_checkpoint_path=$dir/run" > "$dir.resume.log" 2>&1 ||
    fail "$fault: resuming failed: $(tail -5 "$dir.resume.log")"
  from=$((10#${expected#step_}))
  "$runner" compare --reference "$out/whole" --candidate "$dir/resumed" --from-step "$from" --tolerance 0 --losses-only 1 ||
    fail "$fault: the resumed losses differ"
  echo "$fault: latest stays $expected (complete), resumed bit for bit"
}

# The faults run two at a time: each is mostly process starts and waits (about 0.4 of a core
# busy), so two side by side halve the wall time. Each one's lines are printed when all are done.
PARALLEL_FAULTS=2
status=0 running=0
for fault in "${faults[@]}"; do
  if ((running == PARALLEL_FAULTS)); then
    wait -n || status=1
    running=$((running - 1))
  fi
  check_fault "$fault" > "$out/fault_${fault//:/_}.result" 2>&1 &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
for fault in "${faults[@]}"; do cat "$out/fault_${fault//:/_}.result"; done
exit $status
