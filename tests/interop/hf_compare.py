"""What the Hugging Face interop tests share: running a command, triax's logits (through the
triax_logits tool), transformers' logits, and comparing the two within a tolerance.

    from hf_compare import LogitCheck, run
    check = LogitCheck(triax_logits, work, tokens=[5, 17, 99])
    check.compare("export", check.triax(run_dir), check.transformers(model))
    check.finish()   # prints the failures and exits 1 if there are any
"""
import os
import subprocess
import sys

import numpy as np
import torch


def run(*args, expect_failure=False):
    """stdout + stderr of a command that must succeed (or the CompletedProcess, expect_failure=True)."""
    result = subprocess.run(list(args), capture_output=True, text=True)
    if expect_failure:
        return result
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result.stdout + result.stderr


class LogitCheck:
    def __init__(self, triax_logits, work, tokens, tolerance=1e-4):
        self.triax_logits, self.work, self.tokens, self.tolerance = triax_logits, work, tokens, tolerance
        self.failures = []

    def triax(self, weights):
        """[tokens, vocab] logits of a triax checkpoint or Hugging Face folder, through triax."""
        out = os.path.join(self.work, "logits.bin")
        run(self.triax_logits, "--weights", weights, "--tokens", " ".join(map(str, self.tokens)), "--out", out)
        raw = np.fromfile(out, dtype=np.int64, count=2)
        return np.fromfile(out, dtype=np.float32, offset=16).reshape(int(raw[0]), int(raw[1]))

    def transformers(self, model):
        with torch.no_grad():
            return model(torch.tensor([self.tokens]), use_cache=False).logits[0].float().numpy()

    def compare(self, what, ours, theirs):
        diff = float(np.abs(ours - theirs).max()) if ours.shape == theirs.shape else float("inf")
        print(f"{what}: max |logit difference| {diff:.2e} over {theirs.shape[0]} tokens x {theirs.shape[1]} logits")
        if not diff <= self.tolerance:
            self.failures.append(f"{what}: {diff:.2e} > {self.tolerance} (shapes {ours.shape}, {theirs.shape})")

    def fail(self, what):
        self.failures.append(what)

    def finish(self):
        if self.failures:
            print("FAILED:\n  " + "\n  ".join(self.failures))
            sys.exit(1)
        print("ok")
