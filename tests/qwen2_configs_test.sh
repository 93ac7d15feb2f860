#!/usr/bin/env bash
# nanotron's Qwen2 examples through `triax train --check`: the dense one (tests/data/
# nanotron_config_qwen.yaml) selects the qwen2 plugin by its marker; the MoE one is refused for
# its duplicate moe_config key, naming both lines, and once the first (null) one is removed it
# selects the moe plugin. Then the qwen2 plugin's refusals, each exit 2 naming the key.
#   qwen2_configs_test.sh TRIAX SOURCE_DIR
set -uo pipefail
TRIAX=$1 SRC=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
DENSE="$SRC/tests/data/nanotron_config_qwen.yaml"
MOE="$SRC/tests/data/nanotron_config_qwen_with_moe.yaml"
failures=0
# expect STATUS TEXT CONFIG [overrides...]
expect() {
  local status=$1 text=$2 config=$3
  shift 3
  local out got
  out=$("$TRIAX" train --check --config "$config" "$@" 2>&1)
  got=$?
  if [[ $got -ne $status || "$out" != *"$text"* ]]; then
    echo "FAIL: $(basename "$config") $* exited $got (expected $status) or does not say '$text':"
    echo "$out" | tail -5
    failures=$((failures + 1))
  else
    echo "ok: $(basename "$config") $* -> $(grep -m1 -F -- "$text" <<<"$out" | cut -c1-200)"
  fi
}

expect 0 "the configuration is valid (model qwen2," "$DENSE"
first=$(grep -n '^    moe_config: null' "$MOE" | cut -d: -f1)
second=$(grep -n '^    moe_config:$' "$MOE" | cut -d: -f1)
expect 2 "model.model_config.moe_config (line $second)" "$MOE"
expect 2 "duplicate key (first given (line $first))" "$MOE"
grep -v '^    moe_config: null' "$MOE" > "$WORK/qwen_with_moe.yaml"
expect 0 "the configuration is valid (model moe," "$WORK/qwen_with_moe.yaml"

M=model.model_config
expect 2 "$M.no_rope_layer: must be a positive interval" "$DENSE" --set $M.no_rope_layer=0
expect 2 "$M.moe_config (line $second): is a mixture of experts" "$WORK/qwen_with_moe.yaml" --set model.plugin=qwen2
expect 2 "$M.flex_attention_mask: 'document' is not implemented" "$DENSE" --set $M.flex_attention_mask=document
expect 2 "$M.z_loss_coefficient: must not be negative" "$DENSE" --set $M.z_loss_coefficient=-0.5
expect 2 "$M.interleaved_rotary: true disagrees with rope_interleaved false" "$DENSE" --set $M.interleaved_rotary=true

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "all qwen2 config checks passed"
