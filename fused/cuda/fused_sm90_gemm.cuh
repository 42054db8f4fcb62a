/* fused_sm90_gemm.cuh — the Hopper logits GEMM of fused-sm90 with its two fused epilogues
 * (fused_sm90_gemm.cu: CUTLASS/CuTe sm_90a, TMA + wgmma, warp-specialized) and the small kernels
 * around it, as the driver (fused_sm90.cu) calls them. Plain launch functions: the CUTLASS types stay
 * inside fused_sm90_gemm.cu, the only translation unit that includes CUTLASS.
 *
 * The GEMM: logits[m x n] = a[m x k] · b[n x k]^T, a the token rows (hidden), b the vocab rows (an
 * output-weight range), both k-contiguous with a row stride of k elements (a multiple of 8: TMA
 * needs 16-byte strides; fs_launch_pad_rows makes such a copy), bf16/fp16 or tf32 (fp32 operands
 * whose values are tf32) in, fp32 accumulation. The logits never
 * reach memory: the epilogue consumes the accumulators in registers. */
#ifndef FUSED_SM90_GEMM_CUH
#define FUSED_SM90_GEMM_CUH

#include <stdint.h>

#include "fused_cuda_kernels.cuh"

typedef enum fs_epilogue {
  FS_STATS,   /* online-softmax partials per (token, CTA's vocab range): no tile in memory */
  FS_DLOGITS  /* d_logits in the input dtype into ds (the backward's recomputation) */
} fs_epilogue;

/* One launch. Token i = token0 + local row; vocab row v = vocab0 + local column. */
typedef struct fs_gemm {
  lce_dtype dtype;    /* bf16, fp16, or fp32 with o.tf32 (tf32 wgmma) */
  const void *a;      /* [m x k] dtype, row stride k */
  const void *b;      /* [n x k] dtype, row stride k */
  int64_t m, n, k;
  int64_t token0, vocab0;
  fc_tokens tk;       /* labels [global n], class weights [v] or NULL */
  fc_options o;
  /* FS_STATS */
  float *partial;     /* [splits][m][4]: (max, sum, sum w, sum w (max - z)) of each CTA's vocab range */
  float *z_target;    /* [global n]: the label's softcapped logit, written by the element's owner */
  /* FS_DLOGITS */
  const float *dl, *lse, *smooth_a; /* [global n] each */
  void *ds;           /* [m x ld_ds] dtype */
  int64_t ld_ds;
  int *layout_error;  /* device flag: set when the accumulator layout is not the one the epilogue assumes */
  int pingpong;       /* the consumer warp groups' schedule: 1 pingpong, 0 cooperative (fused_sm90_gemm_config.cuh) */
} fs_gemm;

/* The vocab tile (columns per CTA tile) and the token tile. */
enum { FS_TILE_N = 256, FS_TILE_M = 128 };

/* Production's GEMM launcher (below), declared under a name no mutant build renames: a mutant whose bug
 * lives in one epilogue launches the other through it (fused_sm90_gemm.cu, FS_WITH_DLOGITS). */
namespace lce_fs {
lce_code fs_launch_gemm(const fs_gemm *g, fs_epilogue e, cudaStream_t stream, lce_status *st);
}
namespace lce_fs_production = lce_fs;

/* The namespace of the GEMM's kernels and launchers. A mutant whose bug lives in this GEMM
 * (fused/cuda/cuda.cmake: LCE_FS_NS=lce_fs_<mutant>) compiles fused_sm90_gemm.cu and its driver into a
 * namespace of its own, so that its kernels never collide with production's at link time, nor replace
 * them (the __global__ templates would otherwise be one symbol in both archives). */
#ifdef LCE_FS_NS
#define lce_fs LCE_FS_NS
#endif

namespace lce_fs {

/* The number of CTA ranges (splits) an FS_STATS launch over n columns uses: its partial buffer
 * holds splits·m·4 floats. */
int64_t fs_stats_splits(int64_t n);

/* The GEMM with epilogue e. LCE_EINVAL when CUTLASS cannot implement the shape (alignment). */
lce_code fs_launch_gemm(const fs_gemm *g, fs_epilogue e, cudaStream_t stream, lce_status *st);

/* Folds the splits' partials ([splits][m][4]) into the shard statistics (indexed by token0 + row)
 * in split order, as fused-cuda folds its vocab chunks in order. */
lce_code fs_launch_combine_splits(const float *partial, int64_t splits, int64_t m, int64_t token0, fc_stats shard,
                                  cudaStream_t stream, lce_status *st);

/* out [rows x ld] = x [rows x k] (elements of es = 2 or 4 bytes) with columns k .. ld-1 zero: a 16-byte
 * row stride for TMA when k is not a multiple of 8. */
lce_code fs_launch_pad_rows(const void *x, void *out, size_t es, int64_t rows, int64_t k, int64_t ld,
                            cudaStream_t stream, lce_status *st);

} // namespace lce_fs

#endif
