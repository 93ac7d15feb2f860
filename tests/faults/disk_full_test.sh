#!/usr/bin/env bash
# A full disk during a save is a named error and loses nothing (docs/reliability.md): the run
# stops naming the file and the cause, `latest` keeps the previous checkpoint, which passes
# `triax inspect`, and a run resumed from it finishes with the uninterrupted run's losses bit for
# bit. Once with ENOSPC injected into rank 1's file (TRIAX_FAULT=disk_full), once on a real tmpfs
# mounted by the test just large enough for one checkpoint; exits 77 (skipped) after the first
# part when mounting is not allowed here.
#   disk_full_test.sh TRIAX CONFIG OUT_DIR [--set KEY=VALUE]...  (checkpoints.async_save=true: the
#   disk fills during the background write, and the run stops at the next step boundary)
set -uo pipefail
triax=$1 config=$2 out=$3
shift 3
source "$(dirname "$0")/lib.sh"
MOUNTED=""
cleanup() { [[ -n "$MOUNTED" ]] && umount "$MOUNTED"; }
trap cleanup EXIT
[[ -n "$(findmnt -n "$out/tmpfs" 2>/dev/null)" ]] && umount "$out/tmpfs"
rm -rf "$out"
mkdir -p "$out"
settings=(--set parallelism.dp=2 --set tokens.batch_accumulation_per_replica=4 --set tokens.train_steps=6
          --set checkpoints.checkpoint_interval=2 --set parallelism.comm_timeout_seconds=20
          --set logging.tensorboard=false "$@")
train() {  # train RUN_FOLDER [--set ...]...
  local folder=$1
  shift
  "$triax" launch -n 2 -- "$triax" train --config "$config" --set "checkpoints.checkpoints_path=$folder" \
    "${settings[@]}" "$@"
}

# check_full NAME FOLDER: the failed save of step 4 left step 2 as latest, intact, resumable.
check_full() {
  local name=$1 folder=$2 output
  output=$(cat "$out/$name.log")
  grep -q "No space left on device" <<<"$output" || fail "$name: the error does not name the cause. Output: $output"
  grep -qE "checkpoint of step 4 failed; the previous checkpoint stays latest: .*rank_0000[01]\.h5" <<<"$output" ||
    fail "$name: the error does not name the file. Output: $output"
  [[ "$(cat "$folder/latest")" == step_00000002 ]] || fail "$name: latest is '$(cat "$folder/latest")'"
  [[ ! -e "$folder/step_00000004" ]] || fail "$name: a partial step 4 is visible under its final name"
  "$triax" inspect checkpoint "$folder/step_00000002" >"$out/$name.inspect" 2>&1 ||
    fail "$name: step 2 does not pass triax inspect: $(cat "$out/$name.inspect")"
  train "$out/$name.resumed" --set "checkpoints.resume_checkpoint_path=$folder" >"$out/$name.resume.log" 2>&1 ||
    fail "$name: resuming failed: $(tail -5 "$out/$name.resume.log")"
  diff <(losses "$out/whole/metrics.jsonl" | tail -4) <(losses "$out/$name.resumed/metrics.jsonl") >/dev/null ||
    fail "$name: the resumed losses differ from the uninterrupted run's"
  echo "$name: the save of step 4 failed by name, step 2 stays latest and resumes bit for bit"
}

train "$out/whole" >"$out/whole.log" 2>&1 || fail "the uninterrupted run failed: $(tail -5 "$out/whole.log")"

TRIAX_FAULT=disk_full:1:4 train "$out/injected" >"$out/injected.log" 2>&1
status=$?
[[ $status -eq 1 ]] || fail "injected: the launcher exited $status, expected 1"
check_full injected "$out/injected"

# A real file system that holds the run's files and one checkpoint, not two.
checkpoint_bytes=$(du -sb "$out/whole/step_00000002" | cut -f1)
mkdir -p "$out/tmpfs"
size_kib=$(((checkpoint_bytes * 3 / 2 + 256 * 1024) / 1024))
if ! mount -t tmpfs -o "size=${size_kib}k" tmpfs "$out/tmpfs" 2>"$out/mount.log"; then
  echo "SKIPPED the tmpfs part: cannot mount a tmpfs here ($(cat "$out/mount.log"))"
  ((failures)) && finish
  exit 77
fi
MOUNTED="$out/tmpfs"
train "$out/tmpfs/run" >"$out/tmpfs.log" 2>&1
status=$?
[[ $status -eq 1 ]] || fail "tmpfs: the launcher exited $status, expected 1. Output: $(cat "$out/tmpfs.log")"
check_full tmpfs "$out/tmpfs/run"
echo "tmpfs of ${size_kib} KiB for checkpoints of $checkpoint_bytes bytes"
finish
