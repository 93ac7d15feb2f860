#!/usr/bin/env python3
"""`triax generate` beside transformers' generate() on one GPU, as a markdown table of ratios.

    python3 tools/device/generate_bench.py [--build build-gpu] [--new-tokens 128] [--no-peer | --peer-json FILE]
                                           [--family llama|mamba] [--bandwidth BYTES_PER_S]

--family mamba: the Mamba-130m shape (configs/bench/mamba-130m.yaml) at batch 1 and 32, with and
without CUDA graphs, beside mamba-ssm's generate(cg=True) (tools/device/mamba_ssm_peer.py --decode).

Runs, one process each, with random weights (configs/bench/smollm-*.yaml) and the prompt ids
1..8 (--repeat B for batch B): the 135m shape at batch 1 and 32 with and without CUDA graphs, the
1.7b shape's decode at batch 1 (against the weight-read bound: bf16 weight bytes / HBM bandwidth
per step, the bandwidth by the card's name: H100 3.35 TB/s, H200 4.8 TB/s, else --bandwidth) and
its prefill of 2,048 tokens (MFU of the forward: 2·N·T + 4·L·h·T² FLOPs over the 989 TFLOP/s bf16
dense peak); then tools/device/generate_peer_bench.py (transformers eager, and
static cache + torch.compile) at the 135m shape. Every triax run generates once before the one
measured (--warmup 1). Prints one JSON line per measurement, then the table.
"""
import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEAK_FLOPS = 989e12
# The weight-read bound's memory bandwidth by card (bytes/s); another card: --bandwidth.
HBM_BYTES_PER_S = {"H100": 3.35e12, "H200": 4.8e12}


def card_bandwidth():
    """The first GPU's HBM bandwidth by its name (nvidia-smi), None if unknown."""
    try:
        name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, check=True).stdout.splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return None
    return next((bandwidth for card, bandwidth in HBM_BYTES_PER_S.items() if card in name), None)


LINE = re.compile(r"prefill: (\d+) prompt tokens in ([\d.]+) s; decode: (\S+) tokens/s at batch (\d+)")
PARAMETERS = re.compile(r": (\d+) parameters")
SHAPES = {"135m": (30, 576), "1.7b": (24, 2048)}  # layers, hidden


def triax(build, size, batch, new_tokens, prompt_ids, extra=(), config="smollm"):
    cmd = [str(Path(build) / "bin" / "triax"), "generate", "--config", str(ROOT / f"configs/bench/{config}-{size}.yaml"),
           "--prompt-ids", prompt_ids, "--max-new-tokens", str(new_tokens), "--ignore-eos", "--repeat", str(batch),
           "--warmup", "1", *extra]
    run = subprocess.run(cmd, capture_output=True, text=True)
    found, params = LINE.search(run.stderr), PARAMETERS.search(run.stderr)
    if run.returncode != 0 or not found:
        return {"error": f"exit {run.returncode}: {run.stderr[-600:]}"}
    return {"prompt_tokens": int(found[1]), "prefill_s": float(found[2]), "decode_tokens_per_s": float(found[3]),
            "parameters": int(params[1]) if params else None}


def peer_lines(a, script, args):
    """The peer's JSON lines: from --peer-json, or a run of `script` with `args`; none with --no-peer."""
    if a.peer_json:
        lines = Path(a.peer_json).read_text().splitlines()
    elif a.no_peer:
        return []
    else:
        peer = subprocess.run([sys.executable, str(ROOT / "tools/device" / script), *args], capture_output=True, text=True)
        lines = peer.stdout.splitlines()
        if peer.returncode != 0:
            print(json.dumps({"peer_error": peer.stderr[-800:]}), flush=True)
    items = [json.loads(line) for line in lines if line.startswith("{")]
    for item in items:
        print(json.dumps(item), flush=True)
    return items


def mamba_table(a, short):
    """Mamba-130m decode at batch 1 and 32: triax with and without graphs, mamba-ssm's cg=True."""
    rates = {}
    for batch in (1, 32):
        for graphs in ("on", "off"):
            result = triax(a.build, "130m", batch, a.new_tokens, short, ["--cuda-graphs", graphs], config="mamba")
            print(json.dumps({"run": f"mamba-130m b{batch} graphs {graphs}", **result}), flush=True)
            rates[(batch, graphs)] = result.get("decode_tokens_per_s")
    peer = {item["batch"]: item.get("decode_tokens_per_s")
            for item in peer_lines(a, "mamba_ssm_peer.py", ["--decode", "--model", "130m", "--new-tokens",
                                                            str(a.new_tokens)]) if item.get("mode") == "decode"}
    print("\n| what | triax (CUDA graphs) | triax (no graphs) | mamba-ssm generate(cg=True) | triax / mamba-ssm |")
    print("|---|---|---|---|---|")
    for batch in (1, 32):
        t, plain, p = rates[(batch, "on")], rates[(batch, "off")], peer.get(batch)
        ratio = f"{t / p:.2f}x" if t and p else "—"
        print(f"| Mamba-130m decode, batch {batch}, tokens/s | {t} | {plain} | {p} | {ratio} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build-gpu")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--peer-json", help="the peer's JSON lines, already measured in this call, instead of running it")
    ap.add_argument("--family", default="llama", choices=["llama", "mamba"])
    ap.add_argument("--bandwidth", type=float, help="HBM bytes/s for the weight-read bound (default: by the card's name)")
    a = ap.parse_args()
    short = ",".join(str(i) for i in range(1, 9))
    if a.family == "mamba":
        mamba_table(a, short)
        return
    results = {}

    def record(key, value):
        results[key] = value
        print(json.dumps({"run": key, **value}), flush=True)

    for batch in (1, 32):
        record(f"135m b{batch}", triax(a.build, "135m", batch, a.new_tokens, short))
        record(f"135m b{batch} no graphs", triax(a.build, "135m", batch, a.new_tokens, short, ["--cuda-graphs", "off"]))
    record("1.7b b1", triax(a.build, "1.7b", 1, a.new_tokens, short))
    long_prompt = ",".join(str(1 + i % 1000) for i in range(2048))
    record("1.7b prefill 2048", triax(a.build, "1.7b", 1, 1, long_prompt,
                                      ["--set", "model.model_config.max_position_embeddings=4096"]))
    peers = {(item["mode"], item["batch"]): item.get("decode_tokens_per_s")
             for item in peer_lines(a, "generate_peer_bench.py", ["--model", "135m", "--new-tokens", str(a.new_tokens)])}

    def rate(key):
        return results.get(key, {}).get("decode_tokens_per_s")

    def ratio(x, y):
        return f"{x / y:.2f}x" if x and y else "—"

    print("\n| what | triax (CUDA graphs) | triax (no graphs) | transformers eager | static cache + compile |"
          " vs eager | vs compile |")
    print("|---|---|---|---|---|---|---|")
    for batch in (1, 32):
        t, plain = rate(f"135m b{batch}"), rate(f"135m b{batch} no graphs")
        eager, compiled = peers.get(("eager", batch)), peers.get(("static-compile", batch))
        print(f"| 135m decode, batch {batch}, tokens/s | {t} | {plain} | {eager} | {compiled} | {ratio(t, eager)} |"
              f" {ratio(t, compiled)} |")
    decode = results.get("1.7b b1", {})
    bandwidth = a.bandwidth or card_bandwidth()
    if decode.get("parameters") and decode.get("decode_tokens_per_s") and bandwidth:
        bound = bandwidth / (2 * decode["parameters"])
        print(f"| 1.7b decode, batch 1, tokens/s | {decode['decode_tokens_per_s']} | | | | "
              f"{decode['decode_tokens_per_s'] / bound:.1%} of the weight-read bound ({bound:.0f} steps/s) | |")
    prefill = results.get("1.7b prefill 2048", {})
    if prefill.get("parameters") and prefill.get("prefill_s"):
        layers, hidden = SHAPES["1.7b"]
        tokens = prefill["prompt_tokens"]
        flops = 2 * prefill["parameters"] * tokens + 4 * layers * hidden * tokens * tokens
        print(f"| 1.7b prefill of {tokens} tokens | {prefill['prefill_s'] * 1e3:.1f} ms | | | | "
              f"{flops / prefill['prefill_s'] / PEAK_FLOPS:.1%} MFU | |")


if __name__ == "__main__":
    main()
