# Sourced by the command-line tests (cli_test.sh, hf_cli_test.sh, generate_cli_test.sh) after they
# set TRIAX (the binary). Each failed check is printed and counted in `failures`; the test exits 1
# at its end when any failed.
#   fail MESSAGE
#   expect STATUS TEXT -- triax arguments...   the run exits with STATUS (a number, or "error" for
#                                              any non-zero) and its output contains TEXT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect() {
  local status="$1" text="$2"; shift 3
  local out; out="$("$TRIAX" "$@" 2>&1)"; local got=$?
  if [[ "$status" == error ]]; then
    [[ $got -ne 0 ]] || fail "triax $* succeeded, expected a refusal. Output:
$out"
  else
    [[ $got -eq $status ]] || fail "triax $* exited $got, expected $status. Output:
$out"
  fi
  [[ "$out" == *"$text"* ]] || fail "triax $* does not say '$text'. Output:
$out"
}
