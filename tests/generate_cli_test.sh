#!/usr/bin/env bash
# `triax generate` from the command line, on a tiny checkpoint trained from the quickstart's
# config in a folder laid out like a clone (build/bin, configs, runs/):
#   generate_cli_test.sh TRIAX SOURCE_DIR WORK setup       trains the checkpoint (ctest fixture)
#   generate_cli_test.sh TRIAX SOURCE_DIR WORK readme      runs the README's generate commands as written
#   generate_cli_test.sh TRIAX SOURCE_DIR WORK bad_input EXPERT_TOY_PLUGIN_DIR
#                                                          each refusal: exit status and message
#   generate_cli_test.sh TRIAX SOURCE_DIR WORK tp2         tp 2 under `triax launch` = tp 1, token for token
set -uo pipefail
TRIAX="$1"
SRC="$2"
WORK="$3"
MODE="$4"
source "$(dirname "$0")/cli_expect.sh"

case "$MODE" in
setup)
  rm -rf "$WORK" && mkdir -p "$WORK/build" || exit 1
  ln -s "$(dirname "$TRIAX")" "$WORK/build/bin"
  ln -s "$SRC/configs" "$WORK/configs"
  cd "$WORK" && build/bin/triax train --config configs/tiny_llama.yaml --set tokens.train_steps=20 >train.log 2>&1 ||
    { cat train.log; exit 1; }
  [[ -f runs/tiny_llama/latest ]] || fail "training left no checkpoint in runs/tiny_llama"
  ;;
readme)
  cd "$WORK" || exit 1
  # The README's generate commands on the quickstart's run folder, exactly as written there.
  mapfile -t commands < <(grep -E '^build/bin/triax generate runs/tiny_llama ' "$SRC/README.md" | sed 's/ *#.*$//')
  ((${#commands[@]})) || fail "README.md has no 'build/bin/triax generate runs/tiny_llama ...' line"
  for command in "${commands[@]}"; do
    out="$(bash -c "$command" 2>&1)" || fail "'$command' failed: $out"
    [[ "$out" == *"[0] "* && "$out" == *"tokens/s"* ]] || fail "'$command' printed no sequence and no tokens/s: $out"
  done
  ;;
bad_input)
  cd "$WORK" || exit 1
  RUN=runs/tiny_llama
  expect 2 "unrecognised option '--frobnicate'" -- generate "$RUN" --prompt-ids 1,2 --frobnicate
  expect 2 "comes with no tokenizer.json" -- generate "$RUN" --prompt "Hello"
  expect 2 "give the tokenizer with --tokenizer FILE" -- generate "$RUN" --prompt "Hello"
  long="$(yes 5 | head -n 300 | paste -sd, -)"
  expect 2 "prompt 0 has 300 tokens, more than the model's context holds" -- generate "$RUN" --prompt-ids "$long"
  expect 2 "256 positions" -- generate "$RUN" --prompt-ids "$long"
  expect 2 "with 100 new tokens (--max-new-tokens)" -- generate "$RUN" --prompt-ids "$(seq -s, 1 200)" -n 100
  expect 2 "outside the model's vocabulary [0, 256)" -- generate "$RUN" --prompt-ids 1,256
  expect 2 "--prompt-ids: 'x' in '1,x' is not a token id" -- generate "$RUN" --prompt-ids 1,x
  expect 2 "--tp 2: generation runs tensor parallel over every process, but 1 were started" -- \
    generate "$RUN" --prompt-ids 1 --tp 2
  expect 2 "nowhere: no such folder" -- generate nowhere --prompt-ids 1
  expect 2 "--top-p: expected a probability in (0, 1]" -- generate "$RUN" --prompt-ids 1 --temperature 1 --top-p 0
  expect 2 "give the prompts as --prompt TEXT or as --prompt-ids IDS" -- generate "$RUN"
  expect 2 "--device cuda" -- generate "$RUN" --prompt-ids 1 --device cuda
  expect 2 "--cuda-graphs on: decoding steps run as CUDA graphs on a CUDA device at tp 1, not on cpu" -- \
    generate "$RUN" --prompt-ids 1 --device cpu --cuda-graphs on
  expect 2 "--cuda-graphs: expected auto, on or off, got 'yes'" -- generate "$RUN" --prompt-ids 1 --cuda-graphs yes
  expect 2 "--profile nowhere/trace.json: the folder" -- generate "$RUN" --prompt-ids 1 --profile nowhere/trace.json
  expect 2 "--warmup: expected 0 or more runs, got -1" -- generate "$RUN" --prompt-ids 1 --warmup -1
  # --profile: a Chrome trace of decoding steps 3-10, holding the model's ops.
  rm -f decode_trace.json
  "$TRIAX" generate "$RUN" --prompt-ids 1,2,3 -n 16 --ignore-eos --profile decode_trace.json >/dev/null 2>&1 ||
    fail "generate --profile failed"
  grep -q '"traceEvents"' decode_trace.json && grep -q 'aten::' decode_trace.json ||
    fail "--profile wrote no trace of the decoding steps' ops"
  # The tokenizer's Python cannot be started: said with the way out.
  echo '{}' >not_a_tokenizer.json
  out="$(TRIAX_PYTHON=/nonexistent/python "$TRIAX" generate "$RUN" --tokenizer not_a_tokenizer.json --prompt "Hi" 2>&1)"
  [[ $? -eq 1 && "$out" == *"cannot start the tokenizer's Python '/nonexistent/python'"*"set TRIAX_PYTHON"* ]] ||
    fail "a missing tokenizer Python is not reported as such: $out"
  # A model plugin whose model has no inference cache: refused by its name.
  expect 3 "model plugin 'expert_toy': this model has no inference cache" -- \
    generate --config "$SRC/tests/parity/expert_toy_parity.yaml" --plugin-path "$5" --prompt-ids 1,2
  ;;
tp2)
  cd "$WORK" || exit 1
  ARGS=(generate runs/tiny_llama --prompt-ids 1,2,3 --prompt-ids 7 --prompt-ids 9,8,7,6,5 --max-new-tokens 12)
  SAMPLE=(--temperature 0.8 --top-p 0.9 --top-k 40 --seed 3)
  "$TRIAX" "${ARGS[@]}" --output tp1.jsonl >tp1.log 2>&1 || fail "tp 1: $(cat tp1.log)"
  "$TRIAX" "${ARGS[@]}" "${SAMPLE[@]}" --output tp1_sampled.jsonl >tp1s.log 2>&1 || fail "tp 1: $(cat tp1s.log)"
  "$TRIAX" launch -n 2 -- "$TRIAX" "${ARGS[@]}" --tp 2 --output tp2.jsonl >tp2.log 2>&1 || fail "tp 2: $(cat tp2.log)"
  "$TRIAX" launch -n 2 -- "$TRIAX" "${ARGS[@]}" "${SAMPLE[@]}" --tp 2 --output tp2_sampled.jsonl >tp2s.log 2>&1 ||
    fail "tp 2: $(cat tp2s.log)"
  grep -q "tp 2" tp2.log || fail "the tp 2 run does not say it ran at tp 2: $(cat tp2.log)"
  cmp -s tp1.jsonl tp2.jsonl || fail "greedy at tp 2 differs from tp 1: $(cat tp1.jsonl tp2.jsonl)"
  cmp -s tp1_sampled.jsonl tp2_sampled.jsonl || fail "sampling at tp 2 differs from tp 1: $(cat tp1_sampled.jsonl tp2_sampled.jsonl)"
  [[ $(wc -l <tp1.jsonl) -eq 3 ]] || fail "expected 3 sequences: $(cat tp1.jsonl)"
  cmp -s tp1.jsonl tp1_sampled.jsonl && fail "sampling gave the greedy tokens"
  ;;
*)
  echo "unknown mode $MODE"; exit 2 ;;
esac
if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "generate $MODE: all checks passed"
