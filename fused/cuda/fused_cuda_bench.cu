/* fused_cuda_bench.cu — `lcecheck bench` on the GPU: fused-cuda's forward and backward beside the
 * plain cuBLAS GEMMs the algorithm performs (logits = hidden·W^T, d_hidden = d_logits·W,
 * d_W = d_logits^T·hidden, 2·N·H·V flops each, unchunked), timed with CUDA events in one process on one
 * stream and one cuBLAS handle, plus fused-cuda's peak extra device memory.
 *
 * Every repetition draws fresh inputs (uniform hidden in [-1, 1), W in [-0.15, 0.15): logits of
 * standard deviation ~3 at H = 4096; uniform labels; random d_logits for the plain GEMMs), never
 * zeros; warm-up repetitions are run and dropped; medians are reported. The fused-cuda workspace is
 * created once, as a training step would keep it, and its bytes are the peak extra memory (also
 * cross-checked against the drop of cudaMemGetInfo's free memory). */
#include <algorithm>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_cuda_driver.cuh"

extern "C" {
#include "fused_cuda.h"
}

/* Device buffers of one bench shape: the problem, and the plain GEMMs' logits and d_logits. */
typedef struct bench_buffers {
  void *hidden, *w, *d_hidden, *ref_dlogits;
  float *grad_w, *dl, *rho, *lse, *loss_token, *ref_logits, *ref_dh;
  int64_t *labels;
} bench_buffers;

#define BENCH_ALLOC(ptr, size, what) LCE_TRY(lce_cuda_alloc((void **)(ptr), (size), (what), NULL, "bench", st))

static lce_code bench_buffers_alloc(const lce_case *c, bench_buffers *b, lce_status *st) {
  const size_t n = (size_t)c->n, nh = (size_t)(c->n * c->h), vh = (size_t)(c->v * c->h), nv = (size_t)(c->n * c->v);
  BENCH_ALLOC(&b->hidden, nh * 2, "hidden");
  BENCH_ALLOC(&b->w, vh * 2, "W");
  BENCH_ALLOC(&b->d_hidden, nh * 2, "d_hidden");
  BENCH_ALLOC((void **)&b->grad_w, vh * 4, "grad_W");
  BENCH_ALLOC((void **)&b->dl, 4 * n * 4, "g's split, lse, loss_token");
  b->rho = b->dl + n, b->lse = b->rho + n, b->loss_token = b->lse + n;
  BENCH_ALLOC((void **)&b->labels, n * 8, "labels");
  BENCH_ALLOC((void **)&b->ref_logits, nv * 4, "the plain GEMMs' logits");
  BENCH_ALLOC(&b->ref_dlogits, nv * 2, "the plain GEMMs' d_logits");
  BENCH_ALLOC((void **)&b->ref_dh, nh * 4, "the plain GEMMs' d_hidden");
  return LCE_OK;
}

static void bench_buffers_free(bench_buffers *b) {
  void *all[] = {b->hidden, b->w, b->d_hidden, b->ref_dlogits, b->grad_w, b->dl, b->labels, b->ref_logits, b->ref_dh};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i]) cudaFree(all[i]);
}

/* The plain GEMMs, unchunked, in the layouts fused-cuda uses (see gemm_* in fused_cuda.cu): 0 logits,
 * 1 d_hidden, 2 d_weight. */
static lce_code plain_gemm(cublasHandle_t h, int which, const lce_case *c, const bench_buffers *b, lce_status *st) {
  const float one = 1.0f, zero = 0.0f;
  const int N = (int)c->n, H = (int)c->h, V = (int)c->v;
  if (which == 0)
    LCE_CUBLAS_CHECK(st, cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, V, N, H, &one, b->w, CUDA_R_16BF, H, b->hidden,
                                      CUDA_R_16BF, H, &zero, b->ref_logits, CUDA_R_32F, V, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
  else if (which == 1)
    LCE_CUBLAS_CHECK(st, cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, H, N, V, &one, b->w, CUDA_R_16BF, H, b->ref_dlogits,
                                      CUDA_R_16BF, V, &one, b->ref_dh, CUDA_R_32F, H, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
  else
    LCE_CUBLAS_CHECK(st, cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, H, V, N, &one, b->hidden, CUDA_R_16BF, H,
                                      b->ref_dlogits, CUDA_R_16BF, V, &one, b->grad_w, CUDA_R_32F, H, CUBLAS_COMPUTE_32F,
                                      CUBLAS_GEMM_DEFAULT));
  return LCE_OK;
}

/* Fresh inputs for repetition `seed`. */
static lce_code bench_fill(const lce_case *c, const bench_buffers *b, uint64_t seed, cudaStream_t s, lce_status *st) {
  LCE_TRY(fc_launch_fill_uniform(b->hidden, LCE_BF16, c->n * c->h, 1.0f, seed * 8 + 1, s, st));
  LCE_TRY(fc_launch_fill_uniform(b->w, LCE_BF16, c->v * c->h, 0.15f, seed * 8 + 2, s, st));
  LCE_TRY(fc_launch_fill_uniform(b->ref_dlogits, LCE_BF16, c->n * c->v, 1e-4f, seed * 8 + 3, s, st));
  LCE_TRY(fc_launch_fill_labels(b->labels, c->n, c->v, seed * 8 + 4, s, st));
  LCE_CUDA_CHECK(st, cudaMemsetAsync(b->grad_w, 0, (size_t)(c->v * c->h) * 4, s));
  LCE_CUDA_CHECK(st, cudaMemsetAsync(b->ref_dh, 0, (size_t)(c->n * c->h) * 4, s));
  return LCE_OK;
}

static double median(double *x, int count) {
  std::sort(x, x + count);
  return count % 2 ? x[count / 2] : 0.5 * (x[count / 2 - 1] + x[count / 2]);
}

/* Timed plain GEMMs per repetition, in this order: logits, logits again (the backward recomputes
 * them), d_hidden, d_weight. */
static const int kPlainOrder[4] = {0, 0, 1, 2};
enum { EV_COUNT = 7, MAX_REPS = 200 };

static lce_code bench_shape(const lce_cuda_bench_config *cfg, const lce_case *c, bench_buffers *b, fc_workspace *ws,
                            cudaStream_t s, cudaEvent_t *ev, lce_cuda_bench_result *res, lce_status *st) {
  LCE_TRY(bench_buffers_alloc(c, b, st));
  float alpha;
  { /* g = grad_output / N for reduction mean with no ignored token, split as the subject splits it */
    const size_t n = (size_t)c->n;
    float *g = (float *)malloc(3 * n * sizeof(float));
    LCE_ALLOC_CHECK(st, g);
    for (size_t i = 0; i < n; i++) g[i] = 1.0f / (float)c->n;
    lce_fused_grad_split(c, NULL, g, g + n, g + 2 * n, &alpha); /* mean: hidden rows are not read */
    cudaError_t rc = cudaMemcpy(b->dl, g + n, 2 * n * sizeof(float), cudaMemcpyHostToDevice); /* dl, rho */
    free(g);
    LCE_CUDA_CHECK(st, rc);
  }
  size_t free0, free1, total;
  LCE_CUDA_CHECK(st, cudaDeviceSynchronize());
  LCE_CUDA_CHECK(st, cudaMemGetInfo(&free0, &total));
  LCE_TRY(fused_cuda_workspace_create(ws, c, s, st));
  fc_problem p;
  p.c = c, p.hidden = b->hidden, p.w = b->w, p.grad_w = b->grad_w;
  p.tk.labels = b->labels, p.tk.class_weight = NULL, p.tk.n = c->n, p.tk.ignore_index = c->ignore_index;
  p.dl = b->dl, p.rho = b->rho, p.scale_rows = 0, p.alpha = alpha;
  p.lse = b->lse, p.loss_token = b->loss_token, p.d_hidden = b->d_hidden;

  double fwd[MAX_REPS], bwd[MAX_REPS], gm[4][MAX_REPS], gsum[MAX_REPS], gsum3[MAX_REPS];
  size_t free_min = free0;
  for (int rep = 0; rep < cfg->warmup + cfg->reps; rep++) {
    LCE_TRY(bench_fill(c, b, cfg->seed + (uint64_t)rep, s, st));
    LCE_CUDA_CHECK(st, cudaEventRecord(ev[0], s));
    LCE_TRY(fused_cuda_forward(ws, &p, st));
    LCE_CUDA_CHECK(st, cudaEventRecord(ev[1], s));
    LCE_TRY(fused_cuda_backward(ws, &p, st));
    LCE_CUDA_CHECK(st, cudaEventRecord(ev[2], s));
    for (int k = 0; k < 4; k++) {
      LCE_TRY(plain_gemm(ws->blas, kPlainOrder[k], c, b, st));
      LCE_CUDA_CHECK(st, cudaEventRecord(ev[3 + k], s));
    }
    LCE_CUDA_CHECK(st, cudaEventSynchronize(ev[6]));
    LCE_CUDA_CHECK(st, cudaMemGetInfo(&free1, &total));
    if (free1 < free_min) free_min = free1;
    if (rep < cfg->warmup) continue;
    const int i = rep - cfg->warmup;
    float ms;
    LCE_CUDA_CHECK(st, cudaEventElapsedTime(&ms, ev[0], ev[1]));
    fwd[i] = ms;
    LCE_CUDA_CHECK(st, cudaEventElapsedTime(&ms, ev[1], ev[2]));
    bwd[i] = ms;
    gsum[i] = 0.0;
    for (int k = 0; k < 4; k++) {
      LCE_CUDA_CHECK(st, cudaEventElapsedTime(&ms, ev[2 + k], ev[3 + k]));
      gm[k][i] = ms, gsum[i] += ms;
    }
    gsum3[i] = gsum[i] - gm[1][i];
  }
  res->fwd_ms = median(fwd, cfg->reps);
  res->bwd_ms = median(bwd, cfg->reps);
  for (int k = 0; k < 4; k++) res->gemm_ms[k] = median(gm[k], cfg->reps);
  res->gemm_total_ms = median(gsum, cfg->reps);
  res->gemm3_total_ms = median(gsum3, cfg->reps);
  res->workspace_bytes = (double)ws->bytes;
  res->measured_extra_bytes = (double)(free0 - free_min);

  float *loss = (float *)malloc((size_t)c->n * sizeof(float));
  LCE_ALLOC_CHECK(st, loss);
  cudaError_t rc = cudaMemcpy(loss, b->loss_token, (size_t)c->n * sizeof(float), cudaMemcpyDeviceToHost);
  double sum = 0.0;
  for (int64_t i = 0; i < c->n; i++) sum += loss[i];
  free(loss);
  LCE_CUDA_CHECK(st, rc);
  res->loss_mean = sum / (double)c->n;
  LCE_CHECK(st, isfinite(res->loss_mean) && res->loss_mean > 0.0, LCE_EINTERNAL,
            "bench: fused-cuda's mean loss %g is not a finite positive number", res->loss_mean);
  return LCE_OK;
}

extern "C" lce_code lce_cuda_bench_run(const lce_cuda_bench_config *cfg, lce_cuda_bench_result *res, lce_status *st) {
  memset(res, 0, sizeof *res);
  LCE_CHECK(st, cfg->reps >= 1 && cfg->reps <= MAX_REPS && cfg->warmup >= 0, LCE_EINVAL,
            "bench: repetitions must be in [1, %d], warm-up >= 0", (int)MAX_REPS);
  char why[256];
  LCE_CHECK(st, lce_device_query(NULL, why, sizeof why), LCE_ENODEV, "bench: %s", why);
  cudaDeviceProp prop;
  LCE_CUDA_CHECK(st, cudaGetDeviceProperties(&prop, 0));
  snprintf(res->device, sizeof res->device, "%.80s (sm_%d%d, %d SMs)", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount);
  lce_case c = lce_case_default();
  c.n = cfg->n, c.h = cfg->h, c.v = cfg->v, c.vp = cfg->v, c.tp = 1, c.vocab_chunk = cfg->vocab_chunk;
  c.dtype = LCE_BF16, c.tied = 0, c.prior_grad = 0, c.reduction = LCE_RED_MEAN, c.ignore_pct = 0, c.token_chunk = 0;
  LCE_TRY(lce_case_validate(&c, st));

  cudaStream_t s = NULL;
  cudaEvent_t ev[EV_COUNT] = {0};
  bench_buffers b;
  memset(&b, 0, sizeof b);
  fc_workspace ws;
  memset(&ws, 0, sizeof ws);
  lce_code rc = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess
                    ? LCE_OK
                    : lce_fail(st, LCE_EINTERNAL, __FILE__, __LINE__, "bench: cudaStreamCreate failed");
  for (int k = 0; k < EV_COUNT && rc == LCE_OK; k++)
    if (cudaEventCreate(&ev[k]) != cudaSuccess)
      rc = lce_fail(st, LCE_EINTERNAL, __FILE__, __LINE__, "bench: cudaEventCreate failed");
  if (rc == LCE_OK) rc = bench_shape(cfg, &c, &b, &ws, s, ev, res, st);
  if (s) cudaStreamSynchronize(s);
  fused_cuda_workspace_destroy(&ws);
  bench_buffers_free(&b);
  for (int k = 0; k < EV_COUNT; k++)
    if (ev[k]) cudaEventDestroy(ev[k]);
  if (s) cudaStreamDestroy(s);
  return rc;
}
