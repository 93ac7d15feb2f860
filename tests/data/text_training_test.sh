#!/usr/bin/env bash
# Tokenizes the licence texts of /usr/share/common-licenses with tools/tokenize (a byte-level BPE
# tokenizer trained on them, no download) and trains the demo config on them with the triax
# command for a few steps: the run describes the dataset, and the loss falls.
#   text_training_test.sh <triax executable> <source dir>
set -euo pipefail
TRIAX="$1"
SRC="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/licence_tokens.sh"
ls "$WORK"/licenses/tokens_0000{0,1,2}.ds >/dev/null

"$TRIAX" train --config "$SRC/configs/tiny_llama_text.yaml" --set tokens.train_steps=40 \
  --set "data_stages.0.data.dataset.dataset_folder=$WORK/licenses" \
  --set "checkpoints.checkpoints_path=$WORK/run" >"$WORK/log" 2>&1 || { cat "$WORK/log"; exit 1; }
grep -q "samples per epoch from .* tokens in 3 file(s)" "$WORK/log" || { echo "FAIL: no dataset description"; cat "$WORK/log"; exit 1; }
grep -q "data consumed after step 40" "$WORK/log" || { echo "FAIL: no consumption line"; cat "$WORK/log"; exit 1; }
# Bad data stops before training with exit status 2, naming the key and the folder.
set +e
out="$("$TRIAX" train --config "$SRC/configs/tiny_llama_text.yaml" --set "data_stages.0.data.dataset.dataset_folder=$WORK/nowhere" \
  --set "checkpoints.checkpoints_path=$WORK/run2" 2>&1)"
status=$?
set -e
[[ $status -eq 2 && "$out" == *"data_stages.0.data.dataset.dataset_folder: $WORK/nowhere: no such folder"* ]] ||
  { echo "FAIL: a missing folder gave exit $status: $out"; exit 1; }
out="$("$TRIAX" train --config "$SRC/configs/tiny_llama_text.yaml" --set "data_stages.0.data.dataset.dataset_folder=$WORK/licenses" \
  --set model.model_config.vocab_size=300 --set "checkpoints.checkpoints_path=$WORK/run2" 2>&1)" && exit 1
[[ "$out" == *"is not below the vocabulary size 300 (model.model_config.vocab_size)"* ]] ||
  { echo "FAIL: token ids above the vocabulary not refused: $out"; exit 1; }

"$SRC/.venv/bin/python" - "$WORK/run/metrics.jsonl" <<'PY'
import json, sys
losses = [json.loads(line)["loss"] for line in open(sys.argv[1])]
first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
print(f"loss {first:.3f} -> {last:.3f} over {len(losses)} steps")
sys.exit(0 if len(losses) == 40 and last < first - 1.0 else 1)
PY
