#!/usr/bin/env bash
# nanotron's profiler section and general.benchmark_csv_path on CPU:
#   skip_first 1, wait 1, warmup 1, active 2, repeat 1 over 8 steps traces steps 4-5 only, as
#   torch.profiler.schedule counts; the Chrome trace holds the pipeline blocks' ranges; two runs
#   append two rows under one header; unwritable folders stop the run before step 1.
#   profiler_test.sh <triax executable> <source dir>
set -euo pipefail
TRIAX="$1"
SRC="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
CONFIG="$SRC/configs/tiny_llama.yaml"
PROFILER="profiler={profiler_export_path: $WORK/traces, skip_first: 1, wait: 1, warmup: 1, active: 2, repeat: 1}"

"$TRIAX" train --config "$CONFIG" --set tokens.train_steps=8 --set "$PROFILER" \
  --set "general.benchmark_csv_path=$WORK/bench/results.csv" --set "checkpoints.checkpoints_path=$WORK/run" \
  >"$WORK/log" 2>&1 || { cat "$WORK/log"; fail "training with the profiler"; }
traces=("$WORK"/traces/*.pt.trace.json)
[[ ${#traces[@]} -eq 1 && "${traces[0]}" == "$WORK/traces/rank0_steps4-5.pt.trace.json" ]] ||
  { ls -la "$WORK/traces"; cat "$WORK/log"; fail "expected exactly the trace of steps 4-5"; }
python3 - "${traces[0]}" <<'PY' || fail "the trace does not hold the expected ranges"
import json, sys
trace = json.load(open(sys.argv[1]))
names = [e.get("name", "") for e in trace["traceEvents"]]
for wanted in ("block embedding", "block layer 0", "block layer 1", "block head",
               "forward micro-batch 0 of chunk 0", "backward micro-batch 1 of chunk 0"):
    count = names.count(wanted)
    # Two recorded steps of two micro-batches: each block twice per step.
    expected = 2 if "micro-batch" in wanted else 4
    assert count == expected, f"{wanted}: {count} ranges, expected {expected}"
assert any(n.startswith("aten::") for n in names), "no operator events"
PY

"$TRIAX" train --config "$CONFIG" --set tokens.train_steps=3 --set parallelism.pp_engine=1f1b \
  --set "general.benchmark_csv_path=$WORK/bench/results.csv" --set "checkpoints.checkpoints_path=$WORK/run2" \
  >"$WORK/log2" 2>&1 || { cat "$WORK/log2"; fail "second benchmark run"; }
python3 - "$WORK/bench/results.csv" "$WORK/run/metrics.jsonl" <<'PY' || fail "the benchmark CSV is not as expected"
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 2, rows
first, second = rows
assert (first["pp_engine"], second["pp_engine"]) == ("afab", "1f1b"), rows
for row in rows:
    assert row["model"] == "llama" and row["world_size"] == "1" and row["dp"] == "1", row
    assert int(row["parameters"]) > 0 and int(row["peak_memory_bytes"]) > 0, row
    assert row["global_batch_tokens"] == str(8 * 2 * 64), row
assert first["train_steps"] == "8" and second["train_steps"] == "3", rows
# The first run's throughput: its steps after the first logged one, as metrics.jsonl has them.
records = [json.loads(l) for l in open(sys.argv[2])]
seconds = sum(r["step_s"] for r in records[1:])
expected = 1024 * (len(records) - 1) / seconds
assert abs(float(first["tokens_per_s"]) / expected - 1) < 1e-3, (first["tokens_per_s"], expected)
PY

# Loading a checkpoint and converting one report their sizes and rates.
"$TRIAX" train --config "$CONFIG" --set tokens.train_steps=9 --set "checkpoints.resume_checkpoint_path=$WORK/run" \
  --set "checkpoints.checkpoints_path=$WORK/run" >"$WORK/log3" 2>&1 || { cat "$WORK/log3"; fail "resuming"; }
grep -Eq "loading the weights of $WORK/run/step_00000008: 0\.4 MB in [0-9.]+ s \([0-9.]+ MB/s\)" "$WORK/log3" ||
  { cat "$WORK/log3"; fail "no size and rate for the checkpoint load (0.4 MB: 108,864 fp32 parameters)"; }
"$TRIAX" convert --to hf "$WORK/run" "$WORK/hf" >"$WORK/log4" 2>&1 || { cat "$WORK/log4"; fail "convert --to hf"; }
grep -Eq "reading $WORK/run/step_00000009: 0\.4 MB in [0-9.]+ s" "$WORK/log4" || { cat "$WORK/log4"; fail "no size for convert"; }

# Unwritable places: exit 2 naming the key and the path, before step 1.
touch "$WORK/a_file"
check_refused() {  # <override> <expected text>
  set +e
  out="$("$TRIAX" train --config "$CONFIG" --set tokens.train_steps=3 --set "$1" \
    --set "checkpoints.checkpoints_path=$WORK/run_bad" 2>&1)"
  status=$?
  set -e
  [[ $status -eq 2 && "$out" == *"$2"* ]] || fail "$1 gave exit $status: $out"
  [[ "$out" != *"step 1/3"* ]] || fail "$1: training started before the check: $out"
}
check_refused "profiler={profiler_export_path: $WORK/a_file/traces}" \
  "profiler.profiler_export_path: cannot create the folder '$WORK/a_file/traces'"
check_refused "general.benchmark_csv_path=$WORK/a_file/results.csv" \
  "general.benchmark_csv_path: cannot append to '$WORK/a_file/results.csv'"
echo "profiler_test: passed"
