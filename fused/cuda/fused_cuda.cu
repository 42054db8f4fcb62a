/* fused_cuda.cu — fused-cuda: fused linear cross-entropy (LM-head GEMM + softmax cross-entropy,
 * forward and backward) on the GPU with the algorithm and precision policy of fused-host
 * (fused_host.c's header has the full evaluation order; the math is lce_case.h's; the tile sizes, the
 * option constants, each shard's real rows, g and the mean's divisor come from the shared plan,
 * fused/plan/lce_fused_plan.h):
 *   GEMMs (cuBLAS, cublasGemmEx): bf16/fp16 inputs with CUBLAS_COMPUTE_32F and fp32 logits; fp32
 *     inputs with CUBLAS_COMPUTE_32F_PEDANTIC (IEEE fp32, never tf32) or, for gemm tf32,
 *     CUBLAS_COMPUTE_32F_FAST_TF32 on operands rounded to tf32 (cvt.rna) beforehand. Reduced-precision
 *     split-K reductions are disallowed on the handle.
 *   forward: token chunks, then shards r in rank order (their real rows only: padded rows never enter
 *     a GEMM), then vocab chunks; per tile the logits GEMM into an fp32 tile and the online-softmax
 *     statistics kernel (running max from -inf, rescaled sum, smoothing sums, the label's logit);
 *     then the shard merge kernel (lse, loss_token). The reduced loss is summed on the host in
 *     token order, as fused-host does.
 *   backward: the tile's logits recomputed by the same GEMM, d_logits in the input dtype (kernel)
 *     with only the exact part of g folded in (lce_fused_grad_split: no common rounding error of
 *     1/n_valid), d_hidden += alpha · d_logits · W_chunk by cuBLAS with beta = 1 into ONE fp32 buffer
 *     across chunks and shards, grad_W[chunk] += alpha · d_logits^T · hidden with beta = 1 straight
 *     into the fp32 gradient of the parameter that is the output weight (tied: grad_embedding;
 *     untied: grad_weight; the embedding gradient untouched); alpha = g under mean and sum; under
 *     none alpha = 1, the token chunk's hidden rows are scaled by the remainder of g first and
 *     d_hidden by it in fp32 at the end, where it is converted to the dtype.
 * Where the fused-host order is a sequential loop, the GPU reassociates (blocks fold their share of a
 * tile's logits and merge; cuBLAS orders its own sums): same function, different rounding, judged by
 * the "fused-cuda" goldens.
 *
 * Build: fused/cuda.cmake (sm_90, CUDA::cublas). Run: build/lcecheck check --subject fused-cuda.
 * Versions: production, and one mutant per LCE_MUTANT_CUDA_* switch below (the GPU variants of the two
 * Megatron-LM PR #2739 seed bugs and of the mean factor folded into d_logits; fused/mutants.txt
 * describes them), each its own subject symbol. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fused_cuda_driver.cuh"

extern "C" {
#include "fused_cuda.h"
#include "lce_fused_plan.h"
}

/* ---- build variant --------------------------------------------------------------------------- */
#if (defined(LCE_MUTANT_CUDA_BF16_DHIDDEN_ACCUM) + defined(LCE_MUTANT_CUDA_TIED_WEIGHT_WHEN_UNTIED) + \
     defined(LCE_MUTANT_CUDA_MEAN_FACTOR_IN_DLOGITS)) > 1
#error "one LCE_MUTANT_CUDA_* switch per build"
#endif
#if defined(LCE_MUTANT_CUDA_BF16_DHIDDEN_ACCUM) || defined(LCE_MUTANT_CUDA_TIED_WEIGHT_WHEN_UNTIED) || \
    defined(LCE_MUTANT_CUDA_MEAN_FACTOR_IN_DLOGITS)
#define FUSED_CUDA_IS_MUTANT 1
#else
#define FUSED_CUDA_IS_MUTANT 0
#endif

/* ---- workspace ------------------------------------------------------------------------------- */

#define FC_ALLOC(ws, ptr, size, what) \
  LCE_TRY(lce_cuda_alloc((void **)(ptr), (size), (what), &(ws)->bytes, "fused-cuda", st))

static lce_code workspace_create(fc_workspace *ws, const lce_case *c, cudaStream_t stream, lce_status *st) {
  memset(ws, 0, sizeof *ws);
  ws->stream = stream;
  lce_fused_plan_make(&ws->plan, c);
  ws->o = fc_make_options(c, &ws->plan);
  ws->dh_dtype = LCE_FP32;
  /* Sanitizer runs (scripts/gpu_run.sh) poison the logits tile with NaN before every GEMM: a tile
   * element cuBLAS failed to write would then reach the judge as NaN, and initcheck, which does
   * not see the writes of cuBLAS's larger sm_90 GEMM kernels (conformance/GPU_RUNS.md), sees the
   * tile initialized. Off by default: it costs one tile-sized memset per GEMM. */
  const char *poison = getenv("LCE_POISON_TILES");
  ws->poison_tiles = poison != NULL && strcmp(poison, "1") == 0;
#if defined(LCE_MUTANT_CUDA_BF16_DHIDDEN_ACCUM)
  /* Megatron-LM PR #2739, seed bug 2: d_hidden += d_logits_chunk @ W_chunk accumulated in a buffer of
   * the input dtype: cuBLAS rounds it to bf16/fp16 after every chunk's beta = 1 GEMM. */
  ws->dh_dtype = c->dtype;
#endif
  const size_t tile = (size_t)(ws->plan.tok_max * ws->plan.rows_max), tpn = (size_t)c->tp * (size_t)c->n;
  const size_t n = (size_t)c->n, nh = (size_t)(c->n * c->h);
  FC_ALLOC(ws, (void **)&ws->tile, tile * sizeof(float), "the logits tile");
  FC_ALLOC(ws, &ws->ds, tile * lce_dtype_size(c->dtype), "the d_logits tile");
  FC_ALLOC(ws, &ws->dh_acc, nh * lce_dtype_size(ws->dh_dtype), "the d_hidden buffer");
  if (c->reduction == LCE_RED_NONE) /* per-token remainders of g scale the hidden rows (lce_fused_grad_split) */
    FC_ALLOC(ws, &ws->hidden_dw, (size_t)(ws->plan.tok_max * c->h) * lce_dtype_size(c->dtype),
             "the scaled hidden rows");
  FC_ALLOC(ws, (void **)&ws->stats.m, 4 * tpn * sizeof(float), "the online statistics");
  ws->stats.s = ws->stats.m + tpn, ws->stats.sw = ws->stats.s + tpn, ws->stats.d = ws->stats.sw + tpn;
  FC_ALLOC(ws, (void **)&ws->z_target, 2 * n * sizeof(float), "the per-token values");
  ws->smooth_a = ws->z_target + n;
  return fc_blas_create(&ws->blas, &ws->blas_ws, &ws->bytes, FC_CUBLAS_WORKSPACE_MIB_DEFAULT, stream, "fused-cuda", st);
}

/* Frees whatever workspace_create got to; errors here cannot be acted on and are not reported. */
static void workspace_destroy(fc_workspace *ws) {
  if (ws->blas) cublasDestroy(ws->blas);
  void *bufs[] = {ws->tile, ws->ds, ws->dh_acc, ws->hidden_dw, ws->stats.m, ws->z_target, ws->blas_ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) cudaFree(bufs[i]);
  memset(ws, 0, sizeof *ws);
}

/* ---- GEMMs (column-major cuBLAS on row-major tensors) ----------------------------------------- */

/* C[m x n] = alpha·A·B (+ C when beta = 1), column-major, every operand described by its cuBLAS
 * type; alpha and beta in fp32 (the compute type's scale type). */
static lce_code fc_gemm(fc_workspace *ws, const lce_case *c, cublasOperation_t op_a, cublasOperation_t op_b, int64_t m,
                        int64_t n, int64_t k, float alpha, const void *a, cudaDataType ta, int64_t lda, const void *b,
                        cudaDataType tb, int64_t ldb, float beta, void *out, cudaDataType tc, int64_t ldc,
                        lce_status *st) {
  LCE_CHECK(st, m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && lda <= INT32_MAX && ldb <= INT32_MAX &&
                    ldc <= INT32_MAX, LCE_EINVAL, "fused-cuda: GEMM dimension beyond int32 (m %lld n %lld k %lld)",
            (long long)m, (long long)n, (long long)k);
  LCE_CUBLAS_CHECK(st, cublasGemmEx(ws->blas, op_a, op_b, (int)m, (int)n, (int)k, &alpha, a, ta, (int)lda, b, tb,
                                    (int)ldb, &beta, out, tc, (int)ldc, fc_compute_type(c), CUBLAS_GEMM_DEFAULT));
  return LCE_OK;
}

static const char *fc_at(const void *base, int64_t elems, lce_dtype t) {
  return (const char *)base + (size_t)elems * lce_dtype_size(t);
}

/* tile[tok x rows] (row-major) = hidden[t0 .. t0+tok) · W[row0 .. row0+rows)^T: in cuBLAS terms the
 * column-major [rows x tok] product W_chunk^T(h x rows, transposed) · hidden^T(h x tok). */
static lce_code gemm_logits(fc_workspace *ws, const fc_problem *p, int64_t t0, int64_t tok, int64_t row0,
                            int64_t rows, lce_status *st) {
  const lce_case *c = p->c;
  const cudaDataType t = fc_cuda_type(c->dtype);
  if (ws->poison_tiles)
    LCE_CUDA_CHECK(st, cudaMemsetAsync(ws->tile, 0xff, (size_t)(rows * tok) * sizeof(float), ws->stream));
  return fc_gemm(ws, c, CUBLAS_OP_T, CUBLAS_OP_N, rows, tok, c->h, 1.0f, fc_at(p->w, row0 * c->h, c->dtype), t, c->h,
                 fc_at(p->hidden, t0 * c->h, c->dtype), t, c->h, 0.0f, ws->tile, CUDA_R_32F, rows, st);
}

/* dh[t0 .. t0+tok) += alpha · ds · W_chunk: column-major [h x tok] = W_chunk(h x rows) · ds^T(rows x tok). */
static lce_code gemm_dhidden(fc_workspace *ws, const fc_problem *p, int64_t t0, int64_t tok, int64_t row0,
                             int64_t rows, lce_status *st) {
  const lce_case *c = p->c;
  const cudaDataType t = fc_cuda_type(c->dtype);
  return fc_gemm(ws, c, CUBLAS_OP_N, CUBLAS_OP_N, c->h, tok, rows, p->alpha, fc_at(p->w, row0 * c->h, c->dtype), t, c->h,
                 ws->ds, t, rows, 1.0f, (void *)fc_at(ws->dh_acc, t0 * c->h, ws->dh_dtype),
                 fc_cuda_type(ws->dh_dtype), c->h, st);
}

/* grad_W[row0 .. row0+rows) += alpha · ds^T · hidden[t0 .. t0+tok): column-major [h x rows] =
 * hidden^T(h x tok) · ds(tok x rows, the transposed column-major [rows x tok] tile). The hidden rows
 * are the token chunk's scaled copy when p->scale_rows says so (scale_hidden_rows). */
static lce_code gemm_dweight(fc_workspace *ws, const fc_problem *p, int64_t t0, int64_t tok, int64_t row0,
                             int64_t rows, lce_status *st) {
  const lce_case *c = p->c;
  const cudaDataType t = fc_cuda_type(c->dtype);
  const void *hidden = p->scale_rows ? ws->hidden_dw : fc_at(p->hidden, t0 * c->h, c->dtype);
  return fc_gemm(ws, c, CUBLAS_OP_N, CUBLAS_OP_T, c->h, rows, tok, p->alpha, hidden, t, c->h, ws->ds, t, rows, 1.0f,
                 p->grad_w + row0 * c->h, CUDA_R_32F, c->h, st);
}

/* The token chunk's hidden rows as the weight gradient reads them, when p->scale_rows says so. */
static lce_code scale_hidden_rows(fc_workspace *ws, const fc_problem *p, int64_t t0, int64_t tok, lce_status *st) {
  const lce_case *c = p->c;
  if (!p->scale_rows) return LCE_OK;
  LCE_CHECK(st, ws->hidden_dw != NULL, LCE_EINTERNAL, "fused-cuda: hidden rows to scale without a buffer (reduction %d)",
            (int)c->reduction);
  return fc_launch_scale_rows(fc_at(p->hidden, t0 * c->h, c->dtype), ws->hidden_dw, c->dtype, tok, c->h, p->rho + t0,
                              ws->o.tf32, ws->stream, st);
}

/* ---- passes: token chunks, shards, vocab chunks ---------------------------------------------- */

typedef enum fc_pass { FC_FORWARD, FC_BACKWARD } fc_pass;

static lce_code run_tiles(fc_workspace *ws, const fc_problem *p, fc_pass pass, lce_status *st) {
  const lce_case *c = p->c;
  for (int64_t t0 = 0; t0 < c->n; t0 += ws->plan.tok_max) {
    const int64_t tok = c->n - t0 < ws->plan.tok_max ? c->n - t0 : ws->plan.tok_max;
    if (pass == FC_BACKWARD) LCE_TRY(scale_hidden_rows(ws, p, t0, tok, st));
    for (int r = 0; r < c->tp; r++) {
      int64_t lo, hi;
      lce_fused_shard_rows(c, r, &lo, &hi);
      fc_stats shard = ws->stats;
      shard.m += (int64_t)r * c->n, shard.s += (int64_t)r * c->n, shard.sw += (int64_t)r * c->n, shard.d += (int64_t)r * c->n;
      for (int64_t row0 = lo; row0 < hi; row0 += c->vocab_chunk) {
        const int64_t rows = hi - row0 < c->vocab_chunk ? hi - row0 : c->vocab_chunk;
        LCE_TRY(gemm_logits(ws, p, t0, tok, row0, rows, st));
        if (pass == FC_FORWARD) {
          LCE_TRY(fc_launch_chunk_stats(ws->tile, tok, rows, t0, row0, p->tk, ws->o, shard, ws->z_target, ws->stream, st));
        } else {
          LCE_TRY(fc_launch_chunk_dlogits(ws->tile, ws->ds, tok, rows, t0, row0, p->tk, ws->o, p->dl, p->lse,
                                          ws->smooth_a, ws->stream, st));
          LCE_TRY(gemm_dhidden(ws, p, t0, tok, row0, rows, st));
          LCE_TRY(gemm_dweight(ws, p, t0, tok, row0, rows, st));
        }
      }
    }
  }
  return LCE_OK;
}

static lce_code forward(fc_workspace *ws, const fc_problem *p, lce_status *st) {
  const lce_case *c = p->c;
  LCE_TRY(fc_launch_stats_init(ws->stats, (int64_t)c->tp * c->n, ws->z_target, c->n, ws->stream, st));
  LCE_TRY(run_tiles(ws, p, FC_FORWARD, st));
  return fc_launch_merge(ws->stats, c->tp, ws->z_target, p->tk, ws->o, p->lse, ws->smooth_a, p->loss_token,
                         ws->stream, st);
}

static lce_code backward(fc_workspace *ws, const fc_problem *p, lce_status *st) {
  const lce_case *c = p->c;
  LCE_TRY(fc_launch_zero_ignored_rows(p->hidden, c->dtype, c->h, p->tk, ws->stream, st));
  LCE_CUDA_CHECK(st, cudaMemsetAsync(ws->dh_acc, 0, (size_t)(c->n * c->h) * lce_dtype_size(ws->dh_dtype), ws->stream));
  LCE_TRY(run_tiles(ws, p, FC_BACKWARD, st));
  return fc_launch_finish_dhidden(ws->dh_acc, ws->dh_dtype, p->rho, p->d_hidden, c->dtype, c->h, p->tk, ws->stream, st);
}

/* ---- the subject: uploads, the two passes, downloads ----------------------------------------- */

/* Device copies of one case's tensors and outputs. */
typedef struct fc_device_case {
  void *hidden, *w;
  float *grad_w, *class_weight, *dl, *rho, *lse, *loss_token;
  int64_t *labels;
  void *d_hidden;
} fc_device_case;

/* The output weight and the gradient buffer it owns: the embedding table and grad_embedding when
 * tied, the separate weight and grad_weight when untied. */
static void select_output_weight(const lce_case *c, const lce_tensors *in, lce_outputs *out, const void **w,
                                 float **grad_w) {
  int use_embedding = c->tied;
#if defined(LCE_MUTANT_CUDA_TIED_WEIGHT_WHEN_UNTIED)
  /* Megatron-LM PR #2739, seed bug 1: the fused loss took the input embedding matrix as the output
   * weight even with untied embeddings, so the output layer's weight got no gradient at all. */
  use_embedding = 1;
#endif
  *w = use_embedding ? in->embedding : in->weight;
  *grad_w = use_embedding ? out->grad_embedding : out->grad_weight;
}

/* d loss / d loss_token on the host: g [n], and its split (lce_fused_grad_split). */
typedef struct fc_grad {
  float *g, *dl, *rho; /* [n] each, one allocation at g */
  float alpha;
  int scale_rows;      /* some rho is not 1 */
} fc_grad;

/* fold_g: the whole g folded into d_logits (dl = g, no remainder), as an unfused PyTorch model's
 * cross-entropy backward does before its d_logits are cast to the input dtype. */
static lce_code grad_make(const lce_case *c, const lce_tensors *in, float weight_sum, int fold_g, fc_grad *gr,
                          lce_status *st) {
  const size_t n = (size_t)c->n;
  gr->g = (float *)malloc(3 * n * sizeof(float));
  LCE_ALLOC_CHECK(st, gr->g);
  gr->dl = gr->g + n, gr->rho = gr->dl + n;
  lce_fused_loss_gradient(c, in, weight_sum, gr->g);
  gr->scale_rows = lce_fused_grad_split(c, in, gr->g, gr->dl, gr->rho, &gr->alpha);
  if (fold_g) {
    for (size_t i = 0; i < n; i++) gr->dl[i] = gr->g[i], gr->rho[i] = 1.0f;
    gr->alpha = 1.0f, gr->scale_rows = 0;
  }
  return LCE_OK;
}

/* fused-cuda's passes on a problem whose tensors live on the device: a workspace for the run, the
 * forward, the backward. */
static lce_code fc_passes(const fc_problem *p, cudaStream_t stream, lce_status *st) {
  fc_workspace ws;
  lce_code rc = workspace_create(&ws, p->c, stream, st);
  if (rc == LCE_OK) rc = forward(&ws, p, st);
  if (rc == LCE_OK) rc = backward(&ws, p, st);
  cudaStreamSynchronize(stream); /* nothing may still use the workspace freed below */
  workspace_destroy(&ws);
  return rc;
}

#define FC_DEV_ALLOC(ptr, size, what) LCE_TRY(lce_cuda_alloc((void **)(ptr), (size), (what), NULL, name, st))

static lce_code run_on_device(const lce_case *c, const lce_tensors *in, lce_outputs *out, const fc_grad *gr,
                              fc_device_case *d, fc_passes_fn passes, const char *name, cudaStream_t stream,
                              lce_status *st) {
  const size_t es = lce_dtype_size(c->dtype), nh = (size_t)(c->n * c->h), vh = (size_t)(c->vp * c->h);
  const size_t n = (size_t)c->n;
  const void *w_host;
  float *grad_host;
  select_output_weight(c, in, out, &w_host, &grad_host);
  FC_DEV_ALLOC(&d->hidden, nh * es, "hidden");
  FC_DEV_ALLOC(&d->w, vh * es, "the output weight");
  FC_DEV_ALLOC((void **)&d->grad_w, vh * sizeof(float), "the weight gradient");
  FC_DEV_ALLOC((void **)&d->labels, n * sizeof(int64_t), "labels");
  FC_DEV_ALLOC((void **)&d->dl, 4 * n * sizeof(float), "g's split, lse, loss_token");
  d->rho = d->dl + n, d->lse = d->rho + n, d->loss_token = d->lse + n;
  FC_DEV_ALLOC(&d->d_hidden, nh * es, "d_hidden");
  if (c->class_weights) FC_DEV_ALLOC((void **)&d->class_weight, (size_t)c->v * sizeof(float), "class weights");

  LCE_CUDA_CHECK(st, cudaMemcpyAsync(d->hidden, in->hidden, nh * es, cudaMemcpyHostToDevice, stream));
  LCE_CUDA_CHECK(st, cudaMemcpyAsync(d->w, w_host, vh * es, cudaMemcpyHostToDevice, stream));
  LCE_CUDA_CHECK(st, cudaMemcpyAsync(d->grad_w, grad_host, vh * sizeof(float), cudaMemcpyHostToDevice, stream));
  LCE_CUDA_CHECK(st, cudaMemcpyAsync(d->labels, in->labels, n * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
  LCE_CUDA_CHECK(st, cudaMemcpyAsync(d->dl, gr->dl, 2 * n * sizeof(float), cudaMemcpyHostToDevice, stream)); /* dl rho */
  if (c->class_weights)
    LCE_CUDA_CHECK(st, cudaMemcpyAsync(d->class_weight, in->class_weight, (size_t)c->v * sizeof(float),
                                       cudaMemcpyHostToDevice, stream));
  if (c->gemm == LCE_GEMM_TF32) { /* fp32 inputs only (lce_case_validate) */
    LCE_TRY(fc_launch_round_tf32((float *)d->hidden, (int64_t)nh, stream, st));
    LCE_TRY(fc_launch_round_tf32((float *)d->w, (int64_t)vh, stream, st));
  }
  fc_problem p;
  p.c = c, p.hidden = d->hidden, p.w = d->w, p.grad_w = d->grad_w;
  p.tk.labels = d->labels, p.tk.class_weight = d->class_weight, p.tk.n = c->n, p.tk.ignore_index = c->ignore_index;
  p.dl = d->dl, p.rho = d->rho, p.scale_rows = gr->scale_rows, p.alpha = gr->alpha;
  p.lse = d->lse, p.loss_token = d->loss_token, p.d_hidden = d->d_hidden;
  LCE_TRY(passes(&p, stream, st));
  LCE_CUDA_CHECK(st, cudaStreamSynchronize(stream));

  /* Every device step succeeded: only now are the outputs written (payloads only, never the guards). */
  LCE_CUDA_CHECK(st, cudaMemcpy(out->loss_token, d->loss_token, n * sizeof(float), cudaMemcpyDeviceToHost));
  LCE_CUDA_CHECK(st, cudaMemcpy(out->lse, d->lse, n * sizeof(float), cudaMemcpyDeviceToHost));
  LCE_CUDA_CHECK(st, cudaMemcpy(out->d_hidden, d->d_hidden, nh * es, cudaMemcpyDeviceToHost));
  LCE_CUDA_CHECK(st, cudaMemcpy(grad_host, d->grad_w, vh * sizeof(float), cudaMemcpyDeviceToHost));
  return LCE_OK;
}

static lce_code fused_cuda_run_g(const lce_case *c, const lce_tensors *in, lce_outputs *out, int fold_g,
                                 fc_passes_fn passes, const char *name, lce_status *st) {
  LCE_TRY(lce_case_validate(c, st));
  LCE_TRY(lce_tensors_validate(c, in, st));
  LCE_TRY(lce_fused_check_outputs(c, out, name, st));
  LCE_TRY(fc_check_workspace_env(name, st));
  char why[256];
  LCE_CHECK(st, lce_device_query(NULL, why, sizeof why), LCE_ENODEV, "%s: %s", name, why);
  const float weight_sum = lce_fused_weight_sum(c, in);
  fc_grad gr;
  LCE_TRY(grad_make(c, in, weight_sum, fold_g, &gr, st));
  cudaStream_t stream = NULL;
  fc_device_case d;
  memset(&d, 0, sizeof d);
  lce_code rc = LCE_OK;
  cudaError_t srs = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (srs != cudaSuccess)
    rc = lce_fail(st, LCE_EINTERNAL, __FILE__, __LINE__, "%s: cudaStreamCreate failed: %s", name, cudaGetErrorString(srs));
  if (rc == LCE_OK) rc = run_on_device(c, in, out, &gr, &d, passes, name, stream, st);
  void *bufs[] = {d.hidden, d.w, d.grad_w, d.labels, d.dl, d.d_hidden, d.class_weight};
  if (stream) cudaStreamSynchronize(stream); /* nothing may still use the buffers freed below */
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) cudaFree(bufs[i]);
  if (stream) cudaStreamDestroy(stream);
  free(gr.g);
  if (rc != LCE_OK) return rc;
  out->loss[0] = lce_fused_loss(c, out->loss_token, weight_sum);
  return LCE_OK;
}

static lce_code fused_cuda_run(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st) {
#if defined(LCE_MUTANT_CUDA_MEAN_FACTOR_IN_DLOGITS)
  /* What every bf16 fused kernel in conformance/EXTERNAL.md does: the whole g (grad_output /
   * n_valid under mean) is folded into d_logits before they are rounded to the input dtype, so the
   * label term -g(1 - p_y) of every token carries the same relative rounding error of g. */
  return fused_cuda_run_g(c, in, out, 1, fc_passes, "fused-cuda", st);
#else
  return fused_cuda_run_g(c, in, out, 0, fc_passes, "fused-cuda", st);
#endif
}

/* ---- the subject of this build --------------------------------------------------------------- */
#define FC_CAPS (LCE_CAP_ALL_SEMANTICS | LCE_CAP_NEEDS_GPU)

#if defined(LCE_MUTANT_CUDA_BF16_DHIDDEN_ACCUM)
extern "C" const lce_subject lce_mutant_cuda_bf16_dhidden_accum_subject = {
    "mutant-cuda/bf16-dhidden-accum", "fused-cuda",
    "Megatron-LM PR #2739 seed bug 2 on the GPU: d_hidden accumulated across vocab chunks and shards by cuBLAS "
    "(beta = 1) into a buffer of the input dtype instead of fp32",
    FC_CAPS | LCE_CAP_MUTANT, fused_cuda_run, lce_inner_chunked, NULL, NULL, NULL, NULL};
#elif defined(LCE_MUTANT_CUDA_TIED_WEIGHT_WHEN_UNTIED)
extern "C" const lce_subject lce_mutant_cuda_tied_weight_when_untied_subject = {
    "mutant-cuda/tied-weight-when-untied", "fused-cuda",
    "Megatron-LM PR #2739 seed bug 1 on the GPU: untied embeddings use the input embedding table as the output "
    "weight and put its gradient in grad_embedding, leaving grad_weight without a gradient",
    FC_CAPS | LCE_CAP_MUTANT, fused_cuda_run, lce_inner_chunked, NULL, NULL, NULL, NULL};
#elif defined(LCE_MUTANT_CUDA_MEAN_FACTOR_IN_DLOGITS)
extern "C" const lce_subject lce_mutant_cuda_mean_factor_in_dlogits_subject = {
    "mutant-cuda/mean-factor-in-dlogits", "fused-cuda",
    "the loss gradient g (grad_output / n_valid under mean) folded into d_logits before their rounding to the "
    "input dtype, as every bf16 peer in conformance/EXTERNAL.md does: d_hidden and d_weight scaled coherently by "
    "the rounding of g",
    FC_CAPS | LCE_CAP_MUTANT, fused_cuda_run, lce_inner_chunked, NULL, NULL, NULL, NULL};
#else
extern "C" const lce_subject lce_fused_cuda_subject = {
    "fused-cuda", "fused-cuda",
    "the fused algorithm on the GPU: cuBLAS GEMMs (fp32 accumulate) per vocab chunk, CUDA kernels for the online "
    "softmax and d_logits in the input dtype, fp32 d_hidden buffer (beta = 1)",
    FC_CAPS, fused_cuda_run, lce_inner_chunked, NULL, NULL, NULL, NULL};

/* The driver with g folded into d_logits, for unfused-cuda (unfused_cuda.cu). */
lce_code lce_fused_cuda_run_folded(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st) {
  return fused_cuda_run_g(c, in, out, 1, fc_passes, "fused-cuda", st);
}

/* fused-cuda's passes, for a device algorithm that runs some cases this way (fused-sm90's IEEE fp32). */
lce_code fused_cuda_passes(const fc_problem *p, cudaStream_t stream, lce_status *st) { return fc_passes(p, stream, st); }

/* The subject's run around another device algorithm (fused-sm90's, fused_sm90.cu). */
lce_code fused_cuda_run_passes(const lce_case *c, const lce_tensors *in, lce_outputs *out, fc_passes_fn passes,
                               const char *name, lce_status *st) {
  return fused_cuda_run_g(c, in, out, 0, passes, name, st);
}

/* The production driver, for the bench (fused_cuda_bench.cu) and the epilogue test. */
lce_code fused_cuda_workspace_create(fc_workspace *ws, const lce_case *c, cudaStream_t stream, lce_status *st) {
  return workspace_create(ws, c, stream, st);
}
void fused_cuda_workspace_destroy(fc_workspace *ws) { workspace_destroy(ws); }
lce_code fused_cuda_forward(fc_workspace *ws, const fc_problem *p, lce_status *st) { return forward(ws, p, st); }
lce_code fused_cuda_backward(fc_workspace *ws, const fc_problem *p, lce_status *st) { return backward(ws, p, st); }
lce_code fused_cuda_gemm_dhidden(fc_workspace *ws, const fc_problem *p, int64_t t0, int64_t tok, int64_t row0,
                                 int64_t rows, lce_status *st) {
  return gemm_dhidden(ws, p, t0, tok, row0, rows, st);
}
lce_code fused_cuda_gemm_dweight(fc_workspace *ws, const fc_problem *p, int64_t t0, int64_t tok, int64_t row0,
                                 int64_t rows, lce_status *st) {
  return gemm_dweight(ws, p, t0, tok, row0, rows, st);
}
#endif
