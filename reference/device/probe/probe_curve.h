/* probe_curve.h — the error-vs-K curve of cuBLAS bf16 GEMMs beside the model's prediction.
 *
 * For each K: X = A·B by cublasGemmEx (bf16 in, fp32 accumulate and out) and R = A·B by
 * cublasDgemm of the same values (the reference: products exact in fp64, summation error at most
 * K·2^-53·sum|a_k b_k| per element), A (M x K) and B (K x N) fresh randn bf16 data per K
 * (probe_gpu.h). Metrics as conformance/judge/lce_metrics.h defines them, against R:
 *   relerr = ||X - R||_2 / ||R||_2,   bias = <X - R, R> / <R, R>   (bias < 0: results shrink)
 * over all M·N elements, and again over a sample of elements (rows x cols of the output) on which
 * the host evaluates lce_gemm_dot with the same operands under the model (default sm90) and under
 * ieee: the prediction. measured/predicted compares the sample's measured values with the model's
 * on the same elements, so sampling noise cancels. */
#ifndef PROBE_CURVE_H
#define PROBE_CURVE_H

#include <stdint.h>

#include "lce_gemm_model.h"
#include "lce_status.h"
#include "probe_gpu.h"

typedef struct probe_curve_point {
  int64_t k, m, n;
  int sample;                 /* elements in the sample (nrows · ncols) */
  double relerr, bias;        /* measured, all M·N elements */
  double relerr_s, bias_s;    /* measured, the sample */
  double pred_relerr, pred_bias;           /* the model on the sample */
  double ieee_relerr, ieee_bias;           /* sequential IEEE fp32 on the sample */
  double ref_bound;           /* normwise bound of the fp64 reference's own error on the sample */
  int64_t twin_checked, twin_mismatch;     /* sampled operands re-drawn on the host with lce_prng */
  double gemm_ms, dgemm_ms;
} probe_curve_point;

/* The host half: metrics and predictions from what probe_gpu_curve returned (io->x, io->r, the
 * sampled rows and columns); io->seed and io->k name the operands' lce_prng streams. */
lce_code probe_curve_evaluate(const lce_gemm_arch *model, const probe_curve_gpu *io, probe_curve_point *p,
                              lce_status *st);

#ifdef LCE_PROBE_WITH_CUDA
/* One K on the GPU (M = N = mn) and its evaluation; sample ~ elements in the sample (a multiple
 * of 16 columns). */
lce_code probe_curve_run(const lce_gemm_arch *model, int64_t k, int64_t mn, uint64_t seed, int sample,
                         probe_curve_point *p, lce_status *st);
#endif

#endif
