#!/usr/bin/env bash
# scripts/gpu_fuzz.sh — the fuzz campaigns on the H200, in one command (through the device tool,
# carrying .deps/root and .gpufuzz; .deps/cutlass-* may stay behind, as the bundle with fused-sm90 is
# ~35 MiB of the 64 MiB a call carries: the replay build needs no CUTLASS, but a build folder that
# gpu_run.sh configured with it does, so then name another, e.g. LCE_GPU_BUILD=build-gpu-fuzz):
#   1. replay: the normal build's fuzz_replay_subject (configured and built here like gpu_run.sh)
#      over the committed corpus with LCE_FUZZ_SUBJECT=fused-cuda: no violation, cases judged (exit
#      77 = every case skipped, counts as a failure here); the same corpus must kill
#      mutant-cuda/bf16-dhidden-accum (--expect-violations);
#   2. campaign: the libFuzzer build with fused-cuda made on the workstation
#      (`python3 scripts/fuzz_campaign.py bundle-gpu`, folder .gpufuzz/) for LCE_GPU_FUZZ_SECONDS
#      (default 120) on fused-cuda from the committed seeds: must find nothing;
#   3. the same campaign on mutant-cuda/bf16-dhidden-accum: must find it;
#   4. with LCE_GPU_FUZZ_SEEDS (e.g. "1 2 3 4 5"): one more campaign per seed on each subject of
#      LCE_GPU_FUZZ_SEED_SUBJECTS (default fused-cuda; e.g. "fused-cuda fused-sm90"), over
#      LCE_GPU_FUZZ_JOBS processes sharing the GPU (fuzz_campaign.py run --target fuzz_subject), each
#      for LCE_GPU_FUZZ_SEED_SECONDS (default 60): must find nothing; their report.md and report.json
#      come back in $OUT/seed-campaigns.tar.
# Everything is tee'd into $OUT/fuzz-log; $OUT also gets fuzz-summary.txt (the table that ends the
# log), replay-fused-cuda.txt and one campaign-<subject>.json per campaign (5 files: the device tool
# brings back 8 at most). Campaign findings directories stay on the machine; their .finding reports
# are printed into the log.
#
#   OUT=/tmp/out bash scripts/gpu_fuzz.sh      (the device tool sets OUT)
# Environment: LCE_GPU_BUILD (normal build dir, default build-gpu: shared with gpu_run.sh),
#   LCE_GPU_FUZZ_BUNDLE (default .gpufuzz), LCE_GPU_FUZZ_SECONDS (default 120), LCE_GPU_JOBS,
#   LCE_GPU_FUZZ_SEEDS, LCE_GPU_FUZZ_SEED_SUBJECTS, LCE_GPU_FUZZ_JOBS (default 8), LCE_GPU_FUZZ_SEED_SECONDS (step 4),
#   LCE_GPU_DEADLINE_S (default 540 s from the start: every step runs under it).
# Exit status: 0 when every step met its expectation, 1 otherwise.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/gpu_common.sh
. "$ROOT/scripts/gpu_common.sh"
gpu_start fuzz-log 540 "$@"
BUNDLE=${LCE_GPU_FUZZ_BUNDLE:-$ROOT/.gpufuzz}
SECONDS_PER_CAMPAIGN=${LCE_GPU_FUZZ_SECONDS:-120}
JOBS=${LCE_GPU_JOBS:-$(nproc)}
WORK=$(mktemp -d /tmp/lce-gpu-fuzz.XXXXXX) # findings directories: too many files for $OUT
# The bundle's MPFR/GMP, and the CUDA runtime and cuBLAS wherever this machine's toolkit keeps them
# (the binary's rpath names the workstation's /usr/local/cuda/lib).
CUDA_HOME_GUESS=$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")
export LD_LIBRARY_PATH="$BUNDLE/lib:$CUDA_HOME_GUESS/lib64:$CUDA_HOME_GUESS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Goldens from this tree (the binaries have the workstation's path compiled in).
export LCE_GOLDEN_DIR=$ROOT/golden
# ASan beside the CUDA driver (google/sanitizers#629); the harness has the same defaults built in.
export ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0:replace_intrin=0:detect_leaks=0}
FUZZER=$BUNDLE/fuzz_subject
REPLAY=$BUILD/fuzz_replay_subject
CORPUS=$ROOT/fuzz/corpus/subject
MUTANT=mutant-cuda/bf16-dhidden-accum

# campaign <subject> <expected rc: 0 nothing found, 1 found>: fuzz_campaign.py run on the bundle.
campaign() {
  local subject=$1 expect=$2 json
  json=$OUT/campaign-${subject//\//_}.json
  step "campaign $subject (${SECONDS_PER_CAMPAIGN}s)" "$expect" $((SECONDS_PER_CAMPAIGN + 60)) \
    sh -c "python3 '$ROOT/scripts/fuzz_campaign.py' run --build '$BUNDLE' --subject '$subject' \
      --seconds $SECONDS_PER_CAMPAIGN --findings-root '$WORK/campaigns' --json >'$json'"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('  found', r['found'], '| execs', r['executions'],
    '| s to finding', r['seconds_to_finding'], '| error', r['error']); [print('  finding', f['case'] + ':', f['summary'])
    for f in r['findings']]" "$json" 2>/dev/null
  for f in "$WORK"/campaigns/"${subject//\//_}"/*/*.finding; do [ -f "$f" ] && { echo "---- $f"; cat "$f"; }; done
  local log
  log=$(ls -t "$WORK"/campaigns/"${subject//\//_}"/*/fuzzer.log 2>/dev/null | head -1)
  [ -n "$log" ] && { echo "---- tail of $log"; tail -25 "$log"; }
}

echo "gpu_fuzz.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), root $ROOT, build $BUILD, bundle $BUNDLE, out $OUT"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
[ -f "$BUNDLE/BUILD_INFO" ] && cat "$BUNDLE/BUILD_INFO"

# 1. replay with the normal build (gcc + nvcc, no sanitizers)
gpu_build "build fuzz_replay_subject" 240 -- -j "$JOBS" --target fuzz_replay_subject
step "replay corpus, fused-cuda" 0 90 sh -c "LCE_FUZZ_SUBJECT=fused-cuda LCE_FUZZ_FINDINGS='$WORK/replay' \
  '$REPLAY' '$CORPUS' >'$OUT/replay-fused-cuda.txt' 2>&1; rc=\$?; tail -8 '$OUT/replay-fused-cuda.txt'; exit \$rc"
step "replay corpus kills $MUTANT" 0 90 sh -c "LCE_FUZZ_SUBJECT=$MUTANT LCE_FUZZ_FINDINGS='$WORK/replay-mutant' \
  '$REPLAY' --expect-violations '$CORPUS' >'$WORK/replay-mutant.txt' 2>&1; rc=\$?; tail -7 '$WORK/replay-mutant.txt'; exit \$rc"

# 2./3. the carried libFuzzer build. Its C++ runtime must be at least the workstation's: when the
# machine's own is older the binary does not load, and the bundle's copy is put first.
if [ -x "$FUZZER" ]; then
  if ! "$FUZZER" -help=1 >/dev/null 2>&1; then
    echo "the bundled fuzzer does not load with this machine's C++ runtime; using $BUNDLE/lib-fallback"
    export LD_LIBRARY_PATH="$BUNDLE/lib-fallback:$LD_LIBRARY_PATH"
  fi
  step "ldd bundle (nothing 'not found')" 0 30 sh -c "ldd '$FUZZER'; ! ldd '$FUZZER' | grep -q 'not found'"
  campaign fused-cuda 0
  campaign "$MUTANT" 1
  seconds=${LCE_GPU_FUZZ_SEED_SECONDS:-60}
  for subject in ${LCE_GPU_FUZZ_SEED_SUBJECTS:-fused-cuda}; do
    for seed in ${LCE_GPU_FUZZ_SEEDS:-}; do
      step "campaign $subject -seed=$seed, ${LCE_GPU_FUZZ_JOBS:-8} jobs (${seconds}s)" 0 $((seconds + 90)) \
        python3 "$ROOT/scripts/fuzz_campaign.py" run --target fuzz_subject --subject "$subject" --build "$BUNDLE" \
        --jobs "${LCE_GPU_FUZZ_JOBS:-8}" --seed "$seed" --seconds "$seconds" --findings-root "$WORK/seeds" \
        --out "$WORK/seed-${subject//\//_}-$seed"
    done
  done
  if [ -n "${LCE_GPU_FUZZ_SEEDS:-}" ]; then
    (cd "$WORK" && tar -cf "$OUT/seed-campaigns.tar" seed-*/report.md seed-*/report.json 2>/dev/null)
  fi
else
  echo "no $FUZZER: build it on the workstation with python3 scripts/fuzz_campaign.py bundle-gpu, carry .gpufuzz"
  step_note "campaigns (bundle)" 0 "NOT RUN (no bundle)"
fi

step_summary "campaign: exit 0 = nothing found, 1 = found" "$OUT/fuzz-log" | tee "$OUT/fuzz-summary.txt"
exit "$FAILED"
