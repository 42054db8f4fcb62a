#!/usr/bin/env bash
# scripts/gpu_run.sh — the GPU verification on an H200 (through the device tool,
# carrying .deps; `fuzz` also needs .gpufuzz), in stages chosen by LCE_GPU_STAGES:
#   build       configure + build everything (Release, sm_90; MPFR/GMP from .deps)
#   gputests    ctest -L gpu -LE slow but the matrix checks, which are stages check and medium
#               (fused-cuda's own tests, the probe, the fp64 tier's certification)
#   probe       lcecheck probe: single mma.sync m16n8k16/k8 vs the sm90 model, bit for bit, and the
#               cuBLAS error-vs-K curve beside the model's prediction; the dump comes back
#   check       the conformance ctests: fused-cuda on the default and wide matrices (goldens
#               golden/sm_90/), each GPU seed-bug mutant failing cases (mutant-cuda/*, and in CUTLASS
#               builds fused-sm90 and its mutant-sm90/*); with stage `poison` the default
#               matrix again with NaN-poisoned tiles; measurements of fused-cuda and unfused-cuda
#   medium      fused-cuda on the medium matrix judged by the fp64 GPU tier, its measurement, and
#               fused-host vs fused-cuda side by side on two medium cases (lcecheck compare)
#   medium-host fused-host and fused-host-sm90 on the medium matrix (fp64-gpu oracle) against their
#               CPU goldens, JSON to the results (OpenMP: every core; minutes per subject)
#   compare     fused-host-sm90 vs fused-cuda on the default matrix: the host twin under the sm90
#               model must predict the GPU's gradient errors (relerr and bias of d_hidden, d_weight)
#               within LCE_PREDICT_FACTOR on every tensor-core case (bf16, fp16, tf32)
#   production-measure  lcecheck production --measure-only on its small shapes (a smoke test)
#   production  lcecheck production (gpu;slow): the four production shapes, tied/untied, tp 1 and 8,
#               judged against golden/sm_90/ (the mutant must fail at V >= 128k)
#   sm90-production  the same for fused-sm90 and mutant-sm90/bf16-dhidden-accum (CUTLASS builds), and
#               fused-sm90 on the medium matrix (fp64-gpu oracle), judged by fused-cuda's goldens as on default and wide
#   regen       goldens of LCE_REGEN_SUBJECTS (default fused-cuda unfused-cuda: per-architecture,
#               --arch sm_90; fused-host, fused-host-sm90: golden/) from this device's measurements
#               over the default, wide and medium (fp64-gpu) matrices, written in this machine's
#               tree (so each file's generator line reproduces the committed file) and copied to the
#               results (the committed ones beside them, golden-before*); the tree gets the committed
#               goldens back unless LCE_REGEN_INSTALL=1: then the stages after regen (bench fuzz
#               sanitizers) and a second gpu_run.sh in the same call judge with the new ones
#   bench       lcecheck bench (fused-sm90's row too in CUTLASS builds)
#   sm90        fused-sm90 (CUTLASS builds), right after the build: one case under a 45 s limit (a
#               hang skips every later step that runs fused-sm90), then tests/test_fused_sm90 (its case
#               list against the unfused double computation, beside fused-host and fused-cuda, the
#               1/n_valid bias, its own mutants), then lcecheck probe --wgmma: the probe's vectors through
#               fused-sm90's wgmma m64n256k16 vs the sm90 model, bit for bit (the dump comes back)
#   sm90-matrix after the benches: fused-cuda's own tests (the shared run() and d_logit arithmetic),
#               fused-cuda on the default matrix, fused-sm90 on the default and wide ones (fused-cuda's
#               goldens), and each of fused-sm90's own mutants (mutant-sm90/*) failing cases of the
#               default matrix with no errors; then fused-sm90's pingpong schedule on the default matrix
#               and through tests/test_fused_sm90 (LCE_FUSED_SM90_SCHEDULE=pingpong); then the compare stage's
#               prediction for fused-sm90: fused-host-sm90 vs fused-sm90 on the default matrix, within
#               LCE_PREDICT_FACTOR on every tensor-core case (compare-predict-sm90.json)
#   bench-sm90  lcecheck bench at 8192x4096x128256 once per fused-sm90 schedule (cooperative, pingpong:
#               LCE_FUSED_SM90_SCHEDULE) at the default token chunk, then once per backward token chunk
#               in LCE_SM90_BENCH_CHUNKS (default "1024 4096"), per cuBLAS workspace in
#               LCE_SM90_BENCH_WORKSPACES (MiB, default "8 2": LCE_CUBLAS_WORKSPACE_MIB) and per vocab chunk
#               in LCE_SM90_BENCH_VOCAB_CHUNKS (default "4096"): its memory against its time
#   sanitizers-sm90  compute-sanitizer memcheck over tests/test_fused_sm90 (the TMA/wgmma kernels and
#               their direct d_logits stores), then racecheck over it judged by scripts/gpu_racecheck.sh
#               (0 hazards in fs_*/fc_* kernels; shared-memory hazards inside the wgmma mainloop's
#               pipeline would show here), sharing the time left
#   fuzz        scripts/gpu_fuzz.sh (replay + libFuzzer campaigns on fused-cuda; carry .gpufuzz)
#   sanitizers  compute-sanitizer memcheck / racecheck / initcheck over tests/test_fused_cuda: every
#               kernel path, the mean factor as the GEMMs' alpha (its 1/n_valid bias block, n_valid
#               259) and reduction none's scaled hidden rows (fc_scale_rows_kernel, token chunks of 7)
# Default: build gputests probe check medium compare bench sanitizers. Results other than the log
# go into $OUT/results.tar (the device tool returns at most 8 files); a summary table ends the log.
#
#   OUT=/tmp/out LCE_GPU_STAGES="build production" bash scripts/gpu_run.sh   (the device tool sets OUT)
# Environment: LCE_GPU_BUILD (default build-gpu), LCE_GPU_JOBS (default nproc), LCE_GPU_DEADLINE_S
#   (default 540 s from the start: every step runs under it), LCE_GPU_TARGETS (build only these
#   targets, e.g. "lcecheck test_fused_sm90 test_fused_cuda test_fused_cuda_epilogue"), LCE_PREDICT_FACTOR (default 3),
#   LCE_REGEN_LOOSEN (a reason: passed to the regeneration as --allow-loosen), LCE_REGEN_SUBJECTS,
#   LCE_REGEN_INSTALL (stage regen, above), LCE_REGEN_MATRICES (the matrices regen fits on, default
#   "default wide medium@fp64-gpu"), LCE_REGEN_FEWER (a reason: --allow-fewer-matrices), LCE_PROD_SHAPES
#   (production --shapes, default all), LCE_PROD_TP (default "1 8").
# Exit status: 0 when every required step met its expectation, 1 otherwise.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/gpu_common.sh
. "$ROOT/scripts/gpu_common.sh"
gpu_start log 540 "$@"
JOBS=${LCE_GPU_JOBS:-$(nproc)}
STAGES=${LCE_GPU_STAGES:-build gputests probe check medium compare bench sanitizers}
PREDICT_FACTOR=${LCE_PREDICT_FACTOR:-3}
RES=$(mktemp -d /tmp/lce-gpu-results.XXXXXX)
LCECHECK=$BUILD/lcecheck
GPU_TEST=$BUILD/tests/test_fused_cuda

echo "gpu_run.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), root $ROOT, build $BUILD, out $OUT, stages: $STAGES"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
command -v nvcc >/dev/null && nvcc --version | tail -2
[ -n "${LCE_GOLDEN_COMMIT:-}" ] && echo "commit: $LCE_GOLDEN_COMMIT"

# shellcheck disable=SC2086  # LCE_GPU_TARGETS is a list of target names
has_stage build && gpu_build build 300 -- -j "$JOBS" ${LCE_GPU_TARGETS:+--target $LCE_GPU_TARGETS}
# fused-sm90 first on one case under a short limit: a kernel that hangs (a pipeline that never fills)
# costs 45 s, and the steps that would run it again (its test, its bench rows, memcheck) are skipped.
SM90_HUNG=0
if has_stage sm90; then
  step "fused-sm90: smoke, one case (hang guard)" pass 45 "$LCECHECK" check --subject fused-sm90 \
    --case bf16.untied.tp1.n300.h136.v16700.vp16700.vc4096.mean.ign10.prior.mixed.s1
  case "${SUMMARY[-1]}" in *TIMEOUT*) SM90_HUNG=1 ;; esac
fi
sm90_step() { # step, unless fused-sm90 hung in the smoke step
  if [ "$SM90_HUNG" = 1 ]; then step_note "$1" "$2" "NOT RUN (fused-sm90 hung)"; else step "$@"; fi
}
if has_stage sm90; then
  sm90_step "fused-sm90: tests/test_fused_sm90" pass 240 "$BUILD/tests/test_fused_sm90"
  step "probe --wgmma (m64n256k16 vs sm90 model)" pass 60 "$LCECHECK" probe --wgmma --dump "$RES/probe-wgmma-h200.bin"
fi
# The matrix checks are stages of their own: conformance_* is `check`'s, the medium one `medium`'s.
has_stage gputests && step "ctest -L gpu -LE slow" pass 240 ctest --test-dir "$BUILD" -L gpu -LE slow -j "$JOBS" \
  -E '^(lcecheck_medium_fp64_gpu|conformance_.*)$' --output-on-failure --no-tests=error
if has_stage probe; then
  step "probe (mma.sync vs sm90 model, error vs K)" pass 120 "${TO[@]}" "$RES/probe.json" "$LCECHECK" probe \
    --dump "$RES/probe-h200.bin" --json
  step "probe replay (table)" pass 60 "$LCECHECK" probe --replay "$RES/probe-h200.bin"
fi
if has_stage check; then
  step "ctest conformance_* (matrices, GPU mutants)" pass 240 ctest --test-dir "$BUILD" \
    -L gpu -R '^conformance_' -j "$JOBS" --output-on-failure --no-tests=error
  has_stage poison && step "check fused-cuda (NaN-poisoned tiles)" pass 150 env LCE_POISON_TILES=1 \
    "$LCECHECK" check --subject fused-cuda --quiet
  step "measure fused-cuda" any 90 "${TO[@]}" "$RES/measure-fused-cuda.json" "$LCECHECK" measure --subject fused-cuda --quiet --json
  step "measure unfused-cuda" any 90 "${TO[@]}" "$RES/measure-unfused-cuda.json" "$LCECHECK" measure --subject unfused-cuda \
    --quiet --json
fi
if has_stage medium; then
  step "check fused-cuda (medium, fp64-gpu oracle)" pass 150 "$LCECHECK" check --subject fused-cuda \
    --matrix medium --oracle fp64-gpu --quiet
  # fused-host beside fused-cuda at medium shapes: one case (two with the stage medium-large); the
  # whole medium matrix of the host twins is the stage medium-host.
  ids=(fp16.untied.tp2.n512.h512.v16384.vp16384.vc4096.sum.ign10.fresh.normal.s9104)
  has_stage medium-large && ids+=(bf16.untied.tp1.n512.h1024.v32000.vp32000.vc4096.mean.ign10.fresh.normal.s9100)
  for id in "${ids[@]}"; do
    step "compare fused-host,fused-cuda ${id%%.fresh*}" pass 200 "$LCECHECK" compare \
      --subjects fused-host,fused-cuda --case "$id" --oracle fp64-gpu
  done
fi
# The host twins at medium shapes, judged by the fp64 GPU tier against their CPU goldens (golden/):
# do those bounds, measured on default + wide, hold there? fused-host's tiles use every core.
if has_stage medium-host; then
  for s in fused-host fused-host-sm90; do
    step "check $s (medium, fp64-gpu oracle)" pass 300 "${TO[@]}" "$RES/medium-$s.json" "$LCECHECK" check \
      --subject "$s" --matrix medium --oracle fp64-gpu --json
  done
fi
has_stage compare && step "compare fused-host-sm90,fused-cuda (predict x$PREDICT_FACTOR)" pass 200 \
  "${TO[@]}" "$RES/compare-predict.json" "$LCECHECK" compare --subjects fused-host-sm90,fused-cuda --matrix default \
  --predict-factor "$PREDICT_FACTOR" --predict-outputs d_hidden,d_weight --predict-precisions bf16,fp16,tf32 --json
if has_stage production-measure; then
  step "production (measure only, small shapes)" pass 120 "$LCECHECK" production --measure-only --shapes small
fi
if has_stage production; then
  for tp in ${LCE_PROD_TP:-1 8}; do
    step "production (judged, tp $tp)" pass 280 "${TO[@]}" "$RES/production-tp$tp.json" "$LCECHECK" production \
      --tp "$tp" --shapes "${LCE_PROD_SHAPES:-all}" --json
  done
fi
if has_stage sm90-production; then
  sm90_step "check fused-sm90 (medium, fp64-gpu oracle)" pass 150 "${TO[@]}" "$RES/medium-fused-sm90.json" "$LCECHECK" \
    check --subject fused-sm90 --matrix medium --oracle fp64-gpu --json
  for tp in ${LCE_PROD_TP:-1 8}; do
    sm90_step "production fused-sm90 (judged, tp $tp)" pass 280 "${TO[@]}" "$RES/production-sm90-tp$tp.json" "$LCECHECK" \
      production --subjects fused-sm90,mutant-sm90/bf16-dhidden-accum --tp "$tp" --shapes "${LCE_PROD_SHAPES:-all}" --json
  done
fi
# regen_class <policy> <subject> <arch args...>: one regeneration from this device's measurements over
# LCE_REGEN_MATRICES (default: default, wide and medium@fp64-gpu), sharded over the cores. It writes into
# this tree's golden/ (golden/sm_90/ with --arch sm_90), so the generator line each file records is the
# command that reproduces the committed file (a --golden-dir elsewhere would be recorded and refused by
# lcecheck_golden.py reproduce).
REGEN_MATRICES=()
for m in ${LCE_REGEN_MATRICES:-default wide medium@fp64-gpu}; do REGEN_MATRICES+=(--matrix "$m"); done
regen_class() {
  local policy=$1 subject=$2 extra=() jobs=$JOBS
  shift 2
  # The host subjects run their tiles on OpenMP threads (cores / jobs each): at medium shapes one
  # case takes minutes on one core (conformance/GPU_RUNS.md), so they get a quarter of the shards.
  case $subject in fused-host*) jobs=$(((JOBS + 3) / 4)) ;; esac
  case $subject in
    unfused-cuda) extra=(--allow-no-mutants "a baseline (the unfused LM head), not an implementation under test") ;;
    fused-host-sm90) extra=(--allow-no-mutants "the host twin under the sm90 GEMM model is fused_host.c itself, whose catalogued mutants fused-host's goldens kill; this class exists to predict fused-cuda (lcecheck compare --predict-factor)") ;;
  esac
  step "regen $subject" any 400 python3 "$ROOT/scripts/lcecheck_golden.py" "$@" \
    --policy "$policy" regen --subject "$subject" "${REGEN_MATRICES[@]}" \
    --jobs "$jobs" --build "$BUILD" --write "${extra[@]}" ${LCE_REGEN_LOOSEN:+--allow-loosen "$LCE_REGEN_LOOSEN"} \
    ${LCE_REGEN_FEWER:+--allow-fewer-matrices "$LCE_REGEN_FEWER"}
}
if has_stage regen; then
  # The committed goldens are the starting point (loosening is detected and must be argued) and are
  # kept in $RES/golden-before*: the tree gets them back afterwards unless LCE_REGEN_INSTALL=1.
  # GPU subjects: golden/sm_90/ (this device must be one); CPU subjects (fused-host, fused-host-sm90;
  # the medium matrix needs the fp64 GPU tier): golden/.
  mkdir -p "$RES/golden-sm_90" "$RES/golden" "$RES/golden-before-sm_90" "$RES/golden-before"
  cp "$ROOT"/golden/sm_90/*.golden "$RES/golden-before-sm_90/" 2>/dev/null
  cp "$ROOT"/golden/*.golden "$RES/golden-before/" 2>/dev/null
  for s in ${LCE_REGEN_SUBJECTS:-fused-cuda unfused-cuda}; do
    case $s in
      *-cuda) regen_class "$ROOT/golden/sm_90/policy.txt" "$s" --arch sm_90 ;;
      fused-host-sm90) regen_class "$ROOT/golden/sm_90/policy.txt" "$s" ;;
      *) regen_class "$ROOT/golden/policy.txt" "$s" ;;
    esac
  done
  cp "$ROOT"/golden/sm_90/*.golden "$RES/golden-sm_90/" 2>/dev/null
  cp "$ROOT"/golden/*.golden "$RES/golden/" 2>/dev/null
  if [ "${LCE_REGEN_INSTALL:-0}" = 1 ]; then
    echo "regen: the regenerated goldens stay in $ROOT/golden for the stages after this one"
  else
    step "restore the committed goldens in $ROOT/golden" pass 10 sh -c \
      "cp '$RES'/golden-before-sm_90/*.golden '$ROOT/golden/sm_90/' && cp '$RES'/golden-before/*.golden '$ROOT/golden/'"
  fi
fi
has_stage bench && sm90_step "bench" pass 150 sh -c "'$LCECHECK' bench --json >'$RES/bench.json' && '$LCECHECK' bench --render '$RES/bench.json'"
if has_stage bench-sm90; then
  for schedule in cooperative pingpong; do
    sm90_step "bench 8192x4096x128256, fused-sm90 $schedule" pass 90 env LCE_FUSED_SM90_SCHEDULE="$schedule" \
      "$LCECHECK" bench --shapes 8192x4096x128256 --reps 10 --warmup 2
  done
  for chunk in ${LCE_SM90_BENCH_CHUNKS:-1024 4096}; do
    sm90_step "bench 8192x4096x128256, fused-sm90 token chunk $chunk" pass 90 env LCE_FUSED_SM90_TOKEN_CHUNK="$chunk" \
      "$LCECHECK" bench --shapes 8192x4096x128256 --reps 10 --warmup 2
  done
  for mib in ${LCE_SM90_BENCH_WORKSPACES:-8 2}; do
    sm90_step "bench 8192x4096x128256, cuBLAS workspace $mib MiB" pass 90 env LCE_CUBLAS_WORKSPACE_MIB="$mib" \
      "$LCECHECK" bench --shapes 8192x4096x128256 --reps 10 --warmup 2
  done
  for vc in ${LCE_SM90_BENCH_VOCAB_CHUNKS:-4096}; do
    sm90_step "bench 8192x4096x128256, vocab chunk $vc" pass 90 "$LCECHECK" bench --shapes 8192x4096x128256 \
      --vocab-chunk "$vc" --reps 10 --warmup 2
  done
fi
if has_stage sm90-matrix; then
  sm90_step "ctest fused-cuda, fused-sm90 matrices, sm90 mutants" pass 240 ctest --test-dir "$BUILD" \
    -R '^(test_fused_cuda|test_fused_cuda_epilogue|conformance_fused_cuda_default|conformance_fused_sm90_(default|wide)|conformance_mutant_sm90_.*_caught)$' \
    -j "$JOBS" --output-on-failure --no-tests=error
  sm90_step "fused-sm90 pingpong on the default matrix" pass 120 env LCE_FUSED_SM90_SCHEDULE=pingpong \
    "$LCECHECK" check --subject fused-sm90 --matrix default --quiet
  sm90_step "fused-sm90 pingpong: tests/test_fused_sm90" pass 240 env LCE_FUSED_SM90_SCHEDULE=pingpong \
    "$BUILD/tests/test_fused_sm90"
  sm90_step "compare fused-host-sm90,fused-sm90 (predict x$PREDICT_FACTOR)" pass 200 \
    "${TO[@]}" "$RES/compare-predict-sm90.json" "$LCECHECK" compare --subjects fused-host-sm90,fused-sm90 --matrix default \
    --predict-factor "$PREDICT_FACTOR" --predict-outputs d_hidden,d_weight --predict-precisions bf16,fp16,tf32 --json
fi
if has_stage fuzz; then
  step "gpu_fuzz.sh (replay + campaigns)" pass "$(left)" env LCE_GPU_DEADLINE_S=$(($(left) - 10)) \
    OUT="$RES" LCE_GPU_BUILD="$BUILD" bash "$ROOT/scripts/gpu_fuzz.sh"
fi
if has_stage sanitizers; then
  if command -v compute-sanitizer >/dev/null; then
    # memcheck and initcheck see every kernel, cuBLAS's included: a GEMM reading one of our buffers
    # uninitialised (beta = 1) is ours to catch. racecheck is judged on our kernels by
    # scripts/gpu_racecheck.sh (why: its header).
    share=$(($(left) / 3))
    step "compute-sanitizer memcheck" pass "$share" env LCE_POISON_TILES=1 compute-sanitizer --tool memcheck \
      --error-exitcode 99 "$GPU_TEST"
    share=$(($(left) / 2))
    step "compute-sanitizer racecheck (our kernels)" pass "$share" env LCE_POISON_TILES=1 bash \
      "$ROOT/scripts/gpu_racecheck.sh" "$GPU_TEST" "$RES/racecheck.txt"
    step "compute-sanitizer initcheck" pass "$(left)" env LCE_POISON_TILES=1 compute-sanitizer --tool initcheck \
      --error-exitcode 99 "$GPU_TEST"
  else
    step_note compute-sanitizer pass "NOT FOUND"
  fi
fi

if has_stage sanitizers-sm90; then
  if command -v compute-sanitizer >/dev/null; then
    # racecheck runs unfiltered and is judged on our kernels, as in stage sanitizers (gpu_racecheck.sh's
    # header says why); the fused-sm90 GEMM's kernels are lce_fs::fs_* there.
    sm90_step "compute-sanitizer memcheck (test_fused_sm90)" pass "$(($(left) / 2))" compute-sanitizer --tool memcheck \
      --error-exitcode 99 "$BUILD/tests/test_fused_sm90"
    sm90_step "compute-sanitizer racecheck (test_fused_sm90)" pass "$(left)" bash \
      "$ROOT/scripts/gpu_racecheck.sh" "$BUILD/tests/test_fused_sm90" "$RES/racecheck-sm90.txt"
  else
    step_note "compute-sanitizer (test_fused_sm90)" pass "NOT FOUND"
  fi
fi

tar -C "$RES" -cf "$OUT/results.tar" . && echo "results: $OUT/results.tar ($(ls "$RES" | tr '\n' ' '))"
step_summary "expect: the exit status a step must have" "$OUT/log"
exit "$FAILED"
