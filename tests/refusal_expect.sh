# Sourced by the refusal tests that run `triax train` through the command line, after they set
# TRIAX (the binary) and SRC (the source folder): `expect STATUS TEXT CONFIG -- overrides...`
# runs configs/CONFIG with the overrides and counts a failure in `failures` unless the run exits
# with STATUS, says TEXT and stops before its first step.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1
failures=0
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
