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
# HELD_SHARE=D (ZeRO-3): what building the run left allocated on every rank (parameters, optimizer
# state and the rest) is at most 1/D of the single-rank reference's, plus 10%.
if [[ -n "${HELD_SHARE:-}" ]]; then
  whole=$(cat "$reference/held_bytes.rank0.txt")
  for file in "$out"/held_bytes.rank*.txt; do
    held=$(cat "$file")
    echo "$(basename "$file" .txt): $held bytes held, the single rank $whole (1/$HELD_SHARE: $((whole / HELD_SHARE)))"
    if ((held * HELD_SHARE * 10 > whole * 11)); then
      echo "$(basename "$file" .txt) holds more than 1/$HELD_SHARE of the single rank's bytes (+10%)" >&2
      exit 1
    fi
  done
fi
