/* lce_oracle_forward.c — the tier-0 oracle's per-token work: logits, lse, loss and dz for one
 * row, with rigorous error bounds, and the finite-difference objective built from the same code.
 *
 * Error analysis. p = working precision, u = 2^-p. Every MPFR operation rounds to nearest, so
 * its result r is within half_ulp(r) <= u|r| of the exact result of its operands
 * (lce_half_ulp). The driver widens MPFR's exponent range for the run, so only an exp of an
 * argument below about -3.2e18 underflows (see Exponentials). Capital letters are exact
 * quantities.
 *
 * Logits. z_v = RN(sum of the exact products) (mpfr_sum is correctly rounded):
 *     |z_v - Z_v| <= EZ := max_v half_ulp(z_v) over the logits whose sum was inexact.
 *
 * Exponentials. a = argmax, m = z_a; d_v = RN(z_v - m), d_a = 0 exactly; t_v = RN(exp d_v),
 * t_a = 1. With hd = max_v half_ulp(d_v):
 *     t_v = exp(z_v - m)(1 + rho_v),  |rho_v| <= (1 + u) e^hd - 1 <= 1.01 (u + hd) =: R,
 * provided hd <= 0.0099 (then e^x - 1 <= 1.01 x); otherwise the row is not certified.
 * An exp that underflows (MPFR's flag) returns 0 or the least positive number for a true value
 * below 2^(-2^61); against S >= 1 (t_a = 1) all of them together move the sums below u, so R
 * grows by u — but those t_v lose all relative accuracy, so the row's dz is not certified.
 *
 * Product lemma. A quantity equal to an exact one times prod_i (1 + a_i)^(+-1), with
 * A = sum_i |a_i| <= 0.001, has relative error <= e^(1.001 A) - 1 <= 1.02 A.
 *
 * lse. S = RN(sum_v t_v) = T (1 + rho')(1 + sigma), T = sum_v exp(z_v - m), |rho'| <= R (a sum
 * of positive terms each off by <= R), |sigma| <= u. m + log T = LSE(z) exactly, and LSE is
 * 1-Lipschitz in the max norm, so |LSE(z) - LSE(Z)| <= EZ. With L = RN(log S),
 * lse = RN(m + L) and |log(1 + x)| <= 1.01 |x| for |x| <= 0.0099:
 *     |lse - LSE(Z)| <= EZ + 1.01 (R + u) + half_ulp(L) + half_ulp(lse),   mag = |m| + |L|.
 *
 * loss. loss = RN(log1p(r)), r = RN(S_y / t_y), S_y = RN(sum_{v != y} t_v). Mathematically
 * log1p(Q), Q = sum_{v != y} exp(z_v - z_y), equals LSE(z) - z_y, but it keeps relative accuracy
 * where p_y -> 1 and lse - z_y would cancel. Q(z)/Q(Z) lies in e^(+-2 EZ); S_y carries
 * (1 + rho'')(1 + sigma''), t_y (1 + rho_y), the division one more u, so by the product lemma
 * r = Q(Z)(1 + delta) with |delta| <= DL := 1.02 (2 EZ + 2R + 3u). Since Q/(1+Q) <= log1p(Q),
 *     |log1p(Q(1 + delta)) - log1p(Q)| = |log(1 + delta Q/(1+Q))| <= 1.01 DL log1p(Q),
 * and log1p(Q) <= (|loss| + h)/(1 - 1.01 DL) with h = half_ulp(loss), so for DL <= 0.001
 *     |loss - LOSS| <= 1.02 DL (|loss| + h) + h,   mag = |lse| + |z_y|.
 * When t_y < 2^-64 (p_y tiny, loss > 44: nothing cancels, and t_y may have underflowed) the
 * loss is RN(lse - z_y) instead, with |loss - LOSS| <= err(lse) + EZ + half_ulp(loss).
 *
 * dz. g = RN(G) with relative error g_rel (0 when exact). For v != y,
 * dz_v = RN(g RN(t_v / S)); the exact G P_v(Z) differs through e^(+-2 EZ) (P_v(z)/P_v(Z) =
 * exp(z_v - Z_v - (LSE(z) - LSE(Z)))), rho_v, rho', sigma, g_rel and two roundings. For v = y,
 * dz_y = -RN(g RN(S_y / S)) against -G sum_{v != y} P_v(Z): the same factors plus S_y's. By the
 * product lemma every element of the row satisfies |dz_v - DZ_v| <= delta |DZ_v| with
 *     delta = 1.02 (2 EZ + 2R + 6u + g_rel)      (certified while the sum is <= 0.001).
 * The backward (lce_oracle_backward.c) turns this into element bounds, using
 * |DZ| <= |dz|/(1 - delta), i.e. |dz - DZ| <= 1.01 delta |dz|. */
#include <stdlib.h>
#include <string.h>

#include "lce_oracle_internal.h"

lce_code lce_row_init(lce_row *r, int64_t v, int64_t h, mpfr_prec_t prec, mpfr_prec_t prod_prec, lce_status *st) {
  memset(r, 0, sizeof *r);
  r->prec = prec;
  r->v = v;
  mpfr_inits2(prec, r->d, r->s, r->s_rest, r->tmp, r->lse, r->loss, (mpfr_ptr)0);
  lce_code rc = lce_mp_array_init(&r->z, v, prec, st);
  if (rc == LCE_OK) rc = lce_mp_array_init(&r->t, v, prec, st);
  if (rc == LCE_OK) rc = lce_mp_array_init(&r->prod, h, prod_prec, st);
  if (rc != LCE_OK) lce_row_free(r);
  return rc;
}

void lce_row_free(lce_row *r) {
  if (r->prec == 0) return;
  mpfr_clears(r->d, r->s, r->s_rest, r->tmp, r->lse, r->loss, (mpfr_ptr)0);
  lce_mp_array_free(&r->z);
  lce_mp_array_free(&r->t);
  lce_mp_array_free(&r->prod);
  r->prec = 0;
}

static double max_d(double a, double b) { return a > b ? a : b; }

/* EZ grows by the half ulp of each logit whose sum was inexact (exact logits add nothing). */
static void note_logit(lce_row *r, int64_t v, int inexact) {
  if (inexact) r->ez = max_d(r->ez, lce_half_ulp(r->z.x[v], r->prec));
}

void lce_row_logits_exact(lce_row *r, mpfr_t *h_row, mpfr_t *w) {
  const int64_t h = r->prod.n;
  r->ez = 0.0;
  for (int64_t v = 0; v < r->v; v++) {
    mpfr_t *wv = w + v * h;
    for (int64_t k = 0; k < h; k++) lce_mul_exact_1(r->prod.x[k], h_row[k], wv[k]);
    note_logit(r, v, mpfr_sum(r->z.x[v], r->prod.ptr, (unsigned long)h, MPFR_RNDN));
  }
}

/* Logits from MPFR inputs of any precision: products exact at prod precision, sum rounded once. */
static void row_logits_mp(lce_row *r, mpfr_t *h_row, mpfr_t *w) {
  const int64_t h = r->prod.n;
  r->ez = 0.0;
  for (int64_t v = 0; v < r->v; v++) {
    for (int64_t k = 0; k < h; k++) mpfr_mul(r->prod.x[k], h_row[k], w[v * h + k], MPFR_RNDN);
    note_logit(r, v, mpfr_sum(r->z.x[v], r->prod.ptr, (unsigned long)h, MPFR_RNDN));
  }
}

void lce_row_forward(lce_row *r, int64_t y) {
  const mpfr_prec_t p = r->prec;
  const double u = ldexp(1.0, -(int)p);
  mpfr_t *z = r->z.x, *t = r->t.x;

  int64_t a = 0;
  double hd = 0.0;
  for (int64_t v = 0; v < r->v; v++)
    if (mpfr_greater_p(z[v], z[a])) a = v;
  mpfr_clear_underflow();
  for (int64_t v = 0; v < r->v; v++) {
    if (v == a) {
      mpfr_set_ui(t[v], 1, MPFR_RNDN);
      continue;
    }
    mpfr_sub(r->d, z[v], z[a], MPFR_RNDN);
    hd = max_d(hd, lce_half_ulp(r->d, p));
    mpfr_exp(t[v], r->d, MPFR_RNDN);
  }
  r->underflow = mpfr_underflow_p();
  const double ez = r->ez;
  r->certified = hd <= 0.0099;
  r->rho = r->certified ? lce_mul_up(1.01, lce_add_up(u, hd)) : INFINITY;
  if (r->underflow) r->rho = lce_add_up(r->rho, u);

  mpfr_sum(r->s, r->t.ptr, (unsigned long)r->v, MPFR_RNDN);
  mpfr_log(r->tmp, r->s, MPFR_RNDN); /* L */
  mpfr_add(r->lse, z[a], r->tmp, MPFR_RNDN);
  double e = lce_add_up(ez, lce_mul_up(1.01, lce_add_up(r->rho, u)));
  r->err_lse = lce_add_up(lce_add_up(e, lce_half_ulp(r->tmp, p)), lce_half_ulp(r->lse, p));
  r->mag_lse = lce_add_up(lce_abs_up(z[a]), lce_abs_up(r->tmp));
  if (!r->certified) r->err_lse = INFINITY;

  if (y < 0 || y >= r->v) return;
  /* S_y: the sum without t_y (moved to the end of the pointer table, then restored). */
  mpfr_ptr *ptr = r->t.ptr;
  ptr[y] = t[r->v - 1];
  ptr[r->v - 1] = t[y];
  mpfr_sum(r->s_rest, ptr, (unsigned long)(r->v - 1), MPFR_RNDN);
  ptr[r->v - 1] = t[r->v - 1];
  ptr[y] = t[y];
  r->mag_loss = lce_add_up(lce_abs_up(r->lse), lce_abs_up(z[y]));
  double h;
  if (mpfr_cmp_ui_2exp(t[y], 1, -64) < 0) { /* p_y < 2^-64: loss > 44, no cancellation to avoid */
    mpfr_sub(r->loss, r->lse, z[y], MPFR_RNDN);
    h = lce_half_ulp(r->loss, p);
    r->err_loss = lce_add_up(lce_add_up(r->err_lse, ez), h);
    return;
  }
  mpfr_div(r->tmp, r->s_rest, t[y], MPFR_RNDN);
  mpfr_log1p(r->loss, r->tmp, MPFR_RNDN);
  double dl = lce_mul_up(1.02, lce_add_up(lce_mul_up(2.0, lce_add_up(ez, r->rho)), 3.0 * u));
  h = lce_half_ulp(r->loss, p);
  r->err_loss = (r->certified && dl <= 0.001)
                    ? lce_add_up(lce_mul_up(lce_mul_up(1.02, dl), lce_add_up(lce_abs_up(r->loss), h)), h)
                    : INFINITY;
}

double lce_row_dz(lce_row *r, int64_t y, mpfr_srcptr g, double g_rel, mpfr_t *dz) {
  for (int64_t v = 0; v < r->v; v++) {
    if (v == y) continue;
    mpfr_div(r->tmp, r->t.x[v], r->s, MPFR_RNDN);
    mpfr_mul(dz[v], r->tmp, g, MPFR_RNDN);
  }
  mpfr_div(r->tmp, r->s_rest, r->s, MPFR_RNDN); /* 1 - p_y without cancellation */
  mpfr_mul(dz[y], r->tmp, g, MPFR_RNDN);
  mpfr_neg(dz[y], dz[y], MPFR_RNDN);

  const double u = ldexp(1.0, -(int)r->prec);
  double a = lce_add_up(lce_add_up(lce_mul_up(2.0, lce_add_up(r->ez, r->rho)), 6.0 * u), g_rel);
  if (!r->certified || r->underflow || !(a <= 0.001)) return INFINITY;
  return lce_mul_up(1.02, a);
}

/* ---- the finite-difference objective ---------------------------------------------------------- */

static mpfr_prec_t max_prec(mpfr_t *x, int64_t n) {
  mpfr_prec_t m = MPFR_PREC_MIN;
  for (int64_t i = 0; i < n; i++)
    if (mpfr_get_prec(x[i]) > m) m = mpfr_get_prec(x[i]);
  return m;
}

lce_code lce_oracle_objective(const lce_case *c, const lce_tensors *in, mpfr_t *hidden, mpfr_t *w,
                              mpfr_prec_t prec, mpfr_t out, lce_status *st) {
  LCE_TRY(lce_tensors_validate(c, in, st));
  LCE_CHECK(st, hidden != NULL && w != NULL, LCE_EINVAL, "objective needs hidden and weight values");
  LCE_CHECK(st, prec >= 64 && prec <= 100000, LCE_EINVAL, "precision %ld outside [64, 100000]", (long)prec);
  mpfr_prec_t pp = max_prec(hidden, c->n * c->h) + max_prec(w, c->v * c->h);
  lce_row r;
  LCE_TRY(lce_row_init(&r, c->v, c->h, prec, pp, st));
  int64_t n_valid = lce_count_valid(c, in);
  mpfr_t g, term;
  mpfr_inits2(prec, g, term, (mpfr_ptr)0);
  mpfr_set_zero(out, 1);
  for (int64_t n = 0; n < c->n; n++) {
    int64_t y = in->labels[n];
    if (y == c->ignore_index) continue;
    row_logits_mp(&r, hidden + n * c->h, w);
    lce_row_forward(&r, y);
    mpfr_set_d(g, in->grad_output[c->reduction == LCE_RED_NONE ? n : 0], MPFR_RNDN);
    if (c->reduction == LCE_RED_MEAN) mpfr_div_si(g, g, (long)n_valid, MPFR_RNDN);
    mpfr_mul(term, g, r.loss, MPFR_RNDN);
    mpfr_add(out, out, term, MPFR_RNDN);
  }
  mpfr_clears(g, term, (mpfr_ptr)0);
  lce_row_free(&r);
  return LCE_OK;
}
