#!/usr/bin/env bash
# The tiny CPU configs of the qwen3 and qwen3_moe plugins train with the triax command as shipped:
# the loss starts near ln(256) = 5.5 (uniform over the vocabulary) and ends below 1.5, close to the
# synthetic stream's floor of about 1.11 nats; the Qwen3-MoE run logs its router losses.
#   qwen3_tiny_configs_test.sh TRIAX SOURCE_DIR
set -uo pipefail
TRIAX=$1 SRC=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1
failures=0
loss_of_step() {  # loss_of_step METRICS STEP
  grep -m1 "^{\"step\": $2," "$1" | sed -E 's/.*"loss": ([0-9.e+-]+).*/\1/'
}
for name in tiny_qwen3 tiny_qwen3_moe; do
  out=$("$TRIAX" train "$SRC/configs/$name.yaml" --set "checkpoints.checkpoints_path=$WORK/$name" 2>&1)
  status=$?
  metrics="$WORK/$name/metrics.jsonl"
  steps=$(grep -c '"loss"' "$metrics" 2>/dev/null)
  first=$(loss_of_step "$metrics" 1)
  last=$(loss_of_step "$metrics" "$steps")
  if [[ $status -ne 0 ]] || ! awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.0 && b < 1.5) }'; then
    echo "FAIL: $name exited $status, loss $first at step 1 and $last at step $steps (expected > 5.0, then < 1.5)"
    echo "$out" | tail -5
    failures=$((failures + 1))
  else
    echo "ok: $name trains $steps steps: loss $first -> $last"
  fi
done
if ! grep -q '"load_balancing_loss"' "$WORK/tiny_qwen3_moe/metrics.jsonl"; then
  echo "FAIL: tiny_qwen3_moe logs no load_balancing_loss"
  failures=$((failures + 1))
fi
((failures == 0)) || exit 1
echo "the tiny Qwen3 configs train: ok"
