/* fused_cuda_driver.cuh — the device-level fused-cuda algorithm (fused_cuda.cu) on problems whose
 * tensors already live on the GPU: what the subject's run() wraps with uploads and downloads, and
 * what the bench (fused_cuda_bench.cu) times. Only the production build of fused_cuda.cu exports
 * these entry points; its mutant builds keep theirs static. */
#ifndef FUSED_CUDA_DRIVER_CUH
#define FUSED_CUDA_DRIVER_CUH

#include <errno.h>
#include <stdlib.h>

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

/* The plan's option constants as the kernels' arguments (fused-cuda's kernels, fused-sm90's epilogue). */
static inline fc_options fc_make_options(const lce_case *c, const lce_fused_plan *p) {
  fc_options o;
  o.one_minus_e = p->one_minus_e;
  o.ev = p->ev;
  o.lambda = p->lambda;
  o.cap = p->cap;
  o.tf32 = p->tf32;
  o.dtype = c->dtype;
  return o;
}

/* A dtype as cuBLAS names it, and the compute type of the case's GEMMs: bf16/fp16 inputs with fp32
 * compute; fp32 inputs IEEE (PEDANTIC, never tf32) or, for gemm tf32, FAST_TF32 on operands rounded to
 * tf32 beforehand (fused-cuda's and fused-sm90's cuBLAS GEMMs alike). */
static inline cudaDataType fc_cuda_type(lce_dtype t) {
  return t == LCE_BF16 ? CUDA_R_16BF : (t == LCE_FP16 ? CUDA_R_16F : CUDA_R_32F);
}

static inline cublasComputeType_t fc_compute_type(const lce_case *c) {
  if (c->dtype != LCE_FP32) return CUBLAS_COMPUTE_32F;
  return c->gemm == LCE_GEMM_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F_PEDANTIC;
}

/* $LCE_CUBLAS_WORKSPACE_MIB, the cuBLAS workspace of fused-cuda and fused-sm90 alike, so that the bench can
 * weigh a smaller one's memory against the GEMMs it leaves cuBLAS: -1 unset, its MiB (1 to 1024), or 0 when
 * it is anything else (refused by fc_check_workspace_env). */
static inline long fc_cublas_workspace_env_mib(void) {
  const char *env = getenv("LCE_CUBLAS_WORKSPACE_MIB");
  if (env == NULL) return -1;
  char *end;
  errno = 0;
  const long v = strtol(env, &end, 10);
  return end != env && *end == '\0' && errno == 0 && v >= 1 && v <= 1024 ? v : 0;
}

/* A device algorithm's cuBLAS workspace in bytes: $LCE_CUBLAS_WORKSPACE_MIB where set, else default_mib
 * (fused-cuda FC_CUBLAS_WORKSPACE_MIB_DEFAULT, what cuBLAS itself keeps on Hopper; fused-sm90
 * FS_CUBLAS_WORKSPACE_MIB); 0 for a malformed variable. */
#define FC_CUBLAS_WORKSPACE_MIB_DEFAULT 32
static inline size_t fc_cublas_workspace_bytes(size_t default_mib) {
  const long v = fc_cublas_workspace_env_mib();
  return (v < 0 ? default_mib : (size_t)v) << 20;
}

/* The refusal of a malformed $LCE_CUBLAS_WORKSPACE_MIB, naming who: run() asks before its device query
 * (a refusal on any machine), fc_blas_create again (the bench's path). */
static inline lce_code fc_check_workspace_env(const char *who, lce_status *st) {
  LCE_CHECK(st, fc_cublas_workspace_env_mib() != 0, LCE_EINVAL,
            "%s: LCE_CUBLAS_WORKSPACE_MIB=%s is not a number of MiB in [1, 1024]", who, getenv("LCE_CUBLAS_WORKSPACE_MIB"));
  return LCE_OK;
}

/* The cuBLAS handle of a device algorithm (fused-cuda, fused-sm90) on stream, with a workspace of its
 * own, fc_cublas_workspace_bytes(default_mib) (*blas_ws, counted into *bytes, so that a run's extra memory
 * includes it), and no reduced-precision reductions. The workspace is zeroed once: cuBLAS's split-K reduction
 * (cublasLt::splitKreduce_kernel) reads words of it that its GEMM did not write, which
 * compute-sanitizer initcheck reports as uninitialised reads; zeroed, initcheck's reports are about
 * the subject's own buffers. who names the subject in error messages. On failure what was made is in
 * *blas and *blas_ws for the caller to free. */
static inline lce_code fc_blas_create(cublasHandle_t *blas, void **blas_ws, size_t *bytes, size_t default_mib,
                                      cudaStream_t stream, const char *who, lce_status *st) {
  LCE_TRY(fc_check_workspace_env(who, st));
  const size_t ws = fc_cublas_workspace_bytes(default_mib);
  LCE_TRY(lce_cuda_alloc(blas_ws, ws, "the cuBLAS workspace", bytes, who, st));
  LCE_CUDA_ON_ERROR(st, who, cudaMemsetAsync(*blas_ws, 0, ws, stream), return lce_rc_);
  LCE_CUBLAS_ON_ERROR(st, who, cublasCreate(blas), return lce_rc_);
  LCE_CUBLAS_ON_ERROR(st, who, cublasSetStream(*blas, stream), return lce_rc_);
  LCE_CUBLAS_ON_ERROR(st, who, cublasSetWorkspace(*blas, *blas_ws, ws), return lce_rc_);
  LCE_CUBLAS_ON_ERROR(st, who,
                      cublasSetMathMode(*blas, (cublasMath_t)(CUBLAS_DEFAULT_MATH |
                                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
                      return lce_rc_);
  return LCE_OK;
}

/* A device algorithm: both passes (forward, then backward) of one problem on stream, its workspace
 * created and freed inside. */
typedef lce_code (*fc_passes_fn)(const fc_problem *p, cudaStream_t stream, lce_status *st);

/* What fused-cuda's run() does around its passes — validation, g and its split
 * (lce_fused_grad_split), the uploads (the output weight and its gradient buffer selected as
 * fused-cuda selects them), the passes, the downloads and the reduced loss — around `passes`, for a
 * subject named `name` (fused-sm90). */
lce_code fused_cuda_run_passes(const lce_case *c, const lce_tensors *in, lce_outputs *out, fc_passes_fn passes,
                               const char *name, lce_status *st);

/* fused-cuda's own passes (a workspace for the run, the forward, the backward) as an fc_passes_fn. */
lce_code fused_cuda_passes(const fc_problem *p, cudaStream_t stream, lce_status *st);

/* The bench's view of a second device algorithm (lce_cuda_bench_config.engine): a workspace made once,
 * the two passes on a device problem, a final check of device-side flags, the workspace freed. */
struct lce_cuda_bench_engine {
  const char *name;
  /* bytes: the workspace's device bytes; note: what they are (tile sizes), for the bench's row */
  lce_code (*create)(void **ws, const lce_case *c, cudaStream_t stream, size_t *bytes, char *note, size_t note_size,
                     lce_status *st);
  lce_code (*forward)(void *ws, const fc_problem *p, lce_status *st);
  lce_code (*backward)(void *ws, const fc_problem *p, lce_status *st);
  lce_code (*check)(void *ws, lce_status *st);
  void (*destroy)(void *ws);
};

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
