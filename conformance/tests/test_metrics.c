/* test_metrics.c — the four error metrics on hand-made vectors whose metrics are known exactly.
 *
 * Values are small dyadic numbers so that subject values like r*(1 - 2^-10) are exact in fp32 and
 * bf16, and every expected metric is an exact power of two: the checks are equalities, not
 * tolerances. One test builds a cancelling sum that a plain long double sum gets wrong (it returns
 * 0), so it fails if the compensation is removed; another one whose terms a rounded product loses, and
 * one sums the same elements in both orders for the same bits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_metrics.h"

#include "lce_test.h"

/* One fp32 per-token output (loss_token) of n elements, reference arrays alongside. */
typedef struct vec_fixture {
  lce_case c;
  lce_outputs out;
  lce_ref_output ref;
  float *x;
  double *value, *err, *mag, *rounded;
  unsigned char *decisive;
} vec_fixture;

static void vec_init(vec_fixture *f, int64_t n) {
  memset(f, 0, sizeof *f);
  f->c = lce_case_default();
  f->c.n = n;
  f->x = calloc((size_t)n, sizeof *f->x);
  f->value = calloc((size_t)n, sizeof(double));
  f->err = calloc((size_t)n, sizeof(double));
  f->mag = calloc((size_t)n, sizeof(double));
  f->rounded = calloc((size_t)n, sizeof(double));
  f->decisive = calloc((size_t)n, 1);
  if (!f->x || !f->value || !f->err || !f->mag || !f->rounded || !f->decisive) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  f->out.loss_token = f->x;
  f->ref = (lce_ref_output){.count = n, .value = f->value, .err = f->err, .mag = f->mag, .rounded = f->rounded,
                            .decisive = f->decisive};
}

/* Element i: reference r (exact in fp32), subject x, mag = |r| * mag_factor. */
static void vec_set(vec_fixture *f, int64_t i, double r, double x, double mag_factor) {
  f->value[i] = f->rounded[i] = r;
  f->mag[i] = fabs(r) * mag_factor;
  f->decisive[i] = 1;
  f->x[i] = (float)x;
  if ((double)f->x[i] != x) {
    fprintf(stderr, "test setup: %a is not an fp32 value\n", x);
    exit(1);
  }
}

static void vec_free(vec_fixture *f) {
  free(f->x), free(f->value), free(f->err), free(f->mag), free(f->rounded), free(f->decisive);
}

/* The judge's host path: lce_compare_host, then lce_metrics_from_comparison. */
static void metrics_compute(const lce_case *c, const lce_outputs *out, lce_output_id o, const lce_ref_output *ref,
                            const unsigned char *mask, lce_metric_values *mv) {
  lce_comparison cmp;
  memset(&cmp, 0, sizeof cmp);
  lce_compare_host(c, out, o, ref, mask, &cmp);
  lce_metrics_from_comparison(&cmp, mv);
}

static lce_metric_values vec_metrics(vec_fixture *f, const unsigned char *mask) {
  lce_metric_values mv;
  metrics_compute(&f->c, &f->out, LCE_OUT_LOSS_TOKEN, &f->ref, mask, &mv);
  return mv;
}

/* The metrics of f's first n elements repeated `copies` times: relerr, bias, ulpfrac and maxscaled
 * are unchanged by repetition, and the repetition gives bias and ulpfrac enough elements to be
 * defined (LCE_STAT_MIN_ELEMS). */
static lce_metric_values vec_metrics_tiled(vec_fixture *f, int copies) {
  int64_t n = f->ref.count;
  vec_fixture t;
  vec_init(&t, n * copies);
  for (int64_t i = 0; i < n * copies; i++) {
    int64_t j = i % n;
    t.value[i] = f->value[j], t.err[i] = f->err[j], t.mag[i] = f->mag[j], t.rounded[i] = f->rounded[j];
    t.decisive[i] = f->decisive[j], t.x[i] = f->x[j];
  }
  lce_metric_values mv = vec_metrics(&t, NULL);
  vec_free(&t);
  return mv;
}

static const double R[8] = {1.0, -2.0, 3.0, 0.5, -0.75, 6.0, 1.25, -7.0};

/* Below LCE_STAT_MIN_ELEMS effective elements bias and ulpfrac are undefined (NaN, flagged). */
static void test_statistics_need_elements(void) {
  vec_fixture f;
  vec_init(&f, 8);
  for (int i = 0; i < 8; i++) vec_set(&f, i, R[i], R[i] * (1 - 0x1p-10), 1.0);
  lce_metric_values mv = vec_metrics(&f, NULL);
  EXPECT(mv.undefined[LCE_METRIC_BIAS] && isnan(mv.v[LCE_METRIC_BIAS]), "8 elements: bias must be undefined");
  EXPECT(mv.undefined[LCE_METRIC_ULPFRAC] && isnan(mv.v[LCE_METRIC_ULPFRAC]), "8 elements: ulpfrac undefined");
  EXPECT(!mv.undefined[LCE_METRIC_RELERR] && !mv.undefined[LCE_METRIC_MAXSCALED], "relerr, maxscaled always defined");
  mv = vec_metrics_tiled(&f, 32);
  EXPECT(!mv.undefined[LCE_METRIC_BIAS] && !mv.undefined[LCE_METRIC_ULPFRAC], "256 elements: defined");
  EXPECT(mv.neff > LCE_STAT_MIN_ELEMS, "neff %g", mv.neff);
  vec_free(&f);
}

/* x = r (1 - 2^-10): relerr 2^-10, bias -2^-10 exactly; each error is > 1 fp32 ulp. */
static void test_uniform_shrink(void) {
  vec_fixture f;
  vec_init(&f, 8);
  for (int i = 0; i < 8; i++) vec_set(&f, i, R[i], R[i] * (1 - 0x1p-10), 4.0);
  lce_metric_values mv = vec_metrics(&f, NULL);
  EXPECT(mv.judged == 8 && mv.inconclusive == 0, "judged %lld", (long long)mv.judged);
  EXPECT(mv.v[LCE_METRIC_RELERR] == 0x1p-10, "relerr %a, expected 0x1p-10", mv.v[LCE_METRIC_RELERR]);
  lce_metric_values mvt = vec_metrics_tiled(&f, 32);
  EXPECT(mvt.v[LCE_METRIC_BIAS] == -0x1p-10, "bias %a, expected -0x1p-10", mvt.v[LCE_METRIC_BIAS]);
  EXPECT(mvt.undefined[LCE_METRIC_ULPFRAC], "mag = 4|r| everywhere: no element without cancellation, so ulpfrac "
         "must be undefined, got %g", mvt.v[LCE_METRIC_ULPFRAC]);
  EXPECT(mv.v[LCE_METRIC_MAXSCALED] == 0x1p-12, "maxscaled %a, expected 0x1p-12 (2^-10 / 4)",
         mv.v[LCE_METRIC_MAXSCALED]);
  double norm2 = 0;
  for (int i = 0; i < 8; i++) norm2 += R[i] * R[i];
  EXPECT(mv.ref_norm == sqrt(norm2), "ref_norm %g, expected %g", mv.ref_norm, sqrt(norm2));

  /* Growth has the opposite sign; the decimal example of the spec to double accuracy. */
  for (int i = 0; i < 8; i++) vec_set(&f, i, R[i], R[i] * (1 + 0x1p-10), 4.0);
  mv = vec_metrics_tiled(&f, 32);
  EXPECT(mv.v[LCE_METRIC_BIAS] == 0x1p-10, "growth: bias %a, expected +0x1p-10", mv.v[LCE_METRIC_BIAS]);
  for (int i = 0; i < 8; i++) {
    f.value[i] = f.rounded[i] = R[i] * 1024;
    f.x[i] = (float)(R[i] * 1024 * (1 - 1e-3));
  }
  mv = vec_metrics_tiled(&f, 32);
  EXPECT(fabs(mv.v[LCE_METRIC_BIAS] + 1e-3) < 1e-6, "x = r(1-1e-3): bias %.9g, expected -1e-3",
         mv.v[LCE_METRIC_BIAS]);
  vec_free(&f);
}

/* Half the elements 2 ulps off (not beyond LCE_ULPFRAC_K = 2), half 3 ulps off. The output is fp32
 * here; the bf16 case below shows the ulp is the output format's, not fp32's. */
static void test_ulpfrac(void) {
  vec_fixture f;
  vec_init(&f, 8);
  for (int i = 0; i < 8; i++) {
    double ulp = lce_ulp(LCE_FP32, R[i]);
    vec_set(&f, i, R[i], R[i] + (i % 2 ? 3 : 2) * ulp, 1.0);
  }
  lce_metric_values mv = vec_metrics_tiled(&f, 32);
  EXPECT(mv.v[LCE_METRIC_ULPFRAC] == 0.5, "ulpfrac %g, expected 0.5", mv.v[LCE_METRIC_ULPFRAC]);
  vec_free(&f);

  /* d_hidden in bf16: 1 + 2^-6 is two bf16 ulps from 1 (not beyond), 1 + 3 * 2^-7 three. */
  lce_case c = lce_case_default();
  enum { NH = 64 }; /* 64 elements: enough for ulpfrac to be defined */
  c.dtype = LCE_BF16, c.n = 1, c.h = NH;
  uint16_t dh[NH];
  double value[NH], err[NH], mag[NH];
  unsigned char dec[NH];
  for (int i = 0; i < NH; i++) value[i] = mag[i] = 1, err[i] = 0, dec[i] = 1;
  double xs[4] = {1 + 0x1p-6, 1 + 0x1p-6, 1 + 0x1.8p-6, 1};
  for (int i = 0; i < NH; i++) lce_store(LCE_BF16, dh, (size_t)i, xs[i % 4]);
  lce_outputs out = {.d_hidden = dh};
  lce_ref_output ref = {.count = NH, .value = value, .err = err, .mag = mag, .rounded = value, .decisive = dec};
  metrics_compute(&c, &out, LCE_OUT_D_HIDDEN, &ref, NULL, &mv);
  EXPECT(mv.v[LCE_METRIC_ULPFRAC] == 0.25, "bf16 ulpfrac %g, expected 0.25", mv.v[LCE_METRIC_ULPFRAC]);

  /* Across a power of two: r = 0.99993 (binade [1/2, 1), bf16 ulp 2^-8) and a result 1 + 2^-7 (ulp 2^-7)
   * differ by 2.02 ulps of r's binade and 1.01 of the result's: not beyond (the larger magnitude's
   * ulps); 1 + 3 * 2^-7 from the same r is 3 of them, beyond. */
  for (int i = 0; i < NH; i++) value[i] = mag[i] = 0.99993126, lce_store(LCE_BF16, dh, (size_t)i, i % 4 ? 1 + 0x1p-7 : 1 + 0x1.8p-6);
  metrics_compute(&c, &out, LCE_OUT_D_HIDDEN, &ref, NULL, &mv);
  EXPECT(mv.v[LCE_METRIC_ULPFRAC] == 0.25, "bf16 ulpfrac across a power of two %g, expected 0.25",
         mv.v[LCE_METRIC_ULPFRAC]);
}

/* The condition cond = ||mag|| / ||r|| (at least 1), and ulpfrac restricted to elements without
 * cancellation (mag <= LCE_ULPFRAC_MAXCOND * |r|): an element whose exact value is far below its
 * terms may be many ulps off in a correct implementation and must not count. */
static void test_condition(void) {
  vec_fixture f;
  vec_init(&f, 4);
  for (int i = 0; i < 4; i++) vec_set(&f, i, 1.0, 1.0, i < 2 ? 1.0 : 0.5); /* mag below |r| */
  lce_metric_values mv = vec_metrics(&f, NULL);
  EXPECT(mv.cond == 1.0, "cond %g, expected 1 (never below 1)", mv.cond);
  /* mag = 7|r| everywhere: cond exactly 7. */
  for (int i = 0; i < 4; i++) vec_set(&f, i, 2.0, 2.0, 7.0);
  mv = vec_metrics(&f, NULL);
  EXPECT(mv.cond == 7.0, "cond %g, expected 7", mv.cond);
  /* Two elements 4 ulps off: one well conditioned (counts), one with mag = 16|r| (does not). */
  for (int i = 2; i < 4; i++) vec_set(&f, i, 2.0, 2.0, 1.0);
  vec_set(&f, 0, 2.0, 2.0 + 4 * lce_ulp(LCE_FP32, 2.0), 1.0);
  vec_set(&f, 1, 2.0, 2.0 + 4 * lce_ulp(LCE_FP32, 2.0), 16.0);
  mv = vec_metrics_tiled(&f, 32);
  EXPECT(mv.well_conditioned == 96, "well-conditioned elements %lld, expected 96", (long long)mv.well_conditioned);
  EXPECT(mv.v[LCE_METRIC_ULPFRAC] == 1.0 / 3.0, "ulpfrac %g, expected 1/3", mv.v[LCE_METRIC_ULPFRAC]);
  vec_free(&f);
}

/* Elements whose bound is too wide for the metrics (lce_value_judgeable) are counted inconclusive and
 * skipped; an undecided element whose value is still known far inside an ulp is judged; masked-out
 * elements are neither. */
static void test_inconclusive_and_mask(void) {
  vec_fixture f;
  vec_init(&f, 8);
  for (int i = 0; i < 8; i++) vec_set(&f, i, R[i], R[i], 1.0);
  f.x[2] = 1e6f; /* huge error, but the oracle cannot certify element 2 */
  f.decisive[2] = 0, f.err[2] = INFINITY;
  f.decisive[3] = 0, f.err[3] = lce_ulp(LCE_FP32, R[3]) * 0x1p-7; /* undecided, yet within ulp/64: judged */
  f.x[5] = -1e6f; /* huge error, masked out */
  unsigned char mask[8] = {1, 1, 1, 1, 1, 0, 1, 1};
  lce_metric_values mv = vec_metrics(&f, mask);
  EXPECT(mv.judged == 6 && mv.inconclusive == 1, "judged %lld inconclusive %lld, expected 6 and 1",
         (long long)mv.judged, (long long)mv.inconclusive);
  for (int m = 0; m < LCE_METRIC_COUNT; m++)
    EXPECT(mv.v[m] == 0 || mv.undefined[m], "%s = %g: skipped elements leaked into the metric",
           lce_metric_name((lce_metric)m), mv.v[m]);
  mv = vec_metrics(&f, NULL);
  EXPECT(mv.v[LCE_METRIC_RELERR] > 1, "without the mask element 5 must count: relerr %g", mv.v[LCE_METRIC_RELERR]);
  vec_free(&f);
}

/* Nothing judged (every element masked out or inconclusive, as lse of an all-ignored batch): no
 * metric exists, so all four are undefined (NaN, flagged), never a measured 0. */
static void test_nothing_judged(void) {
  vec_fixture f;
  vec_init(&f, 8);
  for (int i = 0; i < 8; i++) vec_set(&f, i, R[i], R[i] * 2, 1.0);
  unsigned char none[8] = {0};
  lce_metric_values mv = vec_metrics(&f, none);
  EXPECT(mv.judged == 0, "judged %lld, expected 0", (long long)mv.judged);
  for (int m = 0; m < LCE_METRIC_COUNT; m++)
    EXPECT(mv.undefined[m] && isnan(mv.v[m]), "nothing judged: %s must be undefined, got %g (flag %d)",
           lce_metric_name((lce_metric)m), mv.v[m], mv.undefined[m]);
  lce_metric_values all;
  lce_metrics_undefined(&all);
  for (int m = 0; m < LCE_METRIC_COUNT; m++)
    EXPECT(all.undefined[m] && isnan(all.v[m]), "lce_metrics_undefined left %s defined", lce_metric_name((lce_metric)m));
  vec_free(&f);
}

/* Edge cases: all-zero reference, zero mag, non-finite values on either side. */
static void test_edges(void) {
  vec_fixture f;
  vec_init(&f, 4);
  for (int i = 0; i < 4; i++) vec_set(&f, i, 0.0, 0.0, 1.0);
  f.x[1] = 3, f.x[3] = 4;
  lce_metric_values mv = vec_metrics(&f, NULL);
  EXPECT(mv.v[LCE_METRIC_RELERR] == 5, "r == 0: relerr is ||x|| = 5, got %g", mv.v[LCE_METRIC_RELERR]);
  EXPECT(mv.undefined[LCE_METRIC_BIAS], "r == 0: a bias (projection on r) is undefined, got %g",
         mv.v[LCE_METRIC_BIAS]);
  EXPECT(mv.v[LCE_METRIC_MAXSCALED] == INFINITY, "mag 0 with an error: maxscaled Inf, got %g",
         mv.v[LCE_METRIC_MAXSCALED]);
  for (int i = 0; i < 4; i++) f.mag[i] = 2.0; /* exact cancellation: terms of size 2, result 0 */
  mv = vec_metrics(&f, NULL);
  EXPECT(mv.v[LCE_METRIC_RELERR] == 1.25, "r == 0 with terms: relerr ||x|| / ||mag|| = 5/4, got %g",
         mv.v[LCE_METRIC_RELERR]);
  for (int i = 0; i < 4; i++) f.mag[i] = 0.0;
  f.x[1] = f.x[3] = 0;
  mv = vec_metrics(&f, NULL);
  EXPECT(mv.v[LCE_METRIC_MAXSCALED] == 0 && mv.v[LCE_METRIC_RELERR] == 0, "0/0 counts as 0");

  for (int i = 0; i < 4; i++) vec_set(&f, i, R[i], R[i], 1.0);
  f.value[0] = f.rounded[0] = INFINITY; /* left to the class checks */
  f.x[0] = INFINITY;
  mv = vec_metrics(&f, NULL);
  EXPECT(mv.judged == 3 && mv.v[LCE_METRIC_RELERR] == 0, "non-finite reference skipped: judged %lld relerr %g",
         (long long)mv.judged, mv.v[LCE_METRIC_RELERR]);
  f.value[0] = f.rounded[0] = 1;
  f.x[0] = NAN;
  mv = vec_metrics_tiled(&f, 32);
  EXPECT(mv.v[LCE_METRIC_RELERR] == INFINITY && isnan(mv.v[LCE_METRIC_BIAS]) &&
             mv.v[LCE_METRIC_MAXSCALED] == INFINITY && mv.v[LCE_METRIC_ULPFRAC] == 0.25,
         "NaN subject vs finite oracle: relerr %g bias %g ulpfrac %g", mv.v[LCE_METRIC_RELERR],
         mv.v[LCE_METRIC_BIAS], mv.v[LCE_METRIC_ULPFRAC]);
  vec_free(&f);
}

/* r == 0 everywhere, on both paths: the host comparison from per-element values and a comparison
 * reduced on the device (sums only, no ulps), through the one lce_metrics_from_comparison. Both must
 * measure the error against the terms' scale ||emag|| when there are terms (5/4 here), ||x|| when
 * there are none (5), and leave bias undefined. */
static void test_zero_reference_both_paths(void) {
  vec_fixture f;
  vec_init(&f, 4);
  for (int i = 0; i < 4; i++) vec_set(&f, i, 0.0, 0.0, 1.0), f.mag[i] = 2.0;
  f.x[1] = 3, f.x[3] = 4;
  lce_metric_values host = vec_metrics(&f, NULL);
  lce_comparison dev;
  memset(&dev, 0, sizeof dev);
  dev.judged = 4, dev.sum_d2 = 25.0, dev.sum_emag2 = 16.0, dev.has_emag = 1, dev.class_ok = 1;
  lce_metric_values device;
  lce_metrics_from_comparison(&dev, &device);
  EXPECT(host.v[LCE_METRIC_RELERR] == 1.25 && device.v[LCE_METRIC_RELERR] == 1.25,
         "r == 0 with terms: relerr host %g device %g, both must be ||x|| / ||emag|| = 1.25",
         host.v[LCE_METRIC_RELERR], device.v[LCE_METRIC_RELERR]);
  EXPECT(host.undefined[LCE_METRIC_BIAS] && device.undefined[LCE_METRIC_BIAS], "r == 0: bias must be undefined");
  EXPECT(host.cond == 1.0 && device.cond == 1.0, "r == 0: cond host %g device %g", host.cond, device.cond);
  for (int i = 0; i < 4; i++) f.mag[i] = 0.0;
  dev.sum_emag2 = 0.0;
  host = vec_metrics(&f, NULL);
  lce_metrics_from_comparison(&dev, &device);
  EXPECT(host.v[LCE_METRIC_RELERR] == 5 && device.v[LCE_METRIC_RELERR] == 5,
         "r == 0 without terms: relerr host %g device %g, both must be ||x|| = 5", host.v[LCE_METRIC_RELERR],
         device.v[LCE_METRIC_RELERR]);
  EXPECT(device.undefined[LCE_METRIC_ULPFRAC], "a device comparison has no ulps: ulpfrac must be undefined");
  vec_free(&f);
}

/* <x - r, r> = 64 * 2^60 + 65536 * 2^-10 - 64 * 2^60 = 2^6: a plain long double sum loses every
 * small term against 2^66 (they are 2^-76 of it) and returns 0. 128 large elements keep the bias
 * a defined statistic (neff ~ 128). */
static void test_compensated_sums(void) {
  enum { SMALL = 65536, LARGE = 64 };
  vec_fixture f;
  vec_init(&f, SMALL + 2 * LARGE);
  for (int i = 0; i < LARGE; i++) vec_set(&f, i, 0x1p40, 0x1p40 + 0x1p20, 1.0);
  for (int i = 0; i < SMALL; i++) vec_set(&f, LARGE + i, 1.0, 1 + 0x1p-10, 1.0);
  for (int i = 0; i < LARGE; i++) vec_set(&f, LARGE + SMALL + i, 0x1p40, 0x1p40 - 0x1p20, 1.0);
  lce_metric_values mv = vec_metrics(&f, NULL);
  double want = 0x1p6 / (2 * LARGE * 0x1p80 + SMALL);
  EXPECT(fabs(mv.v[LCE_METRIC_BIAS] - want) <= 1e-15 * want, "compensated bias %a, expected %a",
         mv.v[LCE_METRIC_BIAS], want);
  vec_free(&f);
}

/* The terms enter the sums as the exact values of their products. Pairs (r = 1 + 3 2^-52, x = 2) and
 * (r = 1, x = 0): d r = (1 - 3 2^-52)(1 + 3 2^-52) = 1 - 9 2^-104 and -1, so <x - r, r> = -9 2^-104 per
 * pair. A product rounded to double (or to long double's 64 bits) is 1 there, and the bias 0. */
static void test_exact_products(void) {
  enum { PAIRS = 128 };
  const double eps = 0x1p-52, r1 = 1.0 + 3 * eps;
  vec_fixture f;
  vec_init(&f, 2 * PAIRS);
  for (int i = 0; i < PAIRS; i++) vec_set(&f, 2 * i, r1, 2.0, 1.0), vec_set(&f, 2 * i + 1, 1.0, 0.0, 1.0);
  lce_metric_values mv = vec_metrics(&f, NULL);
  const double want = -9 * 0x1p-104 / (r1 * r1 + 1.0);
  EXPECT(mv.v[LCE_METRIC_BIAS] != 0.0 && fabs(mv.v[LCE_METRIC_BIAS] - want) <= 1e-14 * fabs(want),
         "bias from exact products %a, expected %a", mv.v[LCE_METRIC_BIAS], want);
  vec_free(&f);
}

/* The sums a comparison holds (lce_reference_result.h), in its order, and its max_scaled. */
static void comparison_sums(const lce_comparison *c, double out[21]) {
  const double v[21] = {c->sum_d2,     c->sum_r2,     c->sum_dr,       c->sum_r4,     c->sum_rnd_r,  c->sum_rnd2,
                        c->sum_flip_r, c->sum_outr_r, c->sum_outs_r,   c->sum_outs_rnd, c->sum_outv, c->sum_acc_r,
                        c->sum_acc_m2, c->sum_flip2,  c->sum_mag_r,    c->sum_emag2,  c->sum_emag4,  c->sum_tc_a2,
                        c->sum_tc_m2,  c->sum_tc_ar,  c->max_scaled};
  memcpy(out, v, sizeof v);
}

/* Every sum is the exact sum of its exact terms rounded once: the elements in any order give the same
 * bits. 4096 elements over twelve decades, subject values their fp32 roundings or the next fp32 value,
 * with a rounded-d_logit reference (rnd), flips, emag and the tensor-core excess, so that every one of
 * lce_compare_acc's sums is exercised, summed forwards and backwards. */
static void test_order_independent(void) {
  enum { N = 4096 };
  vec_fixture fwd, bwd;
  vec_init(&fwd, N), vec_init(&bwd, N);
  double *extra[2][4]; /* rnd, flip, emag, tcex of each fixture */
  for (int f = 0; f < 2; f++)
    for (int a = 0; a < 4; a++) {
      extra[f][a] = calloc(N, sizeof(double));
      if (!extra[f][a]) exit(1);
    }
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < N; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = (double)(state >> 11) * 0x1p-53; /* [0, 1) */
    const double r = (i % 3 ? 1.0 : -1.0) * pow(10.0, 12.0 * u - 6.0) * (1.0 + u / 3.0);
    const float xf = (float)r;
    const double x = (double)(i % 5 == 0 ? xf : nextafterf(xf, (i % 2) ? INFINITY : -INFINITY));
    const double per[4] = {r * (1.0 + (u - 0.5) * 0x1p-7), fabs(r) * u * 0x1p-9, fabs(r) * (1.5 + u), fabs(r) * u};
    for (int f = 0; f < 2; f++) {
      const int at = f ? N - 1 - i : i;
      vec_set(f ? &bwd : &fwd, at, r, x, 1.0 + u);
      (f ? &bwd : &fwd)->rounded[at] = (double)xf; /* R(r), the output format's rounding (fp32) */
      for (int a = 0; a < 4; a++) extra[f][a][at] = per[a];
    }
  }
  lce_metric_values m[2];
  lce_comparison cmp[2];
  for (int f = 0; f < 2; f++) {
    vec_fixture *v = f ? &bwd : &fwd;
    v->ref.rnd = extra[f][0], v->ref.flip = extra[f][1], v->ref.emag = extra[f][2], v->ref.tcex = extra[f][3];
    memset(&cmp[f], 0, sizeof cmp[f]);
    lce_compare_host(&v->c, &v->out, LCE_OUT_LOSS_TOKEN, &v->ref, NULL, &cmp[f]);
    lce_metrics_from_comparison(&cmp[f], &m[f]);
  }
  double sums[2][21];
  for (int f = 0; f < 2; f++) comparison_sums(&cmp[f], sums[f]);
  for (int k = 0; k < 21; k++)
    EXPECT(sums[0][k] == sums[1][k] && sums[0][k] != 0.0,
           "sum %d of the comparison: forwards %a, backwards %a (0: not exercised)", k, sums[0][k], sums[1][k]);
  for (int k = 0; k < LCE_METRIC_COUNT; k++)
    EXPECT(m[0].v[k] == m[1].v[k], "%s forwards %a, backwards %a", lce_metric_name((lce_metric)k), m[0].v[k], m[1].v[k]);
  for (int f = 0; f < 2; f++)
    for (int a = 0; a < 4; a++) free(extra[f][a]);
  vec_free(&fwd), vec_free(&bwd);
}

/* rnd_bias is the rounded-d_logit reference's own bias over the same elements as bias, and NaN
 * when the reference has none (tiers 0 and 2: the judge then uses its bound). */
static void test_reference_rounding_bias(void) {
  vec_fixture f;
  vec_init(&f, 100);
  double rnd[100];
  for (int64_t i = 0; i < 100; i++) vec_set(&f, i, 1.0 + (double)(i % 7), 1.0 + (double)(i % 7), 1.0), rnd[i] = (1.0 + (double)(i % 7)) * 1.001;
  lce_metric_values mv = vec_metrics(&f, NULL);
  EXPECT(isnan(mv.rnd_bias), "no rnd in the reference: rnd_bias %g, expected NaN", mv.rnd_bias);
  f.ref.rnd = rnd;
  mv = vec_metrics(&f, NULL);
  EXPECT(fabs(mv.rnd_bias - 0.001) < 1e-12, "a uniform 0.1%% scale of rnd: rnd_bias %.17g", mv.rnd_bias);
  unsigned char mask[100];
  for (int64_t i = 0; i < 100; i++) mask[i] = i < 50, rnd[i] = i < 50 ? rnd[i] : 0.0;
  mv = vec_metrics(&f, mask);
  EXPECT(fabs(mv.rnd_bias - 0.001) < 1e-12, "masked elements stay out of rnd_bias: %.17g", mv.rnd_bias);
  vec_free(&f);
}

/* outr_bias = sum_i max(|R(r_i) - r_i|, |R(rnd_i) - rnd_i|) |r_i| / <r, r> (R: the output's format, fp32 for
 * loss_token): a result at rnd is rounded at rnd, not at r. r = 1 exactly (no rounding at r), rnd a quarter
 * of an fp32 ulp above: outr 2^-25; with r's own rounding error set to 2^-24 on every element that one. */
static void test_output_rounding_at_rnd(void) {
  vec_fixture f;
  vec_init(&f, 100);
  double rnd[100];
  for (int64_t i = 0; i < 100; i++) vec_set(&f, i, 1.0, 1.0, 1.0), rnd[i] = 1.0 + 0x1p-25;
  f.ref.rnd = rnd;
  lce_metric_values mv = vec_metrics(&f, NULL);
  EXPECT(mv.outr_bias == 0x1p-25, "rounding at rnd: outr_bias %a, expected 0x1p-25", mv.outr_bias);
  for (int64_t i = 0; i < 100; i++) f.rounded[i] = 1.0 + 0x1p-24;
  mv = vec_metrics(&f, NULL);
  EXPECT(mv.outr_bias == 0x1p-24, "the larger rounding, at r: outr_bias %a, expected 0x1p-24", mv.outr_bias);
  vec_free(&f);
}

/* The output rounding signed (outs_r, outs_rnd) and the spread of the roundings a kernel's own error can
 * change (outv_bias), lce_metrics.h; the output format here is fp32, one place at 1 is 2^-23 above and 2^-24
 * below. 100 elements r = 1 with rnd a quarter place above: R(rnd) = 1, so outs_rnd = -2^-25 cancels rnd_bias =
 * +2^-25 (a result at R(rnd) has no bias at all, where outr takes 2^-25 one way) and outs_r = 0; with R(r)
 * set one place up, outs_r = 2^-23. outv: r and rnd both sit 2^-25 from their nearer boundary (r = 1 from
 * 1 - 2^-25, below a power of two the places halve; rnd from 1 + 2^-24), so with mag 0 and D_i = flip_i
 * (the accumulation part, 4 u32 sqrt(L/3) 2^-126, is ~1e-44) an element can cross only when flip_i >=
 * 2^-25: flip 2^-26 gives 0, flip 2^-25 every element one place of 2^-23, sqrt(100) 2^-23 / 100 = 2^-23/10.
 * All NaN without rnd. */
static void test_signed_output_rounding(void) {
  vec_fixture f;
  vec_init(&f, 100);
  double rnd[100], flip[100];
  for (int64_t i = 0; i < 100; i++) vec_set(&f, i, 1.0, 1.0, 0.0), rnd[i] = 1.0 + 0x1p-25, flip[i] = 0x1p-26;
  lce_metric_values mv = vec_metrics(&f, NULL);
  EXPECT(isnan(mv.outs_r) && isnan(mv.outs_rnd) && isnan(mv.outv_bias), "no rnd: outs_r %g outs_rnd %g outv %g, expected NaN",
         mv.outs_r, mv.outs_rnd, mv.outv_bias);
  f.ref.rnd = rnd;
  f.ref.flip = flip;
  mv = vec_metrics(&f, NULL);
  EXPECT(mv.rnd_bias == 0x1p-25 && mv.outs_rnd == -0x1p-25 && mv.outs_r == 0.0 && mv.outr_bias == 0x1p-25,
         "at rnd: rnd_bias %a outs_rnd %a outs_r %a outr %a, expected 0x1p-25, -0x1p-25, 0, 0x1p-25", mv.rnd_bias,
         mv.outs_rnd, mv.outs_r, mv.outr_bias);
  EXPECT(mv.outv_bias == 0.0, "D_i short of every boundary: outv_bias %a, expected 0", mv.outv_bias);
  for (int64_t i = 0; i < 100; i++) flip[i] = 0x1p-25;
  mv = vec_metrics(&f, NULL);
  EXPECT(mv.outv_bias == 0x1p-23 / 10, "D_i reaching the boundary: outv_bias %a, expected 2^-23/10", mv.outv_bias);
  for (int64_t i = 0; i < 50; i++) rnd[i] = 1.0 + 0x1p-24; /* a tie: R(rnd) = 1 (even), 0 from the boundary */
  for (int64_t i = 0; i < 100; i++) flip[i] = 0.0;
  mv = vec_metrics(&f, NULL);
  EXPECT(fabs(mv.outv_bias / (sqrt(50.0) * 0x1p-23 / 100) - 1.0) < 1e-12,
         "ties cross with any error (D_i = 4 u32 sqrt(L/3) 2^-126 here): outv_bias %a, expected sqrt(50) 2^-23/100",
         mv.outv_bias);
  for (int64_t i = 0; i < 100; i++) f.rounded[i] = 1.0 + 0x1p-23;
  mv = vec_metrics(&f, NULL);
  EXPECT(mv.outs_r == 0x1p-23, "rounding at r one place up: outs_r %a, expected 0x1p-23", mv.outs_r);
  vec_free(&f);
}

/* rnd_norm = ||rnd - r|| / ||r||, where rnd_bias = <rnd - r, r> / <r, r> cancels: r = 1 everywhere, rnd off by
 * +1/8 and -1/8 alternately gives rnd_bias 0 and rnd_norm 1/8; NaN without rnd. */
static void test_reference_rounding_norm(void) {
  vec_fixture f;
  vec_init(&f, 100);
  double rnd[100];
  for (int64_t i = 0; i < 100; i++) vec_set(&f, i, 1.0, 1.0, 1.0), rnd[i] = i % 2 ? 1.125 : 0.875;
  lce_metric_values mv = vec_metrics(&f, NULL);
  EXPECT(isnan(mv.rnd_norm), "no rnd in the reference: rnd_norm %g, expected NaN", mv.rnd_norm);
  f.ref.rnd = rnd;
  mv = vec_metrics(&f, NULL);
  EXPECT(mv.rnd_bias == 0.0 && mv.rnd_norm == 0.125, "scattered rnd: rnd_bias %a rnd_norm %a, expected 0 and 0x1p-3",
         mv.rnd_bias, mv.rnd_norm);
  /* r == 0 everywhere: relative to the error scale ||emag|| (mag, 2 per element, here) */
  for (int64_t i = 0; i < 100; i++) f.value[i] = f.rounded[i] = 0.0, f.x[i] = 0.0f, f.mag[i] = 2.0, rnd[i] -= 1.0;
  mv = vec_metrics(&f, NULL);
  EXPECT(mv.rnd_norm == 0.0625, "r == 0: rnd_norm %a, expected ||rnd|| / ||emag|| = 0x1p-4", mv.rnd_norm);
  vec_free(&f);
}

/* The accumulation terms' sums (lce_metric_values.acc_bias, acc_norm): sqrt(sum m^2 r^2) / <r, r> and
 * ||m|| / ||r|| with m = max(mag, 2^-126), and 0 without a reference that has rnd (they are the
 * gradients' terms). 100 elements of r = 2, mag = 3: acc_bias = sqrt(100 * 36) / 400 = 0.15 and
 * acc_norm = 1.5; an element of mag 0 still counts the subnormal spacing 2^-126. */
static void test_accumulation_sums(void) {
  vec_fixture f;
  vec_init(&f, 100);
  double rnd[100];
  for (int64_t i = 0; i < 100; i++) vec_set(&f, i, 2.0, 2.0, 1.5), rnd[i] = 2.0;
  lce_metric_values mv = vec_metrics(&f, NULL);
  EXPECT(mv.acc_bias == 0.0 && mv.acc_norm == 0.0, "no rnd in the reference: acc_bias %g, acc_norm %g, expected 0",
         mv.acc_bias, mv.acc_norm);
  f.ref.rnd = rnd;
  mv = vec_metrics(&f, NULL);
  EXPECT(fabs(mv.acc_bias - 0.15) < 1e-15, "acc_bias %.17g, expected 0.15", mv.acc_bias);
  EXPECT(fabs(mv.acc_norm - 1.5) < 1e-15, "acc_norm %.17g, expected 1.5", mv.acc_norm);
  f.mag[0] = 0.0;
  mv = vec_metrics(&f, NULL);
  const double want = sqrt(99.0 * 9.0 + 0x1p-252) / 20.0;
  EXPECT(fabs(mv.acc_norm - want) < 1e-15 && mv.acc_norm < 1.5, "mag 0 counts 2^-126: acc_norm %.17g, expected %.17g",
         mv.acc_norm, want);
  /* flip_norm = ||flip|| / ||r||: flip 0.5 on every element against r = 2 gives 0.25 */
  double flip[100];
  for (int64_t i = 0; i < 100; i++) flip[i] = 0.5;
  EXPECT(mv.flip_norm == 0.0, "no flip in the reference: flip_norm %g, expected 0", mv.flip_norm);
  f.ref.flip = flip;
  mv = vec_metrics(&f, NULL);
  EXPECT(fabs(mv.flip_norm - 0.25) < 1e-15, "flip_norm %.17g, expected 0.25", mv.flip_norm);
  vec_free(&f);
}

/* The tensor cores' alignment ratios (lce_metric_values.tcx) with a = mag + tcex: relerr's ||a|| / ||mag||,
 * bias's sum a |r| / sum mag |r|, maxscaled's max a / mag; 1 without tcex, ulpfrac's always 1. Elements
 * r = 2 (mag 2) and r = 4 (mag 4), tcex 2 on the first: ratios sqrt(32/20), 24/20 and 2, exactly. */
static void test_tensor_core_ratios(void) {
  vec_fixture f;
  vec_init(&f, 64);
  double tcex[64];
  for (int64_t i = 0; i < 64; i++) vec_set(&f, i, i % 2 ? 4.0 : 2.0, i % 2 ? 4.0 : 2.0, 1.0), tcex[i] = i % 2 ? 0.0 : 2.0;
  lce_metric_values mv = vec_metrics(&f, NULL);
  for (int m = 0; m < LCE_METRIC_COUNT; m++) EXPECT(mv.tcx[m] == 1.0, "no tcex: %s's ratio %g", lce_metric_name(m), mv.tcx[m]);
  f.ref.tcex = tcex;
  mv = vec_metrics(&f, NULL);
  EXPECT(fabs(mv.tcx[LCE_METRIC_RELERR] - sqrt(1.6)) < 1e-15, "relerr's ratio %.17g, expected sqrt(1.6)", mv.tcx[LCE_METRIC_RELERR]);
  EXPECT(fabs(mv.tcx[LCE_METRIC_BIAS] - 1.2) < 1e-15, "bias's ratio %.17g, expected 1.2", mv.tcx[LCE_METRIC_BIAS]);
  EXPECT(mv.tcx[LCE_METRIC_MAXSCALED] == 2.0 && mv.tcx[LCE_METRIC_ULPFRAC] == 1.0, "maxscaled's %g (2), ulpfrac's %g (1)",
         mv.tcx[LCE_METRIC_MAXSCALED], mv.tcx[LCE_METRIC_ULPFRAC]);
  /* an element the metrics leave out (a mask) leaves its excess out too */
  unsigned char mask[64];
  for (int64_t i = 0; i < 64; i++) mask[i] = i % 2;
  mv = vec_metrics(&f, mask);
  EXPECT(mv.tcx[LCE_METRIC_RELERR] == 1.0 && mv.tcx[LCE_METRIC_BIAS] == 1.0 && mv.tcx[LCE_METRIC_MAXSCALED] == 1.0,
         "masked: ratios %g %g %g, expected 1", mv.tcx[LCE_METRIC_RELERR], mv.tcx[LCE_METRIC_BIAS], mv.tcx[LCE_METRIC_MAXSCALED]);
  vec_free(&f);
}

int main(void) {
  test_tensor_core_ratios();
  test_reference_rounding_bias();
  test_accumulation_sums();
  test_output_rounding_at_rnd();
  test_signed_output_rounding();
  test_reference_rounding_norm();
  test_statistics_need_elements();
  test_uniform_shrink();
  test_ulpfrac();
  test_condition();
  test_inconclusive_and_mask();
  test_nothing_judged();
  test_edges();
  test_compensated_sums();
  test_exact_products();
  test_order_independent();
  test_zero_reference_both_paths();
  EXPECT(strcmp(lce_metric_name(LCE_METRIC_MAXSCALED), "maxscaled") == 0, "metric names");
  lce_metric m;
  EXPECT(lce_metric_parse("ulpfrac", &m) && m == LCE_METRIC_ULPFRAC && !lce_metric_parse("ulp", &m), "metric parse");
  return lce_test_finish("test_metrics");
}
