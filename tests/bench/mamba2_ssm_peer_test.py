"""tools/device/mamba2_ssm_peer.py on CPU against a stand-in mamba_ssm package (stand_in_mamba_ssm/):
the model is built with the shape of the config it reads (Mamba-2 layers with the config's
state, head dim, groups, conv width and chunk size; RMSNorm, fp32 residual, fused add + norm,
tied), and the JSON line carries the fields tools/device/bench.py reads, with the FLOPs count and
parameter count of a tiny shape computed here by hand. Without --config it reads
configs/bench/mamba2-780m.yaml.
  python mamba2_ssm_peer_test.py <source dir>"""
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
peer = [sys.executable, str(src / "tools/device/mamba2_ssm_peer.py"), "--device", "cpu"]
TINY = dict(hidden_size=32, num_hidden_layers=2, vocab_size=256, num_heads=4, head_dim=16, state_size=8,
            n_groups=2, conv_kernel=4, chunk_size=8)


def config_with(values, folder):
    """configs/bench/mamba2-780m.yaml with these model_config values, written into folder."""
    text = (src / "configs/bench/mamba2-780m.yaml").read_text()
    for key, value in values.items():
        text, count = re.subn(rf"(?m)^(\s+{key}:)\s*\S+", rf"\g<1> {value}", text)
        assert count == 1, key
    path = Path(folder) / "tiny.yaml"
    path.write_text(text)
    return str(path)


def run(args):
    out = subprocess.run(peer + args, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    config = json.loads(next(l for l in lines if l.startswith("stand-in config: ")).split(": ", 1)[1])
    return config, json.loads(lines[-1])


with tempfile.TemporaryDirectory() as folder:
    config, result = run(["--config", config_with(TINY, folder), "--mbs", "2", "--seq", "16", "--steps", "2",
                          "--warmup", "1"])
    bad_heads = subprocess.run(peer + ["--config", config_with(dict(TINY, num_heads=3), folder)], env=env,
                               capture_output=True, text=True, timeout=60)

assert (config["d_model"], config["n_layer"], config["vocab_size"], config["d_intermediate"]) == (32, 2, 256, 0), config
assert config["ssm_cfg"] == {"layer": "Mamba2", "d_state": 8, "d_conv": 4, "expand": 2, "headdim": 16, "ngroups": 2,
                             "chunk_size": 8, "bias": False, "conv_bias": True}, config
assert config["rms_norm"] and config["residual_in_fp32"] and config["fused_add_norm"] and config["tie_embeddings"], config
assert config["pad_vocab_size_multiple"] == 8 and not config["attn_layer_idx"], config

# By hand, inner 4 x 16 = 64, B and C 2 x 2 x 8 = 32, chunk 8 (< seq 16), per layer multiply-adds:
# in_proj 32 x (2 x 64 + 32 + 4) = 5248, conv (64 + 32) x 4 = 384, SSD 8 / 2 x (2 x 8 + 64) + 2 x 64 x 8
# = 1344, out_proj 64 x 32 = 2048: 9024. Forward 2 x 2 layers x 9024 + 2 x 32 x 256 (lm_head) = 52480;
# training 3 x 52480.
assert result["flops_per_token"] == 157440, result
# Embedding 256 x 32; per layer: norm 32, in_proj 164 x 32, conv 96 x 4 + 96, dt_bias, A_log, D 3 x 4,
# gated norm 64, out_proj 64 x 32 = 7884; final norm 32.
assert result["params"] == 256 * 32 + 2 * 7884 + 32, result
assert (result["peer"], result["model"], result["mbs"], result["seq"]) == ("mamba-ssm", "780m", 2, 16), result
assert abs(result["tokens_per_s"] - 2 * 16 / (result["step_ms"] / 1e3)) <= 0.02 * result["tokens_per_s"] + 1, result
assert abs(result["mfu_989"] - result["tokens_per_s"] * 157440 / 989e12) < 1e-4, result
for key in ("tflops", "peak_mem_gib", "loss", "torch"):
    assert key in result, (key, result)
assert result["loss"] > 0, result

# Heads that are not expand x hidden_size / head_dim stop before any model is built, naming the keys.
assert bad_heads.returncode == 2 and "num_heads x head_dim (48) differs" in bad_heads.stderr, bad_heads.stderr
assert "stand-in config" not in bad_heads.stdout, bad_heads.stdout

# The shipped shape, configs/bench/mamba2-780m.yaml, read in this process (a model of that size
# does not belong on a test machine): in_proj 1536 x 6448, conv 3328 x 4, SSD 128 x (128 + 3072)
# + 2 x 3072 x 128, out_proj 3072 x 1536 per layer; 48 layers, lm_head 1536 x 50280, sequence 2048.
sys.path.insert(0, str(src / "tools/device"))
import mamba2_ssm_peer  # noqa: E402

shape = mamba2_ssm_peer.read_shape(src / "configs/bench/mamba2-780m.yaml")
assert (shape.hidden_size, shape.num_hidden_layers, shape.vocab_size, shape.num_heads, shape.head_dim,
        shape.state_size, shape.n_groups, shape.expand, shape.conv_kernel, shape.chunk_size) == (
            1536, 48, 50280, 48, 64, 128, 1, 2, 4, 256), shape
assert not shape.use_bias and shape.use_conv_bias and shape.residual_in_fp32 and shape.tie_word_embeddings, shape
layer = 1536 * 6448 + 3328 * 4 + 128 * (128 + 3072) + 2 * 3072 * 128 + 3072 * 1536
assert mamba2_ssm_peer.train_flops_per_token(shape, 2048) == 3 * (2 * 48 * layer + 2 * 1536 * 50280) == 5_023_014_912
bad = subprocess.run(peer + ["--model", "7b"], env=env, capture_output=True, text=True, timeout=60)
assert bad.returncode == 2 and "invalid choice: '7b'" in bad.stderr, bad.stderr
print("mamba2_ssm_peer.py: OK", result["tokens_per_s"], "tok/s on the stand-in")
