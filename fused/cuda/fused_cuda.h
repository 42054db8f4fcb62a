/* fused_cuda.h — the fused-cuda subject (fused_cuda.cu, built by fused/cuda.cmake when CUDA is
 * enabled): the fused FLCE algorithm of fused-host on the GPU, cuBLAS GEMMs plus CUDA kernels for the
 * softmax epilogue. Its run() returns LCE_ENODEV where no GPU is present.
 *
 * The GPU variants of the seed-bug mutants and of the mean factor folded into d_logits are fused_cuda.cu compiled again with one
 * LCE_MUTANT_CUDA_* switch; they exist only in builds with mutants (lce_fused_cuda_mutants). */
#ifndef FUSED_CUDA_H
#define FUSED_CUDA_H

#include "lce_device.h"
#include "lce_subject.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const lce_subject lce_fused_cuda_subject; /* "fused-cuda" */

/* fused-cuda's run with the whole loss gradient g folded into d_logits before they are rounded to
 * the input dtype (the 1/n_valid bias kept), as an unfused PyTorch model computes them: what
 * unfused-cuda runs. */
lce_code lce_fused_cuda_run_folded(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st);

#ifdef LCE_WITH_MUTANTS
extern const lce_subject lce_mutant_cuda_bf16_dhidden_accum_subject;      /* "mutant-cuda/bf16-dhidden-accum" */
extern const lce_subject lce_mutant_cuda_tied_weight_when_untied_subject; /* "mutant-cuda/tied-weight-when-untied" */
extern const lce_subject lce_mutant_cuda_mean_factor_in_dlogits_subject;  /* "mutant-cuda/mean-factor-in-dlogits" */
#endif

/* ---- bench (fused_cuda_bench.cu): fused-cuda beside the plain cuBLAS GEMMs ------------------- */
/* A second device algorithm the bench times beside fused-cuda on the same inputs (fused-sm90's,
 * fused_sm90.h); fused_cuda_driver.cuh defines it. */
typedef struct lce_cuda_bench_engine lce_cuda_bench_engine;

typedef struct lce_cuda_bench_config {
  int64_t n, h, v;        /* shape (bf16, untied, tp 1, reduction mean, no ignored tokens) */
  int64_t vocab_chunk;    /* rows per vocab chunk of fused-cuda */
  int warmup, reps;       /* untimed warm-up runs, then timed repetitions (median reported) */
  uint64_t seed;          /* fresh inputs every repetition: seed + repetition */
  const lce_cuda_bench_engine *engine; /* NULL, or a second algorithm timed after fused-cuda */
} lce_cuda_bench_config;

typedef struct lce_cuda_bench_result {
  double fwd_ms, bwd_ms;            /* fused-cuda forward and backward, medians */
  double gemm_ms[4];                /* plain cuBLAS, medians: the logits GEMM, the same GEMM again (the
                                     * backward's recomputation), d_hidden, d_weight (2·N·H·V each) */
  double gemm_total_ms;             /* median of the sum of the four per repetition: the GEMMs the
                                     * algorithm performs: the baseline */
  double gemm3_total_ms;            /* median of logits + d_hidden + d_weight: a path that keeps the logits */
  double workspace_bytes;           /* device bytes fused-cuda allocated beyond inputs and outputs */
  double measured_extra_bytes;      /* drop of cudaMemGetInfo's free memory while the workspace lives */
  double loss_mean;                 /* mean loss_token of the last repetition (sanity: finite, ~log V scale) */
  char device[128];
  /* The engine (config.engine), timed after fused-cuda's workspace is freed, on the same inputs: */
  int engine_ran;                   /* 1: the fields below hold its figures; 0: engine_error says why */
  char engine_error[256];
  double engine_fwd_ms, engine_bwd_ms, engine_workspace_bytes, engine_measured_extra_bytes, engine_loss_mean;
  char engine_note[128];            /* the engine's own description of its workspace */
  /* against fused-cuda's outputs on the last repetition's inputs: max |lse difference|, normwise
   * relative difference of d_hidden and of the weight gradient (its first 2^24 elements) */
  double engine_lse_maxdiff, engine_dhidden_reldiff, engine_gradw_reldiff;
} lce_cuda_bench_result;

/* Runs one shape: allocates inputs and outputs, times fused-cuda and the GEMMs with CUDA events in
 * the same process. LCE_ENODEV without a GPU. */
lce_code lce_cuda_bench_run(const lce_cuda_bench_config *cfg, lce_cuda_bench_result *res, lce_status *st);

#ifdef __cplusplus
}
#endif

#endif
