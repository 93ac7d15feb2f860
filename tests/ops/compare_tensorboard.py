"""Reads a run's TensorBoard events with the tensorboard package and compares every scalar with
metrics.jsonl: the same tags as the JSON keys (nested ones joined by '/'), at the same steps, the
same values (the events hold float32). Also checks the data-mixture counts add up.

  compare_tensorboard.py RUN_FOLDER DATASETS
"""
import json
import math
import struct
import sys
from pathlib import Path

from tensorboard.backend.event_processing import event_accumulator



def crc32c(data):
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit: the reference."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def check_framing(path):
    """Every TFRecord: length, masked CRC of the length, data, masked CRC of the data."""
    data, offset, records = path.read_bytes(), 0, 0
    while offset < len(data):
        header = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[offset + 8:offset + 12])
        assert header_crc == masked(crc32c(header)), f"record {records}: bad length checksum"
        body = data[offset + 12:offset + 12 + length]
        (body_crc,) = struct.unpack("<I", data[offset + 12 + length:offset + 16 + length])
        assert body_crc == masked(crc32c(body)), f"record {records}: bad data checksum"
        offset += 16 + length
        records += 1
    assert offset == len(data), "a truncated record at the end"
    return records


assert crc32c(b"123456789") == 0xE3069283  # the check value of CRC-32C
run, datasets = Path(sys.argv[1]), int(sys.argv[2])
events = sorted(run.glob("events.out.tfevents.*"))
assert len(events) == 1, f"expected one event file in {run}, found {events}"
framed = check_framing(events[0])
accumulator = event_accumulator.EventAccumulator(str(events[0]), size_guidance={event_accumulator.SCALARS: 0})
accumulator.Reload()
scalars = {tag: {e.step: e.value for e in accumulator.Scalars(tag)} for tag in accumulator.Tags()["scalars"]}

records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
assert records, "metrics.jsonl is empty"
expected = {}
for record in records:
    for key, value in record.items():
        if key in ("step", "total_steps") or value is None:
            continue
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for sub, number in items:
            tag = key if sub is None else f"{key}/{sub}"
            expected.setdefault(tag, {})[record["step"]] = float(number)

assert set(scalars) == set(expected), f"tags differ: events {sorted(scalars)}, jsonl {sorted(expected)}"
compared = 0
for tag, by_step in expected.items():
    assert set(scalars[tag]) == set(by_step), f"{tag}: steps {sorted(scalars[tag])} vs {sorted(by_step)}"
    for step, value in by_step.items():
        got = scalars[tag][step]
        assert math.isclose(got, value, rel_tol=2e-7, abs_tol=1e-30), f"{tag} at step {step}: {got} vs {value}"
        compared += 1

mixture = sorted(tag for tag in expected if tag.startswith("data_consumed_samples/"))
assert len(mixture) == datasets, f"expected {datasets} data-mixture series, got {mixture}"
steps = [r for r in records if "loss" in r]  # a validation's line has val_loss instead
validations = [r for r in records if "val_loss" in r]
assert len(steps) + len(validations) == len(records), "a line that is neither a step's nor a validation's"
for record in steps:
    total = sum(record["data_consumed_samples"].values())
    assert total * 64 == record["consumed_tokens"], (record["step"], total, record["consumed_tokens"])
for tag in ("loss", "lr", "grad_norm", "tokens_per_s", "peak_memory_bytes") + (("val_loss", "val_ppl") if validations else ()):
    assert tag in scalars, tag
for record in validations:
    assert math.isclose(record["val_ppl"], math.exp(record["val_loss"]), rel_tol=1e-6), record
assert framed == len(records) + 1, f"{framed} records: expected the file version and one per logged step or validation"
print(f"compare_tensorboard: {compared} scalars of {len(expected)} tags equal in {events[0].name}")
