"""A tiny CPU demo config (configs/tiny_mamba2.yaml unless given) trains with the triax command:
every step is logged, the loss falls, and the run folder's config.yaml shows the plugin's resolved
keys (the plugin's name and one of its keys, mamba2's n_groups: 2 unless given).

usage: mamba2_training_test.py TRIAX SOURCE_DIR WORK_DIR [CONFIG PLUGIN RESOLVED_LINE]
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

triax, source, work = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
config, plugin, resolved_line = sys.argv[4:7] if len(sys.argv) > 4 else ("tiny_mamba2.yaml", "mamba2", "n_groups: 2")
STEPS = 60
shutil.rmtree(work, ignore_errors=True)
result = subprocess.run([triax, "train", str(source / "configs" / config), "--set", f"tokens.train_steps={STEPS}",
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
if f"plugin: {plugin}" not in resolved or resolved_line not in resolved:
    failures.append(f"config.yaml does not show the {plugin} plugin's resolved keys")
if failures:
    sys.exit("FAIL: " + "; ".join(failures))
print("ok")
