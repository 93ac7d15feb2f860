#!/usr/bin/env python3
"""tools/device/bench.py --family moe without a GPU. Its peer (moe_peer_bench.py) and the triax run
of configs/bench/moe-1b.yaml both need one, so bench.py's runner (run_logged) is replaced by a
stand-in that records each command and answers with made-up outputs: triax's model line and
metrics.jsonl, the peer's JSON line. Checked: the size, config and peer the family picks; the
triax and peer command lines (the peer's --mbs and --seq those of the config, or of --set); the
table, bench.md and bench.json made of those outputs; --peer none, as docs/fp8.md runs it; a size
the family lacks.

    python3 tests/bench/bench_moe_family_test.py PROJECT_SOURCE_DIR
"""
import contextlib
import importlib.util
import io
import json
import statistics
import sys
import tempfile
from pathlib import Path

# The stand-in triax's tokens/s at step s is SPEED[variant] * s; 4 steps a run.
SPEED = {"bf16": 100000.0, "fp8": 120000.0}
STEPS = 4
TRIAX_PARAMS, TRIAX_FLOPS = 912000000, 3000000000
TRIAX_LOG = (f"model moe: {TRIAX_PARAMS} parameters, bfloat16 on NVIDIA H100 80GB HBM3, {TRIAX_FLOPS} "
             "training FLOPs per token\n")
PEER_LINE = {"model": "1b", "compile": True, "tokens_per_s": 28400.0, "tflops": 28400.0 * TRIAX_FLOPS / 1e12,
             "mfu_989": 0.064, "peak_mem_gib": 37.1, "params": 911000000, "active_params": 300000000}


def load_bench(source_dir):
    spec = importlib.util.spec_from_file_location("bench", Path(source_dir) / "tools/device/bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def metrics_of(variant):
    return [{"step": s, "tokens_per_s": SPEED[variant] * s, "mfu": 0.1 * s, "peak_memory_bytes": s * 2**30,
             "step_s": 1.0 / s, "loss": 10.0 - s} for s in range(1, STEPS + 1)]


class StandInRuns:
    """bench.run_logged's stand-in: records (command, environment), writes the log, and answers as
    triax (metrics.jsonl in the run folder its --set names) or as the peer (one JSON line)."""

    def __init__(self):
        self.calls = []

    def __call__(self, command, log_path, env=None, timeout=None):
        command = [str(c) for c in command]
        self.calls.append((command, env))
        if command[1:2] == ["train"]:
            run_dir = Path(next(c.split("=", 1)[1] for c in command if c.startswith("checkpoints.checkpoints_path=")))
            run_dir.mkdir(parents=True, exist_ok=True)
            variant = run_dir.name.split("-", 1)[1]
            (run_dir / "metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in metrics_of(variant)))
            log = TRIAX_LOG
        else:
            log = "compiling the model\n" + json.dumps(PEER_LINE) + "\n"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(log)
        return 0, log


def run_main(bench, argv):
    """bench.main(argv) with the stand-in runner: (exit status, stdout, the runner)."""
    runs = StandInRuns()
    bench.run_logged = runs
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = bench.main(argv)
    return status, stdout.getvalue(), runs


def check_defaults(bench, root):
    a = bench.parse_args(["--family", "moe"])
    assert a.sizes == ["1b"], a.sizes
    assert a.peer == str(root / "tools/device/moe_peer_bench.py") and a.peer_args == "--compile", (a.peer, a.peer_args)
    assert a.variants == [("triax", [])], a.variants
    assert bench.config_path("moe", "1b") == root / "configs/bench/moe-1b.yaml"


def check_against_the_peer(bench, root, tmp):
    work, out = tmp / "runs", tmp / "out"
    triax = "/opt/triax/bin/triax"
    status, stdout, runs = run_main(bench, ["--family", "moe", "--triax", triax, "--work", str(work), "--out", str(out),
                                            "--warmup", "1", "--set", f"tokens.train_steps={STEPS}",
                                            "--variant", "bf16", "--variant", "fp8 fp8.recipe=rowwise"])
    assert status == 0, stdout
    config = str(root / "configs/bench/moe-1b.yaml")
    commands = [command for command, _ in runs.calls]
    assert commands == [
        [triax, "train", "--config", config, "--set", f"checkpoints.checkpoints_path={work}/1b-bf16",
         "--set", f"tokens.train_steps={STEPS}"],
        [triax, "train", "--config", config, "--set", f"checkpoints.checkpoints_path={work}/1b-fp8",
         "--set", f"tokens.train_steps={STEPS}", "--set", "fp8.recipe=rowwise"],
        # moe-1b.yaml's micro_batch_size and sequence_length.
        [sys.executable, str(root / "tools/device/moe_peer_bench.py"), "--model", "1b", "--mbs", "8", "--seq", "2048",
         "--compile"],
    ], commands
    for _, env in runs.calls[:2]:  # triax as one rank of a launcher
        assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"]) == ("0", "1", "127.0.0.1"), env

    rows = json.loads((out / "bench.json").read_text())
    assert [(r["size"], r["variant"]) for r in rows] == [("1b", "bf16"), ("1b", "fp8")], rows
    for r in rows:
        t, p = r["triax"], r["peer"]
        timed = metrics_of(r["variant"])[1:]  # after 1 warm-up step
        assert t["tokens_per_s"] == statistics.median(s["tokens_per_s"] for s in timed), t
        assert t["mfu"] == statistics.median(s["mfu"] for s in timed) and t["peak_gib"] == STEPS, t
        assert (t["params"], t["flops_per_token"], t["device"]) == (TRIAX_PARAMS, TRIAX_FLOPS,
                                                                   "NVIDIA H100 80GB HBM3"), t
        assert (p["tokens_per_s"], p["mfu"], p["peak_gib"]) == (28400.0, 0.064, 37.1), p
        assert r["ratio"] == t["tokens_per_s"] / p["tokens_per_s"], r
    assert rows[0]["triax"]["tokens_per_s"] == 300000.0 and rows[1]["triax"]["tokens_per_s"] == 360000.0, rows

    table = [line.split() for line in stdout[stdout.index("size  variant"):].splitlines()]
    assert ["1b", "bf16", "300,000", "30.0%", "4.00", "28,400", "6.4%", "37.10", "10.56x"] in table, stdout
    assert ["1b", "fp8", "360,000", "30.0%", "4.00", "28,400", "6.4%", "37.10", "12.68x"] in table, stdout
    assert "note: 1b bf16: parameter counts differ (triax 912,000,000, peer 911,000,000)" in stdout, stdout
    assert "FLOPs per token differ" not in stdout, stdout  # the peer's TFLOP/s give the same count

    md = (out / "bench.md").read_text()
    assert md.startswith("| size | variant | triax tok/s | triax MFU | triax peak GiB | peer tok/s |"), md
    assert "| 1b | bf16 | 300,000 | 30.0% | 4.00 | 28,400 | 6.4% | 37.10 | 10.56x |" in md, md
    assert "| 1b | fp8 | 360,000 | 30.0% | 4.00 | 28,400 | 6.4% | 37.10 | 12.68x |" in md, md
    assert "Peer: `moe_peer_bench.py --compile`" in md, md
    assert "`bf16`: as configured; `fp8`: `fp8.recipe=rowwise`." in md, md
    assert (out / "logs/triax-1b-fp8.log").read_text() == TRIAX_LOG


def check_triax_alone(bench, root, tmp):
    """docs/fp8.md's comparison: --peer none, the shape overridden by --set; no peer runs."""
    status, stdout, runs = run_main(bench, ["--family", "moe", "--peer", "none", "--work", str(tmp / "runs"),
                                            "--out", str(tmp / "out"), "--warmup", "2",
                                            "--set", "tokens.sequence_length=512", "1b", "--variant", "bf16"])
    assert status == 0, stdout
    commands = [command for command, _ in runs.calls]
    assert commands == [[str(root / "build-gpu/bin/triax"), "train", "--config", str(root / "configs/bench/moe-1b.yaml"),
                         "--set", f"checkpoints.checkpoints_path={tmp}/runs/1b-bf16",
                         "--set", "tokens.sequence_length=512"]], commands
    md = (tmp / "out/bench.md").read_text()
    assert "| 1b | bf16 | 350,000 | 35.0% | 4.00 | — | — | — | — |" in md, md  # the median of steps 3 and 4
    assert "Peer: none." in md and "--compile" not in md, md  # no peer ran: none of its arguments named
    assert "note:" not in md, md


def check_unknown_size(bench):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            bench.parse_args(["--family", "moe", "7b"])
        except SystemExit as e:
            assert e.code == 2, e.code
        else:
            raise AssertionError("size 7b accepted")
    assert "moe-7b.yaml does not exist (moe sizes: 1b)" in stderr.getvalue(), stderr.getvalue()


def main(source_dir):
    root = Path(source_dir).resolve()
    bench = load_bench(root)
    check_defaults(bench, root)
    with tempfile.TemporaryDirectory() as tmp:
        check_against_the_peer(bench, root, Path(tmp) / "peer")
        check_triax_alone(bench, root, Path(tmp) / "alone")
    check_unknown_size(bench)
    print("bench.py --family moe: OK")


if __name__ == "__main__":
    main(sys.argv[1])
