/* probe_gpu.h — the GPU side of lcecheck probe (probe_mma.cu, probe_curve.cu; built only where
 * CUDA is enabled, and then the consumers see LCE_PROBE_WITH_CUDA). Every entry point returns
 * LCE_ENODEV with the runtime's reason where no GPU is present. */
#ifndef PROBE_GPU_H
#define PROBE_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "lce_status.h"
#include "probe_vectors.h"

/* The lce_prng stream of the curve's A (which = 0) or B (which = 1) at inner size k. */
#define PROBE_CURVE_STREAM(k, which) ((((uint64_t)(k)) << 1) | (uint64_t)(which))

#ifdef __cplusplus
extern "C" {
#endif

/* Runs every tile of ts through one mma.sync instruction (m16n8k16 bf16/fp16, m16n8k8 tf32, fp32
 * accumulate, one warp per tile) and stores the results in ts->d. */
lce_code probe_gpu_mma(probe_tileset *ts, lce_status *st);

/* The same through wgmma.mma_async m64n256k16 (bf16/fp16 only, shared-memory operands: the
 * instruction fused-sm90's logits GEMM issues), one warp group per tile (probe_wgmma.cuh). Defined only
 * in builds with CUTLASS's headers, where lce_probe's consumers see LCE_PROBE_WITH_WGMMA. */
lce_code probe_gpu_wgmma(probe_tileset *ts, lce_status *st);

/* One point of the error-vs-K curve. A is M x K, B is K x N, bf16 values of randn drawn by a
 * device twin of lce_rand_normal (stream probe_curve_stream(K, 0) for A, (K, 1) for B; element
 * (i, k) of A has index i*K + k, element (k, j) of B index j*K + k), rounded to bf16 (RNE from
 * double, as lce_bf16_from_double). Computes X = A·B with cublasGemmEx (bf16 in, CUBLAS_COMPUTE_32F,
 * fp32 out) and R = A·B with cublasDgemm of the same values, and copies back X and R ([M*N],
 * column-major: element (i, j) at i + j*M) and rows rows[0..nrows) of A and columns cols[0..ncols)
 * of B (bf16 bits, K each) for the host's prediction. */
typedef struct probe_curve_gpu {
  int64_t m, n, k;
  uint64_t seed;
  const int *rows, *cols;
  int nrows, ncols;
  float *x;        /* [m*n] out */
  double *r;       /* [m*n] out */
  uint16_t *a_rows;/* [nrows*k] out */
  uint16_t *b_cols;/* [ncols*k] out */
  double gemm_ms, dgemm_ms;
} probe_curve_gpu;

lce_code probe_gpu_curve(probe_curve_gpu *io, lce_status *st);

#ifdef __cplusplus
}
#endif

#endif
