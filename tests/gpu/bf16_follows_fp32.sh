#!/usr/bin/env bash
# Mixed precision on the GPU: the parity matrix's tiny Llama trained 50 steps in bf16 on one GPU
# (bf16 parameters and activations, fp32 masters, fp32 gradient accumulation, fp32 loss), through
# the nccl backend at world size 1 (the multi-GPU code path), follows the fp32 CPU run on the same
# data and initialisation: every step's loss within TOLERANCE relative. Further arguments
# (--set KEY=VALUE) go to both runs.
#   bf16_follows_fp32.sh RUNNER CONFIG OUT_DIR [TOLERANCE [--set KEY=VALUE]...]
set -euo pipefail
runner=$1 config=$2 out=$3 tolerance=${4:-0.02}
shift $(( $# < 4 ? $# : 4 ))
rm -rf "$out"
mkdir -p "$out"
steps=(--set tokens.train_steps=50 "$@")
OMP_NUM_THREADS=4 "$runner" run --config "$config" --out "$out/cpu_fp32" "${steps[@]}" \
  --set general.device=cpu --set "checkpoints.checkpoints_path=$out/cpu_fp32/run"
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
  "$runner" run --config "$config" --out "$out/gpu_bf16" "${steps[@]}" --set general.device=cuda \
  --set model.dtype=bfloat16 --set parallelism.comm_backend=nccl --set "checkpoints.checkpoints_path=$out/gpu_bf16/run"
"$runner" compare --reference "$out/cpu_fp32" --candidate "$out/gpu_bf16" --tolerance "$tolerance" --losses-only 1
