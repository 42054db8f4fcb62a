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
 *   exp             lce_exp_rn and lce_tanh_sech_rn (fixed point) and MPFR's exp, tanh, sech: the same
 *                   bits on 60000 and 20000 arguments
 *   threads, blocks the same bits on 1 and 2 threads and with d_weight's dz in vocab blocks of 7 and 97
 *   self-proof      at 160 and 320 bits: |v160 - v320| <= err160 + err320 for every element,
 *                   rounded == lce_mpfr_round_to(v), decisive > 0, non-zero norms
 *   validation      invalid case, label, grad_output or class weight: LCE_EINVAL, nothing computed
 * and, in test_oracle_options.c, every loss option (softcap, label smoothing, z-loss, class weights,
 * tf32) and non-finite inputs. Helpers shared by both files: oracle_check.c.
 * Seed: $LCE_TEST_SEED (default 1); failures print the case id. */
#include <stdlib.h>
#include <string.h>

#include "lce_mpfr_dtype.h"
#include "lce_parallel.h"
#include "lce_prng.h"
#include "oracle_check.h"
#ifdef _OPENMP
#include <omp.h>
#endif

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
  const void *w = lce_output_weight(c, t);
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
    lce_store(c.dtype, t.hidden, (size_t)i, (double)((int)lce_rand_below(lce_test_seed(), 7, (uint64_t)i, 7) - 3));
  for (int64_t i = 0; i < c.vp * c.h; i++)
    lce_store(c.dtype, t.weight, (size_t)i, (double)((int)lce_rand_below(lce_test_seed(), 8, (uint64_t)i, 5) - 2));
  lce_oracle_result r;
  run(&c, &t, &r);

  lce_row row;
  lce_status st = {0};
  lce_mp_array hm, wm;
  if (lce_row_init(&row, &c, NULL, c.h, LCE_ORACLE_PREC, lce_mul_exact_prec(8), &st) ||
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
    check_gradients_fd(&c, &t, &r, 4, 20 + (uint64_t)i, NULL);
    lce_oracle_free(&r);
    lce_tensors_free(&t);
  }
}

/* ---- invariances ------------------------------------------------------------------------------ */

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

/* ---- exp ---------------------------------------------------------------------------------------- */

/* x = 160 random bits (stream seed, index i) times 2^e, e uniform in [e0, e0 + count). */
static void random_bits(mpfr_t x, uint64_t seed, uint64_t i, int e0, int count) {
  mpfr_set_ui(x, 0, MPFR_RNDN);
  for (int k = 0; k < 5; k++) {
    mpfr_mul_2ui(x, x, 32, MPFR_RNDN);
    mpfr_add_ui(x, x, (unsigned long)lce_rand_below(seed, i, (uint64_t)k, (uint64_t)1 << 32), MPFR_RNDN);
  }
  mpfr_div_2ui(x, x, 160, MPFR_RNDN);
  mpfr_mul_2si(x, x, (long)lce_rand_below(seed + 1, i, 0, (uint64_t)count) + e0, MPFR_RNDN);
}

/* lce_exp_rn against mpfr_exp bit for bit at 160 bits: random 160-bit significands and dyadic values
 * of few bits (logit differences of dtype inputs) at every exponent of the fixed-point range and
 * beyond it, values next to multiples of ln 2 (the reduction's edges); then lce_tanh_sech_rn against
 * mpfr_tanh and mpfr_sech. Most must take the fixed point (else the test says nothing about it). */
static void test_exp(void) {
  mpfr_t x, a, b, l2;
  mpfr_inits2(160, x, a, b, l2, (mpfr_ptr)0);
  mpfr_const_log2(l2, MPFR_RNDN);
  int64_t fast = 0, total = 0;
  for (uint64_t i = 0; i < 60000; i++) {
    const int kind = (int)(i % 3);
    if (kind == 0) { /* 160 random bits at exponent -36 .. 14 */
      random_bits(x, 0xE0, i, -36, 51);
    } else if (kind == 1) { /* a double: few bits */
      mpfr_set_d(x, ldexp((double)lce_rand_below(0xE2, i, 0, (uint64_t)1 << 40), -(int)lce_rand_below(0xE3, i, 0, 70)),
                 MPFR_RNDN);
    } else { /* next to q ln 2 */
      mpfr_mul_ui(x, l2, (unsigned long)lce_rand_below(0xE4, i, 0, 6000) + 1, MPFR_RNDN);
      mpfr_nextabove(x);
      for (uint64_t k = lce_rand_below(0xE5, i, 0, 3); k > 0; k--) mpfr_nextbelow(x);
    }
    if (mpfr_zero_p(x)) continue;
    mpfr_neg(x, x, MPFR_RNDN);
    fast += lce_exp_rn(a, x);
    mpfr_exp(b, x, MPFR_RNDN);
    total++;
    EXPECT(mpfr_equal_p(a, b), "exp(%s) differs from mpfr_exp", mpfr_get_str(NULL, NULL, 10, 0, x, MPFR_RNDN));
  }
  EXPECT(fast > total / 2, "only %lld of %lld exps took the fixed point", (long long)fast, (long long)total);
  printf("  exp: %lld of %lld arguments in fixed point, every one mpfr_exp's bits\n", (long long)fast, (long long)total);
  /* tanh and sech (lce_tanh_sech_rn): softcap arguments s / c of either sign, 160 random bits or few. */
  mpfr_t t1, s1, t2, s2;
  mpfr_inits2(160, t1, s1, t2, s2, (mpfr_ptr)0);
  fast = total = 0;
  for (uint64_t i = 0; i < 20000; i++) {
    if (i % 2) {
      random_bits(x, 0xE6, i, -10, 24);
    } else {
      mpfr_set_d(x, ldexp((double)lce_rand_below(0xE8, i, 0, (uint64_t)1 << 30), -18 - (int)lce_rand_below(0xE9, i, 0, 28)),
                 MPFR_RNDN);
    }
    if (mpfr_zero_p(x)) continue;
    if (i % 4 < 2) mpfr_neg(x, x, MPFR_RNDN);
    fast += lce_tanh_sech_rn(t1, s1, x);
    mpfr_tanh(t2, x, MPFR_RNDN);
    mpfr_sech(s2, x, MPFR_RNDN);
    total++;
    EXPECT(mpfr_equal_p(t1, t2) && mpfr_equal_p(s1, s2), "tanh/sech(%s) differ from MPFR's",
           mpfr_get_str(NULL, NULL, 10, 0, x, MPFR_RNDN));
  }
  EXPECT(fast > total / 2, "only %lld of %lld tanh/sech took the fixed point", (long long)fast, (long long)total);
  printf("  tanh, sech: %lld of %lld arguments in fixed point, every one MPFR's bits\n", (long long)fast, (long long)total);
  mpfr_clears(t1, s1, t2, s2, (mpfr_ptr)0);
  mpfr_clears(x, a, b, l2, (mpfr_ptr)0);
}

/* ---- threads and vocab blocks ----------------------------------------------------------------- */

/* Every field of every real element (padded d_weight rows excluded: a subset run leaves them unwritten)
 * bit for bit; decisive counts equal when full. */
static void expect_same_bits(const lce_case *c, const lce_oracle_result *a, const lce_oracle_result *b, int full,
                             const char *what) {
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_ref_output *x = &a->out[o], *y = &b->out[o];
    const int64_t count = o == LCE_OUT_D_WEIGHT && !full ? c->v * c->h : x->count;
    EXPECT(x->count == y->count, "%s %s: counts differ", what, lce_output_name((lce_output_id)o));
    for (int64_t i = 0; i < count && x->count == y->count; i++) {
      const int ok = same(x->value[i], y->value[i]) && same(x->err[i], y->err[i]) && same(x->mag[i], y->mag[i]) &&
                     same(x->emag[i], y->emag[i]) && same(x->rounded[i], y->rounded[i]) &&
                     x->decisive[i] == y->decisive[i];
      EXPECT(ok, "%s %s[%lld]: %a err %a vs %a err %a", what, lce_output_name((lce_output_id)o), (long long)i,
             x->value[i], x->err[i], y->value[i], y->err[i]);
      if (!ok) break;
    }
  }
  if (full)
    EXPECT(a->decisive == b->decisive && a->total == b->total && same(a->worst_rel_err, b->worst_rel_err),
           "%s: decisive %lld/%lld vs %lld/%lld", what, (long long)a->decisive, (long long)a->total,
           (long long)b->decisive, (long long)b->total);
}

static void set_threads(int n) {
#ifdef _OPENMP
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}

/* The same bits on 1 and 2 threads, and with d_weight's dz in vocab blocks of 7 and 97 columns (the
 * later blocks recomputed from each row's kept state) as with all columns at once, also for a subset
 * of d_weight elements and the loss (an escalation's shape): every option,
 * ignored tokens, inexact (fp32) logits, logits below -87, poisoned rows. */
static void test_threads_and_blocks(void) {
  lce_case cases[4];
  /* Each above lce_oracle_rows.c's floor for threads (2^20 products: N V (H + 30) here). */
  cases[0] = make_case(LCE_BF16, 24, 40, 640, LCE_DIST_MIXED, LCE_RED_MEAN, 0);
  cases[0].softcap = 15, cases[0].z_loss_e5 = 10, cases[0].class_weights = 1;
  cases[0].smoothing = LCE_SMOOTH_PYTORCH, cases[0].smoothing_permille = 200, cases[0].ignore_pct = 20;
  cases[1] = make_case(LCE_FP32, 18, 40, 900, LCE_DIST_PEAKED, LCE_RED_SUM, 1);
  cases[1].prior_grad = 1;
  cases[2] = make_case(LCE_FP16, 20, 34, 820, LCE_DIST_NEGATIVE, LCE_RED_NONE, 0);
  cases[3] = make_case(LCE_BF16, 16, 36, 1000, LCE_DIST_POISON, LCE_RED_MEAN, 1);
  int threads_before = lce_thread_limit();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const lce_case *c = &cases[i];
    lce_test_set_case(c);
    lce_tensors t;
    gen(c, &t);
    lce_oracle_result one, two;
    set_threads(1);
    run(c, &t, &one);
    set_threads(2);
    run(c, &t, &two);
    expect_same_bits(c, &one, &two, 1, "2 threads");
    const int64_t N = c->n, H = c->h, V = c->v;
    unsigned char *row = malloc((size_t)N), *dh = malloc((size_t)(N * H)), *dw = malloc((size_t)(V * H));
    memset(row, 1, (size_t)N), memset(dh, 1, (size_t)(N * H)), memset(dw, 1, (size_t)(V * H));
    for (int64_t cols = 7; cols <= 97; cols += 90) {
      lce_oracle_subset sub = {row, dh, dw, 1, NULL, NULL, cols};
      lce_oracle_result b;
      lce_status st = {0};
      EXPECT(lce_oracle_run_subset(c, &t, &sub, &b, &st) == LCE_OK, "blocks of %lld: %s", (long long)cols, st.msg);
      expect_same_bits(c, &one, &b, 0, cols == 7 ? "vocab blocks of 7" : "vocab blocks of 97");
      lce_oracle_free(&b);
    }
    /* An escalation's shape: a few d_weight elements and the loss, no token's d_hidden (tier 0 then
     * computes only those d_weight rows' dz columns). */
    for (int64_t i = 0; i < V * H; i++) dw[i] = i % 5 == 0;
    for (int64_t cols = 0; cols <= 7; cols += 7) {
      lce_oracle_subset sparse = {NULL, NULL, dw, 1, NULL, NULL, cols};
      lce_oracle_result b;
      lce_status st = {0};
      EXPECT(lce_oracle_run_subset(c, &t, &sparse, &b, &st) == LCE_OK, "sparse subset: %s", st.msg);
      const lce_ref_output *x = &one.out[LCE_OUT_D_WEIGHT], *y = &b.out[LCE_OUT_D_WEIGHT];
      for (int64_t i = 0; i < V * H; i += 5)
        EXPECT(same(x->value[i], y->value[i]) && same(x->err[i], y->err[i]) && same(x->mag[i], y->mag[i]) &&
                   same(x->emag[i], y->emag[i]) && x->decisive[i] == y->decisive[i],
               "sparse subset (blocks of %lld) d_weight[%lld]: %a err %a vs %a err %a", (long long)cols, (long long)i,
               x->value[i], x->err[i], y->value[i], y->err[i]);
      EXPECT(same(one.out[LCE_OUT_LOSS].value[0], b.out[LCE_OUT_LOSS].value[0]) &&
             same(one.out[LCE_OUT_LOSS].err[0], b.out[LCE_OUT_LOSS].err[0]), "sparse subset: loss differs");
      lce_oracle_free(&b);
    }
    free(row), free(dh), free(dw);
    lce_oracle_free(&one), lce_oracle_free(&two);
    lce_tensors_free(&t);
  }
  set_threads(threads_before);
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
  t.grad_output[0] = INFINITY;
  expect_rejected(&c, &t, "Inf grad_output");
  t.grad_output[0] = 1.0f;
  lce_tensors_free(&t);
  c.class_weights = 1;
  gen(&c, &t);
  t.class_weight[2] = NAN;
  expect_rejected(&c, &t, "NaN class weight");
  t.class_weight[2] = -1.0f;
  expect_rejected(&c, &t, "negative class weight");
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
    mpfr_set_d(a, lce_rand_normal(lce_test_seed(), 40, i), MPFR_RNDN);
    mpfr_mul_d(a, a, lce_rand_normal(lce_test_seed(), 41, i) * 1e-7 + 1.0 / 3.0, MPFR_RNDN); /* 160 significant bits */
    mpfr_set_d(b, i % 50 == 0 ? 0.0 : lce_rand_normal(lce_test_seed(), 42, i) * ldexp(1.0, (int)(i % 40) - 20), MPFR_RNDN);
    lce_mul_exact_1(arr.x[0], a, b);
    mpfr_mul(ref, a, b, MPFR_RNDN);
    EXPECT(mpfr_equal_p(arr.x[0], ref) || (mpfr_zero_p(ref) && mpfr_zero_p(arr.x[0])), "mul_exact_1 #%" PRIu64, i);
  }
  lce_mp_array_free(&arr);
  mpfr_clears(a, b, ref, (mpfr_ptr)0);
}

/* ---- self-proof ------------------------------------------------------------------------------- */

static void test_self_proof(void) {
  for (int d = 0; d < LCE_DIST_COUNT; d++) {
    lce_case c = make_case((lce_dtype)(d % 3), 9, 12, 50, (lce_dist)d, (lce_reduction)(d % 3), d % 2);
    c.vp = 64, c.tp = 2, c.prior_grad = d % 2 == 0, c.ignore_pct = 20;
    self_proof(&c);
  }
}

int main(int argc, char **argv) {
  (void)argc;
  lce_parallel_prefer_passive(argv); /* threads_and_blocks: no spinning threads (lce_parallel.h) */
  struct { const char *name; void (*fn)(void); } tests[] = {
      {"equal_logits", test_equal_logits}, {"integer_inputs", test_integer_inputs},
      {"finite_differences", test_finite_differences}, {"tp_and_chunk", test_tp_and_chunk},
      {"padding", test_padding}, {"permutation", test_permutation}, {"all_ignored", test_all_ignored},
      {"validation", test_validation}, {"mul_exact", test_mul_exact}, {"self_proof", test_self_proof},
      {"option_values", test_option_values}, {"option_gradients", test_option_gradients},
      {"option_closed_forms", test_option_closed_forms}, {"option_invariance", test_option_invariance},
      {"tf32", test_tf32}, {"poison", test_poison}, {"option_self_proof", test_option_self_proof},
      {"exp", test_exp}, {"threads_and_blocks", test_threads_and_blocks}};
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    const int before = lce_test_failures;
    tests[i].fn();
    printf("%-20s %s\n", tests[i].name, lce_test_failures == before ? "ok" : "FAILED");
  }
  return lce_test_finish("test_oracle");
}
