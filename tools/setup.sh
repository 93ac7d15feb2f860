#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks, creates the Python environment holding LibTorch
# (the torch==2.11.0 wheel), then configures and builds triax. Idempotent: a second run on the
# same machine costs seconds. The environment and the compiler cache live outside the clone,
# keyed by versions, so a fresh clone on the same machine reuses them.
#
#   tools/setup.sh [--no-build] [--with-slurm] [--target TARGET]
#
# --target builds only TARGET and what it needs (tools/quickstart.sh: triax_runtime, the command
# and the shipped plugins, without the test suite); the default builds everything.
# --with-slurm (or CI=true) also installs Slurm's daemons and munge (slurmctld, slurmd,
# slurm-client, munge; about 40 s), which the single-node Slurm test starts and stops itself.
# They are left out otherwise: on a machine with systemd, Debian's packages enable the services.
#
# Environment: TRIAX_BUILD_DIR (default build), TRIAX_CACHE_DIR (default ~/.cache/triax),
# Torch_DIR (a LibTorch of your own; skips the wheel), TRIAX_JOBS (parallel compile jobs).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${TRIAX_BUILD_DIR:-build}"
CACHE_DIR="${TRIAX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/triax}"
TORCH_VERSION=2.11.0
DO_BUILD=1
WITH_SLURM=0
BUILD_TARGETS=()
[[ "${CI:-}" == "true" ]] && WITH_SLURM=1
while (($#)); do
  case "$1" in
    --no-build) DO_BUILD=0 ;;
    --with-slurm) WITH_SLURM=1 ;;
    --target)
      [[ $# -ge 2 ]] || { echo "tools/setup.sh: --target needs a target name" >&2; exit 2; }
      BUILD_TARGETS+=(--target "$2"); shift ;;
    *) echo "tools/setup.sh: unknown option $1 (expected --no-build, --with-slurm, --target TARGET)" >&2; exit 2 ;;
  esac
  shift
done

log() { printf '[setup] %s\n' "$*" >&2; }

# ---- Debian packages -------------------------------------------------------------------
PACKAGES=(cmake ninja-build g++ ccache python3-venv libyaml-cpp-dev libspdlog-dev libfmt-dev
          libboost-dev libboost-program-options-dev libboost-filesystem-dev libhdf5-dev
          libgtest-dev libgmock-dev libopenmpi-dev openmpi-bin nlohmann-json3-dev
          libprotobuf-dev protobuf-compiler)  # protobuf: TensorBoard event files
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ((WITH_SLURM)); then
  slurm_missing=()
  for p in slurmctld slurmd slurm-client munge; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || slurm_missing+=("$p")
  done
  if ((${#slurm_missing[@]})); then
    log "installing Slurm for its test: ${slurm_missing[*]}"
    SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
    ((${#missing[@]})) || $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${slurm_missing[@]}" >/dev/null
  fi
fi

# ---- Python environment with LibTorch --------------------------------------------------
PYTHON="${PYTHON:-python3}"
PY_TAG="$("$PYTHON" -c 'import sys; print(f"py{sys.version_info.major}.{sys.version_info.minor}")')"
VENV="$CACHE_DIR/venv-$PY_TAG-torch$TORCH_VERSION"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c "import torch, numpy" 2>/dev/null; then
  log "creating $VENV with torch==$TORCH_VERSION (a few GB, once per machine)"
  mkdir -p "$CACHE_DIR"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" numpy
fi
# Tokenizing text, JSONL and Parquet (tools/tokenize) and the datatrove compatibility tests.
DATA_PACKAGES=(datatrove==0.10.1 tokenizers==0.23.3 tqdm==4.70.1 pyarrow==26.0.1)
if ! "$VENV/bin/python" -c "import datatrove, tokenizers, tqdm, pyarrow" 2>/dev/null; then
  log "installing ${DATA_PACKAGES[*]} into $VENV"
  "$VENV/bin/pip" install -q "${DATA_PACKAGES[@]}"
fi
# Hugging Face interop checks (tests/interop): transformers loads what triax exports.
INTEROP_PACKAGES=(transformers==5.24.0 safetensors==0.8.0)
if ! "$VENV/bin/python" -c "import transformers, safetensors" 2>/dev/null; then
  log "installing ${INTEROP_PACKAGES[*]} into $VENV"
  "$VENV/bin/pip" install -q "${INTEROP_PACKAGES[@]}"
fi
# Plots (tools/plot) and the TensorBoard test, which reads the event files back.
REPORT_PACKAGES=(matplotlib==3.11.2 tensorboard==2.21.0)
if ! "$VENV/bin/python" -c "import matplotlib, tensorboard" 2>/dev/null; then
  log "installing ${REPORT_PACKAGES[*]} into $VENV"
  "$VENV/bin/pip" install -q "${REPORT_PACKAGES[@]}"
fi
ln -sfn "$VENV" "$ROOT/.venv"

# ---- configure and build -----------------------------------------------------------------
export CCACHE_DIR="${CCACHE_DIR:-$CACHE_DIR/ccache}"
# Paths relative to the clone, and the clone's folder left out of the hash (it would otherwise
# enter through the debug information): a fresh clone hits the same cache.
export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-5G}"
TORCH_PREFIX="$("$VENV/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
CMAKE_ARGS=(-G Ninja -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_PREFIX_PATH=$TORCH_PREFIX")
[[ -n "${Torch_DIR:-}" ]] && CMAKE_ARGS+=("-DTorch_DIR=$Torch_DIR")
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  log "configuring $BUILD_DIR"
  cmake "${CMAKE_ARGS[@]}" >/dev/null
fi
if ((DO_BUILD)); then
  log "building (ccache: $CCACHE_DIR)"
  cmake --build "$BUILD_DIR" -j "${TRIAX_JOBS:-$(nproc --all)}" "${BUILD_TARGETS[@]}"  # --all: nproc honours OMP_NUM_THREADS
fi
