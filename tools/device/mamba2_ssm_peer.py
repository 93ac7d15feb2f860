#!/usr/bin/env python3
"""Peer baseline for the Mamba-2 benchmarks: the training step of state-spaces' mamba-ssm with
Mamba-2 layers.

What a Mamba-2 user runs: `MambaLMHeadModel` with `ssm_cfg` layer "Mamba2" (the SSD as mamba-ssm's
Triton kernels, causal-conv1d's convolution, the gated RMSNorm), RMSNorm blocks, the fused add +
norm, on the shape of configs/bench/mamba2-SIZE.yaml (read from that file: hidden size, layers,
heads, head dim, state, groups, conv width, chunk size, vocabulary, biases, residual in fp32,
tied embeddings); the training loop of tools/device/mamba_ssm_peer.py: random tokens, bf16
autocast over fp32 weights, fused AdamW, gradient clipping at 1.0, one JSON line with the fields
tools/device/bench.py reads. Its MFU counts triax's FLOPs for the same shape
(train_flops_per_token). tools/device/build_mamba_peer.sh builds and installs the packages.

  python3 mamba2_ssm_peer.py --model 780m [--mbs 8] [--seq 2048] [--steps 10] [--warmup 3]
  python3 mamba2_ssm_peer.py --config FILE ...      # the shape of another config of that form

--device cpu runs the same loop on the CPU (a stand-in mamba_ssm package in the tests).
"""
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

import torch

from bench import FAMILIES, config_path, config_scalar, config_value
from mamba_ssm_peer import argument_parser, train_and_report


@dataclass
class Mamba2Shape:
    """The model.model_config keys of a Mamba-2 benchmark config that shape the peer."""
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int
    num_heads: int
    head_dim: int
    state_size: int
    n_groups: int
    expand: int
    conv_kernel: int
    chunk_size: int
    use_bias: bool
    use_conv_bias: bool
    residual_in_fp32: bool
    tie_word_embeddings: bool


def read_fields(path, shape_class):
    """A `shape_class` (a dataclass of bool, int and str fields) of the same-named model.model_config
    keys of the config at `path`; a ValueError names a missing or malformed key. Fields with a
    default are left at it, for the caller to read (optional keys)."""
    text = Path(path).read_text()
    values = {}
    for f in fields(shape_class):
        if f.default is not MISSING:
            continue
        if f.type is bool:
            word = config_scalar(text, "model", f.name)
            if word not in ("true", "false"):
                raise ValueError(f"{path}: model.model_config.{f.name} is '{word}', not true or false")
            values[f.name] = word == "true"
        elif f.type is str:
            values[f.name] = config_scalar(text, "model", f.name).strip("\"'")
        else:
            values[f.name] = config_value(text, "model", f.name)
    return shape_class(**values)


def require_mamba_ssm_epsilon(path):
    """mamba-ssm's Mamba2 fixes its gated norm's epsilon at 1e-5: a ValueError for another."""
    if float(config_scalar(Path(path).read_text(), "model", "layer_norm_epsilon")) != 1e-5:
        raise ValueError(f"{path}: model.model_config.layer_norm_epsilon must be 1e-5, mamba-ssm's fixed epsilon")


def read_shape(path):
    """The shape in the config at `path`; a ValueError names what mamba-ssm could not build alike."""
    shape = read_fields(path, Mamba2Shape)
    if shape.num_heads * shape.head_dim != shape.expand * shape.hidden_size:
        raise ValueError(f"{path}: num_heads x head_dim ({shape.num_heads * shape.head_dim}) differs from expand x "
                         f"hidden_size ({shape.expand * shape.hidden_size}); mamba-ssm derives its heads from the latter")
    require_mamba_ssm_epsilon(path)
    return shape


def train_flops_per_token(shape, seq):
    """Training FLOPs per token, triax's count for the same shape (mamba2_block_costs in
    plugins/models/mamba2/mamba2_config.cpp): 3 x the forward at 2 FLOPs per multiply-add."""
    inner = shape.num_heads * shape.head_dim
    b_and_c = 2 * shape.n_groups * shape.state_size
    chunk = min(shape.chunk_size, max(seq, 1))
    in_proj = shape.hidden_size * (2 * inner + b_and_c + shape.num_heads)  # z, x, B, C, dt
    conv = (inner + b_and_c) * shape.conv_kernel  # depthwise over x, B, C
    # Within a chunk: C.B per group and the decay-weighted sum of x per head, each over about
    # chunk / 2 earlier positions (the causal half); across chunks: x B into the chunk's state and
    # C . state out of the previous one.
    ssd = chunk / 2 * (shape.n_groups * shape.state_size + inner) + 2 * inner * shape.state_size
    out_proj = inner * shape.hidden_size
    layer = in_proj + conv + ssd + out_proj
    return 3 * (2 * shape.num_hidden_layers * layer + 2 * shape.hidden_size * shape.vocab_size)


def mamba2_layer_arguments(shape):
    """The keyword arguments of mamba-ssm's Mamba2 (besides d_model) for the layers of `shape`."""
    return dict(d_state=shape.state_size, d_conv=shape.conv_kernel, expand=shape.expand, headdim=shape.head_dim,
                ngroups=shape.n_groups, chunk_size=shape.chunk_size, bias=shape.use_bias,
                conv_bias=shape.use_conv_bias)


def build_model(a, shape):
    from mamba_ssm.models.config_mamba import MambaConfig
    from mamba_ssm.models.mixer_seq_simple import MambaLMHeadModel

    ssm_cfg = dict(layer="Mamba2", **mamba2_layer_arguments(shape))
    config = MambaConfig(d_model=shape.hidden_size, d_intermediate=0, n_layer=shape.num_hidden_layers,
                         vocab_size=shape.vocab_size, ssm_cfg=ssm_cfg, rms_norm=True,
                         residual_in_fp32=shape.residual_in_fp32, fused_add_norm=True, pad_vocab_size_multiple=8,
                         tie_embeddings=shape.tie_word_embeddings)
    return MambaLMHeadModel(config, device=a.device, dtype=torch.float32)


def arguments_and_shape(family_name, read, description, argv):
    """The peer's flags (mamba_ssm_peer's, and --config) and the shape `read` takes from the config
    of --model in bench.py's family `family_name` (or from --config); a bad config exits with usage."""
    family = FAMILIES[family_name]
    ap = argument_parser(family["sizes"] + family["extra_sizes"], family["sizes"][0], description)
    ap.add_argument("--config", default=None,
                    help=f"read the shape from this config instead of the {family_name} family's SIZE config")
    a = ap.parse_args(argv)
    try:
        return a, read(a.config or config_path(family_name, a.model))
    except (OSError, ValueError) as e:
        ap.error(str(e))


def main(argv=None):
    a, shape = arguments_and_shape("mamba2", read_shape, __doc__, argv)
    torch.manual_seed(0)
    train_and_report(a, build_model(a, shape), shape.vocab_size, train_flops_per_token(shape, a.seq))


if __name__ == "__main__":
    main()
