#!/usr/bin/env bash
# model.init_method.use_mup through the command line: a model plugin without spectral muP support
# (mamba) is refused before any step with exit status 3, naming the plugin and the key; std beside
# use_mup exits 2 naming model.init_method.std.
#   mup_bad_input_test.sh TRIAX SOURCE_DIR
set -uo pipefail
TRIAX=$1 SRC=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1
failures=0
# expect STATUS TEXT CONFIG -- overrides...
expect() {
  local expected=$1 text=$2 config=$3
  shift 4
  local out status
  out=$("$TRIAX" train --config "$SRC/configs/$config" --set "checkpoints.checkpoints_path=$WORK/run" "$@" 2>&1)
  status=$?
  if [[ $status -ne $expected || "$out" != *"$text"* || "$out" == *"step 1/"* ]]; then
    echo "FAIL: $config $* exited $status (expected $expected) or does not say '$text':"
    echo "$out" | tail -5
    failures=$((failures + 1))
  else
    echo "ok: $config $* -> $(grep -m1 -F -- "$text" <<<"$out" | cut -c1-200)"
  fi
}
expect 3 "model.init_method.use_mup: model plugin 'mamba' does not support spectral muP" tiny_mamba.yaml -- \
  --set "model.init_method={use_mup: true}"
expect 2 "model.init_method.std: does not apply with use_mup: true" tiny_llama.yaml -- \
  --set "model.init_method={use_mup: true, std: 0.02}"
exit $((failures > 0))
