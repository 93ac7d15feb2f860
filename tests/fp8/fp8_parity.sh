#!/usr/bin/env bash
# fp8 training runs at other topologies against the single-rank fp8 run (CPU ranks, the CPU
# emulation of the fp8 products): the parity matrix's tiny Llama trained 10 steps with the fp8
# section, every step's loss within TOLERANCE relative of the single-rank fp8 run's; and the
# single-rank fp8 run itself must differ from the plain fp32 run (fp8 is really on: every linear,
# however small, through fp8.min_gemm_size=0).
#   fp8_parity.sh RUNNER MPIEXEC CONFIG OUT_DIR RECIPE TOLERANCE RANKS [--set KEY=VALUE]...
set -euo pipefail
runner=$1 mpiexec=$2 config=$3 out=$4 recipe=$5 tolerance=$6 ranks=$7
shift 7
rm -rf "$out"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
"$runner" run --config "$config" --out "$out/fp32" --set "checkpoints.checkpoints_path=$out/fp32/run"
"$runner" run --config "$config" --out "$out/fp8_one_rank" --set "checkpoints.checkpoints_path=$out/fp8_one_rank/run" \
  --set "fp8.recipe=$recipe" --set fp8.min_gemm_size=0
if "$runner" compare --reference "$out/fp32" --candidate "$out/fp8_one_rank" --tolerance 1e-6 --losses-only 1 \
  > "$out/fp32_against_fp8.txt"; then
  echo "the fp8 run's losses equal the fp32 run's: fp8 did not take effect" >&2
  exit 1
fi
echo "fp8 against fp32 at one rank: $(grep -o 'worst relative difference [0-9.e-]*' "$out/fp32_against_fp8.txt")"
"$mpiexec" -n "$ranks" --oversubscribe --bind-to none \
  "$runner" run --config "$config" --out "$out/fp8_parallel" --set "checkpoints.checkpoints_path=$out/fp8_parallel/run" \
  --set "fp8.recipe=$recipe" --set fp8.min_gemm_size=0 "$@"
"$runner" compare --reference "$out/fp8_one_rank" --candidate "$out/fp8_parallel" --tolerance "$tolerance" \
  --losses-only 1
