#!/usr/bin/env bash
# Corrupt inputs through the real command line: truncated and bit-flipped token files, index
# files and metadata (datatrove's layout), and checkpoints (a byte flipped inside every dataset of
# a rank file, truncated rank files, a broken metadata.yaml, a broken `latest` pointer). Each must
# stop with a non-zero status below 128 (no signal) and a message naming the file and the tensor,
# position or offset.
#   corrupt_inputs_test.sh <triax> <h5_dataset_offsets> <source dir>
set -uo pipefail
TRIAX="$1"
OFFSETS="$2"
SRC="$3"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
CONFIG="$SRC/configs/tiny_llama.yaml"
failures=0
cases=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# refused <what> <text the message must hold>... -- <triax arguments>
refused() {
  local what="$1"; shift
  local texts=()
  while [[ "$1" != "--" ]]; do texts+=("$1"); shift; done
  shift
  cases=$((cases + 1))
  local out; out="$(timeout 120 "$TRIAX" "$@" 2>&1)"; local got=$?
  if (( got == 0 || got >= 124 )); then
    fail "$what: exit status $got (expected an error, not success, a signal or a hang). Output:
$(tail -5 <<<"$out")"
    return
  fi
  for text in "${texts[@]}"; do
    [[ "$out" == *"$text"* ]] || fail "$what: the message does not name '$text'. Output:
$(tail -5 <<<"$out")"
  done
}

# flip_byte <file> <offset>: inverts every bit of one byte.
flip_byte() {
  python3 - "$1" "$2" <<'EOF'
import sys
path, offset = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(offset)
    byte = f.read(1)
    f.seek(offset)
    f.write(bytes([byte[0] ^ 0xFF]))
EOF
}

truncate_to() { truncate -s "$2" "$1"; }

# ---- token files (datatrove's layout) ---------------------------------------------------------
# 40 documents of 50 tokens below the vocabulary (256), uint16, with index and metadata.
make_tokens() {
  rm -rf "$1"; mkdir -p "$1"
  python3 - "$1/part.ds" <<'EOF'
import struct, sys
path = sys.argv[1]
tokens = [(7 * i) % 256 for i in range(2000)]
open(path, "wb").write(struct.pack("<%dH" % len(tokens), *tokens))
open(path + ".index", "wb").write(struct.pack("<40Q", *[50 * (d + 1) for d in range(40)]))
open(path + ".metadata", "w").write("test-tokenizer|2\n2000\n2.0 kT\n")
EOF
}
TOKENS="$WORK/tokens"
TRAIN_TOKENS=(train --config "$CONFIG" --set tokens.train_steps=2 --set "checkpoints.checkpoints_path=$WORK/text_run"
  --set "data_stages=[{name: text, start_training_step: 1, data: {dataset: {dataset_folder: $TOKENS}, seed: 1}}]")
make_tokens "$TOKENS"
out="$("$TRIAX" "${TRAIN_TOKENS[@]}" 2>&1)" || fail "the intact token folder must train: $(tail -3 <<<"$out")"

make_tokens "$TOKENS"; truncate_to "$TOKENS/part.ds" 3999
refused "token file cut inside a token" "part.ds" "truncated" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; truncate_to "$TOKENS/part.ds" 3000
refused "token file cut by whole tokens" "part.ds" "truncated or mismatched" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; truncate_to "$TOKENS/part.ds" 0
refused "empty token file" "part.ds" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; flip_byte "$TOKENS/part.ds" 1201   # high byte of token 600: id >= 256
refused "bit-flipped token id" "part.ds" "token id" "position 600" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; truncate_to "$TOKENS/part.ds.index" 317
refused "index cut inside an entry" "part.ds.index" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; truncate_to "$TOKENS/part.ds.index" 160
refused "index missing its last documents" "part.ds.index" "disagrees" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; flip_byte "$TOKENS/part.ds.index" 87   # top byte of document 10's end
refused "bit-flipped index entry" "part.ds.index" "document 10" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; flip_byte "$TOKENS/part.ds.metadata" 15   # the token size digit
refused "bit-flipped metadata" "part.ds.metadata" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; truncate_to "$TOKENS/part.ds.metadata" 8
refused "truncated metadata" "part.ds.metadata" -- "${TRAIN_TOKENS[@]}"

# ---- checkpoints ----------------------------------------------------------------------------
RUN="$WORK/run"
out="$("$TRIAX" train --config "$CONFIG" --set tokens.train_steps=2 --set checkpoints.checkpoint_interval=2 \
  --set "checkpoints.checkpoints_path=$RUN" 2>&1)" || fail "the checkpointed run failed: $(tail -3 <<<"$out")"
STEP="$RUN/step_00000002"
[[ -f "$STEP/rank_00000.h5" ]] || { echo "FAIL: no checkpoint written"; exit 1; }
COPY="$WORK/copy"
fresh_copy() { rm -rf "$COPY"; cp -r "$RUN" "$COPY"; }
RESUME=(train --config "$CONFIG" --set tokens.train_steps=3 --set "checkpoints.checkpoints_path=$WORK/resumed"
  --set "checkpoints.resume_checkpoint_path=$COPY")

# A byte flipped in the middle of every dataset: model parameters, every optimizer state, RNG.
mapfile -t datasets < <("$OFFSETS" "$STEP/rank_00000.h5")
(( ${#datasets[@]} > 10 )) || fail "expected the datasets of a rank file, got: ${datasets[*]}"
kinds=""
for entry in "${datasets[@]}"; do
  read -r name offset bytes <<<"$entry"
  fresh_copy
  flip_byte "$COPY/step_00000002/rank_00000.h5" $((offset + bytes / 2))
  refused "flipped byte in $name (resume)" "rank_00000.h5" "$name" -- "${RESUME[@]}"
  refused "flipped byte in $name (inspect)" "rank_00000.h5" "$name" -- inspect checkpoint "$COPY"
  kinds+=" ${name##*/}"
done
for kind in master exp_avg exp_avg_sq step cpu weight; do
  [[ "$kinds" == *" $kind"* ]] || fail "no dataset of kind '$kind' was corrupted (datasets:$kinds)"
done

# Truncated rank files, from nothing to all but the last byte.
size=$(stat -c %s "$STEP/rank_00000.h5")
for keep in 0 100 $((size / 10)) $((size / 2)) $((size - 1)); do
  fresh_copy; truncate_to "$COPY/step_00000002/rank_00000.h5" "$keep"
  refused "rank file truncated to $keep bytes" "rank_00000.h5" -- "${RESUME[@]}"
done
# Bytes flipped all over the file (headers, attributes, free space): an error or, where the byte
# is unused, a normal resume; never a signal.
for fraction in 1 3 7 13 29 41 53 67 79 97; do
  fresh_copy; flip_byte "$COPY/step_00000002/rank_00000.h5" $((size * fraction / 100))
  cases=$((cases + 1))
  out="$(timeout 120 "$TRIAX" "${RESUME[@]}" 2>&1)"; got=$?
  (( got < 124 )) || fail "a byte flipped at ${fraction}% of the rank file: status $got (signal or hang)"
  (( got == 0 )) || [[ "$out" == *"rank_00000.h5"* ]] || fail "flipped at ${fraction}%: the file is not named: $(tail -3 <<<"$out")"
done

# metadata.yaml: truncated, bit-flipped, missing.
meta_size=$(stat -c %s "$STEP/metadata.yaml")
for keep in 0 $((meta_size / 3)) $((meta_size * 2 / 3)); do
  fresh_copy; truncate_to "$COPY/step_00000002/metadata.yaml" "$keep"
  refused "metadata.yaml truncated to $keep bytes" "metadata.yaml" -- "${RESUME[@]}"
done
for fraction in 5 25 50 75 95; do
  fresh_copy; flip_byte "$COPY/step_00000002/metadata.yaml" $((meta_size * fraction / 100))
  cases=$((cases + 1))
  out="$(timeout 120 "$TRIAX" "${RESUME[@]}" 2>&1)"; got=$?
  (( got < 124 )) || fail "metadata.yaml flipped at ${fraction}%: status $got (signal or hang)"
  (( got == 0 )) || [[ "$out" == *"metadata.yaml"* || "$out" == *"step_00000002"* ]] ||
    fail "metadata.yaml flipped at ${fraction}%: the file is not named: $(tail -3 <<<"$out")"
done
fresh_copy; rm "$COPY/step_00000002/metadata.yaml"
refused "metadata.yaml missing" "step_00000002" -- "${RESUME[@]}"

# The latest pointer: naming no folder, empty, binary garbage.
fresh_copy; echo "step_00000099" > "$COPY/latest"
refused "latest names a missing step" "latest" "step_00000099" -- "${RESUME[@]}"
fresh_copy; : > "$COPY/latest"
refused "latest is empty" "latest" -- "${RESUME[@]}"
fresh_copy; printf '\xff\xfe\x00garbage' > "$COPY/latest"
refused "latest is garbage" "latest" -- "${RESUME[@]}"

echo "$cases corrupt inputs tried, $failures failed"
(( failures == 0 ))
