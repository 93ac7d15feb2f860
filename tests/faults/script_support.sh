# What the fault scripts share (sourced; TRIAX must be set): a work folder removed at exit,
# failure counting, and `expect`, which runs triax under a time limit and checks its exit status
# and messages.

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
failures=0
checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect <status> <text>... -- <triax arguments...>: the exit status (a number, or "error" for
# any failure that is not a signal or a timeout: 1 to 123) and every text in the output.
expect() {
  local status="$1"; shift
  local texts=()
  while [[ "$1" != "--" ]]; do texts+=("$1"); shift; done
  shift
  checks=$((checks + 1))
  local out; out="$(timeout 120 "$TRIAX" "$@" 2>&1)"; local got=$?
  if [[ "$status" == error ]]; then
    (( got >= 1 && got <= 123 )) || fail "triax $*: exit status $got, expected an error (not success, a signal or a hang). Output:
$(tail -5 <<<"$out")"
  else
    (( got == status )) || fail "triax $*: exit status $got, expected $status. Output:
$(tail -5 <<<"$out")"
  fi
  for text in "${texts[@]}"; do
    [[ "$out" == *"$text"* ]] || fail "triax $*: the output does not say '$text'. Output:
$(tail -5 <<<"$out")"
  done
}

# finish <what passed>: the script's exit status.
finish() {
  if ((failures)); then echo "$failures of $checks check(s) failed"; exit 1; fi
  echo "$checks checks passed: $1"
}
