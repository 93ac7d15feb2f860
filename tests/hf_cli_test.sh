#!/usr/bin/env bash
# The command line without model.plugin: a nanotron config (no triax keys) trains, chosen by its
# marker key; `triax convert` exports and imports it; a run whose model_config comes from a
# Hugging Face folder's config.json trains and shows it in its resolved config; and the refusals:
# no marker, two markers, an architecture no plugin reads.
#   hf_cli_test.sh <triax executable> <source dir> <folder of the marker test plugins>
set -uo pipefail
TRIAX="$1"
SRC="$2"
MARKERS="$3"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/cli_expect.sh"

NANOTRON="$SRC/tests/data/nanotron_config_tiny_llama.yaml"
# One process, a synthetic stream instead of nanotron's Hugging Face dataset, a few short steps.
SMALL=(--set parallelism.dp=1 --set parallelism.tp=1 --set parallelism.pp=1 --set tokens.train_steps=3
       --set tokens.sequence_length=32 --set data_stages.0.data.dataset=null --set data_stages.1.data.dataset=null)

# A nanotron config: the plugin follows from is_llama_config.
expect 0 "step 3/3" -- train --config "$NANOTRON" "${SMALL[@]}" --set "checkpoints.checkpoints_path=$WORK/nano" \
  --set checkpoints.checkpoint_interval=3
grep -q "plugin: llama" "$WORK/nano/config.yaml" || fail "the resolved config does not name the chosen plugin"

# Exported through the plugin's mapping; imported back.
expect 0 "wrote the Hugging Face folder" -- convert --to hf "$WORK/nano" "$WORK/hf" --dtype float32
grep -q '"LlamaForCausalLM"' "$WORK/hf/config.json" || fail "config.json lacks the architecture"
expect 0 "wrote the triax checkpoint" -- convert --from hf "$WORK/hf" "$WORK/imported"

# No model_config: it comes from the folder's config.json, and the resolved config shows it.
expect 0 "step 3/3" -- train --config "$NANOTRON" "${SMALL[@]}" --set "checkpoints.checkpoints_path=$WORK/from_hf" \
  --set model.model_config=null --set "model.init_method={path: $WORK/hf}"
grep -q "hidden_size: 16" "$WORK/from_hf/config.yaml" || fail "the resolved config lacks config.json's hidden_size"
grep -q "num_hidden_layers: 2" "$WORK/from_hf/config.yaml" || fail "the resolved config lacks config.json's layers"
grep -q "plugin: llama" "$WORK/from_hf/config.yaml" || fail "the resolved config does not name the plugin"

# No marker, or the markers of two plugins: refused, listing the plugins and their markers.
expect error "llama (is_llama_config)" -- train --config "$NANOTRON" "${SMALL[@]}" \
  --set "checkpoints.checkpoints_path=$WORK/none" --set model.model_config.is_llama_config=null
export TRIAX_PLUGIN_PATH="$MARKERS"
expect error "several model plugins" -- train --config "$NANOTRON" "${SMALL[@]}" \
  --set "checkpoints.checkpoints_path=$WORK/two" --set model.model_config.is_a_config=true
unset TRIAX_PLUGIN_PATH

# An architecture no plugin reads.
sed -i 's/"LlamaForCausalLM"/"NoSuchModelForCausalLM"/' "$WORK/hf/config.json"
expect error "no model plugin reads this architecture" -- convert --from hf "$WORK/hf" "$WORK/nobody"
expect error "llama (LlamaForCausalLM)" -- convert --from hf "$WORK/hf" "$WORK/nobody"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "ok"
