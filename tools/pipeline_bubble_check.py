#!/usr/bin/env python3
"""Checks the schedule simulator against real runs on CPU ranks (docs/pipeline-runs.md).

Measures one stage's F, B and W times of CONFIG's model (`triax inspect schedule --measure`), lets
the simulator predict each engine's step at --pp ranks and --micro-batches, then trains each
engine for --steps steps under mpirun (one rank per pipeline stage, --threads threads each, the
measure too) and prints the median step time of metrics.jsonl (after the first two steps), the
prediction and their ratio. Each run also records the time of every pass on every rank
(parallelism.pp_pass_record), and `triax inspect schedule --record` predicts the run's step from
those, each rank's own F, B and W, plus the least time a rank spent outside the engine (the
optimizer, the gradient norm): that comparison checks the schedule (order, dependencies, bubble)
whatever the passes cost inside a multi-rank run. The ranks need --threads cores each: on a shared
or smaller machine the measured steps time-share cores and the comparison says nothing about the
schedules.

    tools/pipeline_bubble_check.py CONFIG [--pp 4] [--micro-batches 16] [--steps 8] [--threads 1]
                                   [--triax build/bin/triax] [--set KEY=VALUE]... [--engines ENGINE...]
                                   [--keep FOLDER]
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
ENGINES = ["afab", "1f1b", "interleaved_1f1b", "zb_h1", "zb_v"]


def thread_environment(args):
    """The environment of the measure and of every rank: --threads threads, mpirun as root allowed."""
    return dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMPI_ALLOW_RUN_AS_ROOT="1",
                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def predicted_steps(triax, args, sets):
    """The simulator's step time (ms) per engine from the stage's measured times, and the
    parallelism.pp_pass_times setting that orders the zero-bubble engines for them."""
    command = [triax, "inspect", "schedule", "--measure", args.config, "--pp", str(args.pp),
               "--micro-batches", str(args.micro_batches), "--transfer", str(args.transfer),
               "--repeat", str(args.repeat)]
    for s in sets:
        command += ["--set", s]
    output = subprocess.run(command, check=True, capture_output=True, text=True, env=thread_environment(args)).stdout
    print(output)
    times = re.search(r"pp_pass_times=(\[[0-9.,]+\])", output).group(1)
    steps = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] in ENGINES and re.match(r"^[0-9.]+$", cells[3]):
            steps[cells[0]] = float(cells[3])
    return steps, f"parallelism.pp_pass_times={times}"


def measured_step(triax, args, sets, engine, folder):
    """The median step time (ms) of a run of `engine` after its first two steps, and the prediction
    from its record: {"pipeline": (predicted, measured), "step": (predicted, measured)}."""
    run = folder / engine
    command = ["mpirun", "-n", str(args.pp), "--oversubscribe", "--bind-to", "none", triax, "train", "--config",
               args.config, "--set", f"parallelism.pp={args.pp}", "--set", f"parallelism.pp_engine={engine}",
               "--set", f"tokens.batch_accumulation_per_replica={args.micro_batches}",
               "--set", f"tokens.train_steps={args.steps}", "--set", f"checkpoints.checkpoints_path={run}",
               "--set", "checkpoints.checkpoint_interval=1000000", "--set", "logging.iteration_step_info_interval=1",
               "--set", "parallelism.pp_pass_record=true"]
    if engine == "interleaved_1f1b":
        command += ["--set", "parallelism.pp_chunks_per_rank=2"]
    for s in sets:
        command += ["--set", s]
    subprocess.run(command, check=True, capture_output=True, env=thread_environment(args))
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [line["step_s"] * 1000 for line in lines if "loss" in line and line["step"] > 2]
    inspect = subprocess.run([triax, "inspect", "schedule", "--record", str(run), "--skip-steps", "2",
                              "--transfer", str(args.transfer)], check=True, capture_output=True, text=True).stdout
    print(inspect, flush=True)
    from_record = {}
    for part in ("pipeline", "step"):
        found = re.search(rf"^{part} \(ms\): predicted ([0-9.]+), measured ([0-9.]+)", inspect, re.MULTILINE)
        from_record[part] = (float(found.group(1)), float(found.group(2)))
    return statistics.median(steps), from_record


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--pp", type=int, default=4)
    parser.add_argument("--micro-batches", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8, help="training steps per engine (the first two untimed)")
    parser.add_argument("--threads", type=int, default=1, help="threads per rank, and of the measure")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each pass in the measure")
    parser.add_argument("--transfer", type=float, default=0.0, help="ms per transfer between ranks, for the simulator")
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE, for the measure and every run")
    parser.add_argument("--triax", default=str(ROOT / "build" / "bin" / "triax"))
    parser.add_argument("--engines", nargs="+", default=ENGINES, choices=ENGINES, help="the engines to run (all)")
    parser.add_argument("--keep", help="a folder to keep the runs in (their records included); a temporary one if not given")
    args = parser.parse_args()
    started = time.monotonic()
    predicted, pass_times = predicted_steps(args.triax, args, args.set)
    print("ms; one process: the simulator fed with the stage measured alone, against metrics.jsonl's step; "
          "record: fed with each rank's own pass times in the run (pipeline: the engine's part of the step; "
          "step: with the least time any rank spent outside it), against the record's slowest rank\n")
    header = ("| engine | one process: predicted | measured | ratio | record: pipeline predicted | measured | ratio | "
              "step predicted | measured | ratio |\n|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.keep or temporary
        for engine in args.engines:
            measured, record = measured_step(args.triax, args, args.set + [pass_times], engine, pathlib.Path(folder))
            (pipeline, pipeline_run), (step, step_run) = record["pipeline"], record["step"]
            rows.append(f"| {engine} | {predicted[engine]:.1f} | {measured:.1f} | {measured / predicted[engine]:.3f} | "
                        f"{pipeline:.1f} | {pipeline_run:.1f} | {pipeline_run / pipeline:.3f} | "
                        f"{step:.1f} | {step_run:.1f} | {step_run / step:.3f} |")
            print(rows[-1], flush=True)  # a call that runs out of time keeps the rows done
    print("\n" + header + "\n" + "\n".join(rows))
    print(f"{time.monotonic() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
