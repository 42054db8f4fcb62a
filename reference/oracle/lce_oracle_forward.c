/* lce_oracle_forward.c — the tier-0 oracle's per-token forward: logits (softcap included), lse and
 * the cross-entropy part lse - z_y of one row, with rigorous error bounds. The token loss with its
 * options, dz and the objective build on them in lce_oracle_loss.c.
 *
 * Error analysis. p = working precision, u = 2^-p. Every MPFR operation rounds to nearest, so
 * its result r is within half_ulp(r) <= u|r| of the exact result of its operands
 * (lce_half_ulp). The driver widens MPFR's exponent range for the run, so only an exp of an
 * argument below about -3.2e18 underflows (see Exponentials). Capital letters are exact
 * quantities. With tf32 GEMMs the inputs are the tf32-rounded values (lce_oracle.c): exact
 * numbers like any other, nothing below changes.
 *
 * Logits. s_v = RN(sum of the exact products) (mpfr_sum is correctly rounded), within ES_v =
 * half_ulp(s_v) of S_v (0 when the sum was exact). Without softcap z_v = s_v. With softcap c,
 * q = RN(s_v / c), t = RN(tanh q), z_v = RN(c t); tanh is 1-Lipschitz, so
 *     |z_v - c tanh(S_v / c)| <= ES_v + c (half_ulp(q) + half_ulp(t)) + half_ulp(z_v),
 * and the derivative factor F_v = 1 - tanh^2(S_v / c) = sech^2(S_v / c) is f_v = RN(RN(sech q)^2)
 * (sech, not 1 - t^2, which cancels where |s| >> c). |q - S_v / c| <= eq := half_ulp(q) + ES_v / c
 * and |d/dx log sech^2 x| = 2 |tanh x| <= 2, so f_v = F_v e^theta (1 + u)^3 with |theta| <= 2 eq:
 *     |f_v - F_v| <= rf |F_v|,  rf := 1.02 (2 eq + 3u)  (product lemma below; certified while
 * 2 eq + 3u <= 0.001). A sech that underflows (|s/c| beyond ~3e18) leaves f_v uncertified.
 * In both cases |z_v - Z_v| <= EZ := the largest of these bounds over the row.
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
 * Cross-entropy part. ce = RN(log1p(r)), r = RN(S_y / t_y), S_y = RN(sum_{v != y} t_v). Mathematically
 * log1p(Q), Q = sum_{v != y} exp(z_v - z_y), equals LSE(z) - z_y, but it keeps relative accuracy
 * where p_y -> 1 and lse - z_y would cancel. Q(z)/Q(Z) lies in e^(+-2 EZ); S_y carries
 * (1 + rho'')(1 + sigma''), t_y (1 + rho_y), the division one more u, so by the product lemma
 * r = Q(Z)(1 + delta) with |delta| <= DL := 1.02 (2 EZ + 2R + 3u). Since Q/(1+Q) <= log1p(Q),
 *     |log1p(Q(1 + delta)) - log1p(Q)| = |log(1 + delta Q/(1+Q))| <= 1.01 DL log1p(Q),
 * and log1p(Q) <= (|ce| + h)/(1 - 1.01 DL) with h = half_ulp(ce), so for DL <= 0.001
 *     |ce - CE| <= 1.02 DL (|ce| + h) + h.
 * When t_y < 2^-64 (p_y tiny, ce > 44: nothing cancels, and t_y may have underflowed) ce is
 * RN(lse - z_y) instead, with |ce - CE| <= err(lse) + EZ + half_ulp(ce).
 */
#include <stdlib.h>
#include <string.h>

#include "lce_oracle_internal.h"

lce_code lce_row_init(lce_row *r, const lce_case *c, const float *class_weight, int64_t h, mpfr_prec_t prec,
                      mpfr_prec_t prod_prec, lce_status *st) {
  memset(r, 0, sizeof *r);
  r->prec = prec;
  r->v = c->v;
  mpfr_inits2(prec, r->d, r->s, r->s_rest, r->tmp, r->k, r->cy, r->pv, r->inner, r->lse, r->ce, r->loss,
              r->zmax, (mpfr_ptr)0);
  lce_row_opts_init(&r->opts, c, class_weight, prec);
  lce_code rc = lce_mp_array_init(&r->z, r->v, prec, st);
  if (rc == LCE_OK) rc = lce_mp_array_init(&r->t, r->v, prec, st);
  if (rc == LCE_OK) rc = lce_mp_array_init(&r->f, r->opts.softcap > 0 ? r->v : 0, prec, st);
  if (rc == LCE_OK) rc = lce_mp_array_init(&r->aux, r->opts.smoothing ? r->v : 0, prec, st);
  if (rc == LCE_OK) rc = lce_mp_array_init(&r->prod, h, prod_prec, st);
  if (rc != LCE_OK) lce_row_free(r);
  return rc;
}

void lce_row_free(lce_row *r) {
  if (r->prec == 0) return;
  mpfr_clears(r->d, r->s, r->s_rest, r->tmp, r->k, r->cy, r->pv, r->inner, r->lse, r->ce, r->loss,
              r->zmax, (mpfr_ptr)0);
  lce_row_opts_clear(&r->opts);
  lce_mp_array_free(&r->z);
  lce_mp_array_free(&r->f);
  lce_mp_array_free(&r->t);
  lce_mp_array_free(&r->aux);
  lce_mp_array_free(&r->prod);
  r->prec = 0;
}

static double max_d(double a, double b) { return a > b ? a : b; }

/* z_v = c tanh(s_v / c) in place of s_v, and f_v = sech^2(s_v / c), given es = ES_v; returns the
 * logit's bound and raises r->rf (see Logits above). */
static double softcap_logit(lce_row *r, int64_t v, double es) {
  const mpfr_prec_t p = r->prec;
  const double c = r->opts.softcap, u = ldexp(1.0, -(int)p);
  mpfr_ptr z = r->z.x[v], f = r->f.x[v];
  mpfr_div_d(r->d, z, c, MPFR_RNDN); /* q */
  const double hq = lce_half_ulp(r->d, p);
  lce_tanh_sech_rn(r->tmp, f, r->d); /* mpfr_tanh's and mpfr_sech's values (lce_oracle_exp.c) */
  mpfr_sqr(f, f, MPFR_RNDN);
  const double ht = lce_half_ulp(r->tmp, p);
  mpfr_mul_d(z, r->tmp, c, MPFR_RNDN);
  const double eq = lce_add_up(hq, nextafter(es / c, INFINITY));
  const double a = lce_add_up(lce_mul_up(2.0, eq), 3.0 * u);
  r->rf = max_d(r->rf, a <= 0.001 ? lce_mul_up(1.02, a) : INFINITY);
  return lce_add_up(lce_add_up(es, lce_mul_up(c, lce_add_up(hq, ht))), lce_half_ulp(z, p));
}

/* EZ grows by the bound of each logit: half an ulp of an inexact sum, and the softcap's. */
static void finish_logit(lce_row *r, int64_t v, int inexact) {
  double e = inexact ? lce_half_ulp(r->z.x[v], r->prec) : 0.0;
  if (r->opts.softcap > 0) e = softcap_logit(r, v, e);
  r->ez = max_d(r->ez, e);
}

static void start_logits(lce_row *r) {
  r->ez = 0.0;
  r->rf = 0.0;
  mpfr_clear_underflow();
}

static void end_logits(lce_row *r) { r->cap_underflow = r->opts.softcap > 0 && mpfr_underflow_p(); }

/* Logits v in [v0, v1): from s[v - v0] where s is given and holds a non-zero number (the exact sum:
 * mpfr_sum would return it, exact, ternary 0), else as the correctly rounded sum of the h exact
 * products (a zero's sign is mpfr_sum's). */
static void row_logits(lce_row *r, mpfr_t *h_row, mpfr_t *w, const double *s, int64_t v0, int64_t v1) {
  const int64_t h = r->prod.n;
  for (int64_t v = v0; v < v1; v++) {
    if (s && s[v - v0] != 0.0 && !isnan(s[v - v0])) {
      mpfr_set_d(r->z.x[v], s[v - v0], MPFR_RNDN);
      finish_logit(r, v, 0);
      continue;
    }
    mpfr_t *wv = w + v * h;
    for (int64_t k = 0; k < h; k++) lce_mul_exact_1(r->prod.x[k], h_row[k], wv[k]);
    finish_logit(r, v, mpfr_sum(r->z.x[v], r->prod.ptr, (unsigned long)h, MPFR_RNDN));
  }
}

void lce_row_logits_exact(lce_row *r, mpfr_t *h_row, mpfr_t *w) {
  start_logits(r);
  row_logits(r, h_row, w, NULL, 0, r->v);
  end_logits(r);
}

void lce_row_logits_given(lce_row *r, mpfr_t *h_row, mpfr_t *w, const double *s) {
  start_logits(r);
  row_logits(r, h_row, w, s, 0, r->v);
  end_logits(r);
}

void lce_row_logits_range(lce_row *r, mpfr_t *h_row, mpfr_t *w, const double *s, int64_t v0, int64_t v1) {
  row_logits(r, h_row, w, s, v0, v1);
}

void lce_row_logits_mp(lce_row *r, mpfr_t *h_row, mpfr_t *w) {
  const int64_t h = r->prod.n;
  start_logits(r);
  for (int64_t v = 0; v < r->v; v++) {
    for (int64_t k = 0; k < h; k++) mpfr_mul(r->prod.x[k], h_row[k], w[v * h + k], MPFR_RNDN);
    finish_logit(r, v, mpfr_sum(r->z.x[v], r->prod.ptr, (unsigned long)h, MPFR_RNDN));
  }
  end_logits(r);
}

/* t_v = exp(z_v - max) for v in [v0, v1) (t_amax = 1); returns the largest half ulp of the
 * differences. */
static double row_exp(lce_row *r, int64_t v0, int64_t v1) {
  double hd = 0.0;
  for (int64_t v = v0; v < v1; v++) {
    if (v == r->amax) {
      mpfr_set_ui(r->t.x[v], 1, MPFR_RNDN);
      continue;
    }
    mpfr_sub(r->d, r->z.x[v], r->zmax, MPFR_RNDN);
    hd = max_d(hd, lce_half_ulp(r->d, r->prec));
    lce_exp_rn(r->t.x[v], r->d); /* mpfr_exp's value, faster (lce_oracle_exp.c) */
  }
  return hd;
}

void lce_row_exp_range(lce_row *r, int64_t v0, int64_t v1) { row_exp(r, v0, v1); }

void lce_row_save(const lce_row *r, lce_row_state *s) {
  mpfr_set(s->mp[0], r->zmax, MPFR_RNDN);
  mpfr_set(s->mp[1], r->s, MPFR_RNDN);
  mpfr_set(s->mp[2], r->s_rest, MPFR_RNDN);
  mpfr_set(s->mp[3], r->lse, MPFR_RNDN);
  s->amax = r->amax, s->ez = r->ez, s->rf = r->rf, s->rho = r->rho;
  s->certified = r->certified, s->underflow = r->underflow;
}

void lce_row_restore(lce_row *r, const lce_row_state *s) {
  mpfr_set(r->zmax, s->mp[0], MPFR_RNDN);
  mpfr_set(r->s, s->mp[1], MPFR_RNDN);
  mpfr_set(r->s_rest, s->mp[2], MPFR_RNDN);
  mpfr_set(r->lse, s->mp[3], MPFR_RNDN);
  r->amax = s->amax, r->ez = s->ez, r->rf = s->rf, r->rho = s->rho;
  r->certified = s->certified, r->underflow = s->underflow;
}

void lce_row_forward(lce_row *r, int64_t y) {
  const mpfr_prec_t p = r->prec;
  const double u = ldexp(1.0, -(int)p);
  mpfr_t *z = r->z.x, *t = r->t.x;

  int64_t a = 0;
  for (int64_t v = 0; v < r->v; v++)
    if (mpfr_greater_p(z[v], z[a])) a = v;
  r->amax = a;
  mpfr_set(r->zmax, z[a], MPFR_RNDN);
  mpfr_clear_underflow();
  const double hd = row_exp(r, 0, r->v);
  r->underflow = mpfr_underflow_p() || r->cap_underflow;
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
  double h;
  if (mpfr_cmp_ui_2exp(t[y], 1, -64) < 0) { /* p_y < 2^-64: ce > 44, no cancellation to avoid */
    mpfr_sub(r->ce, r->lse, z[y], MPFR_RNDN);
    h = lce_half_ulp(r->ce, p);
    r->err_ce = lce_add_up(lce_add_up(r->err_lse, ez), h);
    return;
  }
  mpfr_div(r->tmp, r->s_rest, t[y], MPFR_RNDN);
  mpfr_log1p(r->ce, r->tmp, MPFR_RNDN);
  double dl = lce_mul_up(1.02, lce_add_up(lce_mul_up(2.0, lce_add_up(ez, r->rho)), 3.0 * u));
  h = lce_half_ulp(r->ce, p);
  r->err_ce = (r->certified && dl <= 0.001)
                  ? lce_add_up(lce_mul_up(lce_mul_up(1.02, dl), lce_add_up(lce_abs_up(r->ce), h)), h)
                  : INFINITY;
}
