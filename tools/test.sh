#!/usr/bin/env bash
# The test command: sets up what is missing, builds, and runs the whole ctest suite.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
tools/setup.sh
BUILD_DIR="${TRIAX_BUILD_DIR:-build}"
# GNU nproc honours OMP_NUM_THREADS: count the cores before limiting each test to one thread.
JOBS="${TRIAX_TEST_JOBS:-$(nproc --all)}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" "$@"
