#!/usr/bin/env bash
# The main job: sets up what is missing, then trains a tiny Llama on CPU on the built-in
# synthetic stream (configs/tiny_llama.yaml); one log line per step, the loss falling from
# about ln(256) = 5.5 towards the stream's floor of 1.1.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
tools/setup.sh
BUILD_DIR="${TRIAX_BUILD_DIR:-build}"
exec "$BUILD_DIR/bin/triax" train --config configs/tiny_llama.yaml "$@"
