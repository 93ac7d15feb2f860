#!/usr/bin/env bash
# Builds the Mamba peers (tools/device/mamba_ssm_peer.py, mamba2_ssm_peer.py, hybrid_ssm_peer.py) on the GPU
# machine: state-spaces' mamba-ssm and Dao-AILab's causal-conv1d as wheels for sm_90 (H100, H200)
# only, then installs them into the machine's Python (--no-deps: torch, triton, einops,
# transformers are there).
#
#   tools/device/build_mamba_peer.sh SOURCES [WHEELS]
#
# SOURCES holds mamba/ and causal-conv1d/, the two public repositories' trees (mamba at tag
# v2.3.1: later commits import the Mamba-3 kernels); WHEELS (default /root/mamba-peer-wheels)
# keeps the wheels, and a later call that finds both there only installs them. The machine
# reaches no package registry, hence pip's --no-index --no-build-isolation. MAX_JOBS (default:
# the cores) bounds the compiler processes of both builds together; they run side by side.
# Prints each build's seconds; exit status 0 when both are installed.
set -uo pipefail
SOURCES=$(readlink -f "${1:?usage: build_mamba_peer.sh SOURCES [WHEELS]}")
WHEELS=${2:-/root/mamba-peer-wheels}
JOBS=${MAX_JOBS:-$(nproc)}
mkdir -p "$WHEELS"

# Each setup.py lists a -gencode pair per architecture; keep sm_90's alone (a fraction of the
# compile time, and the only architecture these machines have).
only_sm90() {
  python3 - "$1/setup.py" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
pair = re.compile(r'cc_flag\.append\("-gencode"\)\s*\n\s*cc_flag\.append\("arch=compute_(\d+),code=sm_\d+"\)')
kept = pair.sub(lambda m: m.group(0) if m.group(1) == "90" else "pass", text)
if 'arch=compute_90,code=sm_90' not in kept:
    sys.exit(f"{path}: no sm_90 -gencode pair to keep")
open(path, "w").write(kept)
PY
}

build_wheel() {  # build_wheel NAME SOURCE_DIR JOBS LOG, env FORCE variables set by the caller
  local name=$1 src=$2 jobs=$3 log=$4 start=$SECONDS
  only_sm90 "$src" || return 1
  (cd "$src" && MAX_JOBS=$jobs python3 -m pip wheel --no-deps --no-build-isolation --no-index -w "$WHEELS" . ) \
    >"$log" 2>&1 || { echo "$name: build failed, last lines of $log:"; tail -30 "$log"; return 1; }
  echo "$name: wheel built in $((SECONDS - start)) s"
}

have_wheel() { compgen -G "$WHEELS/$1-*.whl" >/dev/null; }

start=$SECONDS
# The two builds cost about the same compiler time (measured on an H100 machine: 297 s with 5
# jobs, 121 s with 12): half the jobs each, or all of them for the one whose wheel is missing
# (a wheel brought back from an earlier machine can be put into WHEELS beforehand).
jobs_each=$JOBS
! have_wheel causal_conv1d && ! have_wheel mamba_ssm && jobs_each=$((JOBS / 2 > 0 ? JOBS / 2 : 1))
pids=()
if ! have_wheel causal_conv1d; then
  CAUSAL_CONV1D_FORCE_BUILD=TRUE build_wheel causal-conv1d "$SOURCES/causal-conv1d" "$jobs_each" \
    "$WHEELS/causal-conv1d.log" &
  pids+=($!)
fi
if ! have_wheel mamba_ssm; then
  MAMBA_FORCE_BUILD=TRUE MAMBA_KEEP_CUDA_BUILD=TRUE build_wheel mamba-ssm "$SOURCES/mamba" "$jobs_each" \
    "$WHEELS/mamba-ssm.log" &
  pids+=($!)
fi
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
((status == 0)) || exit 1
echo "builds: $((SECONDS - start)) s"
python3 -m pip install -q --no-deps --no-index --force-reinstall "$WHEELS"/causal_conv1d-*.whl "$WHEELS"/mamba_ssm-*.whl ||
  exit 1
python3 -c 'import causal_conv1d, mamba_ssm; from mamba_ssm.ops.selective_scan_interface import selective_scan_fn; print("mamba_ssm", mamba_ssm.__version__, "and causal_conv1d", causal_conv1d.__version__, "installed")'
