#!/usr/bin/env bash
# nanotron's habits on the triax command line: --config-file as run_train.py spells it, a
# torchrun launch on CPU answered with one line of what to do instead (before any work), and
# `triax inspect --help` as help, not an error.
#   nanotron_habits_test.sh <triax executable> <source dir>
set -euo pipefail
TRIAX="$1"
SRC="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
CONFIG="$SRC/configs/tiny_llama.yaml"

"$TRIAX" train --config-file "$CONFIG" --set tokens.train_steps=2 --set "checkpoints.checkpoints_path=$WORK/run" \
  >"$WORK/log" 2>&1 || { cat "$WORK/log"; fail "--config-file"; }
grep -q "step 2/2 | loss" "$WORK/log" || { cat "$WORK/log"; fail "--config-file did not train"; }
set +e
out="$("$TRIAX" train --config "$CONFIG" --config-file "$CONFIG" 2>&1)"; status=$?
set -e
[[ $status -eq 2 && "$out" == *"give the config once"* ]] || fail "--config with --config-file gave $status: $out"

out="$("$TRIAX" inspect --help)" || fail "triax inspect --help exited $?"
[[ "$out" == *"triax inspect mesh"* && "$out" == *"triax inspect checkpoint"* ]] || fail "inspect --help: $out"

[[ "$("$TRIAX" train --print-run-folder --config "$CONFIG" --set checkpoints.checkpoints_path=elsewhere)" == elsewhere ]] ||
  fail "--print-run-folder"

# torchrun on CPU: every rank says in one line what to run instead, and stops before any work.
set +e
out="$(timeout 120 "$SRC/.venv/bin/torchrun" --nproc_per_node 2 --no-python "$TRIAX" train --config "$CONFIG" \
  --set parallelism.dp=2 --set "checkpoints.checkpoints_path=$WORK/torchrun" 2>&1)"
status=$?
set -e
[[ $status -ne 0 ]] || fail "torchrun on CPU succeeded: $out"
line="$(grep -m1 "torchrun starts GPU ranks" <<<"$out" || true)"
[[ "$line" == *"triax launch -n 2 -- triax train --config $CONFIG"* ]] || fail "torchrun on CPU: $out"
[[ "$out" != *"step 1/"* && ! -e "$WORK/torchrun/config.yaml" ]] || fail "torchrun on CPU started training: $out"
echo "nanotron_habits_test: passed"
