#!/usr/bin/env python3
"""Multi-GPU checks on one host: bf16 loss parity against one GPU, and scaling.

  tools/device/multi_gpu.py [--build build-gpu] [--out DIR] [--parity-steps 50] [--bench-steps 12]
                            [--sizes 360m,1.7b] [--skip-parity] [--skip-scaling]

Parity: the parity matrix's tiny Llama (tests/parity/tiny_llama_parity.yaml) in bf16 on one GPU,
then at each topology that fits the GPUs (dp, tp in both modes, pp with both engines, ZeRO-1),
through `triax launch` and the nccl backend; every step's loss must stay within --tolerance
(relative) of the one-GPU run's.

Scaling: configs/bench/smollm-<size>.yaml on one GPU and at dp = N (ZeRO-1 off and on), tp = N,
pp = N (1F1B, 4*N micro-batches, against one GPU with the same micro-batches) and, with 8 GPUs, a
3D mix; tokens/s/GPU (median of the steps after the warm-up), efficiency against one GPU, and the
pipeline bubble measured as T_pp / (T_1 / N) - 1 against (N - 1) / m. Standard library only.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def gpu_count():
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    return len([line for line in out.splitlines() if line.startswith("GPU ")])


def run(cmd, log):
    start = time.time()
    with open(log, "w") as f:
        code = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT).returncode
    return code, time.time() - start


def tail(log, lines=15):
    with open(log) as f:
        return "".join(f.readlines()[-lines:])


def single_gpu_env():
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
    return env


def parity(args, n, out):
    runner = os.path.join(args.build, "bin", "parity_runner")
    triax = os.path.join(args.build, "bin", "triax")
    config = os.path.join(ROOT, "tests", "parity", "tiny_llama_parity.yaml")
    common = ["--set", "general.device=cuda", "--set", "model.dtype=bfloat16", "--set",
              f"tokens.train_steps={args.parity_steps}", "--set", "parallelism.comm_backend=nccl"]
    ref = os.path.join(out, "parity_reference")
    os.environ.update(single_gpu_env())
    code, secs = run([runner, "run", "--config", config, "--out", ref, "--set",
                      f"checkpoints.checkpoints_path={ref}/run"] + common, ref + ".log")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        os.environ.pop(key, None)
    if code != 0:
        print(f"parity reference failed:\n{tail(ref + '.log')}")
        return False
    cases = [("dp", {"parallelism.dp": n, "tokens.batch_accumulation_per_replica": 8 // n}),
             ("dp_zero1", {"parallelism.dp": n, "optimizer.zero_stage": 1,
                           "tokens.batch_accumulation_per_replica": 8 // n}),
             ("tp", {"parallelism.tp": n}),
             ("tp_sp", {"parallelism.tp": n, "parallelism.tp_mode": "REDUCE_SCATTER"}),
             ("pp_afab", {"parallelism.pp": n}),
             ("pp_1f1b", {"parallelism.pp": n, "parallelism.pp_engine": "1f1b"})]
    if n >= 4:
        cases.append(("dp2_tp2_zero1", {"parallelism.dp": 2, "parallelism.tp": 2, "optimizer.zero_stage": 1,
                                        "tokens.batch_accumulation_per_replica": 4}))
    if n >= 8:
        cases.append(("dp2_tp2_pp2_1f1b_sp", {"parallelism.dp": 2, "parallelism.tp": 2, "parallelism.pp": 2,
                                              "parallelism.pp_engine": "1f1b", "optimizer.zero_stage": 1,
                                              "parallelism.tp_mode": "REDUCE_SCATTER",
                                              "tokens.batch_accumulation_per_replica": 4}))
    ok = True
    print(f"| topology ({n} GPUs, bf16, {args.parity_steps} steps) | worst loss difference vs 1 GPU | result |")
    print("|---|---|---|")
    for name, settings in cases:
        world = 1
        for key in ("parallelism.dp", "parallelism.tp", "parallelism.pp"):
            world *= settings.get(key, 1)
        case_out = os.path.join(out, "parity_" + name)
        sets = []
        for key, value in settings.items():
            sets += ["--set", f"{key}={value}"]
        code, secs = run([triax, "launch", "-n", str(world), "--", runner, "run", "--config", config, "--out",
                          case_out, "--set", f"checkpoints.checkpoints_path={case_out}/run"] + common + sets,
                         case_out + ".log")
        if code != 0:
            print(f"| {name} | run failed | FAIL |")
            print(tail(case_out + ".log"))
            ok = False
            continue
        result = subprocess.run([runner, "compare", "--reference", ref, "--candidate", case_out, "--tolerance",
                                 str(args.tolerance), "--losses-only", "1"], capture_output=True, text=True)
        worst = result.stdout.split("worst relative difference ")[-1].split(")")[0] if "worst" in result.stdout else "?"
        print(f"| {name} | {worst} | {'ok' if result.returncode == 0 else 'FAIL'} |")
        ok = ok and result.returncode == 0
    return ok


def metrics_of(run_dir, warmup):
    rows = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            rows.append(json.loads(line))
    timed = [r for r in rows if r["step"] > warmup] or rows
    return {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in timed),
            "peak_gib": max(r.get("peak_memory_bytes", 0) or 0 for r in rows) / 2**30,
            "mfu": statistics.median((r["mfu"] or 0) for r in timed)}


def scaling(args, n, out):
    triax = os.path.join(args.build, "bin", "triax")
    print()
    print(f"| model | layout ({n} GPUs) | tokens/s | tokens/s/GPU | efficiency vs 1 GPU | MFU | peak GiB |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        config = os.path.join(ROOT, "configs", "bench", f"smollm-{size}.yaml")
        layouts = [("1 GPU", 1, {}),
                   ("1 GPU, 4N micro-batches", 1, {"tokens.batch_accumulation_per_replica": 4 * n}),
                   (f"dp={n}", n, {"parallelism.dp": n}),
                   (f"dp={n} zero1", n, {"parallelism.dp": n, "optimizer.zero_stage": 1}),
                   (f"tp={n}", n, {"parallelism.tp": n}),
                   (f"tp={n} sp", n, {"parallelism.tp": n, "parallelism.tp_mode": "REDUCE_SCATTER"}),
                   (f"pp={n} 1f1b m={4 * n}", n, {"parallelism.pp": n, "parallelism.pp_engine": "1f1b",
                                                   "tokens.batch_accumulation_per_replica": 4 * n})]
        if n >= 8:
            layouts.append(("dp2 tp2 pp2 zero1 1f1b", 8, {"parallelism.dp": 2, "parallelism.tp": 2,
                                                           "parallelism.pp": 2, "parallelism.pp_engine": "1f1b",
                                                           "optimizer.zero_stage": 1,
                                                           "tokens.batch_accumulation_per_replica": 8}))
        results = {}
        for name, world, settings in layouts:
            run_dir = os.path.join(out, f"scaling_{size}_{name.replace(' ', '_').replace('=', '')}")
            sets = ["--set", f"checkpoints.checkpoints_path={run_dir}", "--set", f"tokens.train_steps={args.bench_steps}"]
            for key, value in settings.items():
                sets += ["--set", f"{key}={value}"]
            if world == 1:
                os.environ.update(single_gpu_env())
                cmd = [triax, "train", config] + sets
            else:
                cmd = [triax, "launch", "-n", str(world), "--", triax, "train", config] + sets
            code, secs = run(cmd, run_dir + ".log")
            for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
                os.environ.pop(key, None)
            if code != 0:
                last = tail(run_dir + ".log", 4).strip().splitlines()
                print(f"| {size} | {name} | failed: {last[-1] if last else '?'} | | | | |")
                continue
            m = metrics_of(run_dir, args.warmup)
            results[name] = (world, m)
            base = results.get("1 GPU, 4N micro-batches" if name.startswith("pp=") else "1 GPU")
            per_gpu = m["tokens_per_s"] / world
            efficiency = f"{100 * per_gpu / base[1]['tokens_per_s']:.1f}%" if base else "-"
            print(f"| {size} | {name} | {m['tokens_per_s']:,.0f} | {per_gpu:,.0f} | {efficiency} | "
                  f"{100 * m['mfu']:.1f}% | {m['peak_gib']:.1f} |")
        pp_name = f"pp={n} 1f1b m={4 * n}"
        if pp_name in results and "1 GPU, 4N micro-batches" in results:
            t1 = 1 / results["1 GPU, 4N micro-batches"][1]["tokens_per_s"]
            tpp = 1 / results[pp_name][1]["tokens_per_s"]
            bubble = tpp / (t1 / n) - 1
            print(f"| {size} | pipeline bubble at pp={n}, m={4 * n} | measured {100 * bubble:.1f}% | "
                  f"(PP-1)/m = {100 * (n - 1) / (4 * n):.1f}% | | | |")
        sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(ROOT, "build-gpu"))
    parser.add_argument("--out", default=os.environ.get("OUT") or "/tmp/triax-multi-gpu")
    parser.add_argument("--parity-steps", type=int, default=50)
    parser.add_argument("--bench-steps", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--tolerance", type=float, default=2e-2)
    parser.add_argument("--sizes", default="360m,1.7b")
    parser.add_argument("--skip-parity", action="store_true")
    parser.add_argument("--skip-scaling", action="store_true")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    n = gpu_count()
    if n < 2:
        print(f"multi_gpu.py: {n} GPU(s) visible; this needs at least 2")
        return 2
    ok = True
    if not args.skip_parity:
        ok = parity(args, n, args.out) and ok
    if not args.skip_scaling:
        scaling(args, n, args.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
