/* probe_curve.c — the host half of the error-vs-K curve (probe_curve.h): metrics of the GPU's
 * GEMM against its fp64 reference, and the model's prediction for the same operands. */
#include "probe_curve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lce_dtype.h"
#include "lce_prng.h"

#define CURVE_SAMPLE_COLS 16

/* Long double sums of the two metrics' numerators and denominator. */
typedef struct err_sums {
  long double d2, r2, dr;
} err_sums;

static void err_add(err_sums *s, double x, double r) {
  const long double d = (long double)x - (long double)r;
  s->d2 += d * d;
  s->r2 += (long double)r * r;
  s->dr += d * (long double)r;
}
static double err_relerr(const err_sums *s) { return s->r2 > 0 ? (double)sqrtl(s->d2 / s->r2) : NAN; }
static double err_bias(const err_sums *s) { return s->r2 > 0 ? (double)(s->dr / s->r2) : NAN; }

/* Re-draws a sampled operand row on the host and counts values that differ from the device's. */
static void twin_check(const uint16_t *got, uint64_t seed, uint64_t stream, int64_t row, int64_t k,
                       probe_curve_point *p) {
  for (int64_t kk = 0; kk < k; kk++) {
    const uint16_t want = lce_bf16_from_double(lce_rand_normal(seed, stream, (uint64_t)(row * k + kk)));
    p->twin_checked++;
    p->twin_mismatch += got[kk] != want;
  }
}

static void to_float(const uint16_t *h, float *f, int64_t k) {
  for (int64_t kk = 0; kk < k; kk++) f[kk] = (float)lce_bf16_to_double(h[kk]);
}

lce_code probe_curve_evaluate(const lce_gemm_arch *model, const probe_curve_gpu *io, probe_curve_point *p,
                              lce_status *st) {
  const lce_gemm_arch *ieee = lce_gemm_arch_find("ieee");
  LCE_CHECK(st, ieee != NULL && model != NULL, LCE_EINTERNAL, "probe curve: the ieee model is missing");
  const int64_t m = io->m, n = io->n, k = io->k;
  memset(p, 0, sizeof *p);
  p->k = k, p->m = m, p->n = n;
  p->sample = io->nrows * io->ncols;
  p->gemm_ms = io->gemm_ms, p->dgemm_ms = io->dgemm_ms;

  err_sums all = {0}, meas = {0}, pred = {0}, seq = {0};
  for (int64_t e = 0; e < m * n; e++) err_add(&all, io->x[e], io->r[e]);
  p->relerr = err_relerr(&all), p->bias = err_bias(&all);

  for (int i = 0; i < io->nrows; i++) twin_check(io->a_rows + (size_t)i * k, io->seed, PROBE_CURVE_STREAM(k, 0), io->rows[i], k, p);
  for (int j = 0; j < io->ncols; j++) twin_check(io->b_cols + (size_t)j * k, io->seed, PROBE_CURVE_STREAM(k, 1), io->cols[j], k, p);

  float *a = malloc((size_t)k * sizeof *a), *b = malloc((size_t)k * io->ncols * sizeof *b);
  if (a == NULL || b == NULL) {
    free(a);
    free(b);
    return lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "probe curve: out of memory for K = %lld", (long long)k);
  }
  for (int j = 0; j < io->ncols; j++) to_float(io->b_cols + (size_t)j * k, b + (size_t)j * k, k);
  long double bound2 = 0;
  for (int i = 0; i < io->nrows; i++) {
    to_float(io->a_rows + (size_t)i * k, a, k);
    for (int j = 0; j < io->ncols; j++) {
      const float *bj = b + (size_t)j * k;
      const size_t e = (size_t)io->rows[i] + (size_t)io->cols[j] * (size_t)m;
      err_add(&meas, io->x[e], io->r[e]);
      err_add(&pred, lce_gemm_dot(model, LCE_MMA_BF16, 0.0f, a, 1, bj, 1, k), io->r[e]);
      err_add(&seq, lce_gemm_dot(ieee, LCE_MMA_BF16, 0.0f, a, 1, bj, 1, k), io->r[e]);
      double mag = 0.0;
      for (int64_t kk = 0; kk < k; kk++) mag += fabs((double)a[kk] * (double)bj[kk]);
      const long double bound = (long double)k * 0x1p-53L * mag;
      bound2 += bound * bound;
    }
  }
  free(a);
  free(b);
  p->relerr_s = err_relerr(&meas), p->bias_s = err_bias(&meas);
  p->pred_relerr = err_relerr(&pred), p->pred_bias = err_bias(&pred);
  p->ieee_relerr = err_relerr(&seq), p->ieee_bias = err_bias(&seq);
  p->ref_bound = meas.r2 > 0 ? (double)sqrtl(bound2 / meas.r2) : NAN;
  return LCE_OK;
}

#ifdef LCE_PROBE_WITH_CUDA
lce_code probe_curve_run(const lce_gemm_arch *model, int64_t k, int64_t mn, uint64_t seed, int sample,
                         probe_curve_point *p, lce_status *st) {
  int ncols = CURVE_SAMPLE_COLS < mn ? CURVE_SAMPLE_COLS : (int)mn;
  int nrows = sample / ncols < 1 ? 1 : sample / ncols;
  if (nrows > mn) nrows = (int)mn;
  probe_curve_gpu io = {.m = mn, .n = mn, .k = k, .seed = seed, .nrows = nrows, .ncols = ncols};
  int *rows = malloc((size_t)nrows * sizeof *rows), *cols = malloc((size_t)ncols * sizeof *cols);
  io.x = malloc((size_t)(mn * mn) * sizeof *io.x);
  io.r = malloc((size_t)(mn * mn) * sizeof *io.r);
  io.a_rows = malloc((size_t)nrows * (size_t)k * sizeof *io.a_rows);
  io.b_cols = malloc((size_t)ncols * (size_t)k * sizeof *io.b_cols);
  lce_code rc = LCE_OK;
  if (!rows || !cols || !io.x || !io.r || !io.a_rows || !io.b_cols) {
    rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "probe curve: out of memory for %lld^2 x %lld", (long long)mn,
                  (long long)k);
  } else {
    /* Evenly spread rows and columns, so the sample covers the whole output. */
    for (int i = 0; i < nrows; i++) rows[i] = (int)((int64_t)i * mn / nrows);
    for (int j = 0; j < ncols; j++) cols[j] = (int)((int64_t)j * mn / ncols + mn / (2 * ncols));
    io.rows = rows, io.cols = cols;
    rc = probe_gpu_curve(&io, st);
    if (rc == LCE_OK) rc = probe_curve_evaluate(model, &io, p, st);
  }
  free(rows);
  free(cols);
  free(io.x);
  free(io.r);
  free(io.a_rows);
  free(io.b_cols);
  return rc;
}
#endif
