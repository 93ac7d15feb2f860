# Sourced by the refusal tests that run triax through the command line, after they set TRIAX (the
# binary) and SRC (the source folder). Each check counts a failure in `failures` unless the run
# exits with STATUS, says TEXT and stops before its first step:
#   expect_command STATUS TEXT -- command...
#   expect STATUS TEXT CONFIG -- overrides...     (`triax train` of configs/CONFIG)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1
failures=0
expect_command() {
  local expected=$1 text=$2
  shift 3
  local out status
  out=$("$@" 2>&1)
  status=$?
  if [[ $status -ne $expected || "$out" != *"$text"* || "$out" == *"step 1/"* ]]; then
    echo "FAIL: $* exited $status (expected $expected) or does not say '$text':"
    echo "$out" | tail -5
    failures=$((failures + 1))
  else
    echo "ok: exit $status: $(grep -m1 -F -- "$text" <<<"$out" | cut -c1-240)"
  fi
}
expect() {
  local expected=$1 text=$2 config=$3
  shift 4
  expect_command "$expected" "$text" -- "$TRIAX" train --config "$SRC/configs/$config" \
    --set "checkpoints.checkpoints_path=$WORK/run" "$@"
}
