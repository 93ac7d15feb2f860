#!/usr/bin/env bash
# Saves written in the background overlap training (checkpoints.async_save): a dp=2 x pp=2 run on
# four CPU ranks saves at step 5, each rank's file taking 1 s longer to write (TRIAX_FAULT=
# slow_write, a slow disk) while the next steps take at least 0.4 s each (slow_forward), and
# every rank's log line of that save must show the steps stalled for less time than the write
# took; `latest` names the last step (10: its save is waited for at the end of the run).
#   async_overlap_test.sh TRIAX CONFIG OUT_DIR
set -euo pipefail
triax=$1 config=$2 out=$3
rm -rf "$out"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
TRIAX_FAULT=slow_write:*:5,slow_forward "$triax" launch -n 4 -- "$triax" train --config "$config" \
  --set "checkpoints.checkpoints_path=$out/run" --set parallelism.dp=2 --set parallelism.pp=2 \
  --set parallelism.pp_engine=1f1b --set tokens.batch_accumulation_per_replica=4 \
  --set checkpoints.checkpoint_interval=5 --set checkpoints.async_save=true --set logging.log_level=info \
  --set logging.log_level_replica=info --set logging.tensorboard=false >"$out/run.log" 2>&1 ||
  { tail -20 "$out/run.log"; exit 1; }
# "...written in the background in W s (...); the training stalled S s (...)", one line per rank
lines=$(grep 'checkpoint: step 5 saved' "$out/run.log" |
  grep -o 'written in the background in [0-9.]* s .*the training stalled [0-9.]* s' || true)
[[ $(wc -l <<<"$lines") -eq 4 && -n "$lines" ]] || { echo "not 4 ranks' lines for step 5: $(tail -20 "$out/run.log")"; exit 1; }
while read -r line; do
  write=$(sed -E 's/.*background in ([0-9.]+) s.*/\1/' <<<"$line")
  stall=$(sed -E 's/.*stalled ([0-9.]+) s.*/\1/' <<<"$line")
  awk -v s="$stall" -v w="$write" 'BEGIN { exit !(s < w) }' || { echo "stalled $stall s, written in $write s: no overlap"; exit 1; }
  echo "step 5: written in $write s, the training stalled $stall s"
done <<<"$lines"
latest=$(cat "$out/run/latest")
[[ $latest == step_00000010 && -f "$out/run/$latest/metadata.yaml" ]] || { echo "latest is $latest, expected a complete step 10"; exit 1; }
echo "the background save of step 5 overlapped training on every rank; latest is $latest"
