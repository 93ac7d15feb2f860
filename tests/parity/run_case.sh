#!/usr/bin/env bash
# One case of the parity matrix: trains the tiny Llama on RANKS processes with the given
# overrides, then compares losses and parameters with the single-rank reference.
#   run_case.sh RUNNER MPIEXEC CONFIG REFERENCE_DIR OUT_DIR RANKS [--set KEY=VALUE]...
set -euo pipefail
runner=$1 mpiexec=$2 config=$3 reference=$4 out=$5 ranks=$6
shift 6
rm -rf "$out"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$mpiexec" -n "$ranks" --oversubscribe --bind-to none \
  "$runner" run --config "$config" --out "$out" --set "checkpoints.checkpoints_path=$out/run" "$@"
"$runner" compare --reference "$reference" --candidate "$out"
# PEAK_LIVE="4 3 2 1": the most micro-batches each world rank held in flight, as measured.
if [[ -n "${PEAK_LIVE:-}" ]]; then
  rank=0
  for expected in $PEAK_LIVE; do
    measured=$(cat "$out/peak_live.rank$rank.txt")
    if [[ "$measured" != "$expected" ]]; then
      echo "rank $rank held $measured micro-batches in flight, expected $expected" >&2
      exit 1
    fi
    rank=$((rank + 1))
  done
  echo "micro-batches in flight per rank: $PEAK_LIVE (as expected)"
fi
