#!/usr/bin/env bash
# scripts/gpu_run.sh — the issue-4 run on the H200, in one command (through the device tool, carrying
# .deps): configure + build (Release, sm_90), `ctest -L gpu`, `lcecheck check --subject fused-cuda`
# on the default matrix, the two GPU seed-bug mutants (they must fail), `lcecheck bench`, then
# compute-sanitizer memcheck / racecheck / initcheck over the gpu test with the time that is left.
# Everything is tee'd into $OUT/log; a summary table ends the output. Finishes in < 9 minutes:
# every step runs under a deadline (LCE_GPU_DEADLINE_S, default 520 s from the start).
#
#   OUT=/tmp/out scripts/gpu_run.sh            (the device tool sets OUT)
# Environment: LCE_GPU_BUILD (build dir, default build-gpu), LCE_GPU_JOBS (default nproc),
#   LCE_GPU_DEADLINE_S. MPFR and GMP come from .deps/root (apt-get download + dpkg -x, made on the
#   workstation: see conformance/GPU_RUNS.md) when present, else from the system.
# Exit status: 0 when every required step met its expectation, 1 otherwise.
set -u -o pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/gpu-out}
BUILD=${LCE_GPU_BUILD:-$ROOT/build-gpu}
JOBS=${LCE_GPU_JOBS:-$(nproc)}
DEADLINE_S=${LCE_GPU_DEADLINE_S:-520}
START=$(date +%s)
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log") 2>&1

DEPS=$ROOT/.deps/root/usr
CMAKE_DEPS=()
if [ -d "$DEPS" ]; then
  CMAKE_DEPS=(-DGMP_ROOT="$DEPS" -DMPFR_ROOT="$DEPS")
  export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
LCECHECK=$BUILD/lcecheck
GPU_TEST=$BUILD/tests/test_fused_cuda

SUMMARY=()
FAILED=0
left() { echo $((DEADLINE_S - ($(date +%s) - START))); }

# step <name> <expected: pass|fail|any> <timeout s> <command...>: runs it (printed first), records rc,
# seconds and whether the rc met the expectation (fail: rc 1, the suite caught it).
step() {
  local name=$1 expect=$2 limit=$3
  shift 3
  local budget
  budget=$(left)
  [ "$limit" -gt "$budget" ] && limit=$budget
  if [ "$limit" -lt 10 ]; then
    SUMMARY+=("$(printf '%-42s %-6s %4s %4s  %s' "$name" "$expect" "-" "-" "NOT RUN (deadline)")")
    [ "$expect" != any ] && FAILED=1
    return 0
  fi
  echo
  echo "==== $name (expect $expect, limit ${limit}s) ===="
  echo "+ $*"
  local t0 rc verdict
  t0=$(date +%s)
  timeout --signal=KILL "$limit" "$@"
  rc=$?
  case "$expect:$rc" in
    pass:0 | fail:1 | any:*) verdict=ok ;;
    *:137) verdict="TIMEOUT" ;;
    *) verdict="UNEXPECTED" ;;
  esac
  [ "$verdict" != ok ] && [ "$expect" != any ] && FAILED=1
  SUMMARY+=("$(printf '%-42s %-6s %4s %4s  %s' "$name" "$expect" "$rc" "$(($(date +%s) - t0))" "$verdict")")
  return 0
}

echo "gpu_run.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), root $ROOT, build $BUILD, out $OUT"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
# Provenance of goldens regenerated here (the tree has no .git: the caller passes the commit).
LCE_GOLDEN_DEVICE="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), sm_90, $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)"
export LCE_GOLDEN_DEVICE
command -v nvcc >/dev/null && nvcc --version | tail -2
[ -f "$ROOT/.git/HEAD" ] && echo "HEAD: $(cat "$ROOT/.git/HEAD")"

step configure pass 120 cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  "${CMAKE_DEPS[@]}"
step build pass 240 cmake --build "$BUILD" -j "$JOBS" --target lcecheck test_fused_cuda
step "ctest -L gpu" pass 150 ctest --test-dir "$BUILD" -L gpu --output-on-failure --no-tests=error

# The fused-cuda goldens: golden/sm_90/fused-cuda.golden once it exists; until then the fused-host bounds
# renamed to class fused-cuda (provisional: the measurement below is what regeneration starts from).
GOLDEN=$ROOT/golden/sm_90/fused-cuda.golden
if [ ! -f "$GOLDEN" ]; then
  GOLDEN=$BUILD/fused-cuda.provisional.golden
  sed 's/^fused-host /fused-cuda /' "$ROOT/golden/fused-host.golden" >"$GOLDEN"
  echo "golden/sm_90/fused-cuda.golden missing: judging against $GOLDEN (fused-host bounds, renamed)"
fi
step "check fused-cuda" pass 150 "$LCECHECK" check --subject fused-cuda --golden "$GOLDEN" --quiet
# Again with every logits tile NaN-filled before its GEMM: passes only if cuBLAS writes every element.
step "check fused-cuda (NaN-poisoned tiles)" pass 150 env LCE_POISON_TILES=1 "$LCECHECK" check --subject fused-cuda \
  --golden "$GOLDEN" --quiet
for m in mutant-cuda/bf16-dhidden-accum mutant-cuda/tied-weight-when-untied; do
  step "check $m" fail 90 "$LCECHECK" check --subject "$m" --golden "$GOLDEN" --quiet
done
step "measure fused-cuda (json)" any 90 sh -c "'$LCECHECK' measure --subject fused-cuda --quiet --json >'$OUT/measure-fused-cuda.json'"
# sm_90 goldens for fused-cuda from this device's measurements, through the regeneration script (its
# ceilings and the GPU mutants must both hold); written to $OUT for review, never into the tree here.
if [ ! -f "$ROOT/golden/sm_90/fused-cuda.golden" ] && command -v python3 >/dev/null; then
  step "regen fused-cuda goldens" any 200 python3 "$ROOT/scripts/lcecheck_golden.py" --golden-dir "$OUT" regen \
    --subject fused-cuda --matrix default --build "$BUILD" --write
  if [ -f "$OUT/fused-cuda.golden" ]; then
    step "check fused-cuda (new goldens)" pass 150 "$LCECHECK" check --subject fused-cuda --golden "$OUT/fused-cuda.golden" --quiet
    for m in mutant-cuda/bf16-dhidden-accum mutant-cuda/tied-weight-when-untied; do
      step "check $m (new goldens)" fail 90 "$LCECHECK" check --subject "$m" --golden "$OUT/fused-cuda.golden" --quiet
    done
  fi
fi
step "bench" pass 120 sh -c "'$LCECHECK' bench && '$LCECHECK' bench --json >'$OUT/bench.json'"

# Sanitizers last, sharing what is left of the deadline; a sanitizer finding exits 99, a failing test 1.
if command -v compute-sanitizer >/dev/null; then
  tools=(memcheck racecheck initcheck)
  for i in 0 1 2; do
    share=$(($(left) / (3 - i)))
    step "compute-sanitizer ${tools[$i]}" pass "$share" env LCE_POISON_TILES=1 compute-sanitizer --tool "${tools[$i]}" \
      --error-exitcode 99 "$GPU_TEST"
  done
else
  SUMMARY+=("$(printf "%-42s %-6s %4s %4s  %s" compute-sanitizer pass - - "NOT FOUND")")
  FAILED=1
fi

echo
echo "==== summary ($(($(date +%s) - START)) s; expect fail = the mutant must fail the check) ===="
printf '%-42s %-6s %4s %4s  %s\n' step expect rc sec verdict
for line in "${SUMMARY[@]}"; do echo "$line"; done
echo "overall: $([ "$FAILED" = 0 ] && echo PASS || echo FAIL)  (log: $OUT/log)"
exit "$FAILED"
