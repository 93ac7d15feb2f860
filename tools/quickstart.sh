#!/usr/bin/env bash
# The main job: sets up what is missing, then trains a tiny Llama on CPU on the built-in
# synthetic stream (configs/tiny_llama.yaml): a log line every 10 steps (a live progress line in
# between on a terminal), the loss falling from about ln(256) = 5.5 towards the stream's floor of
# 1.1; then plots the loss, learning-rate and throughput curves into the run folder. It builds
# only what it runs (the triax command and the shipped plugins); tools/test.sh builds the tests.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
tools/setup.sh --target triax_runtime
BUILD_DIR="${TRIAX_BUILD_DIR:-build}"
RUN_DIR="$("$BUILD_DIR/bin/triax" train --print-run-folder --config configs/tiny_llama.yaml "$@")"
"$BUILD_DIR/bin/triax" train --config configs/tiny_llama.yaml --set logging.iteration_step_info_interval=10 "$@"
tools/plot "$RUN_DIR" --output "$RUN_DIR/curves.png" >/dev/null
echo "quickstart: the curves are in $RUN_DIR/curves.png, the metrics in $RUN_DIR/metrics.jsonl," \
     "TensorBoard events beside them (.venv/bin/tensorboard --logdir $RUN_DIR)"
