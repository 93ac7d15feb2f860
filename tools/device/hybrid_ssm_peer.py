#!/usr/bin/env python3
"""Peer baseline for the hybrid benchmark: the training step of a Nemotron-H hybrid built from
state-spaces' mamba-ssm modules, as a mamba-ssm user would assemble it.

One layer per letter of the config's hybrid_override_pattern (configs/bench/nemotron-h-SIZE.yaml),
each in mamba-ssm's pre-norm residual `Block` (its fused add + RMSNorm, `residual_in_fp32` as the
config says), the way MambaLMHeadModel stacks its layers:
  M  mamba_ssm.modules.mamba2.Mamba2 with the config's heads, head dim, state, groups, conv width,
     chunk size and biases; dt clamped below at time_step_min (dt_limit), as triax's nemotron_h does;
  *  mamba_ssm.modules.mha.MHA, causal, the config's heads, key/value heads and head dim, no biases
     and no rotary embedding (Nemotron-H's attention has no positions; triax's neither);
  -  Nemotron-H's MLP, down_proj(relu(up_proj(x))²), not gated. mamba-ssm's only MLP, GatedMLP, is a
     gated SiLU one (3 matrices, not 2), so this is a small torch module with triax's matrices,
     FLOPs and parameters (ReluSquaredMlp below);
  E  refused: mamba-ssm v2.3.1 (the version tools/device/build_mamba_peer.sh builds) has no MoE
     module (the small config has no E layer).
Then the embedding (the config's vocabulary, unpadded as triax's make_vocab_size_divisible_by 1
leaves it), mamba-ssm's fused final RMSNorm and the lm_head, tied when the config ties.

Where it differs from triax's nemotron_h: MHA repeats the key/value heads before
scaled_dot_product_attention (triax passes enable_gqa), and the weights are initialised as
MambaLMHeadModel does (mamba-ssm's _init_weights), not as triax does (neither changes the work of a
step). The parameter count is triax's exactly.

The training loop is tools/device/mamba_ssm_peer.py's (random tokens, bf16 autocast over fp32
weights, fused AdamW, clipping at 1.0, one JSON line with the fields tools/device/bench.py reads);
its MFU counts triax's FLOPs for the same shape (train_flops_per_token).

  python3 hybrid_ssm_peer.py --model small [--mbs 8] [--seq 2048] [--steps 10] [--warmup 3]
  python3 hybrid_ssm_peer.py --config FILE ...      # the shape of another Nemotron-H config

--device cpu runs the same loop on the CPU (a stand-in mamba_ssm package in the tests).
"""
from collections import namedtuple
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch

from bench import config_scalar
from mamba2_ssm_peer import (Mamba2Shape, arguments_and_shape, mamba2_layer_arguments, read_fields,
                             require_mamba_ssm_epsilon, train_flops_per_token as mamba2_train_flops_per_token)
from mamba_ssm_peer import train_and_report

CausalLMOutput = namedtuple("CausalLMOutput", ["logits"])
# Optional model_config keys and NemotronHConfig's defaults for them.
OPTIONAL_KEYS = {"mlp_bias": "false", "time_step_min": "0.001"}


@dataclass
class HybridShape:
    """The model.model_config keys of a Nemotron-H benchmark config that shape the peer."""
    hybrid_override_pattern: str
    num_hidden_layers: int
    vocab_size: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    mamba_num_heads: int
    mamba_head_dim: int
    ssm_state_size: int
    n_groups: int
    conv_kernel: int
    chunk_size: int
    use_bias: bool
    use_conv_bias: bool
    residual_in_fp32: bool
    tie_word_embeddings: bool
    mlp_bias: bool = False
    time_step_min: float = 0.001

    def mamba2_shape(self, layers):
        """The Mamba-2 layers' shape in mamba2_ssm_peer's terms, counting `layers` of them."""
        return Mamba2Shape(hidden_size=self.hidden_size, num_hidden_layers=layers, vocab_size=self.vocab_size,
                           num_heads=self.mamba_num_heads, head_dim=self.mamba_head_dim,
                           state_size=self.ssm_state_size, n_groups=self.n_groups,
                           expand=self.mamba_num_heads * self.mamba_head_dim // self.hidden_size,
                           conv_kernel=self.conv_kernel, chunk_size=self.chunk_size, use_bias=self.use_bias,
                           use_conv_bias=self.use_conv_bias, residual_in_fp32=self.residual_in_fp32,
                           tie_word_embeddings=self.tie_word_embeddings)


def optional_word(text, key):
    try:
        return config_scalar(text, "model", key)
    except ValueError:
        return OPTIONAL_KEYS[key]


def read_shape(path):
    """The shape in the config at `path`; a ValueError names what this peer could not build alike."""
    shape = read_fields(path, HybridShape)
    text = Path(path).read_text()
    shape.mlp_bias = optional_word(text, "mlp_bias") == "true"
    shape.time_step_min = float(optional_word(text, "time_step_min"))
    pattern = shape.hybrid_override_pattern
    if len(pattern) != shape.num_hidden_layers:
        raise ValueError(f"{path}: hybrid_override_pattern \"{pattern}\" has {len(pattern)} letters, "
                         f"num_hidden_layers is {shape.num_hidden_layers}")
    for letter in pattern:
        if letter == "E":
            raise ValueError(f"{path}: the pattern has E (mixture of experts) layers; mamba-ssm v2.3.1 has no MoE "
                             "module to build them from")
        if letter not in LAYER_BUILDERS:
            raise ValueError(f"{path}: unknown letter '{letter}' in hybrid_override_pattern (M, *, -)")
    inner = shape.mamba_num_heads * shape.mamba_head_dim
    if inner % shape.hidden_size:
        raise ValueError(f"{path}: mamba_num_heads x mamba_head_dim ({inner}) is not a multiple of hidden_size "
                         f"({shape.hidden_size}); mamba-ssm's Mamba2 derives its heads from expand x hidden_size")
    require_mamba_ssm_epsilon(path)
    return shape


def train_flops_per_token(shape, seq):
    """Training FLOPs per token, triax's count for the same shape (nemotron_h_block_costs in
    plugins/models/nemotron_h/nemotron_h_config.cpp, each letter's multiply_adds_per_token in
    layer_kinds.cpp): 3 x the forward at 2 FLOPs per multiply-add. The Mamba-2 layers and the
    lm_head as mamba2_ssm_peer counts them; attention: q, k, v, o and the scores and their
    weighted sum over the whole sequence (no causal discount); the MLP: up and down."""
    h, q, kv = shape.hidden_size, shape.num_attention_heads * shape.head_dim, shape.num_key_value_heads * shape.head_dim
    attention = h * (q + 2 * kv) + q * h + 2 * q * seq
    mlp = 2 * h * shape.intermediate_size
    pattern = shape.hybrid_override_pattern
    others = pattern.count("*") * attention + pattern.count("-") * mlp
    return mamba2_train_flops_per_token(shape.mamba2_shape(pattern.count("M")), seq) + 3 * 2 * others


class ReluSquaredMlp(torch.nn.Module):
    """Nemotron-H's MLP layer: down_proj(relu(up_proj(x))²). Takes (and ignores) the
    inference_params that mamba-ssm's Block hands every mixer."""

    def __init__(self, hidden_size, intermediate_size, bias=False, device=None, dtype=None):
        super().__init__()
        self.up_proj = torch.nn.Linear(hidden_size, intermediate_size, bias=bias, device=device, dtype=dtype)
        self.down_proj = torch.nn.Linear(intermediate_size, hidden_size, bias=bias, device=device, dtype=dtype)

    def forward(self, x, inference_params=None):
        return self.down_proj(torch.relu(self.up_proj(x)).square())


def mamba2_mixer(shape, layer, factory):
    from mamba_ssm.modules.mamba2 import Mamba2
    return partial(Mamba2, **mamba2_layer_arguments(shape.mamba2_shape(1)),
                   dt_limit=(shape.time_step_min, float("inf")), layer_idx=layer, **factory)


def attention_mixer(shape, layer, factory):
    from mamba_ssm.modules.mha import MHA
    return partial(MHA, num_heads=shape.num_attention_heads, num_heads_kv=shape.num_key_value_heads,
                   head_dim=shape.head_dim, qkv_proj_bias=False, out_proj_bias=False, causal=True,
                   rotary_emb_dim=0, layer_idx=layer, **factory)


def mlp_mixer(shape, layer, factory):
    return partial(ReluSquaredMlp, intermediate_size=shape.intermediate_size, bias=shape.mlp_bias, **factory)


# Per pattern letter: (the config, the layer's index, device and dtype) -> the Block's mixer_cls.
LAYER_BUILDERS = {"M": mamba2_mixer, "*": attention_mixer, "-": mlp_mixer}


class HybridLMHeadModel(torch.nn.Module):
    """Embedding, one mamba-ssm Block per pattern letter, the fused final norm, the lm_head."""

    def __init__(self, shape, device=None, dtype=None):
        super().__init__()
        from mamba_ssm.models.mixer_seq_simple import _init_weights
        from mamba_ssm.modules.block import Block
        from mamba_ssm.ops.triton.layer_norm import RMSNorm

        factory = dict(device=device, dtype=dtype)
        h = shape.hidden_size
        norm = partial(RMSNorm, eps=1e-5, **factory)
        self.residual_in_fp32 = shape.residual_in_fp32
        self.embedding = torch.nn.Embedding(shape.vocab_size, h, **factory)
        self.layers = torch.nn.ModuleList(
            Block(h, LAYER_BUILDERS[letter](shape, i, factory), mlp_cls=torch.nn.Identity, norm_cls=norm,
                  fused_add_norm=True, residual_in_fp32=shape.residual_in_fp32)
            for i, letter in enumerate(shape.hybrid_override_pattern))
        self.norm_f = norm(h)
        self.lm_head = torch.nn.Linear(h, shape.vocab_size, bias=False, **factory)
        if shape.tie_word_embeddings:
            self.lm_head.weight = self.embedding.weight
        # MambaLMHeadModel's initialisation (normal embedding, out_proj rescaled by the depth).
        self.apply(partial(_init_weights, n_layer=shape.num_hidden_layers))

    def forward(self, input_ids):
        from mamba_ssm.ops.triton.layer_norm import layer_norm_fn

        hidden, residual = self.embedding(input_ids), None
        for layer in self.layers:
            hidden, residual = layer(hidden, residual)
        hidden = layer_norm_fn(hidden, self.norm_f.weight, self.norm_f.bias, eps=self.norm_f.eps, residual=residual,
                               prenorm=False, residual_in_fp32=self.residual_in_fp32, is_rms_norm=True)
        return CausalLMOutput(self.lm_head(hidden))


def main(argv=None):
    a, shape = arguments_and_shape("hybrid", read_shape, __doc__, argv)
    torch.manual_seed(0)
    model = HybridLMHeadModel(shape, device=a.device, dtype=torch.float32)
    train_and_report(a, model, shape.vocab_size, train_flops_per_token(shape, a.seq))


if __name__ == "__main__":
    main()
