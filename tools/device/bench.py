#!/usr/bin/env python3
"""Training throughput of triax against the peer baseline, one table (docs/performance.md).

For each size (configs/bench/smollm-SIZE.yaml; with --family mamba configs/bench/mamba-SIZE.yaml, with
--family mamba2 configs/bench/mamba2-SIZE.yaml, with --family hybrid configs/bench/nemotron-h-SIZE.yaml,
with --family qwen3 configs/bench/qwen3-SIZE.yaml)
and each variant, runs `triax train` on that config, then the peer (`python3 PEER --model SIZE
--mbs MBS --seq SEQ --compile`; for Mamba tools/device/mamba_ssm_peer.py and for Mamba-2
tools/device/mamba2_ssm_peer.py, for the Nemotron-H hybrid tools/device/hybrid_ssm_peer.py,
state-spaces' mamba-ssm with its kernels, without --compile) on the
same shape once per size, and prints: size, variant, triax tokens/s, MFU, peak GiB, peer tokens/s,
MFU, peak GiB, triax/peer. triax's numbers are the median over the steps after --warmup of its
metrics.jsonl (tokens/s, MFU) and its last peak memory; the peer's are its JSON line. With --out
(default $OUT), also writes bench.md, bench.json and every run's log there.

Standard library only: the GPU machine has no package registry.

  tools/device/bench.sh                                  # every size, triax as configured
  tools/device/bench.sh 360m --variant base --variant 'recompute parallelism.recompute_layer=true'
  tools/device/bench.sh --family mamba 130m               # Mamba-130m against mamba-ssm's MambaLMHeadModel
  tools/device/bench.sh --family mamba2 780m              # Mamba-2 780m against MambaLMHeadModel with Mamba2 layers
  tools/device/bench.sh --family hybrid small             # Nemotron-H hybrid against a stack of mamba-ssm's modules
  tools/device/bench.sh --peer none 780m                  # the Llama of the same size, for the Mamba-2/Llama ratio
  tools/device/bench.sh --family qwen3                    # Qwen3-0.6B and -1.7B shapes, triax alone
  tools/device/bench.sh --family moe --peer none 1b --variant bf16 --variant 'fp8 fp8.recipe=rowwise'
"""
import argparse
import json
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Per model family: the sizes (the peer's model names), the config of a size, the default peer.
FAMILIES = {
    # sizes: the default set; extra_sizes: run only when named (3b: seq 4096, minutes per run; 780m:
    # the size of mamba2-780m, for the Mamba-2 / Llama step ratio).
    "llama": dict(sizes=["135m", "360m", "1.7b"], extra_sizes=["780m", "3b"], config="configs/bench/smollm-{size}.yaml",
                  peer=str(ROOT / ".devdeps/peer_bench.py"), peer_args="--compile"),
    "mamba": dict(sizes=["130m", "370m", "1.4b"], extra_sizes=[], config="configs/bench/mamba-{size}.yaml",
                  peer=str(ROOT / "tools/device/mamba_ssm_peer.py"), peer_args=""),
    "mamba2": dict(sizes=["780m"], extra_sizes=[], config="configs/bench/mamba2-{size}.yaml",
                   peer=str(ROOT / "tools/device/mamba2_ssm_peer.py"), peer_args=""),
    # The small Nemotron-H hybrid (Mamba-2, attention and MLP layers) against the same pattern built
    # of mamba-ssm's modules.
    "hybrid": dict(sizes=["small"], extra_sizes=[], config="configs/bench/nemotron-h-{size}.yaml",
                   peer=str(ROOT / "tools/device/hybrid_ssm_peer.py"), peer_args=""),
    # Qwen3's shapes (the qwen3 plugin): triax alone unless --peer names a script for them.
    "qwen3": dict(sizes=["0.6b", "1.7b"], extra_sizes=[], config="configs/bench/qwen3-{size}.yaml",
                  peer="none", peer_args=""),
    # The Mixtral-shaped mixture of experts against transformers' MixtralForCausalLM of its shape.
    "moe": dict(sizes=["1b"], extra_sizes=[], config="configs/bench/moe-{size}.yaml",
                peer=str(ROOT / "tools/device/moe_peer_bench.py"), peer_args="--compile"),
}
GIB = 2**30


def config_path(family, size):
    return ROOT / FAMILIES[family]["config"].format(size=size)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench.sh", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sizes", nargs="*", help="model sizes: llama " + ", ".join(FAMILIES["llama"]["sizes"])
                   + " (and, when named, " + ", ".join(FAMILIES["llama"]["extra_sizes"]) + "); mamba "
                   + ", ".join(FAMILIES["mamba"]["sizes"]) + "; mamba2 " + ", ".join(FAMILIES["mamba2"]["sizes"])
                   + "; hybrid " + ", ".join(FAMILIES["hybrid"]["sizes"])
                   + "; qwen3 " + ", ".join(FAMILIES["qwen3"]["sizes"]) + "; moe " + ", ".join(FAMILIES["moe"]["sizes"])
                   + " (default: the family's sizes not named 'extra')")
    p.add_argument("--family", default="llama", choices=sorted(FAMILIES),
                   help="llama: configs/bench/smollm-SIZE.yaml against .devdeps/peer_bench.py (default); "
                        "mamba: configs/bench/mamba-SIZE.yaml against tools/device/mamba_ssm_peer.py "
                        "(mamba-ssm, built by tools/device/build_mamba_peer.sh); "
                        "mamba2: configs/bench/mamba2-SIZE.yaml against tools/device/mamba2_ssm_peer.py "
                        "(mamba-ssm's Mamba2 layers); hybrid: configs/bench/nemotron-h-SIZE.yaml against "
                        "tools/device/hybrid_ssm_peer.py (mamba-ssm's Mamba2, MHA and a relu² MLP in the "
                        "config's pattern); qwen3: configs/bench/qwen3-SIZE.yaml, no peer; "
                        "moe: configs/bench/moe-SIZE.yaml against tools/device/moe_peer_bench.py")
    p.add_argument("--triax", default=str(ROOT / "build-gpu/bin/triax"), help="triax executable")
    p.add_argument("--peer", default=None,
                   help="peer script, or 'none' to run triax only (default: the family's, see --family)")
    p.add_argument("--peer-args", default=None,
                   help="peer flags besides --model/--mbs/--seq, as one word: --peer-args='--compile --steps 30' "
                        "(default: --compile for llama, none for mamba, mamba2 and hybrid)")
    p.add_argument("--variant", action="append", default=[], metavar="'NAME [KEY=VALUE ...]'",
                   help="a triax run with these config overrides (repeatable; default: one run named 'triax' "
                        "without overrides), e.g. --variant 'recompute parallelism.recompute_layer=true'")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for every triax run (repeatable)")
    p.add_argument("--warmup", type=int, default=5, help="triax steps left out of the median (default 5)")
    p.add_argument("--single-process", action="store_true",
                   help="start triax without the launcher variables (RANK, WORLD_SIZE, MASTER_*): "
                        "for a CPU check with --set parallelism.comm_backend=auto")
    p.add_argument("--work", default=str(ROOT / "runs/bench"), help="run folders (default runs/bench)")
    p.add_argument("--out", default=os.environ.get("OUT"), help="write bench.md, bench.json, logs/ here "
                   "(default: $OUT when set)")
    p.add_argument("--timeout", type=float, default=None, help="seconds allowed to each run")
    a = p.parse_args(argv)
    family = FAMILIES[a.family]
    if not a.sizes:
        a.sizes = list(family["sizes"])
    if a.peer is None:
        a.peer = family["peer"]
    if a.peer_args is None:
        a.peer_args = family["peer_args"]
    for size in a.sizes:
        config = config_path(a.family, size)
        if not config.is_file():
            p.error(f"no benchmark config for size '{size}': {config} does not exist "
                    f"({a.family} sizes: {', '.join(family['sizes'] + family['extra_sizes'])})")
    a.variants = []
    for spec in a.variant or ["triax"]:
        words = shlex.split(spec)
        if not words or "=" in words[0]:
            p.error(f"--variant '{spec}': expected a name, then KEY=VALUE overrides")
        bad = [w for w in words[1:] if "=" not in w]
        if bad:
            p.error(f"--variant '{spec}': '{bad[0]}' is not KEY=VALUE")
        a.variants.append((words[0], words[1:]))
    names = [name for name, _ in a.variants]
    if len(set(names)) != len(names):
        p.error("--variant names must differ: " + ", ".join(names))
    return a


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_logged(command, log_path, env=None, timeout=None):
    """Runs command with stdout and stderr into log_path; returns (exit status, log text)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(shlex.quote(str(c)) for c in command) + "\n")
        log.flush()
        try:
            status = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout,
                                    cwd=ROOT).returncode
        except subprocess.TimeoutExpired:
            log.write(f"\n[bench] stopped after {timeout} s\n")
            status = 124
    return status, log_path.read_text(errors="replace")


def config_scalar(config_text, section, key):
    """The value of `key:` inside top-level `section:` of a benchmark config, as written (simple
    YAML, no parser: the machine's Python may lack one); the first such key at any depth."""
    inside = False
    for line in config_text.splitlines():
        if re.match(r"^\S", line):
            inside = line.startswith(section + ":")
        elif inside:
            m = re.match(r"^\s+" + re.escape(key) + r":\s*([^\s#]+)", line)
            if m:
                return m.group(1)
    raise ValueError(f"no {section}.{key} in the benchmark config")


def config_value(config_text, section, key):
    """An integer `key:` inside top-level `section:` of a benchmark config."""
    value = config_scalar(config_text, section, key)
    if not value.isdigit():
        raise ValueError(f"{section}.{key} is '{value}', not a whole number, in the benchmark config")
    return int(value)


def overridden(overrides, key, default):
    for item in reversed(overrides):
        k, _, v = item.partition("=")
        if k == key:
            return int(v)
    return default


def read_triax_metrics(metrics_path, warmup):
    steps = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    if not steps:
        raise ValueError(f"{metrics_path} holds no step")
    timed = [s for s in steps if s["step"] > warmup]
    if not timed:
        raise ValueError(f"{metrics_path}: {len(steps)} steps, all within --warmup {warmup}")
    mfus = [s["mfu"] for s in timed if s.get("mfu") is not None]
    return {
        "tokens_per_s": statistics.median(s["tokens_per_s"] for s in timed),
        "mfu": statistics.median(mfus) if mfus else None,
        # The peak over the timed steps, as the peers count theirs (reset after their warm-up);
        # runs of triax that predate the interval peak give the run's.
        "peak_gib": max(s.get("interval_peak_memory_bytes", s["peak_memory_bytes"]) for s in timed) / GIB,
        "run_peak_gib": max(s["peak_memory_bytes"] for s in steps) / GIB,
        "step_s": statistics.median(s["step_s"] for s in timed),
        "timed_steps": len(timed),
        "loss": steps[-1]["loss"],
    }


def run_triax(a, size, variant, overrides, logs):
    config = config_path(a.family, size)
    run_dir = Path(a.work) / f"{size}-{variant}"
    metrics = run_dir / "metrics.jsonl"
    if metrics.exists():
        metrics.unlink()  # never read an earlier run's numbers
    command = [a.triax, "train", "--config", str(config), "--set", f"checkpoints.checkpoints_path={run_dir}"]
    for item in a.set + overrides:
        command += ["--set", item]
    env = dict(os.environ)
    if not a.single_process:
        env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    status, log = run_logged(command, logs / f"triax-{size}-{variant}.log", env, a.timeout)
    result = {"status": status, "log": str(logs / f"triax-{size}-{variant}.log")}
    m = re.search(r"model \S+: (\d+) parameters, \S+ on (.+?), (\d+) training FLOPs per token", log)
    if m:
        result.update(params=int(m.group(1)), device=m.group(2), flops_per_token=int(m.group(3)))
    if status != 0:
        result["error"] = f"exit status {status}"
        return result, log
    try:
        result.update(read_triax_metrics(metrics, a.warmup))
    except (OSError, ValueError, KeyError) as e:
        result["error"] = str(e)
    return result, log


def run_peer(a, size, mbs, seq, logs):
    command = [sys.executable, a.peer, "--model", size, "--mbs", str(mbs), "--seq", str(seq)]
    command += shlex.split(a.peer_args)
    status, log = run_logged(command, logs / f"peer-{size}.log", None, a.timeout)
    result = {"status": status, "log": str(logs / f"peer-{size}.log"), "command": " ".join(command[1:])}
    line = None
    for text in log.splitlines():
        if text.startswith("{"):
            try:
                candidate = json.loads(text)
            except ValueError:
                continue
            if isinstance(candidate, dict) and "tokens_per_s" in candidate:
                line = candidate
    if status != 0 or line is None:
        result["error"] = f"exit status {status}" if status != 0 else "no JSON result line"
        return result, log
    result.update(line)
    result["mfu"] = line.get("mfu_989")
    result["peak_gib"] = line.get("peak_mem_gib")
    # The exact count when the peer prints it (the mamba-ssm peers), else from the rounded TFLOP/s.
    if not line.get("flops_per_token") and line.get("tflops") and line.get("tokens_per_s"):
        result["flops_per_token"] = line["tflops"] * 1e12 / line["tokens_per_s"]
    return result, log


def consistency_notes(size, triax, peer):
    """Differences that would make the comparison unfair: model size, FLOPs count, shape."""
    notes = []
    if "params" in triax and "params" in peer and triax["params"] != peer["params"]:
        notes.append(f"{size}: parameter counts differ (triax {triax['params']:,}, peer {peer['params']:,})")
    if triax.get("flops_per_token") and peer.get("flops_per_token"):
        ratio = triax["flops_per_token"] / peer["flops_per_token"]
        if abs(ratio - 1) > 0.01:
            notes.append(f"{size}: FLOPs per token differ by {100 * (ratio - 1):+.1f}% (triax "
                         f"{triax['flops_per_token']:.4g}, peer {peer['flops_per_token']:.4g}): MFUs not comparable")
    return notes


def fmt(value, kind):
    if value is None:
        return "—"
    if kind == "tps":
        return f"{value:,.0f}"
    if kind == "pct":
        return f"{100 * value:.1f}%"
    if kind == "gib":
        return f"{value:.2f}"
    if kind == "ratio":
        return f"{value:.2f}x"
    return str(value)


COLUMNS = ["size", "variant", "triax tok/s", "triax MFU", "triax peak GiB", "peer tok/s", "peer MFU",
           "peer peak GiB", "triax/peer"]


def table_row(row):
    t, p = row["triax"], row["peer"]
    if "error" in t:
        cells = [f"failed ({t['error']})", "", ""]
    else:
        cells = [fmt(t["tokens_per_s"], "tps"), fmt(t["mfu"], "pct"), fmt(t["peak_gib"], "gib")]
    if p is None:
        cells += ["—", "—", "—"]
    elif "error" in p:
        cells += [f"failed ({p['error']})", "", ""]
    else:
        cells += [fmt(p["tokens_per_s"], "tps"), fmt(p["mfu"], "pct"), fmt(p["peak_gib"], "gib")]
    return [row["size"], row["variant"]] + cells + [fmt(row.get("ratio"), "ratio")]


def text_table(rows):
    cells = [COLUMNS] + [table_row(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c[i].rjust(widths[i]) if i > 1 else c[i].ljust(widths[i])
                               for i in range(len(COLUMNS))) for c in cells)


def markdown(rows, notes, a):
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(table_row(r)) + " |" for r in rows]
    devices = sorted({r["triax"].get("device") for r in rows if r["triax"].get("device")})
    torch_versions = sorted({r["peer"].get("torch") for r in rows if r["peer"] and r["peer"].get("torch")})
    lines += ["", f"Measured {time.strftime('%Y-%m-%d %H:%M')} on {', '.join(devices) or 'unknown device'}"
              + (f", peer torch {', '.join(torch_versions)}" if torch_versions else "") + "."]
    peer = ("none" if a.peer == "none" else
            "`" + " ".join([Path(a.peer).name] + shlex.split(a.peer_args)) + "` (its warm-up excluded, peak after "
            "warm-up)")
    lines.append(f"triax: median of steps after {a.warmup} warm-up steps (metrics.jsonl); peak memory: the "
                 f"caching allocator's peak over those steps (interval_peak_memory_bytes; the run's own peak, "
                 f"warm-up included, is run_peak_gib in bench.json). Peer: {peer}.")
    lines.append("Variants: " + "; ".join(f"`{name}`: " + (" ".join(f"`{o}`" for o in ov) if ov else "as configured")
                                          for name, ov in a.variants)
                 + (". Every run: " + " ".join(f"`{s}`" for s in a.set) if a.set else "") + ".")
    lines += [f"- note: {n}" for n in notes]
    return "\n".join(lines) + "\n"


def main(argv):
    a = parse_args(argv)
    out = Path(a.out) if a.out else None
    logs = (out if out else Path(a.work)) / "logs"
    rows, notes, failed = [], [], False
    for size in a.sizes:
        config_text = config_path(a.family, size).read_text()
        seq = overridden(a.set, "tokens.sequence_length", config_value(config_text, "tokens", "sequence_length"))
        mbs = overridden(a.set, "tokens.micro_batch_size", config_value(config_text, "tokens", "micro_batch_size"))
        size_rows = []
        for variant, overrides in a.variants:
            print(f"[bench] triax {size} {variant} ...", flush=True)
            triax, log = run_triax(a, size, variant, overrides, logs)
            if "error" in triax:
                failed = True
                print(f"[bench] triax {size} {variant} failed ({triax['error']}); log {triax['log']}, last lines:\n"
                      + "\n".join(log.splitlines()[-15:]), flush=True)
            else:
                print(f"[bench] triax {size} {variant}: {triax['tokens_per_s']:,.0f} tok/s over "
                      f"{triax['timed_steps']} steps", flush=True)
            size_rows.append({"size": size, "variant": variant, "overrides": overrides, "triax": triax})
        peer = None
        if a.peer != "none":
            print(f"[bench] peer {size} ...", flush=True)
            peer, log = run_peer(a, size, mbs, seq, logs)
            if "error" in peer:
                failed = True
                print(f"[bench] peer {size} failed ({peer['error']}); log {peer['log']}, last lines:\n"
                      + "\n".join(log.splitlines()[-15:]), flush=True)
        for row in size_rows:
            row["peer"] = peer
            if peer and "error" not in peer and "error" not in row["triax"]:
                row["ratio"] = row["triax"]["tokens_per_s"] / peer["tokens_per_s"]
            if peer and "error" not in peer:
                notes += consistency_notes(f"{size} {row['variant']}", row["triax"], peer)
        rows += size_rows

    print()
    print(text_table(rows))
    for n in notes:
        print("note: " + n)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        (out / "bench.md").write_text(markdown(rows, notes, a))
        (out / "bench.json").write_text(json.dumps(rows, indent=1) + "\n")
        print(f"[bench] wrote {out / 'bench.md'} and {out / 'bench.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
