#!/usr/bin/env bash
# Crash safety: a rank killed at each point of a save (TRIAX_CHECKPOINT_FAULT) leaves the
# previous checkpoint as `latest` and loadable, never a partial one under a final name; a new run
# then resumes from the checkpoints folder and finishes with the uninterrupted run's losses, bit
# for bit (same topology).
#   crash_test.sh RUNNER MPIEXEC TRIAX CONFIG OUT_DIR
set -euo pipefail
runner=$1 mpiexec=$2 triax=$3 config=$4 out=$5
rm -rf "$out"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
settings=(--set parallelism.dp=2 --set optimizer.zero_stage=1 --set tokens.batch_accumulation_per_replica=4
          --set tokens.train_steps=6 --set checkpoints.checkpoint_interval=2 --set parallelism.comm_timeout_seconds=10)
fail() { echo "FAILED: $*" >&2; exit 1; }
run() {  # run DIR [more --set]...: two ranks training into DIR/run
  local dir=$1
  shift
  "$mpiexec" -n 2 --oversubscribe --bind-to none \
    "$runner" run --config "$config" --out "$dir" --set "checkpoints.checkpoints_path=$dir/run" "${settings[@]}" "$@"
}

run "$out/whole" > "$out/whole.log" 2>&1 || fail "the uninterrupted run failed: $(tail -5 "$out/whole.log")"

for fault in 1:mid_write:4 0:before_commit:4 1:before_commit:4 0:before_latest:4; do
  dir="$out/fault_${fault//:/_}"
  if TRIAX_CHECKPOINT_FAULT=$fault run "$dir" > "$dir.log" 2>&1; then fail "$fault: the run did not fail"; fi
  [[ "$(cat "$dir/run/latest")" == step_00000002 ]] || fail "$fault: latest is '$(cat "$dir/run/latest")'"
  for folder in "$dir"/run/step_*; do  # every folder under a final name is complete and intact
    "$triax" inspect checkpoint "$folder" > "$dir.inspect" 2>&1 || fail "$fault: $folder: $(cat "$dir.inspect")"
  done
  if [[ "$fault" == *before_latest* ]]; then
    [[ -f "$dir/run/step_00000004/metadata.yaml" ]] || fail "$fault: step 4 should be complete (only latest unmoved)"
  else
    [[ ! -e "$dir/run/step_00000004" ]] || fail "$fault: a partial step 4 is visible under its final name"
    [[ -d "$dir/run/.step_00000004.partial" ]] || fail "$fault: the interrupted save left no partial folder"
  fi
  # A new run resumes from the folder (through latest) and finishes like the uninterrupted one.
  run "$dir/resumed" --set "checkpoints.resume_checkpoint_path=$dir/run" > "$dir.resume.log" 2>&1 ||
    fail "$fault: resuming failed: $(tail -5 "$dir.resume.log")"
  "$runner" compare --reference "$out/whole" --candidate "$dir/resumed" --from-step 2 --tolerance 0 --losses-only 1 ||
    fail "$fault: the resumed losses differ"
  echo "$fault: previous checkpoint kept as latest, resumed bit for bit"
done
