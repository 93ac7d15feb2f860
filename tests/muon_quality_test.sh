#!/usr/bin/env bash
# Muon against AdamW on real text: the demo config (configs/tiny_llama_text.yaml, the licence
# texts of /usr/share/common-licenses tokenized with tools/tokenize) trained 300 steps with its
# AdamW, then with Muon at Muon's documented default learning rate (0.02 peak, the same schedule
# shape). Muon's loss (mean of the last 20 steps) must reach AdamW's final one in fewer steps; the
# step ratio is printed.
#   muon_quality_test.sh <triax executable> <source dir>
set -euo pipefail
TRIAX="$1"
SRC="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

source "$(dirname "$0")/data/licence_tokens.sh"
train() {
  local name=$1
  shift
  "$TRIAX" train --config "$SRC/configs/tiny_llama_text.yaml" --set "data_stages.0.data.dataset.dataset_folder=$WORK/licenses" \
    --set "checkpoints.checkpoints_path=$WORK/$name" --set logging.log_level=warning "$@" >"$WORK/$name.log" 2>&1 ||
    { cat "$WORK/$name.log"; exit 1; }
}
train adamw
train muon --set optimizer.optimizer_factory.name=muon --set optimizer.learning_rate_scheduler.learning_rate=0.02 \
  --set optimizer.learning_rate_scheduler.min_decay_lr=0.002

"$SRC/.venv/bin/python" - "$WORK/adamw/metrics.jsonl" "$WORK/muon/metrics.jsonl" <<'PY'
import json, sys

def smoothed(path, window=20):
    losses = [json.loads(line)["loss"] for line in open(path)]
    return [sum(losses[max(0, i - window + 1):i + 1]) / (i + 1 - max(0, i - window + 1)) for i in range(len(losses))]

adamw, muon = smoothed(sys.argv[1]), smoothed(sys.argv[2])
target = adamw[-1]
reached = next((step for step, loss in enumerate(muon, start=1) if loss <= target), None)
print(f"AdamW: loss {target:.4f} after {len(adamw)} steps; Muon: {muon[-1]:.4f} after {len(muon)} steps")
if reached is None or reached >= len(adamw):
    print(f"FAIL: Muon does not reach AdamW's final loss {target:.4f} in fewer steps")
    sys.exit(1)
print(f"Muon reaches AdamW's final loss at step {reached}: {reached / len(adamw):.2f} of AdamW's steps")
PY
