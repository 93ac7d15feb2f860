#!/usr/bin/env bash
# One resharding case: resumes the tiny parity Llama on RANKS processes from step FROM of a
# source run's checkpoint (saved at another topology), trains to the end, and compares the
# losses of the remaining steps and the final parameters with the uninterrupted single-rank
# reference (1e-5 relative). With EXACT=1 the losses must also equal the source run's bit for bit
# (same topology).
#   resume_case.sh RUNNER MPIEXEC CONFIG REFERENCE_DIR SOURCE_DIR OUT_DIR RANKS FROM [--set KEY=VALUE]...
set -euo pipefail
runner=$1 mpiexec=$2 config=$3 reference=$4 source=$5 out=$6 ranks=$7 from=$8
shift 8
rm -rf "$out"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
step=$(printf 'step_%08d' "$from")
"$mpiexec" -n "$ranks" --oversubscribe --bind-to none \
  "$runner" run --config "$config" --out "$out" --set "checkpoints.checkpoints_path=$out/run" \
  --set "checkpoints.resume_checkpoint_path=$source/run/$step" "$@"
"$runner" compare --reference "$reference" --candidate "$out" --from-step "$from"
if [[ "${EXACT:-0}" == 1 ]]; then
  "$runner" compare --reference "$source" --candidate "$out" --from-step "$from" --tolerance 0 --losses-only 1
fi
