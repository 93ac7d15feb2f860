"""What bench_mamba_family_test.sh checks of its bench.sh run on CPU, for either family: one row,
the triax run on the CPU paired with the mamba-ssm peer's JSON line at the overridden shape,
their ratio, the peer's command in the row and in bench.md. With --same-counts, triax's logged
parameters and FLOPs per token also equal the peer's and bench.md has no note.
  python3 family_row_check.py OUT SIZE MBS SEQ PEER_SCRIPT PEER_ARGS [--same-counts]"""
import json
import sys
from pathlib import Path

out, size, mbs, seq, script, peer_args = sys.argv[1:7]
rows = json.loads((Path(out) / "bench.json").read_text())
assert [(r["size"], r["variant"]) for r in rows] == [(size, "triax")], rows
t, p = rows[0]["triax"], rows[0]["peer"]
assert t["device"] == "cpu" and t["tokens_per_s"] > 0, t
assert (p["peer"], p["model"], p["mbs"], p["seq"]) == ("mamba-ssm", size, int(mbs), int(seq)), p
assert p["command"].endswith(peer_args) and "--compile" not in p["command"], p
assert abs(rows[0]["ratio"] - t["tokens_per_s"] / p["tokens_per_s"]) < 1e-12, rows[0]
md = (Path(out) / "bench.md").read_text()
assert f"Peer: `{script} {peer_args}`" in md, md
if "--same-counts" in sys.argv[7:]:
    assert t["params"] == p["params"] and t["flops_per_token"] == p["flops_per_token"], (t, p)
    assert "note:" not in md, md
print(f"bench.sh, {script} at {size}: OK", round(t["tokens_per_s"]), "against", p["tokens_per_s"], "tok/s;",
      t["params"], "parameters,", t["flops_per_token"], "FLOPs per token on the triax side")
