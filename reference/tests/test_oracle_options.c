/* test_oracle_options.c — the tier-0 oracle's loss options and non-finite inputs (part of the
 * test_oracle binary; main and the option-free tests are in test_oracle.c).
 *
 *   values          lse, token losses and the reduced loss against the math of lce_case.h evaluated
 *                   straight from its definition at 400 bits (no log1p, no max shift), for softcap,
 *                   label smoothing (pytorch, megatron), z-loss, class weights, tf32 and all at once
 *   gradients       central differences of J = sum_n g_n loss_n for every option and reduction
 *                   (mean with class weights divides by sum of w_label), J itself against the direct sum
 *   closed forms    hidden = 0 (all logits 0): loss = log V for any smoothing without class weights,
 *                   + lambda (log V)^2 with z-loss; loss and d_hidden in general
 *   invariance      tp, vocab chunk and token chunk change no output bit, for every option; megatron
 *                   smoothing gives the same loss for tp 1, 2, 4, 8
 *   tf32            the oracle on a tf32 case equals the oracle on the IEEE case of the same inputs
 *                   pre-rounded with lce_round_tf32, bit for bit
 *   poison          NaN / Inf in hidden rows and in W rows, ignored and valid tokens, non-finite priors:
 *                   exactly the elements lce_case.h names are NaN, the rest exact or unchanged
 *   self-proof      160 against 320 bits over the hard row kinds and poison, for every option */
#include <stdlib.h>
#include <string.h>

#include "lce_prng.h"
#include "oracle_check.h"

typedef struct opt_cfg {
  const char *name;
  int softcap;
  lce_smoothing smoothing;
  int permille, z_loss_e5, class_weights, tf32;
} opt_cfg;

static const opt_cfg CFGS[] = {
    {"softcap30", 30, LCE_SMOOTH_NONE, 0, 0, 0, 0},  {"softcap2", 2, LCE_SMOOTH_NONE, 0, 0, 0, 0},
    {"ls-pytorch", 0, LCE_SMOOTH_PYTORCH, 100, 0, 0, 0}, {"ls-megatron", 0, LCE_SMOOTH_MEGATRON, 100, 0, 0, 0},
    {"z-loss", 0, LCE_SMOOTH_NONE, 0, 100, 0, 0},    {"class-weights", 0, LCE_SMOOTH_NONE, 0, 0, 1, 0},
    {"tf32", 0, LCE_SMOOTH_NONE, 0, 0, 0, 1},        {"all", 5, LCE_SMOOTH_MEGATRON, 250, 3000, 1, 1},
};
enum { NCFG = sizeof CFGS / sizeof CFGS[0] };

static const opt_cfg *cfg_named(const char *name) {
  for (int i = 0; i < NCFG; i++)
    if (strcmp(CFGS[i].name, name) == 0) return &CFGS[i];
  fprintf(stderr, "no option set %s\n", name);
  exit(2);
}

static void apply(lce_case *c, const opt_cfg *o) {
  c->softcap = o->softcap;
  c->smoothing = o->smoothing;
  c->smoothing_permille = o->permille;
  c->z_loss_e5 = o->z_loss_e5;
  c->class_weights = o->class_weights;
  if (o->tf32) c->dtype = LCE_FP32, c->gemm = LCE_GEMM_TF32;
}

static double weight(const lce_case *c, const lce_tensors *t, int64_t v) {
  return c->class_weights ? t->class_weight[v] : 1.0;
}

static double input_of(const lce_case *c, const void *buf, int64_t i) {
  double x = lce_load(c->dtype, buf, (size_t)i);
  return c->gemm == LCE_GEMM_TF32 ? lce_round_tf32(x) : x;
}

/* ---- the math of lce_case.h, directly ---------------------------------------------------------- */

typedef struct naive {
  mpfr_t *lse, *loss_tok; /* [n] */
  mpfr_t loss, j, sw;     /* reduced loss, J = sum_n g_n loss_n, sum of w_label over valid tokens */
} naive;

static void naive_eval(const lce_case *c, const lce_tensors *t, naive *r) {
  const double e = lce_case_smoothing(c), lambda = lce_case_z_loss(c);
  const void *w = lce_output_weight(c, t);
  mpfr_t *z = malloc((size_t)c->v * sizeof *z), s, x, g;
  r->lse = malloc((size_t)c->n * sizeof *r->lse);
  r->loss_tok = malloc((size_t)c->n * sizeof *r->loss_tok);
  if (z == NULL || r->lse == NULL || r->loss_tok == NULL) exit(2);
  for (int64_t v = 0; v < c->v; v++) mpfr_init2(z[v], 400);
  mpfr_t one_minus_e;
  mpfr_inits2(400, s, x, g, one_minus_e, r->loss, r->j, r->sw, (mpfr_ptr)0);
  mpfr_set_ui(one_minus_e, 1, MPFR_RNDN);
  mpfr_sub_d(one_minus_e, one_minus_e, e, MPFR_RNDN); /* exact at 400 bits */
  mpfr_set_zero(r->sw, 1);
  for (int64_t n = 0; n < c->n; n++)
    if (t->labels[n] != c->ignore_index) mpfr_add_d(r->sw, r->sw, weight(c, t, t->labels[n]), MPFR_RNDN);
  mpfr_set_zero(r->loss, 1);
  mpfr_set_zero(r->j, 1);
  for (int64_t n = 0; n < c->n; n++) {
    mpfr_inits2(400, r->lse[n], r->loss_tok[n], (mpfr_ptr)0);
    mpfr_set_zero(s, 1);
    for (int64_t v = 0; v < c->v; v++) {
      mpfr_set_zero(z[v], 1);
      for (int64_t k = 0; k < c->h; k++) {
        mpfr_set_d(x, input_of(c, t->hidden, n * c->h + k), MPFR_RNDN);
        mpfr_mul_d(x, x, input_of(c, w, v * c->h + k), MPFR_RNDN);
        mpfr_add(z[v], z[v], x, MPFR_RNDN);
      }
      if (c->softcap > 0) {
        mpfr_div_si(z[v], z[v], c->softcap, MPFR_RNDN);
        mpfr_tanh(z[v], z[v], MPFR_RNDN);
        mpfr_mul_si(z[v], z[v], c->softcap, MPFR_RNDN);
      }
      mpfr_exp(x, z[v], MPFR_RNDN);
      mpfr_add(s, s, x, MPFR_RNDN);
    }
    mpfr_log(r->lse[n], s, MPFR_RNDN);
    int64_t y = t->labels[n];
    mpfr_set_zero(r->loss_tok[n], 1);
    if (y == c->ignore_index) continue;
    mpfr_set_zero(s, 1); /* sum_v w_v (lse - z_v) */
    for (int64_t v = 0; v < c->v; v++) {
      mpfr_sub(x, r->lse[n], z[v], MPFR_RNDN);
      mpfr_mul_d(x, x, weight(c, t, v), MPFR_RNDN);
      mpfr_add(s, s, x, MPFR_RNDN);
    }
    mpfr_mul_d(s, s, e, MPFR_RNDN);
    mpfr_div_si(s, s, (long)c->v, MPFR_RNDN);
    mpfr_sub(x, r->lse[n], z[y], MPFR_RNDN);
    mpfr_mul_d(x, x, weight(c, t, y), MPFR_RNDN);
    mpfr_mul(x, x, one_minus_e, MPFR_RNDN);
    mpfr_add(r->loss_tok[n], x, s, MPFR_RNDN);
    mpfr_sqr(x, r->lse[n], MPFR_RNDN);
    mpfr_mul_d(x, x, lambda, MPFR_RNDN);
    mpfr_add(r->loss_tok[n], r->loss_tok[n], x, MPFR_RNDN);
    mpfr_add(r->loss, r->loss, r->loss_tok[n], MPFR_RNDN);
    mpfr_set_d(g, t->grad_output[c->reduction == LCE_RED_NONE ? n : 0], MPFR_RNDN);
    if (c->reduction == LCE_RED_MEAN) mpfr_div(g, g, r->sw, MPFR_RNDN);
    mpfr_mul(x, g, r->loss_tok[n], MPFR_RNDN);
    mpfr_add(r->j, r->j, x, MPFR_RNDN);
  }
  if (c->reduction == LCE_RED_MEAN) {
    if (mpfr_zero_p(r->sw)) mpfr_set_zero(r->loss, 1);
    else mpfr_div(r->loss, r->loss, r->sw, MPFR_RNDN);
  }
  for (int64_t v = 0; v < c->v; v++) mpfr_clear(z[v]);
  free(z);
  mpfr_clears(s, x, g, one_minus_e, (mpfr_ptr)0);
}

static void naive_free(const lce_case *c, naive *r) {
  for (int64_t n = 0; n < c->n; n++) mpfr_clears(r->lse[n], r->loss_tok[n], (mpfr_ptr)0);
  free(r->lse);
  free(r->loss_tok);
  mpfr_clears(r->loss, r->j, r->sw, (mpfr_ptr)0);
}

static lce_case option_case(const opt_cfg *o, lce_dist d, lce_reduction red, int tied, uint64_t variant) {
  lce_case c = make_case((lce_dtype)(variant % 3), 6, 9, 37, d, red, tied);
  c.ignore_pct = 25;
  apply(&c, o);
  return c;
}

void test_option_values(void) {
  const lce_dist dists[] = {LCE_DIST_MIXED, LCE_DIST_HARD, LCE_DIST_NORMAL};
  for (int i = 0; i < NCFG; i++)
    for (int d = 0; d < 3; d++) {
      lce_case c = option_case(&CFGS[i], dists[d], (lce_reduction)((i + d) % 3), (i + d) % 2, (uint64_t)(i + d));
      lce_tensors t;
      gen(&c, &t);
      lce_oracle_result r;
      run(&c, &t, &r);
      naive nv;
      naive_eval(&c, &t, &nv);
      for (int64_t n = 0; n < c.n; n++) {
        const lce_ref_output *l = &r.out[LCE_OUT_LSE], *lt = &r.out[LCE_OUT_LOSS_TOKEN];
        EXPECT(within(l->value[n], l->err[n], nv.lse[n], 1e-90 * (1.0 + l->mag[n])), "%s %s lse[%lld] %.17g vs %.17g",
               CFGS[i].name, id_of(&c), (long long)n, l->value[n], mpfr_get_d(nv.lse[n], MPFR_RNDN));
        EXPECT(within(lt->value[n], lt->err[n], nv.loss_tok[n], 1e-90 * (1.0 + lt->mag[n])),
               "%s %s loss_token[%lld] %.17g vs %.17g", CFGS[i].name, id_of(&c), (long long)n, lt->value[n],
               mpfr_get_d(nv.loss_tok[n], MPFR_RNDN));
      }
      const lce_ref_output *lo = &r.out[LCE_OUT_LOSS];
      EXPECT(within(lo->value[0], lo->err[0], nv.loss, 1e-90 * (1.0 + lo->mag[0])), "%s %s loss %.17g vs %.17g",
             CFGS[i].name, id_of(&c), lo->value[0], mpfr_get_d(nv.loss, MPFR_RNDN));
      EXPECT(r.decisive >= r.total - r.total / 50, "%s %s: decisive %lld of %lld", CFGS[i].name, id_of(&c),
             (long long)r.decisive, (long long)r.total);
      naive_free(&c, &nv);
      lce_oracle_free(&r);
      lce_tensors_free(&t);
    }
}

void test_option_gradients(void) {
  for (int i = 0; i < NCFG; i++)
    for (int red = 0; red < 3; red++) {
      lce_case c = option_case(&CFGS[i], red == 1 ? LCE_DIST_PEAKED : LCE_DIST_MIXED, (lce_reduction)red, red == 2,
                               (uint64_t)(i + red));
      c.n = 5, c.h = 7, c.v = 29, c.vp = 29, c.ignore_pct = 20;
      lce_tensors t;
      gen(&c, &t);
      lce_oracle_result r;
      run(&c, &t, &r);
      naive nv;
      naive_eval(&c, &t, &nv);
      check_gradients_fd(&c, &t, &r, 3, 50 + (uint64_t)(i * 3 + red), nv.j);
      naive_free(&c, &nv);
      lce_oracle_free(&r);
      lce_tensors_free(&t);
    }
}

/* ---- closed forms ----------------------------------------------------------------------------- */

/* hidden = 0: every logit (and softcapped logit) is 0, lse = log V, p_v = 1/V, f_v = 1. Then
 *   loss_n   = ((1 - e) w_y + (e / V) SW) log V + lambda (log V)^2      (SW = sum_v w_v)
 *   d_hidden = g_n ((K / V) sum_v W[v] - (1 - e) w_y W[y] - (e / V) sum_v w_v W[v]),
 *              K = (1 - e) w_y + (e / V) SW + 2 lambda log V,
 * and without class weights (1 - e) + (e / V) V = 1: loss = log V (+ lambda (log V)^2) for every e. */
static void check_zero_hidden(const lce_case *c, int expect_log_v) {
  lce_tensors t;
  gen(c, &t);
  memset(t.hidden, 0, (size_t)(c->n * c->h) * lce_dtype_size(c->dtype));
  lce_oracle_result r;
  run(c, &t, &r);
  const double e = lce_case_smoothing(c), lambda = lce_case_z_loss(c);
  const void *w = lce_output_weight(c, &t);
  mpfr_t logv, sw, swv, k, x, dh, g, valid_w, cy;
  mpfr_inits2(400, logv, sw, swv, k, x, dh, g, valid_w, cy, (mpfr_ptr)0);
  mpfr_set_si(logv, c->v, MPFR_RNDN);
  mpfr_log(logv, logv, MPFR_RNDN);
  mpfr_set_zero(sw, 1);
  for (int64_t v = 0; v < c->v; v++) mpfr_add_d(sw, sw, weight(c, &t, v), MPFR_RNDN);
  mpfr_set_zero(valid_w, 1);
  for (int64_t n = 0; n < c->n; n++)
    if (t.labels[n] != c->ignore_index) mpfr_add_d(valid_w, valid_w, weight(c, &t, t.labels[n]), MPFR_RNDN);
  for (int64_t n = 0; n < c->n; n++) {
    EXPECT(within(r.out[LCE_OUT_LSE].value[n], r.out[LCE_OUT_LSE].err[n], logv, 0.0), "%s lse[%lld] != log V",
           id_of(c), (long long)n);
    int64_t y = t.labels[n];
    if (y == c->ignore_index) continue;
    mpfr_set_ui(cy, 1, MPFR_RNDN);
    mpfr_sub_d(cy, cy, e, MPFR_RNDN);
    mpfr_mul_d(cy, cy, weight(c, &t, y), MPFR_RNDN); /* (1 - e) w_y, exact at 400 bits */
    mpfr_mul_d(k, sw, e, MPFR_RNDN);
    mpfr_div_si(k, k, (long)c->v, MPFR_RNDN); /* (e / V) SW */
    mpfr_add(k, k, cy, MPFR_RNDN);
    mpfr_mul(x, k, logv, MPFR_RNDN);
    mpfr_sqr(dh, logv, MPFR_RNDN);
    mpfr_mul_d(dh, dh, lambda, MPFR_RNDN);
    mpfr_add(x, x, dh, MPFR_RNDN); /* the loss */
    if (expect_log_v) { /* the same without the general formula */
      mpfr_sub(dh, x, logv, MPFR_RNDN);
      mpfr_sqr(g, logv, MPFR_RNDN);
      mpfr_mul_d(g, g, lambda, MPFR_RNDN);
      mpfr_sub(dh, dh, g, MPFR_RNDN);
      EXPECT(mpfr_get_d(dh, MPFR_RNDA) == 0.0 || fabs(mpfr_get_d(dh, MPFR_RNDA)) < 1e-100, "%s: not log V", id_of(c));
    }
    const lce_ref_output *lt = &r.out[LCE_OUT_LOSS_TOKEN];
    EXPECT(within(lt->value[n], lt->err[n], x, 0.0), "%s loss[%lld] %.17g vs closed form %.17g", id_of(c),
           (long long)n, lt->value[n], mpfr_get_d(x, MPFR_RNDN));
    mpfr_mul_d(x, logv, 2.0 * lambda, MPFR_RNDN);
    mpfr_add(k, k, x, MPFR_RNDN); /* K */
    mpfr_set_d(g, t.grad_output[c->reduction == LCE_RED_NONE ? n : 0], MPFR_RNDN);
    if (c->reduction == LCE_RED_MEAN) mpfr_div(g, g, valid_w, MPFR_RNDN);
    for (int64_t kk = 0; kk < c->h; kk++) {
      mpfr_set_zero(swv, 1); /* sum_v (K/V - (e/V) w_v) W[v,k] */
      for (int64_t v = 0; v < c->v; v++) {
        mpfr_set_d(x, weight(c, &t, v), MPFR_RNDN);
        mpfr_mul_d(x, x, e, MPFR_RNDN);
        mpfr_sub(x, k, x, MPFR_RNDN);
        mpfr_div_si(x, x, (long)c->v, MPFR_RNDN);
        mpfr_mul_d(x, x, input_of(c, w, v * c->h + kk), MPFR_RNDN);
        mpfr_add(swv, swv, x, MPFR_RNDN);
      }
      mpfr_set_d(x, input_of(c, w, y * c->h + kk), MPFR_RNDN);
      mpfr_mul(x, x, cy, MPFR_RNDN);
      mpfr_sub(dh, swv, x, MPFR_RNDN);
      mpfr_mul(dh, dh, g, MPFR_RNDN);
      const int64_t i = n * c->h + kk;
      const lce_ref_output *d = &r.out[LCE_OUT_D_HIDDEN];
      EXPECT(within(d->value[i], d->err[i], dh, 1e-90 * d->mag[i]), "%s d_hidden[%lld] %.17g vs closed form %.17g",
             id_of(c), (long long)i, d->value[i], mpfr_get_d(dh, MPFR_RNDN));
    }
  }
  EXPECT(r.decisive > 0, "%s: no decisive element", id_of(c));
  mpfr_clears(logv, sw, swv, k, x, dh, g, valid_w, cy, (mpfr_ptr)0);
  lce_oracle_free(&r);
  lce_tensors_free(&t);
}

void test_option_closed_forms(void) {
  const opt_cfg cfgs[] = {
      {"pytorch", 0, LCE_SMOOTH_PYTORCH, 300, 0, 0, 0}, {"megatron", 0, LCE_SMOOTH_MEGATRON, 300, 0, 0, 0},
      {"z-loss", 0, LCE_SMOOTH_NONE, 0, 5000, 0, 0},    {"z-loss+megatron", 0, LCE_SMOOTH_MEGATRON, 999, 700, 0, 0},
      {"all", 3, LCE_SMOOTH_PYTORCH, 150, 2000, 1, 0},   {"all tf32", 7, LCE_SMOOTH_MEGATRON, 40, 100, 1, 1},
  };
  for (int i = 0; i < 6; i++) {
    lce_case c = make_case((lce_dtype)(i % 3), 6, 8, 37, LCE_DIST_NORMAL, (lce_reduction)(i % 3), i % 2);
    c.ignore_pct = 30;
    apply(&c, &cfgs[i]);
    check_zero_hidden(&c, !cfgs[i].class_weights);
  }
}

/* ---- invariance --------------------------------------------------------------------------------- */

void test_option_invariance(void) {
  for (int i = 0; i < NCFG; i++) {
    lce_case c = make_case(LCE_BF16, 8, 16, 100, LCE_DIST_MIXED, (lce_reduction)(i % 3), i % 2);
    c.vp = 128, c.prior_grad = 1, c.ignore_pct = 25;
    apply(&c, &CFGS[i]);
    lce_tensors t;
    gen(&c, &t);
    lce_oracle_result a, b;
    run(&c, &t, &a);
    lce_case c2 = c;
    c2.tp = 4, c2.vocab_chunk = 7, c2.token_chunk = 3;
    run(&c2, &t, &b);
    for (int o = 0; o < LCE_OUT_COUNT; o++) expect_output_identical(&a, &b, (lce_output_id)o, 1, CFGS[i].name);
    lce_oracle_free(&a);
    lce_oracle_free(&b);
    lce_tensors_free(&t);
  }
  /* Megatron's eps V / (V - 1) uses the full vocabulary, never a shard's. */
  lce_case c = make_case(LCE_FP16, 8, 16, 100, LCE_DIST_NORMAL, LCE_RED_SUM, 0);
  c.vp = 128, c.smoothing = LCE_SMOOTH_MEGATRON, c.smoothing_permille = 200;
  lce_tensors t;
  gen(&c, &t);
  lce_oracle_result base;
  run(&c, &t, &base);
  for (int tp = 2; tp <= 8; tp *= 2) {
    lce_case ct = c;
    ct.tp = tp;
    lce_oracle_result r;
    run(&ct, &t, &r);
    expect_output_identical(&base, &r, LCE_OUT_LOSS, 1, "megatron smoothing over tp");
    expect_output_identical(&base, &r, LCE_OUT_LOSS_TOKEN, 1, "megatron smoothing over tp");
    lce_oracle_free(&r);
  }
  lce_oracle_free(&base);
  lce_tensors_free(&t);
}

/* ---- tf32 --------------------------------------------------------------------------------------- */

static int64_t round_tf32_in_place(float *x, int64_t count) {
  int64_t changed = 0;
  for (int64_t i = 0; i < count; i++) {
    float r = (float)lce_round_tf32(x[i]);
    changed += r != x[i];
    x[i] = r;
  }
  return changed;
}

void test_tf32(void) {
  for (int variant = 0; variant < 2; variant++) {
    lce_case c = make_case(LCE_FP32, 7, 10, 33, LCE_DIST_MIXED, variant ? LCE_RED_NONE : LCE_RED_MEAN, variant);
    c.vp = 40, c.prior_grad = 1, c.ignore_pct = 15;
    apply(&c, cfg_named(variant ? "all" : "tf32")); /* tf32 alone, then every option with it */
    lce_tensors t, u;
    gen(&c, &t);
    gen(&c, &u);
    int64_t ch = round_tf32_in_place(u.hidden, c.n * c.h);
    int64_t cw = round_tf32_in_place((float *)lce_output_weight(&c, &u), c.vp * c.h);
    EXPECT(ch > c.n * c.h / 2 && cw > c.vp * c.h / 2, "tf32: rounding changed only %lld hidden, %lld W values",
           (long long)ch, (long long)cw);
    lce_case ieee = c;
    ieee.gemm = LCE_GEMM_IEEE;
    lce_oracle_result a, b, d;
    run(&c, &t, &a);
    run(&ieee, &u, &b);
    for (int o = 0; o < LCE_OUT_COUNT; o++) expect_output_identical(&a, &b, (lce_output_id)o, 1, "tf32 vs pre-rounded");
    run(&ieee, &t, &d); /* and the rounding matters: fp32 inputs give other values */
    int64_t differ = 0;
    for (int64_t i = 0; i < c.n * c.h; i++) differ += !same(a.out[LCE_OUT_D_HIDDEN].value[i], d.out[LCE_OUT_D_HIDDEN].value[i]);
    EXPECT(differ > c.n * c.h / 2, "tf32: only %lld d_hidden values differ from IEEE fp32", (long long)differ);
    lce_oracle_free(&a);
    lce_oracle_free(&b);
    lce_oracle_free(&d);
    lce_tensors_free(&t);
    lce_tensors_free(&u);
  }
}

/* ---- non-finite inputs -------------------------------------------------------------------------- */

static void expect_class(const lce_oracle_result *r, lce_output_id o, int64_t i, double x, const char *what) {
  const lce_ref_output *e = &r->out[o];
  EXPECT(same(e->value[i], x) && e->err[i] == 0.0 && e->decisive[i] && same(e->rounded[i], x),
         "%s: %s[%lld] = %g (err %g, decisive %d), expected exactly %g", what, lce_output_name(o), (long long)i,
         e->value[i], e->err[i], e->decisive[i], x);
}

/* The elements of a run where every valid token is poisoned (a W row) or tokens pois[] are. */
static void expect_poisoned_tokens(const lce_case *c, const lce_tensors *t, const lce_oracle_result *r,
                                   const unsigned char *pois, const char *what) {
  int any_valid = 0;
  for (int64_t n = 0; n < c->n; n++) {
    if (!pois[n]) continue;
    const int valid = t->labels[n] != c->ignore_index;
    any_valid |= valid;
    expect_class(r, LCE_OUT_LSE, n, NAN, what);
    expect_class(r, LCE_OUT_LOSS_TOKEN, n, valid ? NAN : 0.0, what);
    for (int64_t k = 0; k < c->h; k++) expect_class(r, LCE_OUT_D_HIDDEN, n * c->h + k, valid ? NAN : 0.0, what);
  }
  const float *prior = lce_output_weight_prior(c, t);
  if (any_valid) {
    expect_class(r, LCE_OUT_LOSS, 0, NAN, what);
    for (int64_t i = 0; i < c->v * c->h; i++) expect_class(r, LCE_OUT_D_WEIGHT, i, NAN, what);
  }
  for (int64_t i = c->v * c->h; i < c->vp * c->h; i++) expect_class(r, LCE_OUT_D_WEIGHT, i, prior[i], what);
  EXPECT(r->out[LCE_OUT_D_EMBEDDING].count == 0 && r->out[LCE_OUT_D_EMBEDDING].value == NULL,
         "%s: the oracle kept d_embedding (its prior: the judge checks it against the inputs)", what);
}

/* dist poison: NaN in token 0's hidden row, +Inf in token 1's; token 1 ignored, token 0 valid
 * (then ignored too). The other tokens' outputs equal those of the same tensors with finite rows 0
 * and 1 (copies of row 2); with only ignored tokens poisoned, so do the loss and d_weight. */
static void poison_hidden(void) {
  for (int both_ignored = 0; both_ignored < 2; both_ignored++) {
    lce_case c = make_case(LCE_BF16, 8, 12, 40, LCE_DIST_POISON, LCE_RED_MEAN, 0);
    c.vp = 48, c.prior_grad = 1, c.class_weights = 1, c.smoothing = LCE_SMOOTH_PYTORCH, c.smoothing_permille = 50;
    lce_tensors t, u;
    gen(&c, &t);
    gen(&c, &u);
    t.labels[1] = u.labels[1] = c.ignore_index;
    if (both_ignored) t.labels[0] = u.labels[0] = c.ignore_index;
    const size_t row = (size_t)c.h * lce_dtype_size(c.dtype);
    memcpy(u.hidden, (char *)u.hidden + 2 * row, row);
    memcpy((char *)u.hidden + row, (char *)u.hidden + 2 * row, row);
    EXPECT(isnan(lce_load(c.dtype, t.hidden, (size_t)(c.h / 2))) && isinf(lce_load(c.dtype, t.hidden, (size_t)c.h)),
           "dist poison no longer puts NaN and Inf into tokens 0 and 1");
    lce_oracle_result r, ref;
    run(&c, &t, &r);
    run(&c, &u, &ref);
    const unsigned char pois[8] = {1, 1, 0, 0, 0, 0, 0, 0};
    const char *what = both_ignored ? "poisoned ignored tokens" : "poisoned hidden rows";
    expect_poisoned_tokens(&c, &t, &r, pois, what);
    for (int64_t n = 2; n < c.n; n++) {
      EXPECT(same(r.out[LCE_OUT_LSE].value[n], ref.out[LCE_OUT_LSE].value[n]) &&
                 same(r.out[LCE_OUT_LOSS_TOKEN].value[n], ref.out[LCE_OUT_LOSS_TOKEN].value[n]),
             "%s: token %lld changed", what, (long long)n);
      for (int64_t k = 0; k < c.h; k++)
        EXPECT(same(r.out[LCE_OUT_D_HIDDEN].value[n * c.h + k], ref.out[LCE_OUT_D_HIDDEN].value[n * c.h + k]),
               "%s: d_hidden of token %lld changed", what, (long long)n);
    }
    if (both_ignored) {
      expect_output_identical(&r, &ref, LCE_OUT_LOSS, 1, what);
      expect_output_identical(&r, &ref, LCE_OUT_D_WEIGHT, 1, what);
    }
    lce_oracle_free(&r);
    lce_oracle_free(&ref);
    lce_tensors_free(&t);
    lce_tensors_free(&u);
  }
}

/* A NaN or an Inf in one real W row poisons every token; with every token ignored nothing but the
 * lse sees it (mean over no tokens: loss 0, gradients their priors). */
static void poison_weight(void) {
  for (int variant = 0; variant < 3; variant++) {
    lce_case c = make_case(LCE_FP16, 6, 8, 30, LCE_DIST_NORMAL, variant == 2 ? LCE_RED_MEAN : LCE_RED_SUM, 1);
    c.vp = 32, c.prior_grad = 1, c.ignore_pct = variant == 2 ? 100 : 30, c.softcap = 10;
    lce_tensors t;
    gen(&c, &t);
    lce_store(c.dtype, t.embedding, (size_t)((variant ? c.v - 1 : 3) * c.h + 5), variant == 1 ? INFINITY : NAN);
    lce_oracle_result r;
    run(&c, &t, &r);
    unsigned char pois[6] = {1, 1, 1, 1, 1, 1};
    const char *what = variant == 0 ? "NaN in W" : variant == 1 ? "Inf in W" : "NaN in W, all ignored";
    expect_poisoned_tokens(&c, &t, &r, pois, what);
    if (variant == 2) {
      expect_class(&r, LCE_OUT_LOSS, 0, 0.0, what);
      for (int64_t i = 0; i < c.vp * c.h; i++) expect_class(&r, LCE_OUT_D_WEIGHT, i, t.grad_embedding_prior[i], what);
    }
    lce_oracle_free(&r);
    lce_tensors_free(&t);
  }
}

/* Non-finite priors stay as they are; a tf32 rounding that overflows (fp32 max -> Inf) poisons. */
static void poison_priors_and_tf32(void) {
  lce_case c = make_case(LCE_FP32, 5, 6, 20, LCE_DIST_NORMAL, LCE_RED_NONE, 0);
  c.prior_grad = 1;
  lce_tensors t;
  gen(&c, &t);
  t.grad_weight_prior[5] = NAN, t.grad_weight_prior[7] = INFINITY, t.grad_weight_prior[9] = -INFINITY;
  t.grad_embedding_prior[3] = NAN;
  lce_oracle_result r;
  run(&c, &t, &r);
  expect_class(&r, LCE_OUT_D_WEIGHT, 5, NAN, "NaN prior");
  expect_class(&r, LCE_OUT_D_WEIGHT, 7, INFINITY, "+Inf prior");
  expect_class(&r, LCE_OUT_D_WEIGHT, 9, -INFINITY, "-Inf prior");
  EXPECT(r.out[LCE_OUT_D_EMBEDDING].count == 0, "the oracle kept d_embedding (a NaN in its prior is the judge's)");
  for (int64_t i = 10; i < c.v * c.h; i++)
    EXPECT(isfinite(r.out[LCE_OUT_D_WEIGHT].value[i]) && r.out[LCE_OUT_D_WEIGHT].decisive[i],
           "finite prior: d_weight[%lld] = %g", (long long)i, r.out[LCE_OUT_D_WEIGHT].value[i]);
  EXPECT(isfinite(r.out[LCE_OUT_LOSS].value[0]), "non-finite priors reached the loss");
  lce_oracle_free(&r);

  ((float *)t.hidden)[0] = 0x1.fffffep127f; /* token 0: finite in fp32, +Inf in tf32 */
  run(&c, &t, &r);
  EXPECT(isfinite(r.out[LCE_OUT_LSE].value[0]), "fp32 max in IEEE: lse %g", r.out[LCE_OUT_LSE].value[0]);
  lce_oracle_free(&r);
  c.gemm = LCE_GEMM_TF32;
  run(&c, &t, &r);
  const unsigned char pois[5] = {1, 0, 0, 0, 0};
  EXPECT(t.labels[0] != c.ignore_index, "token 0 should be valid");
  expect_poisoned_tokens(&c, &t, &r, pois, "tf32 overflow");
  EXPECT(isfinite(r.out[LCE_OUT_LSE].value[1]), "tf32 overflow of token 0 reached token 1");
  lce_oracle_free(&r);
  lce_tensors_free(&t);
}

void test_poison(void) {
  poison_hidden();
  poison_weight();
  poison_priors_and_tf32();
}

/* ---- self-proof --------------------------------------------------------------------------------- */

void test_option_self_proof(void) {
  const lce_dist dists[] = {LCE_DIST_MIXED, LCE_DIST_HARD,  LCE_DIST_POISON, LCE_DIST_BIG,      LCE_DIST_TIES,
                            LCE_DIST_TARGET_MAX, LCE_DIST_TARGET_MIN, LCE_DIST_ZERO, LCE_DIST_SUBNORMAL};
  const int nd = sizeof dists / sizeof dists[0];
  for (int i = 0; i < NCFG; i++)
    for (int d = 0; d < nd; d++) {
      lce_case c = make_case((lce_dtype)((i + d) % 3), 9, 12, 50, dists[d], (lce_reduction)((i + d) % 3), d % 2);
      c.vp = 64, c.tp = 2, c.ignore_pct = 20;
      /* A fresh buffer the math leaves at zero (an untied embedding's, or W's gradient for zero hidden
       * rows) would fail the self-proof's non-zero norm check: those get a prior. */
      c.prior_grad = !c.tied || dists[d] == LCE_DIST_ZERO || i % 2;
      apply(&c, &CFGS[i]);
      self_proof(&c);
    }
}
