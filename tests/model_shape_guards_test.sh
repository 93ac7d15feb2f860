#!/usr/bin/env bash
# The model's shape as a new user meets it through the command line:
# 1. training from a Hugging Face folder (model.init_method.path) with a model_config holding one
#    key keeps the folder's shape, that key laid over it (the run's config.yaml says both);
# 2. a key given beside the folder that changes a weight's shape is refused (exit 2) naming the
#    key with its line, the weight and both shapes;
# 3. a model whose parameters, gradients and AdamW state cannot fit the free memory (MemAvailable)
#    is refused (exit 2) with the numbers, in well under a second and before anything is written.
#   model_shape_guards_test.sh TRIAX SOURCE_DIR
set -uo pipefail
TRIAX=$1 SRC=$2
source "$(dirname "$0")/refusal_expect.sh"

# A Hugging Face folder of the tiny Qwen3 (head_dim 32 over hidden_size 64).
"$TRIAX" train "$SRC/configs/tiny_qwen3.yaml" --set tokens.train_steps=2 --set checkpoints.checkpoint_interval=2 \
  --set "checkpoints.checkpoints_path=$WORK/trained" >/dev/null 2>&1 &&
  "$TRIAX" convert --to hf "$WORK/trained" "$WORK/hf" >/dev/null 2>&1 || { echo "FAIL: no Hugging Face folder"; exit 1; }
# run_config MODEL_CONFIG_LINES...: a config training from that folder, model_config's keys at lines 7 on.
run_config() {
  {
    printf 'general: {project: p, run: r, seed: 1, device: cpu}\n'
    printf 'checkpoints: {checkpoints_path: %s, checkpoint_interval: 10}\n' "$WORK/run"
    printf 'model:\n  dtype: float32\n  init_method: {path: %s}\n  model_config:\n' "$WORK/hf"
    printf '    %s\n' "$@"
    printf 'tokens: {sequence_length: 16, micro_batch_size: 2, batch_accumulation_per_replica: 1, train_steps: 1}\n'
    printf 'optimizer: {optimizer_factory: {name: adamW}, learning_rate_scheduler: {learning_rate: 0.001}}\n'
    printf 'data_stages: [{name: s, start_training_step: 1, data: {dataset: null, seed: 1}}]\n'
  } >"$WORK/run.yaml"
}

# 1. One key beside the folder.
run_config "z_loss_enabled: true"
out=$("$TRIAX" train --config "$WORK/run.yaml" 2>&1)
if [[ $? -ne 0 || "$out" != *"model qwen3: 133568 parameters"* || "$out" != *"step 1/1"* ]]; then
  echo "FAIL: training from the folder with one key did not build the folder's model:"
  echo "$out" | tail -5
  failures=$((failures + 1))
fi
for line in "hidden_size: 64" "head_dim: 32" "z_loss_enabled: true"; do
  grep -q "^    $line\$" "$WORK/run/config.yaml" ||
    { echo "FAIL: the run's config.yaml lacks '$line'"; failures=$((failures + 1)); }
done

# 2. Keys that change a weight's shape.
run_config "z_loss_enabled: true" "head_dim: 16"
expect_command 2 "model.model_config.head_dim (line 8): contradicts the weights of the Hugging Face folder $WORK/hf: model.layers.0.self_attn.qkv_proj.weight (model.layers.0.self_attn.q_proj.weight" \
  -- "$TRIAX" train --config "$WORK/run.yaml"
run_config "num_hidden_layers: 3"
expect_command 2 "model.model_config.num_hidden_layers (line 7): contradicts the weights of the Hugging Face folder $WORK/hf: model.layers.2.input_layernorm.weight is none there and [64] with the keys given" \
  -- "$TRIAX" train --config "$WORK/run.yaml"

# 3. About 2.6e11 parameters: terabytes with their gradients and AdamW state. The refusal may take
# what `triax train --check` of the same config takes (loading the config and the plugins), plus
# well under a second.
rm -rf "$WORK/run"
BIG=(--set model.model_config.hidden_size=16384 --set model.model_config.intermediate_size=65536
     --set model.model_config.num_hidden_layers=64)
milliseconds() { echo $(($(date +%s%N) / 1000000)); }
start=$(milliseconds)
"$TRIAX" train --check --config "$SRC/configs/tiny_llama.yaml" "${BIG[@]}" >/dev/null 2>&1
checked=$(milliseconds)
expect 2 "model.model_config: the model's 2.58e+11 parameters need at least" tiny_llama.yaml -- "${BIG[@]}"
refused=$(milliseconds)
expect 2 "free on cpu (MemAvailable); make the model smaller" tiny_llama.yaml -- "${BIG[@]}"
beyond_check=$((refused - checked - (checked - start)))
if ((beyond_check > 500)) || [[ -e "$WORK/run" ]]; then
  echo "FAIL: the refusal took $((refused - checked)) ms, $beyond_check ms more than --check (expected well under" \
       "a second), or left $WORK/run behind"
  failures=$((failures + 1))
else
  echo "ok: refused in $((refused - checked)) ms, $beyond_check ms more than --check"
fi

((failures == 0)) || exit 1
echo "keys beside a Hugging Face folder and a model beyond the free memory: ok"
