"""What the Hugging Face comparison scripts (hf_*_test.py) share: running triax's commands,
triax's and transformers' logits on the same tokens, their comparison, expected refusals, and
the report at the end (exit status 1 when anything failed).

    check = HfCheck(triax_logits_path, work_dir, tokens)
    run_dir, hf_dir, exported = check.train_and_export(triax, config, ["model.dtype=float32"], "tied")
    check.compare("export", check.triax_logits(run_dir), check.hf_logits(model))
    made_dir = check.import_and_compare(triax, transformers_model, "name")
    check.finish()
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch


class HfCheck:
    def __init__(self, triax_logits, work, tokens, tolerance=1e-4):
        self.triax_logits_tool = triax_logits
        self.work = work
        self.tokens = list(tokens)
        self.tolerance = tolerance
        self.failures = []
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)

    def run(self, *args, expect_failure=False):
        """Runs a command; stops the script when it fails (or, with expect_failure, succeeds).
        Returns its stdout and stderr."""
        result = subprocess.run(list(args), capture_output=True, text=True)
        if (result.returncode != 0) != expect_failure:
            raise SystemExit(f"{' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        return result.stdout + result.stderr

    def train_and_export(self, triax, config, settings, name):
        """Trains `config` 10 steps with the --set `settings` into run_NAME, exports the checkpoint
        to exported_NAME as float32. Returns the run folder, the exported folder and its config.json."""
        run_dir = os.path.join(self.work, f"run_{name}")
        self.run(triax, "train", config, *[arg for s in settings for arg in ("--set", s)], "--set", "tokens.train_steps=10",
                 "--set", "checkpoints.checkpoint_interval=10", "--set", f"checkpoints.checkpoints_path={run_dir}")
        hf_dir = os.path.join(self.work, f"exported_{name}")
        self.run(triax, "convert", "--to", "hf", run_dir, hf_dir, "--dtype", "float32")
        with open(os.path.join(hf_dir, "config.json")) as f:
            return run_dir, hf_dir, json.load(f)

    def import_and_compare(self, triax, model, name):
        """Saves transformers' `model` into made_NAME, imports it with `triax convert --from hf` and
        compares triax's logits with the model's, from the converted checkpoint and straight from
        the folder. Returns the folder."""
        made_dir = os.path.join(self.work, f"made_{name}")
        model.save_pretrained(made_dir, safe_serialization=True)
        imported = os.path.join(self.work, f"imported_{name}")
        self.run(triax, "convert", "--from", "hf", made_dir, imported)
        expected = self.hf_logits(model)
        self.compare(f"import {name} through triax convert", self.triax_logits(imported), expected)
        self.compare(f"import {name} straight from the folder", self.triax_logits(made_dir), expected)
        return made_dir

    def triax_logits(self, weights):
        """triax's logits [tokens, vocabulary] for a checkpoint or Hugging Face folder (tests/interop/triax_logits.cpp)."""
        out = os.path.join(self.work, "logits.bin")
        self.run(self.triax_logits_tool, "--weights", weights, "--tokens", " ".join(map(str, self.tokens)), "--out", out)
        raw = np.fromfile(out, dtype=np.int64, count=2)
        return np.fromfile(out, dtype=np.float32, offset=16).reshape(int(raw[0]), int(raw[1]))

    def hf_logits(self, model):
        with torch.no_grad():
            return model(torch.tensor([self.tokens]), use_cache=False).logits[0].float().numpy()

    def compare(self, what, ours, theirs):
        diff = float(np.abs(ours - theirs).max()) if ours.shape == theirs.shape else float("inf")
        print(f"{what}: max |logit difference| {diff:.2e} over {theirs.shape[0]} tokens x {theirs.shape[1]} logits")
        if not diff <= self.tolerance:
            self.failures.append(f"{what}: {diff:.2e} > {self.tolerance} (shapes {ours.shape}, {theirs.shape})")

    def refused(self, what, command, *needles):
        """The command must fail with a message holding every needle."""
        result = subprocess.run(list(command), capture_output=True, text=True)
        text = result.stdout + result.stderr
        if result.returncode == 0 or not all(n in text for n in needles):
            self.failures.append(f"{what}: exit {result.returncode}, expected a refusal naming {needles}; got:\n{text}")
        else:
            print(f"{what}: refused (exit {result.returncode}): {text.strip().splitlines()[-1]}")

    def refused_config(self, triax, folder, what, change, *needles):
        """A copy of the Hugging Face `folder` whose config.json has the keys of `change` must be
        refused by `triax convert --from hf` with a message naming config.json and every needle."""
        bad = os.path.join(self.work, what.replace(" ", "_"))
        shutil.copytree(folder, bad)
        with open(os.path.join(bad, "config.json")) as f:
            cfg = json.load(f)
        cfg.update(change)
        with open(os.path.join(bad, "config.json"), "w") as f:
            json.dump(cfg, f)
        self.refused(what, [triax, "convert", "--from", "hf", bad, os.path.join(self.work, "refused")], "config.json",
                     *needles)

    def fail(self, what):
        self.failures.append(what)

    def finish(self):
        if self.failures:
            print("FAILED:\n  " + "\n  ".join(self.failures))
            sys.exit(1)
        print("ok")
