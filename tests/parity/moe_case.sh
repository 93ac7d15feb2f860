#!/usr/bin/env bash
# One parity case of a model with named auxiliary losses (the MoE and qwen2 matrices): run_case.sh
# (losses, gradient norms, final parameters), then every named auxiliary loss of metrics.jsonl
# against the reference's.
#   moe_case.sh PYTHON RUNNER MPIEXEC CONFIG REFERENCE_DIR OUT_DIR RANKS [--set KEY=VALUE]...
set -euo pipefail
python=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
"$here/run_case.sh" "$@"
"$python" "$here/compare_aux_losses.py" "$4/run/metrics.jsonl" "$5/run/metrics.jsonl"
