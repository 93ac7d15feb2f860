#!/usr/bin/env bash
# Every command README.md shows, run as written, in order, from a fresh checkout's point of view:
# a new folder holding the clone's files (configs, tools, README) and its build, a shell whose
# python3 is the interpreter tools/setup.sh made the environment from (so that a script that fails
# to switch to .venv fails here as it did for users). Commands that need what this machine lacks are listed with the reason
# (a GPU, a real Hugging Face model, a placeholder) and covered elsewhere where they can be.
#   readme_commands_test.sh <source dir> <build dir>
set -euo pipefail
SRC="$1"
BUILD="$2"
# The README's commands build into this build (tools/setup.sh, through quickstart.sh). Run beside
# the other tests, a build older than the sources would be relinked under them (their binaries
# then fail to load, "file too short"): refuse it instead, before running anything.
if [[ -f "$BUILD/build.ninja" ]] && ! cmake --build "$BUILD" -- -n 2>&1 | grep -q "no work to do"; then
  echo "FAIL: $BUILD is older than the sources; build it first (cmake --build $BUILD), then run the tests"
  exit 1
fi
FRESH="$(mktemp -d)"
trap 'rm -rf "$FRESH"' EXIT
for entry in configs tools README.md .venv; do ln -s "$SRC/$entry" "$FRESH/$entry"; done
ln -s "$BUILD" "$FRESH/build"
cd "$FRESH"
mkdir "$FRESH/.shell"
ln -s "$("$SRC/.venv/bin/python" -c 'import sys; print(sys._base_executable)')" "$FRESH/.shell/python3"
export PATH="$FRESH/.shell:/usr/bin:/bin" OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

skip_reason() {
  case "$1" in
    tools/test.sh*) echo "the test suite itself (this test is part of it)" ;;
    *CFG*) echo "a placeholder config (CFG)" ;;
    *some_hf_llama*) echo "a placeholder Hugging Face folder (tests/hf_cli_test.sh converts a real one)" ;;
    *build-gpu*|cmake*|ninja*) echo "the GPU build (needs the CUDA toolkit)" ;;
    *"tensorboard --logdir"*) echo "a server that runs until stopped (tests/ops/compare_tensorboard.py reads the events)" ;;
    *) return 1 ;;
  esac
}

count=0
while IFS= read -r command; do
  if reason="$(skip_reason "$command")"; then
    echo "readme: not run here, $reason: $command"
    continue
  fi
  start=$SECONDS
  if ! bash -c "$command" </dev/null >"$FRESH/out.log" 2>&1; then  # mpirun would read the command list
    tail -30 "$FRESH/out.log"
    echo "FAIL: README command failed: $command"
    exit 1
  fi
  echo "readme: ok in $((SECONDS - start)) s: $command"
  count=$((count + 1))
done < <("$SRC/.venv/bin/python" "$SRC/tests/ops/readme_commands.py" README.md)
[[ $count -ge 10 ]] || { echo "FAIL: only $count README commands ran"; exit 1; }
[[ -s runs/tiny_llama/curves.png ]] || { echo "FAIL: the quickstart wrote no curves.png"; exit 1; }
echo "readme_commands_test: $count commands passed"
