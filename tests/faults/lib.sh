# Helpers of the multi-process fault tests (sourced): background `triax launch` jobs, their
# ranks' processes, waiting for a step, timing an exit. Every rank talks over loopback.
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
finish() {
  if ((failures)); then
    echo "$failures check(s) failed"
    exit 1
  fi
  echo "all checks passed"
  exit 0
}

# descendants PID: every process below PID (a background job may be a subshell around the launcher).
descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}

# first_process JOB_PID FILE LINE: the first of JOB_PID and the processes below it whose
# /proc/PID/FILE (NUL-separated) holds LINE.
first_process() {
  local pid
  for pid in "$1" $(descendants "$1"); do
    if tr '\0' '\n' <"/proc/$pid/$2" 2>/dev/null | grep -qx -- "$3"; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}
# rank_pid JOB_PID RANK: the process of that world rank (the triax-launch-rank around it, which
# passes it the signals sent here and takes it along when killed).
rank_pid() { first_process "$1" environ "OMPI_COMM_WORLD_RANK=$2"; }
# launcher_pid JOB_PID: the `triax launch` process of a background job.
launcher_pid() { first_process "$1" cmdline launch; }

# wait_for_step METRICS_FILE STEP [SECONDS]: until rank 0 has logged STEP lines (one per step).
wait_for_step() {
  local file=$1 step=$2 limit=${3:-120} i
  for ((i = 0; i < limit * 20; i++)); do
    [[ -f "$file" && $(wc -l <"$file") -ge $step ]] && return 0
    sleep 0.05
  done
  return 1
}

# losses METRICS_FILE: one loss per line, as logged (9 significant digits: exact for float32).
losses() { grep -o '"loss": [^,]*' "$1" | cut -d' ' -f2; }

now() { date +%s.%N; }
seconds_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
