/* fused_cuda_kernels.cuh — the CUDA kernels of fused-cuda (fused_cuda_kernels.cu) and the checked-call
 * macros of every fused-cuda source. The cuBLAS GEMMs and the order of the passes live in the driver
 * (fused_cuda.cu); this header is what the driver and the bench (fused_cuda_bench.cu) share.
 *
 * Layouts: a logits tile is [tok x rows] fp32, row-major (one token per row, ld = rows), as the
 * logits GEMM writes it; per-shard statistics are [tp*n], shard-major, as in fused-host. */
#ifndef FUSED_CUDA_KERNELS_CUH
#define FUSED_CUDA_KERNELS_CUH

#include <stdint.h>

#include "lce_cuda_status.cuh"

extern "C" {
#include "lce_case.h"
#include "lce_status.h"
}

/* Every CUDA runtime and cuBLAS call and every launch, checked at its call site
 * (reference/device/lce_cuda_status.cuh): the enclosing function returns the code. */
#define LCE_CUDA_CHECK(st, call) LCE_CUDA_ON_ERROR(st, "fused-cuda", call, return lce_rc_)
#define LCE_CUBLAS_CHECK(st, call) LCE_CUBLAS_ON_ERROR(st, "fused-cuda", call, return lce_rc_)
#define LCE_CUDA_LAUNCH_CHECK(st, kernel) LCE_LAUNCH_ON_ERROR(st, "fused-cuda", kernel, return lce_rc_)

/* The option constants as fp32 kernel arguments, rounded once from double on the host exactly as
 * fused-host rounds them (see fused_host.c's header). */
typedef struct fc_options {
  float one_minus_e; /* 1 - e */
  float ev;          /* e / V of the global vocab (0: no smoothing) */
  float lambda;      /* z-loss weight (0: none) */
  float cap;         /* softcap c (0: none) */
  int tf32;          /* d_logits are rounded to tf32 after the dtype (tf32 GEMMs) */
  lce_dtype dtype;   /* the input format, also of d_logits and d_hidden */
} fc_options;

/* What the kernels read besides the tile: labels [n], class weights [v] or NULL. */
typedef struct fc_tokens {
  const int64_t *labels;
  const float *class_weight;
  int64_t n;
  int64_t ignore_index;
} fc_tokens;

/* Running statistics of the online softmax, per (shard, token): max, sum of exp(z - m), and for
 * smoothing sum_v w_v and sum_v w_v (m - z_v) relative to the same max. */
typedef struct fc_stats {
  float *m, *s, *sw, *d;
} fc_stats;

/* m = -inf, s = sw = d = 0 for count entries; z_target = 0 for n entries. */
lce_code fc_launch_stats_init(fc_stats st_buf, int64_t count, float *z_target, int64_t n, cudaStream_t stream,
                              lce_status *st);

/* Folds one tile (tokens [t0, t0+tok), global vocab rows [row0, row0+rows)) into shard statistics
 * `shard` (already offset to shard r, indexed by token), recording the label's softcapped logit when
 * the label's row is in the tile. */
lce_code fc_launch_chunk_stats(const float *tile, int64_t tok, int64_t rows, int64_t t0, int64_t row0,
                               fc_tokens tk, fc_options o, fc_stats shard, float *z_target, cudaStream_t stream,
                               lce_status *st);

/* The vocab-parallel merge in rank order, then lse [n], the smoothing factor A [n] and loss_token
 * [n] (0 for ignored tokens). */
lce_code fc_launch_merge(fc_stats all, int tp, const float *z_target, fc_tokens tk, fc_options o, float *lse,
                         float *smooth_a, float *loss_token, cudaStream_t stream, lce_status *st);

/* d_logits of one tile, rounded to the input dtype (then to tf32 with tf32 GEMMs), written into ds
 * ([tok x rows] in the dtype); 0 for ignored tokens. dl [n] is the part of d loss / d loss_token
 * folded into d_logits (lce_fused_grad_split: 1, a power of two, or g where g is 0). */
lce_code fc_launch_chunk_dlogits(const float *tile, void *ds, int64_t tok, int64_t rows, int64_t t0, int64_t row0,
                                 fc_tokens tk, fc_options o, const float *dl, const float *lse,
                                 const float *smooth_a, cudaStream_t stream, lce_status *st);

/* Zeroes the hidden rows ([n x h] in dtype) of ignored tokens, so that the backward GEMMs never
 * multiply their (possibly non-finite) hidden values by a zero d_logit. */
lce_code fc_launch_zero_ignored_rows(void *x, lce_dtype dtype, int64_t h, fc_tokens tk, cudaStream_t stream,
                                     lce_status *st);

/* x [count] fp32 rounded in place to tf32 (cvt.rna.tf32.f32: ties away from zero). */
lce_code fc_launch_round_tf32(float *x, int64_t count, cudaStream_t stream, lce_status *st);

/* out [tok x h] = x [tok x h] (dtype) with row i scaled by rho[i] in fp32 and rounded to the dtype
 * (then to tf32 when tf32 is set); rows with rho[i] = 1 copied as they are. */
lce_code fc_launch_scale_rows(const void *x, void *out, lce_dtype dtype, int64_t tok, int64_t h, const float *rho,
                              int tf32, cudaStream_t stream, lce_status *st);

/* d_hidden [n x h] in dtype from the accumulation buffer acc (fp32, or in acc_dtype), each row scaled
 * by rho [n] in fp32 first; ignored tokens' rows exactly 0 (a non-finite W row times their zero
 * d_logits must not reach them). */
lce_code fc_launch_finish_dhidden(const void *acc, lce_dtype acc_dtype, const float *rho, void *d_hidden,
                                  lce_dtype dtype, int64_t h, fc_tokens tk, cudaStream_t stream, lce_status *st);

/* Fills x [count] of dtype with values uniform in [-scale, scale) from a counter-based hash of
 * (seed, index): fresh, non-zero bench inputs. Labels uniform in [0, v). */
lce_code fc_launch_fill_uniform(void *x, lce_dtype dtype, int64_t count, float scale, uint64_t seed,
                                cudaStream_t stream, lce_status *st);
lce_code fc_launch_fill_labels(int64_t *labels, int64_t n, int64_t v, uint64_t seed, cudaStream_t stream,
                               lce_status *st);

#endif
