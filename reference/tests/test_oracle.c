/* test_oracle.c — the tier-0 oracle against closed forms, finite differences, invariances and
 * itself at twice the precision.
 *
 *   closed forms    equal logits (hidden = 0, or all W rows equal): lse = loss = log V, d_hidden =
 *                   g (mean_v W[v] - W[y]); integer inputs: logits exact, lse and d_hidden equal
 *                   to values computed here from integer logits at 400 bits
 *   finite diffs    central differences of J = sum_n g_n loss_n (lce_oracle_objective, 400 bits)
 *                   against d_hidden and d_weight
 *   invariances     tp and vocab_chunk: every output bit-identical; padding rows (NaN-poisoned):
 *                   real outputs identical, padded d_weight = prior; vocab permutation
 *   edge cases      all tokens ignored (mean): loss 0, gradients 0 / prior, exactly
 *   self-proof      at 160 and 320 bits: |v160 - v320| <= err160 + err320 for every element,
 *                   rounded == lce_mpfr_round_to(v), decisive > 0, non-zero norms
 *   validation      invalid case, label or non-finite input: LCE_EINVAL, nothing computed
 * Seed: LCE_SEED environment variable (default 1); failures print the case id. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_mpfr_dtype.h"
#include "lce_oracle_internal.h"
#include "lce_prng.h"

static long g_fail;
static uint64_t g_seed = 1;

#define EXPECT(cond, ...)                                                               \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      if (g_fail++ < 25) {                                                              \
        fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                            \
        fprintf(stderr, __VA_ARGS__);                                                   \
        fprintf(stderr, " (seed %" PRIu64 ", repro: LCE_SEED=%" PRIu64 " test_oracle)\n", g_seed, g_seed); \
      }                                                                                 \
    }                                                                                   \
  } while (0)

static const char *id_of(const lce_case *c) {
  static char buf[200];
  return lce_case_format(c, buf, sizeof buf);
}

static int same(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return a == b && signbit(a) == signbit(b);
}

static lce_case make_case(lce_dtype t, int64_t n, int64_t h, int64_t v, lce_dist d, lce_reduction r, int tied) {
  lce_case c = lce_case_default();
  c.dtype = t, c.n = n, c.h = h, c.v = v, c.vp = v, c.dist = d, c.reduction = r, c.tied = tied;
  c.seed = g_seed;
  return c;
}

static void gen(const lce_case *c, lce_tensors *t) {
  lce_status st = {0};
  if (lce_case_generate(c, t, &st) != LCE_OK) {
    fprintf(stderr, "generate %s: %s\n", id_of(c), st.msg);
    exit(2);
  }
}

static void run(const lce_case *c, const lce_tensors *t, lce_oracle_result *r) {
  lce_status st = {0};
  if (lce_oracle_run(c, t, r, &st) != LCE_OK) {
    fprintf(stderr, "oracle %s: %s\n", id_of(c), st.msg);
    exit(2);
  }
}

/* |value - x| <= err (+ slack), with x given in MPFR. */
static int within(double value, double err, mpfr_srcptr x, double slack) {
  mpfr_t d;
  mpfr_init2(d, 600);
  mpfr_sub_d(d, x, value, MPFR_RNDN);
  int ok = fabs(mpfr_get_d(d, MPFR_RNDA)) <= err + slack;
  mpfr_clear(d);
  return ok;
}

static double g_of(const lce_case *c, const lce_tensors *t, int64_t n, int64_t n_valid) {
  if (t->labels[n] == c->ignore_index) return 0.0;
  if (c->reduction == LCE_RED_NONE) return t->grad_output[n];
  return c->reduction == LCE_RED_MEAN ? (double)t->grad_output[0] / (double)n_valid : t->grad_output[0];
}

/* ---- closed forms ----------------------------------------------------------------------------- */

/* Logits all equal within each row: lse - z = loss = log V, d_hidden = g (mean_v W[v] - W[y]). */
static void check_equal_logits(const lce_case *c, const lce_tensors *t, mpfr_srcptr z_row, const char *what) {
  lce_oracle_result r;
  run(c, t, &r);
  mpfr_t logv, x, s;
  mpfr_inits2(400, logv, x, s, (mpfr_ptr)0);
  mpfr_set_si(logv, c->v, MPFR_RNDN);
  mpfr_log(logv, logv, MPFR_RNDN);
  const void *w = c->tied ? t->embedding : t->weight;
  for (int64_t n = 0; n < c->n; n++) {
    mpfr_add(x, logv, z_row, MPFR_RNDN);
    EXPECT(within(r.out[LCE_OUT_LSE].value[n], r.out[LCE_OUT_LSE].err[n], x, 0.0), "%s lse[%lld] %.17g != log V + z",
           what, (long long)n, r.out[LCE_OUT_LSE].value[n]);
    int64_t y = t->labels[n];
    if (y == c->ignore_index) continue;
    EXPECT(within(r.out[LCE_OUT_LOSS_TOKEN].value[n], r.out[LCE_OUT_LOSS_TOKEN].err[n], logv, 0.0),
           "%s loss[%lld] %.17g != log V", what, (long long)n, r.out[LCE_OUT_LOSS_TOKEN].value[n]);
    double g = g_of(c, t, n, r.n_valid);
    for (int64_t k = 0; k < c->h; k++) {
      mpfr_set_zero(s, 1);
      for (int64_t v = 0; v < c->v; v++) mpfr_add_d(s, s, lce_load(c->dtype, w, (size_t)(v * c->h + k)), MPFR_RNDN);
      mpfr_div_si(s, s, (long)c->v, MPFR_RNDN);
      mpfr_sub_d(s, s, lce_load(c->dtype, w, (size_t)(y * c->h + k)), MPFR_RNDN);
      mpfr_mul_d(s, s, g, MPFR_RNDN); /* g = grad_output / n_valid: rounded in double, hence the slack */
      int64_t i = n * c->h + k;
      EXPECT(within(r.out[LCE_OUT_D_HIDDEN].value[i], r.out[LCE_OUT_D_HIDDEN].err[i], s,
                    1e-15 * r.out[LCE_OUT_D_HIDDEN].mag[i]),
             "%s d_hidden[%lld] %.17g vs closed form %.17g", what, (long long)i, r.out[LCE_OUT_D_HIDDEN].value[i],
             mpfr_get_d(s, MPFR_RNDN));
    }
  }
  EXPECT(r.decisive > 0, "%s: no decisive element", what);
  mpfr_clears(logv, x, s, (mpfr_ptr)0);
  lce_oracle_free(&r);
}

static void test_equal_logits(void) {
  lce_case c = make_case(LCE_BF16, 6, 8, 37, LCE_DIST_NORMAL, LCE_RED_MEAN, 0);
  c.ignore_pct = 30;
  lce_tensors t;
  gen(&c, &t);
  memset(t.hidden, 0, (size_t)(c.n * c.h) * lce_dtype_size(c.dtype)); /* +0 in every format */
  mpfr_t zero;
  mpfr_init2(zero, 64);
  mpfr_set_zero(zero, 1);
  check_equal_logits(&c, &t, zero, "hidden=0");
  mpfr_clear(zero);
  lce_tensors_free(&t);

  /* Every W row equal to row 0 and every hidden row equal to row 0 (tied, fp32): one logit z,
   * computed here exactly, in every position. */
  c = make_case(LCE_FP32, 5, 8, 19, LCE_DIST_NORMAL, LCE_RED_SUM, 1);
  gen(&c, &t);
  float *e = t.embedding, *h = t.hidden;
  for (int64_t v = 1; v < c.v; v++) memcpy(e + v * c.h, e, (size_t)c.h * sizeof *e);
  for (int64_t n = 1; n < c.n; n++) memcpy(h + n * c.h, h, (size_t)c.h * sizeof *h);
  mpfr_t z, p;
  mpfr_init2(z, 400);
  mpfr_init2(p, 64);
  mpfr_set_zero(z, 1);
  for (int64_t k = 0; k < c.h; k++) {
    mpfr_set_d(p, h[k], MPFR_RNDN);
    mpfr_mul_d(p, p, e[k], MPFR_RNDN); /* exact: 48 bits */
    mpfr_add(z, z, p, MPFR_RNDN);      /* exact at 400 bits */
  }
  check_equal_logits(&c, &t, z, "equal W rows");
  mpfr_clears(z, p, (mpfr_ptr)0);
  lce_tensors_free(&t);
}

/* Small integer inputs: logits are exact integers; lse and d_hidden follow from them. */
static void test_integer_inputs(void) {
  lce_case c = make_case(LCE_BF16, 5, 6, 23, LCE_DIST_NORMAL, LCE_RED_NONE, 0);
  lce_tensors t;
  gen(&c, &t);
  for (int64_t i = 0; i < c.n * c.h; i++)
    lce_store(c.dtype, t.hidden, (size_t)i, (double)((int)lce_rand_below(g_seed, 7, (uint64_t)i, 7) - 3));
  for (int64_t i = 0; i < c.vp * c.h; i++)
    lce_store(c.dtype, t.weight, (size_t)i, (double)((int)lce_rand_below(g_seed, 8, (uint64_t)i, 5) - 2));
  lce_oracle_result r;
  run(&c, &t, &r);

  lce_row row;
  lce_status st = {0};
  lce_mp_array hm, wm;
  if (lce_row_init(&row, c.v, c.h, LCE_ORACLE_PREC, lce_mul_exact_prec(8), &st) ||
      lce_mp_array_init(&hm, c.n * c.h, 8, &st) || lce_mp_array_init(&wm, c.v * c.h, 8, &st)) {
    fprintf(stderr, "%s\n", st.msg);
    exit(2);
  }
  for (int64_t i = 0; i < c.n * c.h; i++) mpfr_set_d(hm.x[i], lce_load(c.dtype, t.hidden, (size_t)i), MPFR_RNDN);
  for (int64_t i = 0; i < c.v * c.h; i++) mpfr_set_d(wm.x[i], lce_load(c.dtype, t.weight, (size_t)i), MPFR_RNDN);
  mpfr_t s, e, p;
  mpfr_inits2(400, s, e, p, (mpfr_ptr)0);
  for (int64_t n = 0; n < c.n; n++) {
    long z[64];
    lce_row_logits_exact(&row, hm.x + n * c.h, wm.x);
    mpfr_set_zero(s, 1);
    for (int64_t v = 0; v < c.v; v++) {
      z[v] = 0;
      for (int64_t k = 0; k < c.h; k++)
        z[v] += lround(lce_load(c.dtype, t.hidden, (size_t)(n * c.h + k)) *
                       lce_load(c.dtype, t.weight, (size_t)(v * c.h + k)));
      EXPECT(mpfr_cmp_si(row.z.x[v], z[v]) == 0, "logit[%lld,%lld] not the exact integer %ld", (long long)n,
             (long long)v, z[v]);
      mpfr_set_si(e, z[v], MPFR_RNDN);
      mpfr_exp(e, e, MPFR_RNDN);
      mpfr_add(s, s, e, MPFR_RNDN);
    }
    mpfr_log(e, s, MPFR_RNDN); /* lse at 400 bits */
    EXPECT(within(r.out[LCE_OUT_LSE].value[n], r.out[LCE_OUT_LSE].err[n], e, 0.0), "integer lse[%lld]", (long long)n);
    int64_t y = t.labels[n];
    double g = t.grad_output[n];
    for (int64_t k = 0; k < c.h; k++) { /* d_hidden = g sum_v (p_v - [v==y]) W[v,k] */
      mpfr_set_zero(p, 1);
      for (int64_t v = 0; v < c.v; v++) {
        mpfr_set_si(s, z[v], MPFR_RNDN);
        mpfr_sub(s, s, e, MPFR_RNDN);
        mpfr_exp(s, s, MPFR_RNDN);
        if (v == y) mpfr_sub_ui(s, s, 1, MPFR_RNDN);
        mpfr_mul_d(s, s, lce_load(c.dtype, t.weight, (size_t)(v * c.h + k)), MPFR_RNDN);
        mpfr_add(p, p, s, MPFR_RNDN);
      }
      mpfr_mul_d(p, p, g, MPFR_RNDN);
      int64_t i = n * c.h + k;
      EXPECT(within(r.out[LCE_OUT_D_HIDDEN].value[i], r.out[LCE_OUT_D_HIDDEN].err[i], p, 0.0),
             "integer d_hidden[%lld] %.17g vs %.17g", (long long)i, r.out[LCE_OUT_D_HIDDEN].value[i],
             mpfr_get_d(p, MPFR_RNDN));
    }
  }
  mpfr_clears(s, e, p, (mpfr_ptr)0);
  lce_mp_array_free(&hm);
  lce_mp_array_free(&wm);
  lce_row_free(&row);
  lce_oracle_free(&r);
  lce_tensors_free(&t);
}

/* ---- finite differences ----------------------------------------------------------------------- */

static void objective(const lce_case *c, const lce_tensors *t, lce_mp_array *hm, lce_mp_array *wm, mpfr_t out) {
  lce_status st = {0};
  if (lce_oracle_objective(c, t, hm->x, wm->x, 400, out, &st) != LCE_OK) {
    fprintf(stderr, "objective %s: %s\n", id_of(c), st.msg);
    exit(2);
  }
}

/* dJ/dx by central differences at step 2^-40 (truncation ~1e-24 relative), x one element. */
static double central_difference(const lce_case *c, const lce_tensors *t, lce_mp_array *hm, lce_mp_array *wm,
                                 mpfr_ptr x) {
  mpfr_t jp, jm, x0;
  mpfr_inits2(400, jp, jm, x0, (mpfr_ptr)0);
  mpfr_set(x0, x, MPFR_RNDN);
  mpfr_add_d(x, x0, 0x1p-40, MPFR_RNDN);
  objective(c, t, hm, wm, jp);
  mpfr_sub_d(x, x0, 0x1p-40, MPFR_RNDN);
  objective(c, t, hm, wm, jm);
  mpfr_set(x, x0, MPFR_RNDN);
  mpfr_sub(jp, jp, jm, MPFR_RNDN);
  mpfr_mul_2si(jp, jp, 39, MPFR_RNDN);
  double d = mpfr_get_d(jp, MPFR_RNDN);
  mpfr_clears(jp, jm, x0, (mpfr_ptr)0);
  return d;
}

static void test_finite_differences(void) {
  const lce_reduction reds[] = {LCE_RED_MEAN, LCE_RED_SUM, LCE_RED_NONE};
  const lce_dist dists[] = {LCE_DIST_MIXED, LCE_DIST_PEAKED, LCE_DIST_NORMAL};
  for (int i = 0; i < 3; i++) {
    lce_case c = make_case(i == 1 ? LCE_FP16 : LCE_BF16, 5, 7, 29, dists[i], reds[i], i == 2);
    c.ignore_pct = 20;
    lce_tensors t;
    gen(&c, &t);
    lce_oracle_result r;
    run(&c, &t, &r);
    lce_mp_array hm, wm;
    lce_status st = {0};
    if (lce_mp_array_init(&hm, c.n * c.h, 256, &st) || lce_mp_array_init(&wm, c.v * c.h, 256, &st)) exit(2);
    const void *w = c.tied ? t.embedding : t.weight;
    for (int64_t j = 0; j < c.n * c.h; j++) mpfr_set_d(hm.x[j], lce_load(c.dtype, t.hidden, (size_t)j), MPFR_RNDN);
    for (int64_t j = 0; j < c.v * c.h; j++) mpfr_set_d(wm.x[j], lce_load(c.dtype, w, (size_t)j), MPFR_RNDN);
    const float *prior = c.tied ? t.grad_embedding_prior : t.grad_weight_prior;
    for (int s = 0; s < 4; s++) {
      int64_t e = (int64_t)lce_rand_below(g_seed, 20 + (uint64_t)i, (uint64_t)s, (uint64_t)(c.n * c.h));
      double fd = central_difference(&c, &t, &hm, &wm, hm.x[e]);
      double v = r.out[LCE_OUT_D_HIDDEN].value[e], err = r.out[LCE_OUT_D_HIDDEN].err[e];
      EXPECT(fabs(fd - v) <= err + 1e-18 * (r.out[LCE_OUT_D_HIDDEN].mag[e] + 1e-30),
             "%s d_hidden[%lld] %.17g vs fd %.17g", id_of(&c), (long long)e, v, fd);
      e = (int64_t)lce_rand_below(g_seed, 30 + (uint64_t)i, (uint64_t)s, (uint64_t)(c.v * c.h));
      fd = central_difference(&c, &t, &hm, &wm, wm.x[e]);
      v = r.out[LCE_OUT_D_WEIGHT].value[e] - prior[e]; /* prior fresh: 0 */
      EXPECT(fabs(fd - v) <= r.out[LCE_OUT_D_WEIGHT].err[e] + 1e-18 * (r.out[LCE_OUT_D_WEIGHT].mag[e] + 1e-30),
             "%s d_weight[%lld] %.17g vs fd %.17g", id_of(&c), (long long)e, v, fd);
    }
    lce_mp_array_free(&hm);
    lce_mp_array_free(&wm);
    lce_oracle_free(&r);
    lce_tensors_free(&t);
  }
}

/* ---- invariances ------------------------------------------------------------------------------ */

/* Values and format values bit-identical; error bounds identical when exact_err, else within
 * 1e-12 relative (their sums of magnitudes are evaluated in double, in row order). */
static void expect_output_identical(const lce_oracle_result *a, const lce_oracle_result *b, lce_output_id o,
                                    int exact_err, const char *what) {
  const lce_ref_output *x = &a->out[o], *y = &b->out[o];
  EXPECT(x->count == y->count, "%s %s: counts differ", what, lce_output_name(o));
  if (x->count != y->count) return;
  for (int64_t i = 0; i < x->count; i++) {
    int err_ok = exact_err ? same(x->err[i], y->err[i]) : fabs(x->err[i] - y->err[i]) <= 1e-12 * x->err[i];
    int ok = same(x->value[i], y->value[i]) && err_ok && same(x->rounded[i], y->rounded[i]) &&
             x->decisive[i] == y->decisive[i];
    EXPECT(ok, "%s %s[%lld]: %.17g vs %.17g", what, lce_output_name(o), (long long)i, x->value[i], y->value[i]);
    if (!ok) return;
  }
}

static void test_tp_and_chunk(void) {
  lce_case c = make_case(LCE_BF16, 8, 16, 100, LCE_DIST_MIXED, LCE_RED_MEAN, 0);
  c.vp = 128, c.prior_grad = 1, c.ignore_pct = 25;
  lce_tensors t;
  gen(&c, &t);
  lce_oracle_result a, b;
  run(&c, &t, &a);
  lce_case c2 = c;
  c2.tp = 4, c2.vocab_chunk = 7;
  run(&c2, &t, &b);
  for (int o = 0; o < LCE_OUT_COUNT; o++) expect_output_identical(&a, &b, (lce_output_id)o, 1, "tp4/chunk7");
  lce_oracle_free(&a);
  lce_oracle_free(&b);
  lce_tensors_free(&t);
}

/* The same problem with 13 extra padded rows, poisoned with NaN (W) and junk priors. */
static void test_padding(void) {
  lce_case c = make_case(LCE_FP16, 6, 8, 40, LCE_DIST_MIXED, LCE_RED_SUM, 1);
  c.prior_grad = 1;
  lce_tensors t, u;
  gen(&c, &t);
  lce_case cp = c;
  cp.vp = c.v + 13;
  gen(&cp, &u);
  size_t es = lce_dtype_size(c.dtype), wn = (size_t)(c.v * c.h);
  memcpy(u.hidden, t.hidden, (size_t)(c.n * c.h) * es);
  memcpy(u.labels, t.labels, (size_t)c.n * sizeof *t.labels);
  memcpy(u.grad_output, t.grad_output, sizeof(float));
  memcpy(u.embedding, t.embedding, wn * es);
  memcpy(u.grad_embedding_prior, t.grad_embedding_prior, wn * sizeof(float));
  for (size_t i = wn; i < (size_t)(cp.vp * c.h); i++) {
    lce_store(c.dtype, u.embedding, i, NAN);
    u.grad_embedding_prior[i] = i % 3 ? (float)i : NAN;
  }
  lce_oracle_result a, b;
  run(&c, &t, &a);
  run(&cp, &u, &b);
  const lce_output_id same_outs[] = {LCE_OUT_LOSS, LCE_OUT_LOSS_TOKEN, LCE_OUT_LSE, LCE_OUT_D_HIDDEN};
  for (int i = 0; i < 4; i++) expect_output_identical(&a, &b, same_outs[i], 1, "padding");
  for (int64_t i = 0; i < (int64_t)wn; i++)
    EXPECT(same(a.out[LCE_OUT_D_WEIGHT].value[i], b.out[LCE_OUT_D_WEIGHT].value[i]), "padding: d_weight[%lld]",
           (long long)i);
  for (int64_t i = (int64_t)wn; i < cp.vp * c.h; i++)
    EXPECT(same(b.out[LCE_OUT_D_WEIGHT].value[i], u.grad_embedding_prior[i]) && b.out[LCE_OUT_D_WEIGHT].err[i] == 0.0 &&
               b.out[LCE_OUT_D_WEIGHT].decisive[i],
           "padded d_weight[%lld] = %g, prior %g", (long long)i, b.out[LCE_OUT_D_WEIGHT].value[i],
           (double)u.grad_embedding_prior[i]);
  lce_oracle_free(&a);
  lce_oracle_free(&b);
  lce_tensors_free(&t);
  lce_tensors_free(&u);
}

/* Vocab rows permuted (rotated by 11, then reversed) and labels remapped. */
static void test_permutation(void) {
  lce_case c = make_case(LCE_BF16, 7, 8, 31, LCE_DIST_MIXED, LCE_RED_NONE, 0);
  c.prior_grad = 1, c.ignore_pct = 15;
  lce_tensors t, u;
  gen(&c, &t);
  gen(&c, &u);
  size_t es = lce_dtype_size(c.dtype), row = (size_t)c.h;
  int64_t perm[64];
  for (int64_t v = 0; v < c.v; v++) perm[v] = c.v - 1 - (v + 11) % c.v;
  for (int64_t v = 0; v < c.v; v++) {
    memcpy((char *)u.weight + (size_t)perm[v] * row * es, (char *)t.weight + (size_t)v * row * es, row * es);
    memcpy(u.grad_weight_prior + (size_t)perm[v] * row, t.grad_weight_prior + (size_t)v * row, row * sizeof(float));
  }
  for (int64_t n = 0; n < c.n; n++)
    if (t.labels[n] != c.ignore_index) u.labels[n] = perm[t.labels[n]];
  lce_oracle_result a, b;
  run(&c, &t, &a);
  run(&c, &u, &b);
  const lce_output_id same_outs[] = {LCE_OUT_LOSS, LCE_OUT_LOSS_TOKEN, LCE_OUT_LSE, LCE_OUT_D_HIDDEN};
  for (int i = 0; i < 4; i++) expect_output_identical(&a, &b, same_outs[i], 0, "permutation");
  for (int64_t v = 0; v < c.v; v++)
    for (int64_t k = 0; k < c.h; k++) {
      int64_t i = v * c.h + k, j = perm[v] * c.h + k;
      EXPECT(same(a.out[LCE_OUT_D_WEIGHT].value[i], b.out[LCE_OUT_D_WEIGHT].value[j]), "permutation: d_weight row %lld",
             (long long)v);
    }
  lce_oracle_free(&a);
  lce_oracle_free(&b);
  lce_tensors_free(&t);
  lce_tensors_free(&u);
}

/* ---- edge cases and validation ---------------------------------------------------------------- */

static void test_all_ignored(void) {
  lce_case c = make_case(LCE_BF16, 6, 8, 30, LCE_DIST_MIXED, LCE_RED_MEAN, 1);
  c.ignore_pct = 100, c.prior_grad = 1;
  lce_tensors t;
  gen(&c, &t);
  lce_oracle_result r;
  run(&c, &t, &r);
  EXPECT(r.n_valid == 0, "n_valid %lld", (long long)r.n_valid);
  EXPECT(same(r.out[LCE_OUT_LOSS].value[0], 0.0) && r.out[LCE_OUT_LOSS].err[0] == 0.0, "all ignored: loss %g",
         r.out[LCE_OUT_LOSS].value[0]);
  for (int64_t i = 0; i < c.n * c.h; i++)
    EXPECT(r.out[LCE_OUT_D_HIDDEN].value[i] == 0.0 && r.out[LCE_OUT_D_HIDDEN].err[i] == 0.0,
           "all ignored: d_hidden[%lld] = %g", (long long)i, r.out[LCE_OUT_D_HIDDEN].value[i]);
  for (int64_t i = 0; i < c.vp * c.h; i++)
    EXPECT(same(r.out[LCE_OUT_D_WEIGHT].value[i], t.grad_embedding_prior[i]) && r.out[LCE_OUT_D_WEIGHT].err[i] == 0.0,
           "all ignored: d_weight[%lld] != prior", (long long)i);
  for (int64_t n = 0; n < c.n; n++)
    EXPECT(isfinite(r.out[LCE_OUT_LSE].value[n]) && r.out[LCE_OUT_LOSS_TOKEN].value[n] == 0.0,
           "all ignored: token %lld", (long long)n);
  lce_oracle_free(&r);
  lce_tensors_free(&t);
}

static void expect_rejected(const lce_case *c, const lce_tensors *t, const char *what) {
  lce_oracle_result r;
  lce_status st = {0};
  lce_code rc = lce_oracle_run(c, t, &r, &st);
  EXPECT(rc == LCE_EINVAL && st.msg[0] != '\0' && r.total == 0 && r.out[LCE_OUT_LOSS].value == NULL,
         "%s: rc %d msg '%s'", what, (int)rc, st.msg);
}

static void test_validation(void) {
  lce_case c = make_case(LCE_FP32, 4, 4, 10, LCE_DIST_NORMAL, LCE_RED_MEAN, 0);
  lce_tensors t;
  gen(&c, &t);
  lce_case bad = c;
  bad.vp = 5;
  expect_rejected(&bad, &t, "vp < v");
  int64_t y = t.labels[1];
  t.labels[1] = c.v;
  expect_rejected(&c, &t, "label == v");
  t.labels[1] = y;
  ((float *)t.hidden)[3] = NAN;
  expect_rejected(&c, &t, "NaN hidden");
  lce_tensors_free(&t);
}

/* The fast exact product agrees with mpfr_mul at enough precision. */
static void test_mul_exact(void) {
  mpfr_t a, b, ref;
  mpfr_init2(a, 160);
  mpfr_init2(b, 24);
  mpfr_init2(ref, 300);
  lce_mp_array arr;
  lce_status st = {0};
  if (lce_mp_array_init(&arr, 1, lce_mul_exact_prec(160), &st)) exit(2);
  for (uint64_t i = 0; i < 2000; i++) {
    mpfr_set_d(a, lce_rand_normal(g_seed, 40, i), MPFR_RNDN);
    mpfr_mul_d(a, a, lce_rand_normal(g_seed, 41, i) * 1e-7 + 1.0 / 3.0, MPFR_RNDN); /* 160 significant bits */
    mpfr_set_d(b, i % 50 == 0 ? 0.0 : lce_rand_normal(g_seed, 42, i) * ldexp(1.0, (int)(i % 40) - 20), MPFR_RNDN);
    lce_mul_exact_1(arr.x[0], a, b);
    mpfr_mul(ref, a, b, MPFR_RNDN);
    EXPECT(mpfr_equal_p(arr.x[0], ref) || (mpfr_zero_p(ref) && mpfr_zero_p(arr.x[0])), "mul_exact_1 #%" PRIu64, i);
  }
  lce_mp_array_free(&arr);
  mpfr_clears(a, b, ref, (mpfr_ptr)0);
}

/* ---- self-proof ------------------------------------------------------------------------------- */

static void self_proof(const lce_case *c) {
  lce_tensors t;
  gen(c, &t);
  lce_oracle_result lo, hi;
  lce_oracle_mp mlo, mhi;
  lce_status st = {0};
  if (lce_oracle_run_prec(c, &t, 160, &lo, &mlo, &st) || lce_oracle_run_prec(c, &t, 320, &hi, &mhi, &st)) {
    fprintf(stderr, "self-proof %s: %s\n", id_of(c), st.msg);
    exit(2);
  }
  mpfr_t d;
  mpfr_init2(d, 700);
  double tight = 0.0;
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_ref_output *r = &lo.out[o];
    double norm = 0.0;
    for (int64_t i = 0; i < r->count; i++) {
      mpfr_srcptr vl = mlo.value[o].x[i], vh = mhi.value[o].x[i];
      double el = mlo.err_mp[o][i], eh = mhi.err_mp[o][i];
      if (!mpfr_number_p(vl)) {
        EXPECT(el == 0.0 && mpfr_nan_p(vl) == mpfr_nan_p(vh), "%s %s[%lld] non-finite", id_of(c),
               lce_output_name((lce_output_id)o), (long long)i);
        continue;
      }
      mpfr_sub(d, vl, vh, MPFR_RNDN);
      double diff = fabs(mpfr_get_d(d, MPFR_RNDA));
      EXPECT(diff <= el + eh, "%s %s[%lld]: |v160 - v320| = %g > err %g + %g", id_of(c),
             lce_output_name((lce_output_id)o), (long long)i, diff, el, eh);
      EXPECT(eh <= el * 0x1p-100 || el == 0.0 || !isfinite(el), "%s %s[%lld]: err320 %g not << err160 %g", id_of(c),
             lce_output_name((lce_output_id)o), (long long)i, eh, el);
      if (el > 0.0 && diff / el > tight) tight = diff / el;
      mpfr_sub_d(d, vh, r->value[i], MPFR_RNDN); /* the public double against the better value */
      EXPECT(fabs(mpfr_get_d(d, MPFR_RNDA)) <= r->err[i] + eh, "%s %s[%lld]: value off by more than err", id_of(c),
             lce_output_name((lce_output_id)o), (long long)i);
      lce_dtype fmt = lce_output_format(c, (lce_output_id)o);
      EXPECT(same(r->rounded[i], lce_mpfr_round_to(fmt, vl)), "%s %s[%lld]: rounded", id_of(c),
             lce_output_name((lce_output_id)o), (long long)i);
      if (r->decisive[i]) {
        /* Numerically: a certified zero may carry either sign (see certify in lce_oracle.c). */
        EXPECT(r->rounded[i] == hi.out[o].rounded[i], "%s %s[%lld]: decisive but rounds differently at 320 bits",
               id_of(c), lce_output_name((lce_output_id)o), (long long)i);
        EXPECT(r->err[i] <= ldexp(lce_ulp(fmt, r->value[i]), -12), "%s %s[%lld]: decisive with err %g", id_of(c),
               lce_output_name((lce_output_id)o), (long long)i, r->err[i]);
      }
      norm += r->value[i] * r->value[i];
    }
    if (o != LCE_OUT_LOSS && r->count > 0 && lo.n_valid > 0)
      EXPECT(norm > 0.0, "%s %s: zero norm", id_of(c), lce_output_name((lce_output_id)o));
  }
  /* Inconclusive elements are the rare exactly-cancelling ones (W's constant column 0 makes
   * d_hidden[n, 0] = g (sum_v p_v - 1) = 0): at most 2% here. */
  EXPECT(lo.decisive > 0 && lo.decisive >= lo.total - lo.total / 50, "%s: decisive %lld of %lld", id_of(c),
         (long long)lo.decisive, (long long)lo.total);
  /* Not absurdly loose: somewhere the bound is within 2^40 of the actual difference. */
  EXPECT(tight > 0x1p-40, "%s: bounds loose, max |v160 - v320|/err = %g", id_of(c), tight);
  printf("  %-58s decisive %6lld/%-6lld worst rel err %.2e (mpfr %.2e) tightness %.2e\n", id_of(c),
         (long long)lo.decisive, (long long)lo.total, lo.worst_rel_err, mlo.worst_rel_err_mp, tight);
  mpfr_clear(d);
  lce_oracle_free(&lo);
  lce_oracle_free(&hi);
  lce_oracle_mp_free(&mlo);
  lce_oracle_mp_free(&mhi);
  lce_tensors_free(&t);
}

static void test_self_proof(void) {
  for (int d = 0; d < LCE_DIST_COUNT; d++) {
    lce_case c = make_case((lce_dtype)(d % 3), 9, 12, 50, (lce_dist)d, (lce_reduction)(d % 3), d % 2);
    c.vp = 64, c.tp = 2, c.prior_grad = d % 2 == 0, c.ignore_pct = 20;
    self_proof(&c);
  }
}

int main(void) {
  const char *s = getenv("LCE_SEED");
  if (s != NULL && *s) g_seed = strtoull(s, NULL, 0);
  struct { const char *name; void (*fn)(void); } tests[] = {
      {"equal_logits", test_equal_logits}, {"integer_inputs", test_integer_inputs},
      {"finite_differences", test_finite_differences}, {"tp_and_chunk", test_tp_and_chunk},
      {"padding", test_padding}, {"permutation", test_permutation}, {"all_ignored", test_all_ignored},
      {"validation", test_validation}, {"mul_exact", test_mul_exact}, {"self_proof", test_self_proof}};
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    long before = g_fail;
    tests[i].fn();
    printf("%-20s %s\n", tests[i].name, g_fail == before ? "ok" : "FAILED");
  }
  if (g_fail) {
    fprintf(stderr, "test_oracle: %ld failures (seed %" PRIu64 ")\n", g_fail, g_seed);
    return 1;
  }
  printf("test_oracle: all passed (seed %" PRIu64 ")\n", g_seed);
  return 0;
}
