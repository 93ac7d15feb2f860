#!/usr/bin/env bash
# TensorBoard events, plots, the live progress line and mixing folders of one tokenizer:
#   two folders tokenized separately with `--tokenizer byte` (each records its own tokenizer.json)
#   are mixed; the run logs every 2nd step (logging.iteration_step_info_interval) with a progress
#   line between; the tensorboard package reads back every scalar of metrics.jsonl; tools/plot
#   draws one run and two runs overlaid; an unwritable TensorBoard folder stops before step 1. The
#   first run validates on 5% of each folder held out, after steps 4 and 8: its lines, JSON lines
#   and events, and the plot of a run that validated.
#   tensorboard_test.sh <triax executable> <source dir>
set -euo pipefail
TRIAX="$1"
SRC="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# As a user runs them after tools/setup.sh: the scripts' own shebang, from a shell whose python3 is
# the interpreter the environment was made from (a virtual environment's python links to it).
mkdir "$WORK/shell"
ln -s "$("$SRC/.venv/bin/python" -c 'import sys; print(sys._base_executable)')" "$WORK/shell/python3"
USER_PATH="$WORK/shell:/usr/bin:/bin"
PATH="$USER_PATH" "$SRC/tools/tokenize" --tokenizer byte --output "$WORK/gpl" /usr/share/common-licenses/GPL-3 2>/dev/null
PATH="$USER_PATH" "$SRC/tools/tokenize" --tokenizer byte --output "$WORK/apache" /usr/share/common-licenses/Apache-2.0 2>/dev/null

"$TRIAX" train --config "$SRC/configs/tiny_llama_text.yaml" --set tokens.train_steps=8 \
  --set model.model_config.vocab_size=257 \
  --set "data_stages.0.data.dataset={dataset_folder: [$WORK/gpl, $WORK/apache], dataset_weights: [0.7, 0.3]}" \
  --set "data_stages.0.data.validation={held_out_fraction: 0.05}" \
  --set tokens.val_check_interval=4 --set tokens.limit_val_batches=2 \
  --set logging.iteration_step_info_interval=2 --set logging.progress=always \
  --set "checkpoints.checkpoints_path=$WORK/run" >"$WORK/log" 2>&1 || { cat "$WORK/log"; fail "training on two byte-tokenized folders"; }
logged="$(grep -c '\] step [0-9]/8 | loss' "$WORK/log" || true)"
[[ "$logged" -eq 4 ]] || { cat "$WORK/log"; fail "expected 4 step lines (every 2nd of 8 steps), got $logged"; }
validated="$(grep -c '\] validation after step [48]/8 | val_loss [0-9.]* | val_ppl [0-9.]* | ' "$WORK/log" || true)"
[[ "$validated" -eq 2 ]] || { cat "$WORK/log"; fail "expected 2 validation lines (after steps 4 and 8), got $validated"; }
[[ "$(grep -c '"val_loss"' "$WORK/run/metrics.jsonl")" -eq 2 ]] || fail "expected 2 validation lines in metrics.jsonl"
# Between the log lines of steps 2 and 4: step 3's live line, erased (carriage return, clear) before step 4's.
grep -qa $'step 3/8 \\[#*\\.*\\] [0-9.]* s/step | eta [0-9:]*\r\033\\[K' "$WORK/log" ||
  { cat -v "$WORK/log"; fail "no live progress line for step 3"; }
# Off a terminal the default (auto) draws none.
"$TRIAX" train --config "$SRC/configs/tiny_llama.yaml" --set tokens.train_steps=4 \
  --set logging.iteration_step_info_interval=2 --set "checkpoints.checkpoints_path=$WORK/run2" >"$WORK/log2" 2>&1 ||
  { cat "$WORK/log2"; fail "synthetic run"; }
if grep -q $'\r' "$WORK/log2"; then fail "a progress line although stderr is not a terminal"; fi

"$SRC/.venv/bin/python" "$SRC/tests/ops/compare_tensorboard.py" "$WORK/run" 2 || fail "events differ from metrics.jsonl"

# Plots: one run into its folder, two overlaid into a named file; a folder without metrics refused.
PATH="$USER_PATH" "$SRC/tools/plot" "$WORK/run" >/dev/null || fail "tools/plot of one run"
PATH="$USER_PATH" "$SRC/tools/plot" "$WORK/run" "$WORK/run2" --output "$WORK/both.png" >/dev/null || fail "tools/plot of two runs"
"$SRC/.venv/bin/python" - "$WORK/run/curves.png" "$WORK/both.png" <<'PY' || fail "the plots are not the PNGs expected"
import struct, sys
for path in sys.argv[1:]:
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (900, 1000), (path, width, height)
    assert len(data) > 20000, (path, len(data))  # three panels of curves, not an empty canvas
PY
if out="$("$SRC/tools/plot" "$WORK/nowhere" 2>&1)"; then fail "tools/plot of a missing run succeeded"; fi
[[ "$out" == *"$WORK/nowhere: no metrics.jsonl"* ]] || fail "tools/plot's message: $out"

# An unwritable TensorBoard folder: exit 2 naming the key and the path, before any step.
touch "$WORK/a_file"
set +e
out="$("$TRIAX" train --config "$SRC/configs/tiny_llama.yaml" --set tokens.train_steps=3 \
  --set "logging.tensorboard_dir=$WORK/a_file/tb" --set "checkpoints.checkpoints_path=$WORK/run3" 2>&1)"
status=$?
set -e
[[ $status -eq 2 && "$out" == *"logging.tensorboard_dir: cannot create the TensorBoard folder '$WORK/a_file/tb'"* ]] ||
  fail "an unwritable TensorBoard folder gave exit $status: $out"
[[ "$out" != *"step 1/3"* ]] || fail "training started before the TensorBoard folder was checked: $out"
echo "tensorboard_test: passed"
