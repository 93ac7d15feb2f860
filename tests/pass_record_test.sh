#!/usr/bin/env bash
# A 2-rank pipeline run (pp 2) of the parity model with parallelism.pp_pass_record: its record has
# the documented structure (pass_record_check.py), and `triax inspect schedule --record` predicts
# its step from it.
#   pass_record_test.sh TRIAX MPIEXEC CONFIG OUT ENGINE [--set KEY=VALUE]...
set -euo pipefail
triax=$1 mpiexec=$2 config=$3 out=$4 engine=$5
shift 5
steps=3
rm -rf "$out"
mkdir -p "$(dirname "$out")"
"$mpiexec" -n 2 --oversubscribe "$triax" train --config "$config" --set checkpoints.checkpoints_path="$out" \
  --set checkpoints.checkpoint_interval=1000 --set parallelism.pp=2 --set parallelism.pp_engine="$engine" \
  --set parallelism.pp_pass_record=true --set tokens.train_steps=$steps "$@" > "$out.log" 2>&1 \
  || { cat "$out.log"; exit 1; }
python3 "$(dirname "$0")/pass_record_check.py" "$out" 2 $steps
prediction=$("$triax" inspect schedule --record "$out" --skip-steps 1)
echo "$prediction"
grep -q "^step (ms): predicted [0-9.]*, measured [0-9.]*, ratio" <<< "$prediction"
grep -q "order as the simulator's schedule of $engine" <<< "$prediction"
