#!/usr/bin/env bash
# Everything one GPU-machine call does, from the project root of a fresh checkout:
#   1. build triax against the machine's CUDA LibTorch in build-gpu (Release, TRIAX_CUDA=ON);
#   2. run the ctest label `gpu`, then the CPU suite without the tests that need PyPI packages
#      (label `python`) or a long time (label `slow`);
#   3. run the benchmark (tools/device/bench.sh) with the remaining arguments.
#
#   tools/device/gpu_check.sh [--no-build] [--no-tests] [--no-bench] [--mamba-peer=SOURCES]
#                             [bench.sh arguments...]
#
# --mamba-peer=SOURCES builds the Mamba peer (tools/device/build_mamba_peer.sh SOURCES) in the
# background from the start, beside triax's build, and waits for it before the benchmark.
# Needs .devdeps/ carried along (docs/performance.md): the Debian packages the machine lacks with
# an unpack.sh that extracts them and exports CMAKE_PREFIX_PATH / LD_LIBRARY_PATH, and the peer
# script as .devdeps/peer_bench.py. Extra CMake flags: TRIAX_CMAKE_ARGS; ninja targets (default:
# all): TRIAX_TARGETS. With $OUT set,
# the build and test logs and the benchmark table are written there. Exit status: 0 when every
# stage that ran passed.
# shellcheck disable=SC2317  # the stage functions are called through `stage`
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2

build=1 tests=1 bench=1 mamba_peer=""
bench_args=()
for arg in "$@"; do
  case "$arg" in
    --no-build) build=0 ;;
    --no-tests) tests=0 ;;
    --no-bench) bench=0 ;;
    --mamba-peer=*) mamba_peer="${arg#--mamba-peer=}" ;;
    *) bench_args+=("$arg") ;;
  esac
done

logs="${OUT:-build-gpu}"
mkdir -p "$logs"
summary=()
status=0
stage() {  # stage NAME COMMAND...: runs it, records PASS/FAIL and its time
  local name="$1" start=$SECONDS
  shift
  echo "=== $name"
  if "$@"; then
    summary+=("PASS $name ($((SECONDS - start)) s)")
  else
    summary+=("FAIL $name ($((SECONDS - start)) s)")
    status=1
    return 1
  fi
}
print_summary() {
  echo "=== summary"
  printf '%s\n' "${summary[@]}"
}

[[ -f .devdeps/unpack.sh ]] || { echo "gpu_check: .devdeps/unpack.sh is missing: carry .devdeps (docs/performance.md)"; exit 2; }
# shellcheck disable=SC1091
source .devdeps/unpack.sh
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

configure_and_build() {
  # unpack.sh's CMAKE_PREFIX_PATH is a CMake list (';'), which the environment variable of that
  # name does not accept: pass it as a cache variable.
  # shellcheck disable=SC2086
  cmake -G Ninja -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTRIAX_CUDA=ON "-DCMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH" \
    ${TRIAX_CMAKE_ARGS:-} \
    >"$logs/configure.log" 2>&1 || { tail -40 "$logs/configure.log"; return 1; }
  # shellcheck disable=SC2086
  ninja -C build-gpu -j"$(nproc)" ${TRIAX_TARGETS:-} >"$logs/build.log" 2>&1 || { grep -B2 -A20 -m3 'error' "$logs/build.log" | head -80; tail -20 "$logs/build.log"; return 1; }
  tail -1 "$logs/build.log"
}

run_ctest() {  # run_ctest LOGNAME ctest-arguments...
  local log="$logs/$1.log"
  shift
  ctest --test-dir build-gpu --output-on-failure "$@" >"$log" 2>&1
  local result=$?
  # The failures' output, then ctest's closing lines (pass count, failed tests, times).
  grep -E '^(\s*[0-9]+/[0-9]+ Test .*(Failed|Timeout|Exception|Not Run)|No tests were found)' "$log"
  sed -n '/tests passed/,$p' "$log"
  grep -q 'tests passed' "$log" || echo "(no test matched)"
  return "$result"
}

if [[ -n "$mamba_peer" ]]; then
  tools/device/build_mamba_peer.sh "$mamba_peer" >"$logs/mamba-peer.log" 2>&1 &
  mamba_peer_pid=$!
fi
wait_for_mamba_peer() {
  wait "$mamba_peer_pid"
  local result=$?
  tail -4 "$logs/mamba-peer.log"
  return "$result"
}
if ((build)); then
  stage "build (build-gpu, Release, TRIAX_CUDA=ON)" configure_and_build || { print_summary; exit 1; }
fi
[[ -x build-gpu/bin/triax ]] || { echo "gpu_check: build-gpu/bin/triax is missing: run without --no-build"; exit 2; }
if ((tests)); then
  stage "ctest -L gpu" run_ctest ctest-gpu -L gpu --no-tests=ignore
  stage "ctest CPU suite (-LE 'gpu|python|slow')" run_ctest ctest-cpu -LE 'gpu|python|slow' -j"$(nproc)"
fi
[[ -n "$mamba_peer" ]] && stage "Mamba peer (tools/device/build_mamba_peer.sh $mamba_peer)" wait_for_mamba_peer
if ((bench)); then
  [[ -f .devdeps/peer_bench.py ]] || echo "gpu_check: .devdeps/peer_bench.py is missing: the peer runs will fail"
  stage "benchmark" tools/device/bench.sh "${bench_args[@]}"
fi
print_summary
exit $status
