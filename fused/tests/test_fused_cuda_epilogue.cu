/* test_fused_cuda_epilogue.cu — how cuBLAS rounds the epilogue of fused-cuda's backward GEMMs (label
 * gpu; exit 77 without a GPU). fused-cuda adds both backward GEMMs into fp32 buffers with beta = 1
 * and alpha = g under mean and sum (lce_fused_plan.h), so every d_hidden and weight-gradient element
 * is alpha·acc + C as cuBLAS's epilogue rounds it; the host twin assumes LCE_GEMM_EPILOGUE
 * (lce_gemm_model.h: one fma). This test runs fused-cuda's own GEMM calls (fused_cuda_gemm_dhidden and
 * _dweight: the handle, math mode, workspace, operand layouts and types of a run) on integer bf16
 * operands in [-4, 4], whose accumulators are exact whatever the summation (fused_test_epilogue.h):
 *   1. alpha 1 into a zero buffer: acc itself (checked integer, and exact against the host on a sample);
 *   2. alpha = fp32(1/7782), a mean factor, into a buffer C that tells fma(alpha, acc, C) from
 *      round(round(alpha·acc) + C): prints which one cuBLAS computes, and fails unless every element
 *      is the twin's candidate;
 *   3. alpha 1 into C (reduction none's GEMMs): fails unless every element is acc + C rounded once to
 *      nearest, as the twin adds (not C summed into the tensor-core accumulator, not truncated).
 * At three tiles: test_fused_cuda's (h 64, 24 tokens, 37 rows), a medium one and a production one
 * (h 4096, 8192 tokens, vocab chunk 4096: the GEMMs cuBLAS picks for the real runs).
 * Run: ctest --test-dir build-gpu -R test_fused_cuda_epilogue --output-on-failure. Seed: $LCE_TEST_SEED
 * (default 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_cuda_driver.cuh"

extern "C" {
#include "fused_test_epilogue.h"
#include "lce_device.h"
#include "lce_dtype.h"
#include "lce_prng.h"
#include "lce_test.h"
}

#define EP_WHO "test_fused_cuda_epilogue"
#define EP_CUDA_CHECK(st, call) LCE_CUDA_ON_ERROR(st, EP_WHO, call, return lce_rc_)

/* Deciding elements a verdict needs: this share of the elements (the self-check sees ~a third). */
enum { MIN_DIFFER_DIVISOR = 20, SAMPLE = 64 };
enum { STREAM_W = 0x51, STREAM_HIDDEN = 0x52, STREAM_DS = 0x53, STREAM_SAMPLE = 0x54 };

typedef struct tile_shape {
  const char *what;
  int64_t h, tok, rows;
} tile_shape;

static const tile_shape SHAPES[] = {
    {"test_fused_cuda's tile", 64, 24, 37},
    {"a medium tile", 1024, 512, 4096},
    {"a production tile", 4096, 8192, 4096},
};

/* One tile of fused-cuda's backward on the device, with its integer operands kept on the host. */
typedef struct tile {
  lce_case c;
  cudaStream_t stream;
  fc_workspace ws;
  fc_problem p;
  void *hidden, *w;
  float *grad_w;
  int8_t *w_i, *hidden_i, *ds_i; /* host: W [rows x h], hidden [tok x h], ds [tok x rows] (ld rows) */
} tile;

/* Uploads n integer operands drawn from (seed, stream) as bf16, and keeps them in host. */
static lce_code upload_integers(void *dev, int8_t *host, int64_t n, uint64_t seed, uint64_t stream, lce_status *st) {
  uint16_t *bits = (uint16_t *)malloc((size_t)n * sizeof *bits);
  LCE_ALLOC_CHECK(st, bits);
  for (int64_t i = 0; i < n; i++) {
    host[i] = (int8_t)((int)lce_rand_below(seed, stream, (uint64_t)i, 9) - 4);
    lce_store(LCE_BF16, bits, (size_t)i, (double)host[i]);
  }
  const cudaError_t rc = cudaMemcpy(dev, bits, (size_t)n * sizeof *bits, cudaMemcpyHostToDevice);
  free(bits);
  EP_CUDA_CHECK(st, rc);
  return LCE_OK;
}

static lce_code tile_create(tile *t, const tile_shape *s, uint64_t seed, lce_status *st) {
  memset(t, 0, sizeof *t);
  t->c = lce_case_default();
  t->c.dtype = LCE_BF16, t->c.tied = 0, t->c.tp = 1, t->c.n = s->tok, t->c.h = s->h, t->c.v = t->c.vp = s->rows;
  t->c.vocab_chunk = s->rows, t->c.token_chunk = 0, t->c.reduction = LCE_RED_MEAN;
  EP_CUDA_CHECK(st, cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking));
  LCE_TRY(fused_cuda_workspace_create(&t->ws, &t->c, t->stream, st));
  const int64_t wh = s->rows * s->h, nh = s->tok * s->h, ds = s->tok * s->rows;
  LCE_TRY(lce_cuda_alloc(&t->w, (size_t)wh * 2, "W", NULL, EP_WHO, st));
  LCE_TRY(lce_cuda_alloc(&t->hidden, (size_t)nh * 2, "hidden", NULL, EP_WHO, st));
  LCE_TRY(lce_cuda_alloc((void **)&t->grad_w, (size_t)wh * 4, "the weight gradient", NULL, EP_WHO, st));
  t->w_i = (int8_t *)malloc((size_t)wh), t->hidden_i = (int8_t *)malloc((size_t)nh), t->ds_i = (int8_t *)malloc((size_t)ds);
  LCE_ALLOC_CHECK(st, t->w_i);
  LCE_ALLOC_CHECK(st, t->hidden_i);
  LCE_ALLOC_CHECK(st, t->ds_i);
  LCE_TRY(upload_integers(t->w, t->w_i, wh, seed, STREAM_W, st));
  LCE_TRY(upload_integers(t->hidden, t->hidden_i, nh, seed, STREAM_HIDDEN, st));
  LCE_TRY(upload_integers(t->ws.ds, t->ds_i, ds, seed, STREAM_DS, st));
  EP_CUDA_CHECK(st, cudaDeviceSynchronize()); /* the uploads done before the GEMMs on the non-blocking stream */
  t->p.c = &t->c, t->p.hidden = t->hidden, t->p.w = t->w, t->p.grad_w = t->grad_w;
  t->p.scale_rows = 0, t->p.alpha = 1.0f;
  return LCE_OK;
}

static void tile_destroy(tile *t) {
  if (t->stream) cudaStreamSynchronize(t->stream);
  void *bufs[] = {t->w, t->hidden, t->grad_w};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) cudaFree(bufs[i]);
  fused_cuda_workspace_destroy(&t->ws);
  if (t->stream) cudaStreamDestroy(t->stream);
  free(t->w_i), free(t->hidden_i), free(t->ds_i);
  memset(t, 0, sizeof *t);
}

typedef enum gemm_kind { GEMM_DHIDDEN, GEMM_DWEIGHT } gemm_kind;

static float *gemm_out(tile *t, gemm_kind k) { return k == GEMM_DHIDDEN ? (float *)t->ws.dh_acc : t->grad_w; }
static int64_t gemm_count(const tile *t, gemm_kind k) { return (k == GEMM_DHIDDEN ? t->c.n : t->c.v) * t->c.h; }

/* out = alpha·acc + c through fused-cuda's GEMM of kind k: c uploaded into the output buffer first. */
static lce_code gemm_run(tile *t, gemm_kind k, float alpha, const float *c, float *out, lce_status *st) {
  const size_t bytes = (size_t)gemm_count(t, k) * sizeof(float);
  EP_CUDA_CHECK(st, cudaMemcpyAsync(gemm_out(t, k), c, bytes, cudaMemcpyHostToDevice, t->stream));
  t->p.alpha = alpha;
  if (k == GEMM_DHIDDEN) LCE_TRY(fused_cuda_gemm_dhidden(&t->ws, &t->p, 0, t->c.n, 0, t->c.v, st));
  else LCE_TRY(fused_cuda_gemm_dweight(&t->ws, &t->p, 0, t->c.n, 0, t->c.v, st));
  EP_CUDA_CHECK(st, cudaMemcpyAsync(out, gemm_out(t, k), bytes, cudaMemcpyDeviceToHost, t->stream));
  EP_CUDA_CHECK(st, cudaStreamSynchronize(t->stream));
  return LCE_OK;
}

/* The exact accumulator of element e: d_hidden [tok x h] = ds · W, the weight gradient [rows x h] = ds^T · hidden. */
static int64_t exact_acc(const tile *t, gemm_kind k, int64_t e) {
  const int64_t h = t->c.h, rows = t->c.v, tok = t->c.n, i = e / h, col = e % h;
  int64_t s = 0;
  if (k == GEMM_DHIDDEN)
    for (int64_t r = 0; r < rows; r++) s += (int64_t)t->ds_i[i * rows + r] * t->w_i[r * h + col];
  else
    for (int64_t n = 0; n < tok; n++) s += (int64_t)t->ds_i[n * rows + i] * t->hidden_i[n * h + col];
  return s;
}

/* EXPECTs acc to be the exact integer accumulators (all integers below 2^24; a sample against the host). */
static void check_exact(const tile *t, gemm_kind k, const float *acc, uint64_t seed) {
  const int64_t n = gemm_count(t, k);
  int64_t bad = 0, nonzero = 0;
  for (int64_t e = 0; e < n; e++) {
    bad += !(acc[e] == rintf(acc[e]) && fabsf(acc[e]) < 0x1p24f);
    nonzero += acc[e] != 0.0f;
  }
  EXPECT(bad == 0 && nonzero > n / 2, "%lld accumulators not integers below 2^24, %lld of %lld non-zero", (long long)bad,
         (long long)nonzero, (long long)n);
  for (int s = 0; s < SAMPLE; s++) {
    const int64_t e = (int64_t)lce_rand_below(seed, STREAM_SAMPLE, (uint64_t)s, (uint64_t)n);
    const int64_t want = exact_acc(t, k, e);
    EXPECT((double)acc[e] == (double)want, "accumulator %lld: GPU %.1f, exact %lld", (long long)e, (double)acc[e],
           (long long)want);
  }
}

/* Steps 2 and 3 for one GEMM of one tile. */
static void check_gemm(tile *t, gemm_kind k, const char *what, uint64_t seed, lce_status *st) {
  const int64_t n = gemm_count(t, k);
  const float mean_factor = (float)(1.0 / 7782.0);
  float *acc = (float *)calloc((size_t)n, sizeof(float)), *c = (float *)malloc((size_t)n * sizeof(float));
  float *got = (float *)malloc((size_t)n * sizeof(float));
  char name[160];
  if (!acc || !c || !got) {
    EXPECT(0, "%s: out of memory", what);
  } else if (gemm_run(t, k, 1.0f, acc, acc, st) != LCE_OK) { /* acc: alpha 1 into zeros */
    EXPECT(0, "%s: %s", what, st->msg);
  } else {
    check_exact(t, k, acc, seed);
    const float alphas[2] = {mean_factor, 1.0f};
    for (int a = 0; a < 2; a++) {
      for (int64_t e = 0; e < n; e++) c[e] = epilogue_pick_c(alphas[a], acc[e], seed, (uint64_t)e);
      if (gemm_run(t, k, alphas[a], c, got, st) != LCE_OK) {
        EXPECT(0, "%s: %s", what, st->msg);
        break;
      }
      epilogue_tally tl;
      memset(&tl, 0, sizeof tl);
      epilogue_tally_add(&tl, alphas[a], acc, c, got, n);
      snprintf(name, sizeof name, "%s %s", what, k == GEMM_DHIDDEN ? "d_hidden" : "d_weight");
      epilogue_tally_print(name, alphas[a], &tl, n / MIN_DIFFER_DIVISOR);
      if (alphas[a] != 1.0f) {
        const int v = epilogue_tally_verdict(&tl, n / MIN_DIFFER_DIVISOR);
        EXPECT(v == LCE_GEMM_EPILOGUE, "%s: cuBLAS's epilogue is %s, the host twin assumes %s (lce_gemm_model.h: "
               "LCE_GEMM_EPILOGUE and fused_host.c follow the GPU)", name,
               v < 0 ? "neither candidate (or a mix)" : lce_epilogue_rounding_name((lce_epilogue_rounding)v),
               lce_epilogue_rounding_name(LCE_GEMM_EPILOGUE));
      } else {
        EXPECT(tl.fma == tl.count && tl.inexact >= n / MIN_DIFFER_DIVISOR,
               "%s, alpha 1: %lld of %lld elements are not acc + C rounded once to nearest (%lld inexact)", name,
               (long long)(tl.count - tl.fma), (long long)tl.count, (long long)tl.inexact);
      }
    }
  }
  free(acc), free(c), free(got);
}

int main(void) {
  char why[256];
  if (!lce_device_query(NULL, why, sizeof why)) {
    printf("no CUDA device (%s): skipped\n", why);
    return 77;
  }
  const uint64_t seed = lce_test_seed();
  printf("cuBLAS's epilogue alpha*acc + C (beta 1, fp32) in fused-cuda's backward GEMMs, integer bf16 operands; "
         "the host twin assumes %s\n", lce_epilogue_rounding_name(LCE_GEMM_EPILOGUE));
  for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
    tile t;
    lce_status st;
    memset(&st, 0, sizeof st);
    char what[160];
    snprintf(what, sizeof what, "%s (h %lld, %lld tokens, %lld rows)", SHAPES[s].what, (long long)SHAPES[s].h,
             (long long)SHAPES[s].tok, (long long)SHAPES[s].rows);
    if (tile_create(&t, &SHAPES[s], seed, &st) != LCE_OK) {
      EXPECT(0, "%s: %s", what, st.msg);
    } else {
      check_gemm(&t, GEMM_DHIDDEN, what, seed, &st);
      check_gemm(&t, GEMM_DWEIGHT, what, seed, &st);
    }
    tile_destroy(&t);
  }
  return lce_test_finish(EP_WHO);
}
