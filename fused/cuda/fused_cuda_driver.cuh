/* fused_cuda_driver.cuh — the device-level fused-cuda algorithm (fused_cuda.cu) on problems whose
 * tensors already live on the GPU: what the subject's run() wraps with uploads and downloads, and
 * what the bench (fused_cuda_bench.cu) times. Only the production build of fused_cuda.cu exports
 * these entry points; its mutant builds keep theirs static. */
#ifndef FUSED_CUDA_DRIVER_CUH
#define FUSED_CUDA_DRIVER_CUH

#include "fused_cuda_kernels.cuh"

extern "C" {
#include "lce_fused_plan.h"
}

/* One problem on the device. hidden is read by the forward and has its ignored tokens' rows zeroed
 * by the backward (so that a non-finite hidden value of an ignored token never reaches d_weight). */
typedef struct fc_problem {
  const lce_case *c;  /* shapes and options */
  void *hidden;       /* [n*h] dtype (tf32-rounded already with tf32 GEMMs) */
  const void *w;      /* [vp*h] dtype: the output weight (tf32-rounded already with tf32 GEMMs) */
  float *grad_w;      /* [vp*h] fp32: its gradient buffer, holding the prior; the run adds to it */
  fc_tokens tk;       /* labels [n], class weights [v] or NULL, ignore_index */
  /* d loss / d loss_token, split as lce_fused_grad_split says (no common rounding error of g in
   * the bf16 d_logits): */
  const float *dl;    /* [n] the part folded into d_logits */
  const float *rho;   /* [n] the per-token remainder: d_hidden's row scale, applied in fp32 after the
                         all-reduce, and the hidden rows' scale for the weight gradient (1: mean, sum) */
  int scale_rows;     /* some rho is not 1: the weight gradient reads the hidden rows scaled by rho */
  float alpha;        /* the backward GEMMs' alpha (g under mean and sum, else 1) */
  float *lse;         /* [n] out */
  float *loss_token;  /* [n] out */
  void *d_hidden;     /* [n*h] dtype out */
} fc_problem;

/* Everything the passes need besides the problem: the cuBLAS handle on the stream, the logits tile
 * and its d_logits, the d_hidden accumulation buffer, the online statistics. */
typedef struct fc_workspace {
  cublasHandle_t blas;
  cudaStream_t stream;
  lce_fused_plan plan;       /* tile sizes and option constants (lce_fused_plan.h) */
  fc_options o;              /* the plan's constants as kernel arguments */
  float *tile;               /* [tok_max*rows_max] fp32 logits of one tile */
  void *ds;                  /* [tok_max*rows_max] dtype d_logits of one tile */
  void *dh_acc;              /* [n*h] d_hidden accumulation buffer, in dh_dtype */
  void *hidden_dw;           /* [tok_max*h] dtype: a token chunk's hidden rows scaled by rho (reduction none) */
  lce_dtype dh_dtype;        /* fp32 (the policy) */
  fc_stats stats;            /* [tp*n] each */
  float *z_target, *smooth_a; /* [n] each */
  void *blas_ws;             /* cuBLAS workspace, owned here so that its bytes are counted */
  size_t bytes;              /* device bytes this workspace holds (peak extra memory of a run) */
  int poison_tiles;          /* LCE_POISON_TILES=1: NaN-fill the logits tile before every GEMM */
} fc_workspace;

/* Creates the workspace for case c (its shapes, chunks and options) on stream. On failure the
 * workspace holds what was allocated; fused_cuda_workspace_destroy frees it either way. */
lce_code fused_cuda_workspace_create(fc_workspace *ws, const lce_case *c, cudaStream_t stream, lce_status *st);
void fused_cuda_workspace_destroy(fc_workspace *ws);
/* Forward: online statistics over token chunks, shards and vocab chunks, merge, lse and loss_token. */
lce_code fused_cuda_forward(fc_workspace *ws, const fc_problem *p, lce_status *st);
/* Backward (after the forward): logits recomputed per tile, d_logits, d_hidden into the fp32 buffer
 * (beta = 1), d_weight into grad_w (beta = 1); d_hidden converted to the dtype at the end. */
lce_code fused_cuda_backward(fc_workspace *ws, const fc_problem *p, lce_status *st);
/* The backward's two GEMMs on their own, for one tile (tokens [t0, t0+tok), rows [row0, row0+rows)) whose
 * d_logits are in ws->ds: ws->dh_acc += alpha·ds·W_chunk and grad_w[chunk] += alpha·ds^T·hidden, with
 * beta = 1, exactly as a run calls them (test_fused_cuda_epilogue.cu checks their epilogue's rounding). */
lce_code fused_cuda_gemm_dhidden(fc_workspace *ws, const fc_problem *p, int64_t t0, int64_t tok, int64_t row0,
                                 int64_t rows, lce_status *st);
lce_code fused_cuda_gemm_dweight(fc_workspace *ws, const fc_problem *p, int64_t t0, int64_t tok, int64_t row0,
                                 int64_t rows, lce_status *st);

#endif
