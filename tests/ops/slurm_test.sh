#!/usr/bin/env bash
# Slurm for real, on this machine only: starts munged, slurmctld and slurmd on loopback (their
# key, ports, state, logs and pid files in a temporary folder), runs a 2-rank training with
# `srun --mpi=pmix` and the same through the sbatch template (tools/slurm/train.sbatch), checks
# that both give the losses of `triax launch -n 2`, that srun ranks disagreeing with the config
# are refused with the keys named, and stops the daemons by their pid files.
# Exit 77 (skipped) only where Slurm and munge are not installed (tools/setup.sh --with-slurm
# installs them; CI does) or the test is not root.
#   slurm_test.sh <triax executable> <source dir>
set -euo pipefail
TRIAX="$1"
SRC="$2"
fail() { echo "FAIL: $*"; exit 1; }
for tool in munged slurmctld slurmd srun sbatch sinfo; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (tools/setup.sh --with-slurm installs Slurm and munge)"; exit 77; }
done
[[ $(id -u) -eq 0 ]] || { echo "SKIP: the daemons run as root here (SlurmUser=root); run as root"; exit 77; }

WORK="$(mktemp -d)"
chmod 700 "$WORK"
stop_daemons() {
  for pid_file in "$WORK/slurmd.pid" "$WORK/slurmctld.pid" "$WORK/munge/munged.pid"; do
    [[ -s "$pid_file" ]] && kill "$(cat "$pid_file")" 2>/dev/null || true
  done
  sleep 1
  rm -rf "$WORK"
}
trap stop_daemons EXIT
HOST="$(hostname -s)"
CTLD_PORT=$((20000 + RANDOM % 20000))
# Job ids drawn anew each run: the pmix plugin keeps a folder per job step under /tmp
# (spmix_appdir_<uid>_<job>.<step>), and one left by a run killed midway would make the same
# step of this run fail to launch.
FIRST_JOB_ID=$((1000 + RANDOM % 1000000))
SLURMD_PORT=$((CTLD_PORT + 1))

mkdir -p "$WORK/munge" "$WORK/state" "$WORK/spool"
chmod 700 "$WORK/munge"
dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$WORK/munge/munge.key"
munged --force --key-file="$WORK/munge/munge.key" --socket="$WORK/munge/munge.socket" \
  --pid-file="$WORK/munge/munged.pid" --log-file="$WORK/munge/munged.log" --seed-file="$WORK/munge/munged.seed" ||
  fail "munged did not start: $(cat "$WORK/munge/munged.log" 2>/dev/null)"

export SLURM_CONF="$WORK/slurm.conf"
cat >"$SLURM_CONF" <<CONF
ClusterName=triaxtest
FirstJobId=$FIRST_JOB_ID
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/munge.socket
CredType=cred/munge
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/slurmctld.log
SlurmdLogFile=$WORK/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc --all) State=UNKNOWN
PartitionName=triax Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
slurmctld -c || fail "slurmctld did not start: $(cat "$WORK/slurmctld.log" 2>/dev/null)"
slurmd -c || fail "slurmd did not start: $(cat "$WORK/slurmd.log" 2>/dev/null)"
for _ in $(seq 60); do
  [[ "$(sinfo -h -o %T 2>/dev/null)" == idle* ]] && break
  sleep 0.5
done
[[ "$(sinfo -h -o %T)" == idle* ]] || fail "the node is not idle: $(sinfo 2>&1); $(tail -5 "$WORK/slurmd.log")"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
CONFIG="$SRC/configs/tiny_llama.yaml"
TRAIN=(train --config "$CONFIG" --set parallelism.dp=2 --set tokens.train_steps=4)
losses() { python3 -c 'import json,sys; print(" ".join(repr(json.loads(l)["loss"]) for l in open(sys.argv[1])))' "$1"; }

"$TRIAX" launch -n 2 -- "$TRIAX" "${TRAIN[@]}" --set "checkpoints.checkpoints_path=$WORK/reference" >"$WORK/reference.log" 2>&1 ||
  { cat "$WORK/reference.log"; fail "the triax launch reference run"; }
timeout 300 srun -n 2 --mpi=pmix --oversubscribe "$TRIAX" "${TRAIN[@]}" --set "checkpoints.checkpoints_path=$WORK/srun" \
  >"$WORK/srun.log" 2>&1 || { cat "$WORK/srun.log"; tail -20 "$WORK/slurmd.log"; fail "srun -n 2 training"; }
grep -q "2 ranks started by srun" "$WORK/srun.log" || { cat "$WORK/srun.log"; fail "the ranks do not say srun started them"; }
[[ "$(losses "$WORK/srun/metrics.jsonl")" == "$(losses "$WORK/reference/metrics.jsonl")" ]] ||
  fail "srun losses $(losses "$WORK/srun/metrics.jsonl") differ from triax launch's $(losses "$WORK/reference/metrics.jsonl")"

# The sbatch template, as a user submits it (a CPU job of 2 tasks on one node).
TRIAX_BIN="$TRIAX" TRIAX_CONFIG="$CONFIG" timeout 300 sbatch --wait --nodes=1 --ntasks-per-node=2 \
  --output="$WORK/sbatch.log" "$SRC/tools/slurm/train.sbatch" --set parallelism.dp=2 --set tokens.train_steps=4 \
  --set "checkpoints.checkpoints_path=$WORK/sbatch" >/dev/null || { cat "$WORK/sbatch.log"; fail "the sbatch template's job"; }
[[ "$(losses "$WORK/sbatch/metrics.jsonl")" == "$(losses "$WORK/reference/metrics.jsonl")" ]] ||
  { cat "$WORK/sbatch.log"; fail "the sbatch job's losses differ from triax launch's"; }

# Slurm's ranks against a config for one process: refused on every rank, naming both sides.
set +e
out="$(timeout 120 srun -n 2 --mpi=pmix --oversubscribe "$TRIAX" train --config "$CONFIG" --set tokens.train_steps=2 \
  --set "checkpoints.checkpoints_path=$WORK/bad" 2>&1)"
status=$?
set -e
[[ $status -ne 0 && "$out" == *"parallelism.dp (1)"* && "$out" == *"SLURM_NTASKS=2"* ]] ||
  fail "srun ranks disagreeing with the config gave exit $status: $out"
[[ "$out" != *"step 1/2"* ]] || fail "training started with a mismatched world: $out"
echo "slurm_test: passed"
