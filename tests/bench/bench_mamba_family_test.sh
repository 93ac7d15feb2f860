#!/usr/bin/env bash
# tools/device/bench.sh --family mamba, mamba2 or hybrid on CPU: a tiny model through the family's
# benchmark config (130m, 780m, small; overridden by --set) against the family's default peer
# (tools/device/mamba_ssm_peer.py, mamba2_ssm_peer.py, hybrid_ssm_peer.py), run on the CPU over a
# stand-in mamba_ssm package (stand_in_mamba_ssm/). The row must pair the triax run with the peer's
# JSON line at the overridden shape (family_row_check.py). The Mamba-2 and hybrid peers read the
# same tiny shape from a config file (--config), and both sides must count the same parameters and
# training FLOPs.
#   bench_mamba_family_test.sh <triax executable> <source dir> <python with torch> mamba|mamba2|hybrid
set -euo pipefail
TRIAX="$1"
SRC="$2"
PYTHON="$3"
FAMILY="$4"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# bench.sh runs `python3`, and the peer with the same interpreter: the environment's, with torch
# (its folder first on PATH; a link elsewhere would not find the environment).
PYTHON_BIN="$(dirname "$PYTHON")"
export PATH="$PYTHON_BIN:$PATH" PYTHONPATH="$SRC/tests/bench/stand_in_mamba_ssm"

PEER_ARGS='--device cpu --steps 1 --warmup 1'
CHECKS=()
case "$FAMILY" in
  mamba)
    SIZE=130m PEER=mamba_ssm_peer.py
    sets=(--set model.model_config.d_model=32 --set model.model_config.num_hidden_layers=2
      --set model.model_config.vocab_size=256) ;;
  mamba2)
    SIZE=780m PEER=mamba2_ssm_peer.py CONFIG=mamba2-780m.yaml
    TINY=(hidden_size=32 num_hidden_layers=2 vocab_size=256 num_heads=4 head_dim=16 state_size=8 n_groups=2
      chunk_size=8) ;;
  hybrid)
    # Every kind of layer the peer builds: Mamba-2, attention, MLP.
    SIZE=small PEER=hybrid_ssm_peer.py CONFIG=nemotron-h-small.yaml
    TINY=('hybrid_override_pattern=M*M-' num_hidden_layers=4 hidden_size=32 vocab_size=256 num_attention_heads=4
      num_key_value_heads=2 head_dim=8 intermediate_size=64 mamba_num_heads=4 mamba_head_dim=16 ssm_state_size=8
      n_groups=2 chunk_size=8) ;;
  *) echo "bench_mamba_family_test.sh: unknown family '$FAMILY' (mamba, mamba2, hybrid)"; exit 2 ;;
esac
if [ -n "${CONFIG:-}" ]; then
  # One tiny shape for both sides: --set for triax, the same values in the peer's config file.
  CHECKS=(--same-counts)
  cp "$SRC/configs/bench/$CONFIG" "$WORK/tiny.yaml"
  sets=()
  for kv in "${TINY[@]}"; do
    sed -E -i "s/^( +${kv%%=*}:).*/\1 ${kv#*=}/" "$WORK/tiny.yaml"
    sets+=(--set "model.model_config.$kv")
  done
  PEER_ARGS+=" --config $WORK/tiny.yaml"
fi

OUT="$WORK/out" "$SRC/tools/device/bench.sh" --family "$FAMILY" --triax "$TRIAX" --single-process --warmup 1 \
  --work "$WORK/runs" --peer-args "$PEER_ARGS" \
  --set general.device=cpu --set parallelism.comm_backend=auto --set model.dtype=float32 "${sets[@]}" \
  --set tokens.sequence_length=32 --set tokens.micro_batch_size=2 --set tokens.train_steps=3 "$SIZE" >"$WORK/log" 2>&1 ||
  { cat "$WORK/log"; echo "FAIL: the benchmark script failed"; exit 1; }

python3 "$SRC/tests/bench/family_row_check.py" "$WORK/out" "$SIZE" 2 32 "$PEER" "$PEER_ARGS" "${CHECKS[@]}"
