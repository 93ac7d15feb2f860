"""tools/device/mamba_ssm_peer.py on CPU against a stand-in mamba_ssm package (stand_in_mamba_ssm/):
the model is built with the benchmark shape's config (Mamba-1 layers, RMSNorm, fp32 residual,
fused add + norm, tied, vocab 50280), and the JSON line carries the fields tools/device/bench.py
reads, consistent with each other; with --decode, the generate() calls and one line per batch size.
  python mamba_ssm_peer_test.py <source dir>"""
import json
import os
import subprocess
import sys
from pathlib import Path

src = Path(sys.argv[1])
here = Path(__file__).resolve().parent
env = dict(os.environ, PYTHONPATH=str(here / "stand_in_mamba_ssm"))
command = [sys.executable, str(src / "tools/device/mamba_ssm_peer.py"), "--device", "cpu", "--model", "370m",
           "--mbs", "2", "--seq", "16", "--steps", "2", "--warmup", "1"]
out = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
assert out.returncode == 0, out.stdout + out.stderr
lines = out.stdout.splitlines()
config = json.loads(next(l for l in lines if l.startswith("stand-in config: ")).split(": ", 1)[1])
assert (config["d_model"], config["n_layer"], config["vocab_size"], config["d_intermediate"]) == (1024, 48, 50280, 0), config
assert config["ssm_cfg"] == {"layer": "Mamba1", "d_state": 16, "d_conv": 4, "expand": 2}, config
assert config["rms_norm"] and config["residual_in_fp32"] and config["fused_add_norm"] and config["tie_embeddings"], config
assert config["pad_vocab_size_multiple"] == 8 and not config["attn_layer_idx"], config
result = json.loads(lines[-1])
assert (result["peer"], result["model"], result["mbs"], result["seq"]) == ("mamba-ssm", "370m", 2, 16), result
assert result["params"] == 50280 * 8 + 8 * 8 + 8, result  # the stand-in's tied embedding and mixing layer
assert abs(result["tokens_per_s"] - 2 * 16 / (result["step_ms"] / 1e3)) <= 0.02 * result["tokens_per_s"] + 1, result
for key in ("mfu_989", "tflops", "peak_mem_gib", "loss", "torch"):
    assert key in result, (key, result)
assert result["mfu_989"] > 0 and result["loss"] > 0, result

# --decode: one line per batch size from generate(max_length=prompt+new, cg=True, top_k=1) on the bf16 model,
# each batch size generated once unmeasured, then in whole, then its prefill alone.
decode = subprocess.run(command[:2] + ["--device", "cpu", "--model", "130m", "--decode", "--batches", "1,3", "--prompt",
                                       "4", "--new-tokens", "5"], env=env, capture_output=True, text=True, timeout=120)
assert decode.returncode == 0, decode.stdout + decode.stderr
lines = decode.stdout.splitlines()
calls = [json.loads(l.split(": ", 1)[1]) for l in lines if l.startswith("stand-in generate: ")]
expected_calls = [dict(batch=b, prompt=4, max_length=m, top_k=1, cg=True, dtype="torch.bfloat16")
                  for b in (1, 3) for m in (9, 9, 5)]
assert calls == expected_calls, calls
results = [json.loads(l) for l in lines if l.startswith("{")]
assert [r["batch"] for r in results] == [1, 3], results
for r in results:
    assert (r["peer"], r["mode"], r["model"], r["prompt_tokens"], r["new_tokens"]) == ("mamba-ssm", "decode", "130m", 4, 5), r
    assert r["decode_tokens_per_s"] > 0 and r["tokens_per_s"] > 0 and r["prefill_s"] > 0, r

# Bad arguments stop before any model is built.
bad = subprocess.run(command[:2] + ["--model", "7b"], env=env, capture_output=True, text=True, timeout=60)
assert bad.returncode == 2 and "invalid choice: '7b'" in bad.stderr, bad.stderr
print("mamba_ssm_peer.py: OK", result["tokens_per_s"], "tok/s on the stand-in")
