#!/usr/bin/env bash
# The fp8 loss curve on one GPU: SmolLM-135M (configs/bench/smollm-135m.yaml) trained STEPS
# steps on the synthetic stream in bf16, then with each fp8 recipe from the same initialisation
# and data; the mean loss of each fp8 run's last 20 steps must be within 1% of the bf16 run's.
# Every linear computes in fp8 (fp8.min_gemm_size=0: 135M's are all below the default size).
# Further arguments (--set KEY=VALUE) go to every run.
#   fp8_follows_bf16.sh TRIAX CONFIG OUT_DIR [STEPS [--set KEY=VALUE]...]
set -euo pipefail
triax=$1 config=$2 out=$3 steps=${4:-300}
shift $(( $# < 4 ? $# : 4 ))
rm -rf "$out"
mkdir -p "$out"
export RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29519
common=(--set "tokens.train_steps=$steps" --set tokens.micro_batch_size=4 "$@")
"$triax" train --config "$config" --set "checkpoints.checkpoints_path=$out/bf16" "${common[@]}" > "$out/bf16.log" 2>&1
for recipe in tensorwise rowwise; do
  "$triax" train --config "$config" --set "checkpoints.checkpoints_path=$out/$recipe" "${common[@]}" \
    --set "fp8.recipe=$recipe" --set fp8.min_gemm_size=0 > "$out/$recipe.log" 2>&1
done
python3 - "$out" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
def tail_mean(run):
    steps = [json.loads(l) for l in (out / run / "metrics.jsonl").read_text().splitlines() if l.strip()]
    return sum(s["loss"] for s in steps[-20:]) / 20, steps[0]["loss"]
reference, first = tail_mean("bf16")
print(f"bf16: first loss {first:.4f}, mean of the last 20 steps {reference:.4f}")
failed = False
for recipe in ("tensorwise", "rowwise"):
    loss, _ = tail_mean(recipe)
    relative = abs(loss - reference) / reference
    print(f"fp8 {recipe}: mean of the last 20 steps {loss:.4f}, {100 * relative:.2f}% from bf16")
    failed |= relative > 0.01
if reference > first - 1.0:
    print("the bf16 run did not learn (its loss fell by less than 1 nat): the comparison would prove nothing")
    failed = True
sys.exit(1 if failed else 0)
PY
