#!/usr/bin/env bash
# The config errors a new user meets, through the command line: each exits 2 (3 for an unknown
# plugin) with the file, the key path and, for values of the file, the line; a refused run
# leaves no run folder; `triax train --check` accepts a valid config without training.
#   config_cli_test.sh <triax executable> <source dir>
set -uo pipefail
TRIAX="$1"
SRC="$2"
source "$(dirname "$0")/script_support.sh"

CONFIG="$SRC/configs/tiny_llama.yaml"
RUN="$WORK/run"
at_run=(--set "checkpoints.checkpoints_path=$RUN")
no_run_folder() { [[ ! -e "$RUN" ]] || fail "a refused run created $RUN ($1)"; rm -rf "$RUN"; }

# A copy of the shipped config with one line changed: <file> <sed expression>.
variant() { sed -e "$2" "$CONFIG" > "$WORK/$1"; echo "$WORK/$1"; }
line_of() { grep -n "$2" "$1" | head -1 | cut -d: -f1; }

# Unknown plugins: exit 3, the file and the key named, nothing created.
expect 3 "tiny_llama.yaml: model.plugin" "unknown model plugin 'nosuch'" "llama" -- \
  train --config "$CONFIG" --set model.plugin=nosuch "${at_run[@]}"
no_run_folder "unknown model plugin"
expect 3 "tiny_llama.yaml: parallelism.pp_engine" "zigzag" -- train --config "$CONFIG" --set parallelism.pp_engine=zigzag "${at_run[@]}"
expect 3 "tiny_llama.yaml: optimizer.optimizer_factory.name with optimizer.zero_stage 1" -- \
  train --config "$CONFIG" --set optimizer.optimizer_factory.name=lion --set optimizer.zero_stage=1 "${at_run[@]}"
no_run_folder "unknown optimizer"

# Errors inside model_config and optimizer_factory name the file's line.
FILE="$(variant bad_heads.yaml 's/num_attention_heads: 4/num_attention_heads: 3/')"
expect 2 "bad_heads.yaml: model.model_config.num_attention_heads (line $(line_of "$FILE" num_attention_heads))" -- \
  train --config "$FILE" "${at_run[@]}"
no_run_folder "bad model_config"
FILE="$(variant bad_beta.yaml 's/adam_beta1: 0.9/adam_beta1: 1.5/')"
expect 2 "bad_beta.yaml: optimizer.optimizer_factory.adam_beta1 (line $(line_of "$FILE" adam_beta1))" -- \
  train --config "$FILE" "${at_run[@]}"
no_run_folder "bad optimizer_factory"

# The file itself: a duplicate key, a second document, an unclosed quote.
FILE="$(variant duplicate.yaml 's/^\(  *\)hidden_size: 64/&\n\1hidden_size: 7/')"
expect 2 "duplicate.yaml: model.model_config.hidden_size (line $(( $(line_of "$FILE" hidden_size) + 1 ))): duplicate key" -- \
  train --config "$FILE" "${at_run[@]}"
FILE="$(variant two_documents.yaml '$a ---\ngeneral: {seed: 1}')"
expect 2 "two_documents.yaml: line" "a second YAML document" -- train --config "$FILE" "${at_run[@]}"
FILE="$(variant quote.yaml 's/run: tiny_llama/run: "tiny_llama/')"
expect 2 "quote.yaml: general.run (line $(line_of "$FILE" 'run: "')): not valid YAML: the quoted string" -- \
  train --config "$FILE" "${at_run[@]}"
no_run_folder "broken YAML"

# Huge sizes: a config error naming the key, not an allocation failure.
expect 2 "model.model_config.hidden_size" "largest size" -- train --config "$CONFIG" --set model.model_config.hidden_size=99999999999 "${at_run[@]}"
expect 2 "model.model_config.hidden_size" "parameters" -- train --config "$CONFIG" \
  --set model.model_config.hidden_size=2147483520 --set model.model_config.vocab_size=2147483647 "${at_run[@]}"
expect 2 "tokens.sequence_length" -- train --config "$CONFIG" --set tokens.sequence_length=4611686018427387904 "${at_run[@]}"
no_run_folder "huge sizes"

# --check: the config and the plugins' sections, no training, no run folder.
expect 0 "the configuration is valid" -- train --check --config "$CONFIG" "${at_run[@]}"
no_run_folder "--check"
for config in "$SRC"/configs/*.yaml "$SRC"/configs/bench/*.yaml; do
  expect 0 "valid" -- train --check --config "$config"
done
expect 2 "model.model_config.num_attention_heads" -- train --check --config "$WORK/bad_heads.yaml"

# A warm-up longer than the run (a quick check of a long config) trains, as nanotron does.
expect 0 "step 1/1" -- train --config "$CONFIG" --set tokens.train_steps=1 "${at_run[@]}"

finish "the config errors of the command line"
