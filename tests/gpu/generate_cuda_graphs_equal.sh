#!/usr/bin/env bash
# `triax generate --cuda-graphs on` on one GPU: the tokens equal those of --cuda-graphs off, token
# for token, greedy and sampled, for a batch of prompts of different lengths (prefilled in groups,
# then decoded together), in bf16; and the graphed run's decoding steps are graph launches (its
# --profile trace holds cudaGraphLaunch, the other's none).
#   generate_cuda_graphs_equal.sh TRIAX CONFIG OUT_DIR [PROMPT_IDS...]
# PROMPT_IDS (comma-separated ids, one argument a prompt) replace the 4 prompts below; NEW_TOKENS
# in the environment (default 40) sets --max-new-tokens, for a model of a shorter context.
set -euo pipefail
triax=$1 config=$2 out=$3
shift 3
rm -rf "$out"
mkdir -p "$out"
export MASTER_ADDR=127.0.0.1 MASTER_PORT=29527
prompts=(--prompt-ids 1,2,3 --prompt-ids 4,5,6,7,8,9 --prompt-ids 10,11,12 --prompt-ids 13)
if (($# > 0)); then
  prompts=()
  for ids in "$@"; do prompts+=(--prompt-ids "$ids"); done
fi
failures=0

for mode in greedy sampled; do
  extra=()
  [[ $mode == sampled ]] && extra=(--temperature 0.9 --top-k 40 --top-p 0.95 --seed 5)
  for graphs in on off; do
    "$triax" generate --config "$config" --device cuda --dtype bfloat16 "${prompts[@]}" -n "${NEW_TOKENS:-40}" --ignore-eos \
      "${extra[@]}" --cuda-graphs "$graphs" --output "$out/$mode.$graphs.jsonl" \
      --profile "$out/$mode.$graphs.trace.json" >"$out/$mode.$graphs.log" 2>&1 ||
      { cat "$out/$mode.$graphs.log"; exit 1; }
  done
  if ! cmp -s "$out/$mode.on.jsonl" "$out/$mode.off.jsonl"; then
    echo "FAIL: $mode tokens differ with CUDA graphs:"
    diff "$out/$mode.on.jsonl" "$out/$mode.off.jsonl" || true
    failures=$((failures + 1))
  fi
  grep -q cudaGraphLaunch "$out/$mode.on.trace.json" ||
    { echo "FAIL: $mode: no cudaGraphLaunch in the graphed run's decoding steps"; failures=$((failures + 1)); }
  if grep -q cudaGraphLaunch "$out/$mode.off.trace.json"; then
    echo "FAIL: $mode: --cuda-graphs off launched a graph"
    failures=$((failures + 1))
  fi
done
((failures == 0)) && echo "CUDA-graph decoding equals the ungraphed path (greedy and sampled, $((${#prompts[@]} / 2)) ragged prompts)"
exit $((failures > 0))
