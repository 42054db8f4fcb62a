#!/usr/bin/env bash
# scripts/subjects/gpu_external.sh — the field's FLCE kernels judged on a GPU machine without network
# (the H200 through the device tool; carry the tree with .deps, .whl and .subjects, as
# conformance/GPU_RUNS.md says), in one command:
#   build       configure + build lcecheck (Release, sm_90; MPFR/GMP from .deps)
#   production  `lcecheck export` of each production case of LCE_EXT_CASES (space-separated ids; default
#               one: 8192 x 4096 x 128256, bf16, untied, mean, 5% ignored; tag prod-<k> for the k-th, 1-based)
#               one at a time, every adapter run over it (run_all.sh), each answer judged by the fp64
#               GPU tier kept on the device against golden/sm_90/fused-cuda.golden (loss,
#               d_hidden, d_weight, d_embedding: what production judges), and the lcecheck subjects of
#               LCE_EXT_CHECKS (default "fused-cuda unfused-cuda"; "" for none; each against
#               golden/sm_90/<subject>.golden) judged the same way on the same inputs;
#               production_rows.py's table of them ends the stage (production-rows.json)
#   matrix      the same over matrices, judged against golden/sm_90/fused-cuda.golden (the bounds
#               fused-cuda is held to). LCE_EXT_MATRIX lists them, space-separated, each
#               NAME[@ORACLE][=SUBJECT[:JOBS],...]: the oracle the judge uses (fast: tier 1 on the CPU,
#               undecided elements by MPFR; or fp64-gpu, the default), the subjects (default
#               LCE_EXT_SUBJECTS) and how many adapter processes share each one's cases (default
#               LCE_EXT_JOBS, 1). Every (matrix, subject) runs side by side with the others: its
#               adapters under a time limit that leaves its judge LCE_EXT_JUDGE_S (default 40 s for
#               fast, 100 s for fp64-gpu), the cases not reached skipped as such ("reached K of N" in
#               the log), then its judge. Default `default@fast`.
#   unit-test   Megatron-LM's own test_correctness of its fused LCE (megatron_fused_lce.py unit-test)
#   bench       `lcecheck bench --peers` (the carried wheels installed first): fused-cuda and the external
#               kernels side by side, each beside its process's three-GEMM floor; bench.json, its table
#   bias        the production stage's judging at one shape and seed twice, with no ignored label
#               (n_valid = N, a power of two) and with 5% ignored, for the lcecheck subjects of
#               LCE_EXT_BIAS_CHECKS (default "fused-cuda fused-sm90") and the external kernels of
#               LCE_EXT_BIAS_SUBJECTS; bias_table.py prints d_hidden and d_weight relerr and bias per
#               subject and n_valid and writes bias.json (scripts/plot_errors.py bias draws it)
#   rootcause   scripts/subjects/root_cause.py on the GPU: the default matrix exported, and for each subject
#               of LCE_EXT_RC_SUBJECTS (default torch-eager,megatron-vocab-parallel,te-parallel-ce; torch-compile
#               too, slower: it compiles per case) the cases conformance/external-rootcause.json lists as
#               failing a gradient metric, answered once per
#               variant (one rounding of the peer's LM head removed, or g moved after the GEMMs) and judged by
#               tier 1 against golden/sm_90/fused-cuda.golden; rootcause-<subject>.json (conformance/EXTERNAL.md,
#               "Root causes of the default-matrix gradient failures")
# Stages from LCE_EXT_STAGES (default: build production matrix); the judges' JSON, every runner's
# meta.json and the logs go to $OUT (results.tar), a summary table ends the log.
#
#   OUT=/tmp/out bash scripts/subjects/gpu_external.sh
# Environment: LCE_EXT_SUBJECTS (run_all.sh names, default torch-eager,liger,liger-fp32-accum,cce,
#   cce-exact,megatron-vocab-parallel), LCE_EXT_CASES (the production case ids), LCE_EXT_CHECKS, LCE_EXT_ADAPTERS_S (the
#   production adapters' time limit per case, default 240 s), LCE_EXT_MATRIX, LCE_EXT_JOBS,
#   LCE_EXT_JUDGE_S, TORCHINDUCTOR_COMPILE_THREADS (default 1 in the matrix stage: many compiling processes),
#   LCE_EXT_BENCH_PEERS (default all), LCE_EXT_BENCH_ARGS (more bench options, e.g. "--shapes 8192x4096x128256
#   --reps 10"), LCE_EXT_BIAS_SHAPE (default n8192.h4096.v128256.vp128256), LCE_EXT_BIAS_SEED (default 98: its
#   grad_output 0.98048 makes go/8192 a bf16 number to 1.1e-5, so that at n_valid = 8192 the folded factor's
#   rounding vanishes), LCE_EXT_BIAS_SUBJECTS (default torch-eager,liger,cce,megatron-fused-lce), LCE_EXT_BIAS_CHECKS,
#   LCE_EXT_RC_SUBJECTS (default torch-eager,megatron-vocab-parallel,te-parallel-ce), LCE_EXT_RC_DEVICE (default
#   cuda; cpu for a dry run: te-parallel-ce then needs TRITON_INTERPRET=1), LCE_GPU_BUILD (default
#   build-gpu), LCE_GPU_DEADLINE_S (default 560 s: every step runs under it), LCE_WHEEL_WAIT_S (site_wheels.sh: how
#   long an install waits for the parts of a split wheel; under scripts/gpu_detached.sh).
# Exit status: 0 when every step met its expectation, 1 otherwise.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/gpu_common.sh
. "$ROOT/scripts/gpu_common.sh"
gpu_start log 560 "$@"
STAGES=${LCE_EXT_STAGES:-build production matrix}
SUBJECTS=${LCE_EXT_SUBJECTS:-torch-eager,liger,liger-fp32-accum,cce,cce-exact,megatron-vocab-parallel}
CASES=${LCE_EXT_CASES:-bf16.untied.tp1.n8192.h4096.v128256.vp128256.vc4096.mean.ign5.fresh.normal.s1}
MATRIX=${LCE_EXT_MATRIX:-default@fast}
RES=$(mktemp -d /tmp/lce-ext-results.XXXXXX)
WORK=$(mktemp -d /tmp/lce-ext-work.XXXXXX)
LCECHECK=$BUILD/lcecheck
echo "gpu_external.sh: $(date -u +%Y-%m-%dT%H:%M:%SZ), root $ROOT, stages: $STAGES, subjects: $SUBJECTS"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv

has_stage build && gpu_build build 300 -DLCE_BUILD_TESTS=OFF -- -j "$(nproc)" --target lcecheck

# judge_all <tag> <export dir> <golden> <subjects> <judge options...>: every answered copy of the export
# (of the run_all.sh subjects named) judged (the options name the oracle).
judge_all() {
  local tag=$1 dir=$2 golden=$3 subjects=$4
  shift 4
  local s
  IFS=, read -r -a list <<< "$subjects"
  for s in "${list[@]}"; do
    step "judge $s ($tag)" any 120 "${TO[@]}" "$RES/$tag-$s.json" "$LCECHECK" judge --dir "$dir.results/$s" \
      --subject-name "$s" --golden-class fused-cuda --golden "$golden" --quiet --json "$@"
    mkdir -p "$RES/meta-$tag-$s"
    (cd "$dir.results/$s" && find . -name meta.json -o -name skip.txt | tar -cf - -T -) | tar -xf - -C "$RES/meta-$tag-$s"
  done
}

if has_stage bench; then
  # shellcheck source=scripts/subjects/site_wheels.sh
  . "$ROOT/scripts/subjects/site_wheels.sh"
  site_wheels /tmp/site 1 || step_note "install the carried wheels" pass "pip failed"
  # shellcheck disable=SC2086 # LCE_EXT_BENCH_ARGS is a list of options
  step "bench --peers ${LCE_EXT_BENCH_PEERS:-all}" any 400 "${TO[@]}" "$RES/bench.json" "$LCECHECK" bench \
    --peers "${LCE_EXT_BENCH_PEERS:-all}" ${LCE_EXT_BENCH_ARGS:-} --json
  step "bench table" pass 20 "$LCECHECK" bench --render "$RES/bench.json"
fi

# judge_case <tag> <case id> <run_all.sh subjects> <lcecheck subjects...>: the case exported, every
# adapter run over it, each answer judged by the fp64 GPU tier kept on the device against the production
# golden, and the lcecheck subjects checked the same way on the same inputs, each against its own class's
# golden in this tree's golden/sm_90/ (check's default lookup under LCE_GOLDEN_DIR: fused-sm90 is judged by
# fused-cuda.golden); results $RES/<tag>-<subject>.json.
judge_case() {
  local tag=$1 case=$2 subjects=$3 s
  shift 3
  step "export $case" pass 120 "$LCECHECK" export --case "$case" --dir "$WORK/$tag" --quiet
  step "adapters ($tag)" any "${LCE_EXT_ADAPTERS_S:-240}" bash "$ROOT/scripts/subjects/run_all.sh" --subjects "$subjects" "$WORK/$tag"
  for s in "$@"; do
    step "check $s ($tag)" any 90 "${TO[@]}" "$RES/$tag-$s.json" env LCE_GOLDEN_DIR="$ROOT/golden" "$LCECHECK" check \
      --subject "$s" --case "$case" --oracle fp64-gpu --on-device \
      --outputs loss,d_hidden,d_weight,d_embedding --quiet --json
  done
  judge_all "$tag" "$WORK/$tag" "$ROOT/golden/sm_90/fused-cuda.golden" "$subjects" --oracle fp64-gpu \
    --on-device --outputs loss,d_hidden,d_weight,d_embedding
}

if has_stage production; then
  k=0
  for case in $CASES; do
    k=$((k + 1))
    # shellcheck disable=SC2086 # LCE_EXT_CHECKS is a list of subjects
    judge_case "prod-$k" "$case" "$SUBJECTS" ${LCE_EXT_CHECKS-fused-cuda unfused-cuda}
    rm -rf "${WORK:?}/prod-$k" "$WORK/prod-$k.results" # 6 GB per copy of the inputs at 8192 x 4096 x 128256
  done
  step "production rows" pass 30 python3 "$ROOT/scripts/subjects/production_rows.py" "$RES" --json "$RES/production-rows.json"
fi

if has_stage bias; then
  BIAS_SUBJECTS=${LCE_EXT_BIAS_SUBJECTS:-torch-eager,liger,cce,megatron-fused-lce}
  for ign in 0 5; do
    tag=bias-ign$ign
    judge_case "$tag" "bf16.untied.tp1.${LCE_EXT_BIAS_SHAPE:-n8192.h4096.v128256.vp128256}.vc4096.mean.ign$ign.fresh.normal.s${LCE_EXT_BIAS_SEED:-98}" \
      "$BIAS_SUBJECTS" ${LCE_EXT_BIAS_CHECKS-fused-cuda fused-sm90}
    find "$WORK/$tag" -name grad_output.npy -exec cp {} "$RES/$tag-grad_output.npy" \; # go, for the table
    rm -rf "${WORK:?}/$tag" "$WORK/$tag.results"
  done
  step "bias table" pass 30 python3 "$ROOT/scripts/subjects/bias_table.py" "$RES" --json "$RES/bias.json"
fi

# matrix_subject <matrix> <oracle> <subject> <jobs>: one subject's adapters over the exported matrix as
# <jobs> processes, starting no case after the time that leaves the judge its share (the step's own
# limit adds the last case's grace), a summary line with the cases they reached, then the judge; run
# side by side with the others (bg_steps).
# shellcheck disable=SC2317 # called through bg_steps
matrix_subject() {
  local m=$1 oracle=$2 s=$3 jobs=$4 judge_s grace=45 limit
  judge_s=${LCE_EXT_JUDGE_S:-$([ "$oracle" = fast ] && echo 40 || echo 100)}
  limit=$(($(left) - judge_s))
  step "adapters $s ($m, $jobs processes, time limit $((limit - grace)) s)" any "$limit" \
    bash "$ROOT/scripts/subjects/run_all.sh" --no-install --subjects "$s" --jobs "$jobs" \
    --time-limit $((limit - grace)) "$WORK/matrix-$m"
  local c out total=0 reached=0
  for c in "$WORK/matrix-$m.results/$s"/*/case.json; do
    [ -f "$c" ] || continue # no copy: the adapters did not run
    out=${c%/case.json}/out total=$((total + 1))
    if [ -f "$out/meta.json" ] || { [ -f "$out/skip.txt" ] && ! grep -q '^not reached' "$out/skip.txt"; }; then
      reached=$((reached + 1))
    fi
  done
  step_note "cases reached: $s ($m)" any "$reached of $total (run or skipped for cause)"
  judge_all "$m" "$WORK/matrix-$m" "$ROOT/golden/sm_90/fused-cuda.golden" "$s" --oracle "$oracle"
}

if has_stage matrix; then
  # shellcheck source=scripts/subjects/site_wheels.sh
  . "$ROOT/scripts/subjects/site_wheels.sh"
  site_wheels /tmp/site 1 || step_note "install the carried wheels" pass "pip failed"
  # Inductor's default is a pool of compile workers per process; the matrix runs many processes.
  export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-1}
  for entry in $MATRIX; do
    m=${entry%%[@=]*}
    if [ -d "$WORK/matrix-$m" ]; then # its results and logs are named by the matrix
      echo "gpu_external.sh: matrix $m listed twice in LCE_EXT_MATRIX" >&2
      step_note "export $m" pass "listed twice: not run"
      MATRIX=${MATRIX/"$entry"/}
      continue
    fi
    step "export $m" pass 120 "$LCECHECK" export --matrix "$m" --dir "$WORK/matrix-$m" --quiet
  done
  for entry in $MATRIX; do
    spec=${entry%%=*} m=${entry%%[@=]*} oracle=fp64-gpu names=$SUBJECTS
    case "$spec" in *@*) oracle=${spec#*@} ;; esac
    case "$entry" in *=*) names=${entry#*=} ;; esac
    IFS=, read -r -a items <<< "$names"
    for item in "${items[@]}"; do
      s=${item%%:*} jobs=${LCE_EXT_JOBS:-1}
      case "$item" in *:*) jobs=${item#*:} ;; esac
      bg_steps "$RES/log-$m-$s.txt" matrix_subject "$m" "$oracle" "$s" "$jobs"
    done
  done
  bg_wait
fi

if has_stage rootcause; then
  step "export default (rootcause)" pass 60 "$LCECHECK" export --matrix default --dir "$WORK/rootcause" --quiet
  IFS=, read -r -a rc_subjects <<< "${LCE_EXT_RC_SUBJECTS:-torch-eager,megatron-vocab-parallel,te-parallel-ce}"
  for s in "${rc_subjects[@]}"; do
    step "root_cause.py $s" pass 200 python3 "$ROOT/scripts/subjects/root_cause.py" run --subject "$s" \
      "$WORK/rootcause" --device "${LCE_EXT_RC_DEVICE:-cuda}" --cases-from "$ROOT/conformance/external-rootcause.json" \
      --recorded "$ROOT/conformance/external-rootcause.json" --out "$WORK/rootcause.results" --lcecheck "$LCECHECK" \
      --json "$RES/rootcause-$s.json"
  done
fi

if has_stage unit-test; then
  step "Megatron-LM test_correctness (standalone)" any 240 bash "$ROOT/scripts/subjects/run_all.sh" --unit-test all \
    --out "$RES/megatron"
fi

tar -cf "$OUT/results.tar" -C "$RES" . && echo "results: $OUT/results.tar ($(ls "$RES" | tr '\n' ' '))"
step_summary "expect: the exit status a step must have" "$OUT/log"
exit "$FAILED"
