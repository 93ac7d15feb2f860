#!/usr/bin/env bash
# tools/device/bench.sh on CPU, before it reaches the GPU machine: a tiny model through the
# benchmark config of the 135m size (overridden by --set), two variants, a stand-in peer
# (fake_peer_bench.py). The table's numbers must be the medians of the runs' metrics.jsonl after
# the warm-up, the peer's numbers those of its JSON line (at the overridden shape), the ratio
# their quotient; a failing variant must fail the script without losing the other rows.
#   bench_script_test.sh <triax executable> <source dir>
set -euo pipefail
TRIAX="$1"
SRC="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

tiny=(--single-process --warmup 1 --work "$WORK/runs"
  --set general.device=cpu --set parallelism.comm_backend=auto --set model.dtype=float32
  --set model.model_config.hidden_size=32 --set model.model_config.intermediate_size=64
  --set model.model_config.num_hidden_layers=2 --set model.model_config.num_attention_heads=4
  --set model.model_config.num_key_value_heads=2 --set model.model_config.vocab_size=256
  --set tokens.sequence_length=32 --set tokens.micro_batch_size=2 --set tokens.train_steps=4)

OUT="$WORK/out" "$SRC/tools/device/bench.sh" --triax "$TRIAX" --peer "$SRC/tests/bench/fake_peer_bench.py" "${tiny[@]}" \
  --variant base --variant 'recompute parallelism.recompute_layer=true' 135m >"$WORK/log" 2>&1 ||
  { cat "$WORK/log"; echo "FAIL: the benchmark script failed"; exit 1; }

python3 - "$WORK" <<'PY'
import json, statistics, sys
from pathlib import Path
work = Path(sys.argv[1])
rows = json.loads((work / "out/bench.json").read_text())
assert [(r["size"], r["variant"]) for r in rows] == [("135m", "base"), ("135m", "recompute")], rows
for r in rows:
    steps = [json.loads(l) for l in (work / "runs" / f"135m-{r['variant']}" / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2, 3, 4], steps
    expected = statistics.median(s["tokens_per_s"] for s in steps[1:])  # after 1 warm-up step
    t, p = r["triax"], r["peer"]
    assert t["tokens_per_s"] == expected, (t, expected)
    assert t["peak_gib"] == max(s["interval_peak_memory_bytes"] for s in steps[1:]) / 2**30, t
    assert t["run_peak_gib"] == max(s["peak_memory_bytes"] for s in steps) / 2**30, t
    # Each line's run peak is the largest interval peak so far.
    assert all(s["peak_memory_bytes"] == max(q["interval_peak_memory_bytes"] for q in steps[:i + 1])
               for i, s in enumerate(steps)), steps
    assert t["params"] > 0 and t["device"] == "cpu", t
    # The peer ran at the overridden shape, with --compile, and its JSON line was read.
    assert (p["mbs"], p["seq"], p["peer"]) == (2, 32, "fake+compile"), p
    assert p["tokens_per_s"] == round(37.0 * 2 * 32 * 2) and p["mfu"] == 0.25 and p["peak_gib"] == 1.5, p
    assert abs(r["ratio"] - t["tokens_per_s"] / p["tokens_per_s"]) < 1e-12, r
md = (work / "out/bench.md").read_text()
assert md.startswith("| size | variant | triax tok/s | triax MFU | triax peak GiB | peer tok/s |"), md
assert md.count("\n| 135m | ") == 2, md
assert f"| {rows[1]['ratio']:.2f}x |" in md, md
assert "parameter counts differ" in md, md  # the tiny model is not the peer's
assert (work / "out/logs/triax-135m-recompute.log").is_file() and (work / "out/logs/peer-135m.log").is_file()
print("bench.json and bench.md agree with the runs:", [round(r["triax"]["tokens_per_s"]) for r in rows])
PY
grep -q "recompute_layer: true" "$WORK/runs/135m-recompute/config.yaml" || { echo "FAIL: the variant's override was not applied"; exit 1; }

# A variant that fails (hidden 30 does not split into 4 heads): exit status 1, its row says so,
# the other variant is still measured.
set +e
OUT="$WORK/out2" "$SRC/tools/device/bench.sh" --triax "$TRIAX" --peer none "${tiny[@]}" \
  --variant base --variant 'broken model.model_config.hidden_size=30' 135m >"$WORK/log2" 2>&1
status=$?
set -e
[[ $status -eq 1 ]] || { cat "$WORK/log2"; echo "FAIL: a failed variant gave exit status $status"; exit 1; }
grep -q "| 135m | broken | failed (exit status 2) |" "$WORK/out2/bench.md" || { cat "$WORK/out2/bench.md"; echo "FAIL: no failed row"; exit 1; }
grep -Eq "^\| 135m \| base \| [0-9,]+ \|" "$WORK/out2/bench.md" || { cat "$WORK/out2/bench.md"; echo "FAIL: base not measured"; exit 1; }
grep -q "hidden_size" "$WORK/log2" || { cat "$WORK/log2"; echo "FAIL: the failure's log lines are not shown"; exit 1; }

# Bad arguments stop before any run.
if out="$("$SRC/tools/device/bench.sh" --triax "$TRIAX" 7b 2>&1)"; then echo "FAIL: size 7b accepted"; exit 1; fi
[[ "$out" == *"no benchmark config for size '7b'"* ]] || { echo "FAIL: $out"; exit 1; }
if out="$("$SRC/tools/device/bench.sh" --triax "$TRIAX" --family mamba 135m 2>&1)"; then echo "FAIL: mamba size 135m accepted"; exit 1; fi
[[ "$out" == *"mamba-135m.yaml does not exist (mamba sizes: 130m, 370m, 1.4b)"* ]] || { echo "FAIL: $out"; exit 1; }
if out="$("$SRC/tools/device/bench.sh" --variant 'a=b' 135m 2>&1)"; then echo "FAIL: a nameless variant accepted"; exit 1; fi
[[ "$out" == *"expected a name, then KEY=VALUE overrides"* ]] || { echo "FAIL: $out"; exit 1; }
echo "bench script: OK"
