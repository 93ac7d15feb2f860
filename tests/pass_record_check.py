#!/usr/bin/env python3
"""The record of pipeline passes of a run (parallelism.pp_pass_record) has the structure the docs
give it: one line per step on each of RANKS ranks; in each, every micro-batch once forward and once
backward through every chunk (B and W once each where the engine splits the backward), every pass
longer than 0, the timeline's entries one after another inside the engine's part of the step, and
the step's parts summing to no more than the step.

    pass_record_check.py RUN_FOLDER RANKS STEPS
"""
import collections
import json
import pathlib
import sys

PARTS = ["engine", "log", "gradients", "losses", "optimizer"]
PASSES = {"forward", "backward", "backward_input", "backward_weight"}
TRANSFERS = {"receive_input", "send_output", "receive_gradient", "send_gradient"}
SLACK_MS = 0.01  # the record rounds to microseconds


def check_passes(line, where):
    split = line["engine"].startswith("zb_")
    count = collections.Counter((t["pass"], t["chunk"], t["micro_batch"]) for t in line["timeline"] if t["pass"] in PASSES)
    backwards = ["backward_input", "backward_weight"] if split else ["backward"]
    expected = {(kind, c, i): 1 for c in range(line["chunks"]) for i in range(line["micro_batches"])
                for kind in ["forward"] + backwards}
    assert dict(count) == expected, f"{where}: passes {sorted(count.items())} != once each of {sorted(expected)}"


def check_times(line, where):
    previous_end = 0.0
    for t in line["timeline"]:
        assert t["pass"] in PASSES | TRANSFERS, f"{where}: unknown entry {t}"
        assert t["ms"] > 0 or (t["pass"] in TRANSFERS and t["ms"] >= 0), f"{where}: {t} takes no time"
        assert t["start_ms"] >= previous_end - SLACK_MS, f"{where}: {t} starts before the entry before it ended"
        previous_end = t["start_ms"] + t["ms"]
    parts = line["parts_ms"]
    assert list(parts) == PARTS, f"{where}: parts {list(parts)}"
    assert all(ms >= 0 for ms in parts.values()), f"{where}: {parts}"
    assert previous_end <= parts["engine"] + SLACK_MS, f"{where}: the timeline ends at {previous_end}, after the engine"
    assert sum(t["ms"] for t in line["timeline"]) <= parts["engine"] + SLACK_MS, f"{where}: passes beyond the engine"
    assert sum(parts.values()) <= line["step_ms"] + SLACK_MS, f"{where}: parts {parts} beyond step {line['step_ms']}"


def main(folder, ranks, steps):
    pp_ranks = set()
    for rank in range(ranks):
        path = pathlib.Path(folder) / "pass_record" / f"rank{rank}.jsonl"
        lines = [json.loads(text) for text in path.read_text().splitlines()]
        assert [line["step"] for line in lines] == list(range(1, steps + 1)), f"{path}: steps {[l['step'] for l in lines]}"
        for line in lines:
            where = f"{path}, step {line['step']}"
            assert line["rank"] == rank and line["pp_size"] == ranks, f"{where}: rank {line['rank']} of pp {line['pp_size']}"
            pp_ranks.add(line["pp_rank"])
            check_passes(line, where)
            check_times(line, where)
    assert pp_ranks == set(range(ranks)), f"pipeline ranks {pp_ranks}"
    print(f"{ranks} ranks x {steps} steps of {lines[0]['engine']}: every pass once, times in their steps")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
