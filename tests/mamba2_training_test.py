"""The tiny CPU demo config configs/tiny_mamba2.yaml trains with the triax command: every step is
logged, the loss falls, and the run folder's config.yaml shows the plugin's resolved keys.

usage: mamba2_training_test.py TRIAX SOURCE_DIR WORK_DIR
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

triax, source, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
STEPS = 60
shutil.rmtree(work, ignore_errors=True)
result = subprocess.run([triax, "train", str(source / "configs/tiny_mamba2.yaml"), "--set", f"tokens.train_steps={STEPS}",
                         "--set", f"checkpoints.checkpoints_path={work}"], capture_output=True, text=True)
if result.returncode != 0:
    sys.exit(f"FAIL: triax train exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
losses = [json.loads(line)["loss"] for line in (work / "metrics.jsonl").read_text().splitlines()]
first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
print(f"loss {first:.3f} -> {last:.3f} over {len(losses)} steps")
resolved = (work / "config.yaml").read_text()
failures = []
if len(losses) != STEPS:
    failures.append(f"{len(losses)} logged steps, expected {STEPS}")
if not last < first - 1.0:
    failures.append(f"the loss did not fall by 1: {first:.3f} -> {last:.3f}")
if "plugin: mamba2" not in resolved or "n_groups: 2" not in resolved:
    failures.append("config.yaml does not show the mamba2 plugin's resolved keys")
if failures:
    sys.exit("FAIL: " + "; ".join(failures))
print("ok")
