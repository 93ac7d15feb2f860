#!/usr/bin/env bash
# End-to-end checks of the `triax` command line: a short training run writes its run folder;
# configuration errors exit 2 naming the file and key; an unknown plugin exits 3 listing the
# available ones; `triax plugins` lists the built plugins.
#   cli_test.sh <triax executable> <source dir>
set -uo pipefail
TRIAX="$1"
SRC="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/cli_expect.sh"

CONFIG="$SRC/configs/tiny_llama.yaml"
RUN="$WORK/run"

# A short run: one log line per step, resolved config and metrics in the run folder.
expect 0 "step 3/3" -- train --config "$CONFIG" --set tokens.train_steps=3 --set "checkpoints.checkpoints_path=$RUN"
[[ -f "$RUN/config.yaml" ]] || fail "no resolved config in the run folder"
[[ $(wc -l < "$RUN/metrics.jsonl") -eq 3 ]] || fail "metrics.jsonl should hold 3 lines"
grep -q "train_steps: 3" "$RUN/config.yaml" || fail "resolved config lacks the override"
grep -q "rope_theta" "$RUN/config.yaml" || fail "resolved config lacks the model's defaults"

# Configuration errors: exit 2, file and key path named, nothing trained.
expect 2 "optimizer.clip_grad" -- train --config "$CONFIG" --set optimizer.clip_grad=abc
expect 2 "tiny_llama.yaml" -- train --config "$CONFIG" --set optimizer.clip_grad=abc
out="$("$TRIAX" train --config "$CONFIG" --set optimizer.clip_grad=abc 2>&1)"
[[ "$out" != *"(line 1)"* ]] || fail "an overridden value must not claim a line of the file: $out"
expect 2 "model.model_config.max_position_embeddings" -- train --config "$CONFIG" --set tokens.sequence_length=512
expect 2 "tokens.sequence_lenght" -- train --config "$CONFIG" --set tokens.sequence_lenght=5
expect 2 "model.model_config.num_attention_heads" -- train --config "$CONFIG" --set model.model_config.num_attention_heads=3
expect 2 "parallelism" -- train --config "$CONFIG" --set parallelism.dp=2
expect 2 "cannot open" -- train --config "$WORK/missing.yaml"
expect 2 "--config" -- train
expect 2 "is a folder" -- train --config "$WORK"
printf 'general: {project: x\ntokens: [1,\n' > "$WORK/broken.yaml"
expect 2 "broken.yaml: not valid YAML" -- train --config "$WORK/broken.yaml"
# A data source no stage can name: the key and the known sources, from the run and from --check.
known="data_stages.0.data.source: unknown data source 'parquet'; the known sources are synthetic, token_folders"
expect 2 "tiny_llama.yaml: $known" -- train --config "$CONFIG" --set data_stages.0.data.source=parquet \
  --set "checkpoints.checkpoints_path=$RUN"
expect 2 "$known" -- train --check --config "$CONFIG" --set data_stages.0.data.source=parquet
touch "$WORK/a_file"
expect 2 "checkpoints.checkpoints_path: cannot create the run folder" -- train --config "$CONFIG" --set "checkpoints.checkpoints_path=$WORK/a_file/run"

# Unknown plugin: exit 3, the available ones listed.
expect 3 "afab" -- train --config "$CONFIG" --set parallelism.pp_engine=zigzag --set "checkpoints.checkpoints_path=$RUN"
expect 3 "adamw" -- train --config "$CONFIG" --set optimizer.optimizer_factory.name=adamX --set "checkpoints.checkpoints_path=$RUN"

# A diverging run stops with the step named, exit 1.
expect 1 "training diverged" -- train --config "$CONFIG" --set tokens.train_steps=20 \
  --set optimizer.learning_rate_scheduler.learning_rate=1e6 --set optimizer.learning_rate_scheduler.min_decay_lr=1 \
  --set optimizer.learning_rate_scheduler.lr_warmup_steps=0 --set optimizer.clip_grad=null \
  --set "checkpoints.checkpoints_path=$RUN"

# The plugin listing.
expect 0 "llama" -- plugins
expect 0 "afab" -- plugins
expect 2 "unknown command" -- frobnicate

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "all command-line checks passed"
