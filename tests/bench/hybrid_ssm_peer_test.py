"""tools/device/hybrid_ssm_peer.py on CPU against a stand-in mamba_ssm package (stand_in_mamba_ssm/):
one mamba-ssm Block per letter of the config's pattern (M Mamba2, * causal MHA without biases or
rotary, - the relu² MLP) with the config's shapes, fused add + RMSNorm, fp32 residual, tied; the
JSON line with triax's FLOPs and parameter counts of a tiny shape computed here by hand; the
shipped configs/bench/nemotron-h-small.yaml read and counted; E layers and a pattern of the wrong
length refused. (bench_hybrid_family checks that triax counts the same parameters and FLOPs.)
  python hybrid_ssm_peer_test.py <source dir>"""
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

src = Path(sys.argv[1])
here = Path(__file__).resolve().parent
env = dict(os.environ, PYTHONPATH=str(here / "stand_in_mamba_ssm"))
peer = [sys.executable, str(src / "tools/device/hybrid_ssm_peer.py"), "--device", "cpu"]
TINY = dict(hybrid_override_pattern="M*M-", num_hidden_layers=4, hidden_size=32, vocab_size=256, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, intermediate_size=64, mamba_num_heads=4, mamba_head_dim=16,
            ssm_state_size=8, n_groups=2, chunk_size=8)


def config_with(values, folder, name="tiny.yaml"):
    """configs/bench/nemotron-h-small.yaml with these model_config values, written into folder."""
    text = (src / "configs/bench/nemotron-h-small.yaml").read_text()
    for key, value in values.items():
        text, count = re.subn(rf"(?m)^(\s+{key}:)\s*\S+", lambda m: f"{m.group(1)} {value}", text)
        assert count == 1, key
    path = Path(folder) / name
    path.write_text(text)
    return str(path)


def refusal(config):
    return subprocess.run(peer + ["--config", config], env=env, capture_output=True, text=True, timeout=60)


with tempfile.TemporaryDirectory() as folder:
    tiny = config_with(TINY, folder)
    out = subprocess.run(peer + ["--config", tiny, "--mbs", "2", "--seq", "16", "--steps", "2", "--warmup", "1"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    with_moe = refusal(config_with(dict(TINY, hybrid_override_pattern="M*E-"), folder, "moe.yaml"))
    too_short = refusal(config_with(dict(TINY, hybrid_override_pattern="M*M"), folder, "short.yaml"))

    # The model of the tiny config, built in this process over the stand-in: its layers, letter by letter.
    sys.path[:0] = [str(src / "tools/device"), str(here / "stand_in_mamba_ssm")]
    import torch  # noqa: E402

    import hybrid_ssm_peer  # noqa: E402

    model = hybrid_ssm_peer.HybridLMHeadModel(hybrid_ssm_peer.read_shape(tiny), device="cpu")

kinds = {"Mamba2": "M", "MHA": "*", "ReluSquaredMlp": "-"}
assert "".join(kinds[type(block.mixer).__name__] for block in model.layers) == "M*M-", model
for block in model.layers:
    assert type(block).__module__ == "mamba_ssm.modules.block" and block.fused_add_norm and block.residual_in_fp32
    assert type(block.norm).__module__ == "mamba_ssm.ops.triton.layer_norm" and block.norm.eps == 1e-5, block.norm
mamba, attention, mlp = model.layers[0].mixer, model.layers[1].mixer, model.layers[3].mixer
assert (mamba.d_inner, mamba.d_state, mamba.ngroups, mamba.chunk_size) == (64, 8, 2, 8), mamba
assert mamba.dt_limit == (0.001, float("inf")) and mamba.conv1d.kernel_size == (4,) and mamba.in_proj.bias is None
assert mamba.D.numel() == 4 and mamba.conv1d.bias is not None, mamba
assert (attention.num_heads, attention.num_heads_kv, attention.head_dim) == (4, 2, 8), attention
assert attention.causal and attention.rotary_emb_dim == 0 and attention.softmax_scale is None, attention
assert attention.in_proj.bias is None and attention.out_proj.bias is None, attention
assert attention.in_proj.weight.shape == (8 * 8, 32) and attention.out_proj.weight.shape == (32, 32)
assert mlp.up_proj.weight.shape == (64, 32) and mlp.down_proj.weight.shape == (32, 64) and mlp.up_proj.bias is None
x = torch.randn(3, 32)
assert torch.equal(mlp(x), mlp.down_proj(torch.relu(mlp.up_proj(x)) ** 2)), "not relu² ungated"
assert model.lm_head.weight is model.embedding.weight and model.embedding.weight.shape == (256, 32)
assert abs(model.embedding.weight.std().item() - 0.02) < 0.005, "mamba-ssm's _init_weights not applied"

# By hand at sequence 16, the multiply-adds per token of triax's layer kinds: Mamba-2 (inner 64,
# B and C 2 x 2 x 8 = 32, chunk 8) in_proj 32 x 164 + conv 96 x 4 + SSD 8 / 2 x (16 + 64) + 2 x 64 x 8
# + out_proj 64 x 32 = 9024; attention q, k, v 32 x 64 + o 32 x 32 + scores and sum 2 x 32 x 16 = 4096;
# MLP 2 x 32 x 64 = 4096. Forward 2 x (2 x 9024 + 4096 + 4096) + 2 x 32 x 256 (lm_head); training 3x.
assert result["flops_per_token"] == 3 * (2 * (2 * 9024 + 4096 + 4096) + 2 * 32 * 256) == 206592, result
# Parameters as triax counts them (NemotronHModel::total_parameters): embedding 256 x 32; per layer
# a norm 32 and the mixer: Mamba-2 in_proj 164 x 32, conv 96 x 4 + 96, dt_bias, A_log, D 3 x 4,
# gated norm 64, out_proj 64 x 32 = 7852; attention 32 x 64 + 32 x 32; MLP 2 x 32 x 64; final norm 32.
assert result["params"] == 256 * 32 + 4 * 32 + 2 * 7852 + 3072 + 4096 + 32 == 31224, result
assert (result["peer"], result["model"], result["mbs"], result["seq"]) == ("mamba-ssm", "small", 2, 16), result
assert abs(result["mfu_989"] - result["tokens_per_s"] * 206592 / 989e12) < 1e-4, result
for key in ("step_ms", "tflops", "peak_mem_gib", "loss", "torch"):
    assert key in result, (key, result)
assert 4 < result["loss"] < 8, result  # about ln 256 on random tokens

for bad, words in ((with_moe, "has E (mixture of experts) layers"),
                   (too_short, "has 3 letters, num_hidden_layers is 4")):
    assert bad.returncode == 2 and words in bad.stderr, bad.stderr
    assert not bad.stdout, bad.stdout

# The shipped shape (a model of that size does not belong on a test machine): 18 M, 2 *, 4 - at 2048.
shape = hybrid_ssm_peer.read_shape(src / "configs/bench/nemotron-h-small.yaml")
assert (shape.hybrid_override_pattern, shape.hidden_size, shape.vocab_size, shape.num_attention_heads,
        shape.num_key_value_heads, shape.head_dim, shape.intermediate_size, shape.mamba_num_heads,
        shape.mamba_head_dim, shape.ssm_state_size, shape.n_groups, shape.conv_kernel, shape.chunk_size) == (
            "MMM-MMM*MMM-MMM*MMM-MMM-", 1024, 50280, 8, 2, 128, 4096, 32, 64, 128, 8, 4, 256), shape
assert shape.residual_in_fp32 and shape.tie_word_embeddings and not shape.use_bias and not shape.mlp_bias, shape
mamba_layer = 1024 * (2 * 2048 + 2 * 8 * 128 + 32) + (2048 + 2048) * 4 + 128 * (8 * 128 + 2048) + 2 * 2048 * 128 \
    + 2048 * 1024
attention_layer = 1024 * (1024 + 2 * 256) + 1024 * 1024 + 2 * 1024 * 2048
forward = 2 * (18 * mamba_layer + 2 * attention_layer + 4 * 2 * 1024 * 4096) + 2 * 1024 * 50280
assert hybrid_ssm_peer.train_flops_per_token(shape, 2048) == 3 * forward == 1_602_404_352, forward
# Its parameters, built without storage: triax's count of that config (docs/mamba2.md, *Hybrids*).
shipped = hybrid_ssm_peer.HybridLMHeadModel(shape, device="meta")
shipped_params = sum(p.numel() for p in shipped.parameters())
print("nemotron-h-small parameters: peer", shipped_params, "triax 242301632")
assert shipped_params == 242_301_632, shipped_params
print("hybrid_ssm_peer.py: OK", result["tokens_per_s"], "tok/s on the stand-in;", result["params"], "parameters")
