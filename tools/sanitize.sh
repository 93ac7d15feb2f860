#!/usr/bin/env bash
# Builds the configuration loader, the config fuzzer and the loader's unit tests with
# AddressSanitizer and UndefinedBehaviorSanitizer in their own build folder (default
# build-sanitize) and runs them. These targets link no LibTorch: LibTorch's libraries are not
# instrumented (see docs/reliability.md for what runs under the sanitizers and what does not).
#   tools/sanitize.sh            after tools/setup.sh (it uses the same Python environment)
# Environment: TRIAX_SANITIZE_DIR (default build-sanitize), TRIAX_JOBS (default: all cores).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${TRIAX_SANITIZE_DIR:-build-sanitize}"
VENV="$ROOT/.venv"
[[ -x "$VENV/bin/python" ]] || { echo "tools/sanitize.sh: run tools/setup.sh first (no .venv)" >&2; exit 2; }
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/triax/ccache}" CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
FLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -G Ninja -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Debug -DTRIAX_USE_PCH=OFF \
    "-DCMAKE_PREFIX_PATH=$("$VENV/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
    "-DCMAKE_CXX_FLAGS=$FLAGS" "-DCMAKE_EXE_LINKER_FLAGS=$FLAGS" >/dev/null
fi
TARGETS=(config_test config_fuzz_loader_test mesh_test durable_file_test)
cmake --build "$BUILD_DIR" -j "${TRIAX_JOBS:-$(nproc --all)}" --target "${TARGETS[@]}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for target in "${TARGETS[@]}"; do
  echo "== $target (address, undefined)"
  "$BUILD_DIR/bin/$target" --gtest_brief=1
done
