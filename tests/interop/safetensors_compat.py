"""safetensors compatibility with Hugging Face's own library: a file triax writes loads with
safetensors.torch.load_file to the same values (bit for bit), and triax reads a file that
safetensors.torch.save_file wrote to the same bytes.

  safetensors_compat.py <interop_tool executable>
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

TOOL = sys.argv[1]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def raw_bytes(tensor):
    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def fnv1a(tensor):
    value = 1469598103934665603
    for byte in raw_bytes(tensor):
        value = ((value ^ byte) * 1099511628211) % (1 << 64)
    return f"{value:016x}"


DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}


def expected_generated():
    """What `interop_tool safetensors-generate` writes, computed here with torch."""
    out = {}
    for name, dtype in DTYPES.items():
        if dtype == torch.bool:
            values = torch.arange(15, dtype=torch.int64).remainder(3).eq(0)
        elif dtype.is_floating_point:
            values = (torch.arange(15, dtype=torch.float64) * 0.37 - 2.5).to(dtype)
        else:
            values = (torch.arange(15, dtype=torch.int64) * 37 - 100).to(dtype)
        out["gen." + name] = values.reshape(3, 5)
    out["gen.scalar"] = torch.tensor(7.25, dtype=torch.float32)
    out["gen.empty"] = torch.zeros(0, 3, dtype=torch.bfloat16)
    out["gen.transposed"] = torch.arange(6, dtype=torch.float32).reshape(2, 3).t().contiguous()
    special = [float("nan"), float("inf"), float("-inf"), -0.0, 1e-40, 3.14159]
    out["gen.bf16_special"] = torch.tensor(special, dtype=torch.float64).to(torch.bfloat16)
    return out


with tempfile.TemporaryDirectory() as work:
    work = Path(work)

    # C++ writes, Python reads.
    ours = work / "ours.safetensors"
    subprocess.run([TOOL, "safetensors-generate", ours], check=True)
    loaded = load_file(ours)
    expected = expected_generated()
    check(sorted(loaded) == sorted(expected), f"names: {sorted(loaded)} != {sorted(expected)}")
    for name, tensor in expected.items():
        got = loaded.get(name)
        if got is None:
            continue
        check(got.dtype == tensor.dtype, f"{name}: dtype {got.dtype} != {tensor.dtype}")
        check(tuple(got.shape) == tuple(tensor.shape), f"{name}: shape {tuple(got.shape)} != {tuple(tensor.shape)}")
        check(raw_bytes(got) == raw_bytes(tensor), f"{name}: bytes differ")
    with safe_open(ours, framework="pt") as f:
        check(f.metadata() == {"format": "pt", "producer": "triax interop_tool"}, f"metadata: {f.metadata()}")

    # Python writes, C++ reads: random values of every dtype, NaN/inf/subnormal bit patterns included.
    generator = torch.Generator().manual_seed(11)
    theirs = {}
    for name, dtype in DTYPES.items():
        for shape in [(4, 6), (2, 3, 5), (), (0, 7)]:
            count = 1
            for dim in shape:
                count *= dim
            if dtype == torch.bool:
                tensor = torch.randint(0, 2, shape, generator=generator).bool()
            else:
                size = torch.tensor([], dtype=dtype).element_size()
                raw = torch.randint(0, 256, (count * size,), dtype=torch.uint8, generator=generator)
                tensor = raw.view(dtype).reshape(shape)
            theirs[f"{name}.{'x'.join(map(str, shape)) or 'scalar'}"] = tensor
    theirs_path = work / "theirs.safetensors"
    save_file(theirs, theirs_path, metadata={"format": "pt", "origin": "python"})
    described = json.loads(subprocess.run([TOOL, "safetensors-describe", theirs_path], check=True,
                                          capture_output=True, text=True).stdout)
    check(described["metadata"] == {"format": "pt", "origin": "python"}, f"metadata read: {described['metadata']}")
    check(sorted(described["tensors"]) == sorted(theirs), "names read differ")
    inverse = {dtype: name for name, dtype in DTYPES.items()}
    for name, tensor in theirs.items():
        seen = described["tensors"].get(name)
        if seen is None:
            continue
        check(seen["dtype"] == inverse[tensor.dtype], f"{name}: dtype read {seen['dtype']}")
        check(seen["shape"] == list(tensor.shape), f"{name}: shape read {seen['shape']}")
        check(seen["fnv1a"] == fnv1a(tensor), f"{name}: bytes read differ")

if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
print("safetensors files agree with Hugging Face's safetensors library in both directions")
