#!/usr/bin/env bash
# general.cuda_graphs on one GPU (nccl at world size 1): the parity matrix's tiny Llama trained
# with its steps captured and replayed as a CUDA graph ends with the same losses, gradient norms
# and parameters as the run without graphs, bit for bit (tolerance 0), for
#   - bf16 parameters with fp32 gradient buffers (8 micro-batches a step, afab),
#   - fp32 parameters, whose gradients accumulate in the parameters' own .grad (1f1b),
#   - bf16 with every layer recomputed in the backward and ZeRO-1's optimizer,
#   - bf16 with one micro-batch a step, whose gradients go to the fused AdamW kernel as computed.
# A model whose forward synchronises with the host (the MoE dispatch reads its expert counts)
# is refused at its capture, with general.cuda_graphs and the plugin named.
#   cuda_graphs_equal_eager.sh RUNNER LLAMA_CONFIG MOE_CONFIG OUT_DIR
set -euo pipefail
runner=$1 llama=$2 moe=$3 out=$4
rm -rf "$out"
mkdir -p "$out"
export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29519

run() {  # NAME CONFIG [--set KEY=VALUE]...
  local name=$1 config=$2
  shift 2
  "$runner" run --config "$config" --out "$out/$name" --set tokens.train_steps=12 --set general.device=cuda \
    --set parallelism.comm_backend=nccl --set "checkpoints.checkpoints_path=$out/$name/run" "$@"
}

variant() {  # NAME [--set KEY=VALUE]...
  local name=$1
  shift
  run "$name.eager" "$llama" "$@"
  run "$name.graphs" "$llama" --set general.cuda_graphs=true "$@"
  "$runner" compare --reference "$out/$name.eager" --candidate "$out/$name.graphs" --tolerance 0
}

variant bf16 --set model.dtype=bfloat16
variant fp32 --set model.dtype=float32 --set parallelism.pp_engine=1f1b
variant bf16_recompute_zero1 --set model.dtype=bfloat16 --set parallelism.recompute_layer=true \
  --set optimizer.zero_stage=1
variant bf16_one_micro_batch --set model.dtype=bfloat16 --set tokens.batch_accumulation_per_replica=1

if run moe.graphs "$moe" --set general.cuda_graphs=true --set model.dtype=bfloat16 2>"$out/moe.err"; then
  echo "the MoE model was captured, but its dispatch reads expert counts on the host" >&2
  exit 1
fi
for expected in "general.cuda_graphs" "could not be captured" "model plugin 'moe'"; do
  if ! grep -q "$expected" "$out/moe.err"; then
    echo "the refusal does not say '$expected':" >&2
    cat "$out/moe.err" >&2
    exit 1
  fi
done
echo "refused as expected: $(head -c 400 "$out/moe.err")"
