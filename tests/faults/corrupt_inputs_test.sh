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
source "$(dirname "$0")/script_support.sh"
CONFIG="$SRC/configs/tiny_llama.yaml"

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
expect error "part.ds" "truncated" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; truncate_to "$TOKENS/part.ds" 3000
expect error "part.ds" "truncated or mismatched" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; truncate_to "$TOKENS/part.ds" 0
expect error "part.ds" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; flip_byte "$TOKENS/part.ds" 1201   # high byte of token 600: id >= 256
expect error "part.ds" "token id" "position 600" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; truncate_to "$TOKENS/part.ds.index" 317
expect error "part.ds.index" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; truncate_to "$TOKENS/part.ds.index" 160
expect error "part.ds.index" "disagrees" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; flip_byte "$TOKENS/part.ds.index" 87   # top byte of document 10's end
expect error "part.ds.index" "document 10" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; flip_byte "$TOKENS/part.ds.metadata" 15   # the token size digit
expect error "part.ds.metadata" -- "${TRAIN_TOKENS[@]}"
make_tokens "$TOKENS"; truncate_to "$TOKENS/part.ds.metadata" 8
expect error "part.ds.metadata" -- "${TRAIN_TOKENS[@]}"

# ---- checkpoints ----------------------------------------------------------------------------
# One layer: every kind of dataset of a rank file, once (a second layer repeats the same kinds
# through the same checks, at the cost of two more process starts per dataset).
ONE_LAYER=(--set model.model_config.num_hidden_layers=1)
RUN="$WORK/run"
out="$("$TRIAX" train --config "$CONFIG" "${ONE_LAYER[@]}" --set tokens.train_steps=2 \
  --set checkpoints.checkpoint_interval=2 --set "checkpoints.checkpoints_path=$RUN" 2>&1)" ||
  fail "the checkpointed run failed: $(tail -3 <<<"$out")"
STEP="$RUN/step_00000002"
[[ -f "$STEP/rank_00000.h5" ]] || { echo "FAIL: no checkpoint written"; exit 1; }
COPY="$WORK/copy"
fresh_copy() { rm -rf "$COPY"; cp -r "$RUN" "$COPY"; }
RESUME=(train --config "$CONFIG" "${ONE_LAYER[@]}" --set tokens.train_steps=3
  --set "checkpoints.checkpoints_path=$WORK/resumed"
  --set "checkpoints.resume_checkpoint_path=$COPY")

# A byte flipped in the middle of every dataset: model parameters, every optimizer state, RNG.
mapfile -t datasets < <("$OFFSETS" "$STEP/rank_00000.h5")
(( ${#datasets[@]} > 10 )) || fail "expected the datasets of a rank file, got: ${datasets[*]}"
kinds=""
for entry in "${datasets[@]}"; do
  read -r name offset bytes <<<"$entry"
  fresh_copy
  flip_byte "$COPY/step_00000002/rank_00000.h5" $((offset + bytes / 2))
  expect error "rank_00000.h5" "${name#/}" -- "${RESUME[@]}"
  # `triax inspect checkpoint` verifies the tensors' checksums but not yet the RNG states'
  # (resuming does): left out here until it does.
  [[ "$name" == /rng/* ]] || expect error "rank_00000.h5" "${name#/}" -- inspect checkpoint "$COPY"
  kinds+=" $name"
done
for kind in /model/ /exp_avg /exp_avg_sq /step /rng/cpu; do
  [[ "$kinds" == *"$kind"* ]] || fail "no dataset of kind '$kind' was corrupted"
done

# Truncated rank files, from nothing to all but the last byte.
size=$(stat -c %s "$STEP/rank_00000.h5")
for keep in 0 100 $((size / 10)) $((size / 2)) $((size - 1)); do
  fresh_copy; truncate_to "$COPY/step_00000002/rank_00000.h5" "$keep"
  expect error "rank_00000.h5" -- "${RESUME[@]}"
done
# Bytes flipped all over the file (headers, attributes, free space): an error or, where the byte
# is unused, a normal resume; never a signal.
for fraction in 1 3 7 13 29 41 53 67 79 97; do
  fresh_copy; flip_byte "$COPY/step_00000002/rank_00000.h5" $((size * fraction / 100))
  checks=$((checks + 1))
  out="$(timeout 120 "$TRIAX" "${RESUME[@]}" 2>&1)"; got=$?
  (( got < 124 )) || fail "a byte flipped at ${fraction}% of the rank file: status $got (signal or hang)"
  (( got == 0 )) || [[ "$out" == *"rank_00000.h5"* ]] || fail "flipped at ${fraction}%: the file is not named: $(tail -3 <<<"$out")"
done

# metadata.yaml: truncated, bit-flipped, missing.
meta_size=$(stat -c %s "$STEP/metadata.yaml")
for keep in 0 $((meta_size / 3)) $((meta_size * 2 / 3)); do
  fresh_copy; truncate_to "$COPY/step_00000002/metadata.yaml" "$keep"
  expect error "metadata.yaml" -- "${RESUME[@]}"
done
for fraction in 5 25 50 75 95; do
  fresh_copy; flip_byte "$COPY/step_00000002/metadata.yaml" $((meta_size * fraction / 100))
  checks=$((checks + 1))
  out="$(timeout 120 "$TRIAX" "${RESUME[@]}" 2>&1)"; got=$?
  (( got < 124 )) || fail "metadata.yaml flipped at ${fraction}%: status $got (signal or hang)"
  (( got == 0 )) || [[ "$out" == *"metadata.yaml"* || "$out" == *"step_00000002"* ]] ||
    fail "metadata.yaml flipped at ${fraction}%: the file is not named: $(tail -3 <<<"$out")"
done
fresh_copy; rm "$COPY/step_00000002/metadata.yaml"
expect error "step_00000002" -- "${RESUME[@]}"

# The latest pointer: naming no folder, empty, binary garbage.
fresh_copy; echo "step_00000099" > "$COPY/latest"
expect error "latest" "step_00000099" -- "${RESUME[@]}"
fresh_copy; : > "$COPY/latest"
expect error "latest" -- "${RESUME[@]}"
fresh_copy; printf '\xff\xfe\x00garbage' > "$COPY/latest"
expect error "latest" -- "${RESUME[@]}"

finish "corrupt token files, index files and checkpoints"
