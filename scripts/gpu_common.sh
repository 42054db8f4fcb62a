# shellcheck shell=bash disable=SC2034  # sourced: the variables and helpers are used by the sourcing scripts
# scripts/gpu_common.sh — sourced by gpu_run.sh, gpu_fuzz.sh and subjects/gpu_external.sh (ROOT set):
#  - MPFR and GMP for a GPU machine that has neither, from the carried .deps/root (apt-get download +
#    dpkg -x on the workstation; conformance/GPU_RUNS.md says how): CMAKE_DEPS (arguments for cmake),
#    LD_LIBRARY_PATH extended; without .deps, the system's libraries are used;
#  - the start of every script (`gpu_start`: --help, the output folder and log, the deadline), its
#    stages (`has_stage`), the build (`gpu_build`);
#  - the steps of a run under one deadline: `step`, `step_note` and `step_summary`; `bg_steps` and
#    `bg_wait` for steps that run side by side.
DEPS=$ROOT/.deps/root/usr
CMAKE_DEPS=()
if [ -d "$DEPS" ]; then
  CMAKE_DEPS=(-DGMP_ROOT="$DEPS" -DMPFR_ROOT="$DEPS")
  export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# gpu_start <log name> <default deadline s> "$@": `--help` prints the script's header comment (from
# line 2 to the first line that is not a comment), any other argument is refused (stages and
# settings come from the environment); then OUT (default gpu-out/), BUILD (LCE_GPU_BUILD, default
# build-gpu/), DEADLINE_S (LCE_GPU_DEADLINE_S, else the default), START, and everything printed is
# tee'd into $OUT/<log name>.
gpu_start() {
  local log=$1 deadline=$2
  shift 2
  case "${1:-}" in
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    "") ;;
    *) echo "$(basename "$0"): no arguments (stages and settings come from the environment; --help)" >&2; exit 2 ;;
  esac
  OUT=${OUT:-$ROOT/gpu-out}
  BUILD=${LCE_GPU_BUILD:-$ROOT/build-gpu}
  DEADLINE_S=${LCE_GPU_DEADLINE_S:-$deadline}
  START=$(date +%s)
  mkdir -p "$OUT"
  exec > >(tee -a "$OUT/$log") 2>&1
}
has_stage() { case " $STAGES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
# "${TO[@]}" <path> <command...>: a command for step whose stdout goes to <path> (stderr: the log).
TO=(sh -c 'o=$1; shift; exec "$@" >"$o"' to)

# gpu_build <build step name> <build limit s> <configure options...> -- <build options...>: configures
# $BUILD (Release, sm_90, MPFR/GMP from .deps) and builds it, two steps that must pass.
gpu_build() {
  local name=$1 limit=$2 conf=()
  shift 2
  while [ "$1" != -- ]; do conf+=("$1"); shift; done
  shift
  step configure pass 120 cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    "${conf[@]}" "${CMAKE_DEPS[@]}"
  step "$name" pass "$limit" cmake --build "$BUILD" "$@"
}

SUMMARY=()
FAILED=0
left() { echo $((DEADLINE_S - ($(date +%s) - START))); }

# step_note <name> <expect> <verdict>: a summary line for something that did not run; it fails the
# run unless expect is `any`.
step_note() {
  SUMMARY+=("$(printf '%-52s %-6s %4s %4s  %s' "$1" "$2" - - "$3")")
  [ "$2" != any ] && FAILED=1
  return 0
}

# step <name> <expect> <timeout s> <command...>: runs the command (printed first) under the deadline
# and records its exit status, seconds and whether the status met the expectation: `pass` (0),
# `fail` (1: the suite caught a mutant), `any` (but not killed at the limit), or an exact exit status.
step() {
  local name=$1 expect=$2 limit=$3
  shift 3
  local budget
  budget=$(left)
  [ "$limit" -gt "$budget" ] && limit=$budget
  if [ "$limit" -lt 10 ]; then
    step_note "$name" "$expect" "NOT RUN (deadline)"
    return 0
  fi
  echo
  echo "==== $name (expect $expect, limit ${limit}s) ===="
  echo "+ $*"
  local t0 rc verdict want
  t0=$(date +%s)
  timeout --signal=KILL "$limit" "$@"
  rc=$?
  case "$expect" in pass) want=0 ;; fail) want=1 ;; *) want=$expect ;; esac
  # A step killed at its limit (137) did not finish, whatever it was expected to do.
  if [ "$rc" = 137 ] && [ "$want" != 137 ]; then verdict=TIMEOUT
  elif [ "$expect" = any ] || [ "$rc" = "$want" ]; then verdict=ok
  else verdict=UNEXPECTED; fi
  [ "$verdict" != ok ] && FAILED=1
  SUMMARY+=("$(printf '%-52s %-6s %4s %4s  %s' "$name" "$expect" "$rc" "$(($(date +%s) - t0))" "$verdict")")
  return 0
}

# bg_steps <log> <command...>: runs the command (typically a function that calls step) in a background
# subshell under the same deadline, everything it prints into <log>; bg_wait waits for every one
# started, in the order they were started, prints each log and adds each one's summary lines and
# failure to this run's. So several GPU processes (adapters of different subjects, their judges)
# share the device and the host's cores instead of queueing.
BG_PIDS=()
BG_LOGS=()
bg_steps() {
  local log=$1
  shift
  (
    SUMMARY=()
    FAILED=0
    "$@"
    [ "${#SUMMARY[@]}" -gt 0 ] && printf '%s\n' "${SUMMARY[@]}" >"$log.summary"
    exit "$FAILED"
  ) >"$log" 2>&1 &
  BG_PIDS+=($!)
  BG_LOGS+=("$log")
  echo "+ (background, log $log) $*"
}
bg_wait() {
  local i lines=()
  for i in "${!BG_PIDS[@]}"; do
    wait "${BG_PIDS[$i]}" || FAILED=1
    echo
    echo "==== background log ${BG_LOGS[$i]} ===="
    cat "${BG_LOGS[$i]}"
    if [ -f "${BG_LOGS[$i]}.summary" ]; then
      mapfile -t lines <"${BG_LOGS[$i]}.summary"
      SUMMARY+=("${lines[@]}")
      rm -f "${BG_LOGS[$i]}.summary"
    fi
  done
  BG_PIDS=()
  BG_LOGS=()
}

# step_summary <title> <log path>: the table that ends a run's log, and its overall verdict.
step_summary() {
  echo
  echo "==== summary ($(($(date +%s) - START)) s; $1) ===="
  printf '%-52s %-6s %4s %4s  %s\n' step expect rc sec verdict
  for line in "${SUMMARY[@]}"; do echo "$line"; done
  echo "overall: $([ "$FAILED" = 0 ] && echo PASS || echo FAIL)  (log: $2)"
}
