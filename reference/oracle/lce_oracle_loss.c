/* lce_oracle_loss.c — the tier-0 oracle's token loss with every option (label smoothing, z-loss,
 * class weights), dz (ds with softcap), the reduction's g, and the finite-difference objective
 * built from the same code. The logits, lse and cross-entropy part come from
 * lce_oracle_forward.c; this continues its error analysis, with its notation.
 *
 * Running bounds. Where terms of either sign meet, relative bounds break down, so every step from
 * here carries an absolute bound: an operation on computed operands a, b (|a - A| <= ea,
 * |b - B| <= eb) returns r within |a| eb + |b| ea + ea eb (products) or ea + eb (sums) plus
 * half_ulp(r) of the exact result (lce_add_err, lce_mul_err in lce_oracle_internal.h). The
 * option constants 1 - e, e / V and sum_v w_v are computed once, each within its half ulp; class
 * weights are exact fp32 values; e and lambda are the doubles lce_case_smoothing and
 * lce_case_z_loss return, taken as exact.
 *
 * Loss. loss = RN(cy ce) + RN(ev SM) + RN(lambda RN(lse^2)), with cy = RN(RN(1 - e) w_y),
 * ev = RN(e / V) and SM = RN(sum_v RN(w_v RN(lse - z_v))). The cross-entropy keeps its
 * cancellation-free log1p evaluation; the smoothing and z-loss terms add to it separately. lse >=
 * m >= z_v (RN is monotone), so every lse - z_v >= 0 and SM sums non-negative terms, each within
 * err(lse) + EZ of LSE(Z) - Z_v before its two roundings (<= 2.01 u of the term), so
 *     |SM - exact| <= sum_w (err(lse) + EZ) + 2.01 u SM + half_ulp(SM).
 *
 * dz. p_v = RN(t_v / S) carries rho_v, S's rho' and sigma and the division; 1 - p_y = RN(S_y / S)
 * carries S_y's and S's factors and the division; against P_v(Z) both also carry e^(+-2 EZ)
 * (P_v(z)/P_v(Z) = exp(z_v - Z_v - (LSE(z) - LSE(Z)))). By the product lemma both are within
 * rp |P| <= 1.01 rp |p| of the exact value, rp = 1.02 (2 EZ + 2R + 3u) (certified while the sum
 * is <= 0.001, no exp underflowed). Then, with K = ev sum_w + 2 lambda lse,
 *     dz_v = g (p_v K + cy (p_v - [v == y]) - ev w_v),
 * the label's cy (p_y - 1) formed as -cy RN(S_y / S), all through the running bounds; with
 * softcap ds_v = RN(dz_v f_v), f_v within 1.01 rf |f_v|. g = RN(G) with relative error g_rel:
 * |g - G| <= 1.01 g_rel |g|.
 *
 * Reduction. The mean's divisor SW = sum of w_{label} over valid tokens is accumulated exactly
 * (fp32 values need at most 301 bits) and rounded once: relative error <= u. For the mean,
 * g = RN(grad_output / SW), g_rel = 1.01 (sw_rel + u). */
#include <stdlib.h>
#include <string.h>

#include "lce_oracle_internal.h"

static double weight_of(const lce_row_opts *o, int64_t v) { return o->class_weight ? o->class_weight[v] : 1.0; }

void lce_row_opts_init(lce_row_opts *o, const lce_case *c, const float *class_weight, mpfr_prec_t prec) {
  const double e = lce_case_smoothing(c);
  o->softcap = c->softcap;
  o->lambda = lce_case_z_loss(c);
  o->smoothing = e > 0.0;
  o->class_weight = c->class_weights ? class_weight : NULL;
  mpfr_inits2(prec, o->one_minus_e, o->ev, o->sw, (mpfr_ptr)0);
  mpfr_set_ui(o->one_minus_e, 1, MPFR_RNDN);
  o->err_one_minus_e = mpfr_sub_d(o->one_minus_e, o->one_minus_e, e, MPFR_RNDN) ? lce_half_ulp(o->one_minus_e, prec) : 0.0;
  mpfr_set_d(o->ev, e, MPFR_RNDN);
  o->err_ev = mpfr_div_si(o->ev, o->ev, (long)c->v, MPFR_RNDN) ? lce_half_ulp(o->ev, prec) : 0.0;
  /* sum_v w_v exactly at 320 bits (fp32 values span 277 bits, V < 2^24 adds 24), rounded once. */
  mpfr_t acc;
  mpfr_init2(acc, 320);
  mpfr_set_zero(acc, 1);
  for (int64_t v = 0; v < c->v; v++) mpfr_add_d(acc, acc, weight_of(o, v), MPFR_RNDN);
  o->err_sw = mpfr_set(o->sw, acc, MPFR_RNDN) ? lce_half_ulp(o->sw, prec) : 0.0;
  mpfr_clear(acc);
}

void lce_row_opts_clear(lce_row_opts *o) { mpfr_clears(o->one_minus_e, o->ev, o->sw, (mpfr_ptr)0); }

/* cy = (1 - e) w_y into r->cy; returns its bound. */
static double label_factor(lce_row *r, int64_t y) {
  const lce_row_opts *o = &r->opts;
  return lce_mul_d_err(r->cy, o->one_minus_e, o->err_one_minus_e, weight_of(o, y), r->prec);
}

/* SM = sum_v w_v (lse - z_v) into out; returns its bound (see Loss above). */
static double smoothing_sum(lce_row *r, mpfr_ptr out) {
  const mpfr_prec_t p = r->prec;
  const double u = ldexp(1.0, -(int)p);
  for (int64_t v = 0; v < r->v; v++) {
    mpfr_ptr a = r->aux.x[v];
    mpfr_sub(a, r->lse, r->z.x[v], MPFR_RNDN);
    if (r->opts.class_weight) mpfr_mul_d(a, a, weight_of(&r->opts, v), MPFR_RNDN);
  }
  int inexact = mpfr_sum(out, r->aux.ptr, (unsigned long)r->v, MPFR_RNDN);
  const double sw_up = lce_add_up(lce_abs_up(r->opts.sw), r->opts.err_sw);
  double e = lce_add_up(lce_mul_up(sw_up, lce_add_up(r->err_lse, r->ez)), lce_mul_up(2.01 * u, lce_abs_up(out)));
  return inexact ? lce_add_up(e, lce_half_ulp(out, p)) : e;
}

void lce_row_loss(lce_row *r, int64_t y, const double *term, double term_max) {
  const mpfr_prec_t p = r->prec;
  const lce_row_opts *o = &r->opts;
  double e_cy = label_factor(r, y);
  double e = lce_mul_err(r->loss, r->cy, e_cy, r->ce, r->err_ce, p);
  if (o->smoothing) {
    double e_sm = smoothing_sum(r, r->tmp);
    double e_t = lce_mul_err(r->tmp, o->ev, o->err_ev, r->tmp, e_sm, p);
    e = lce_add_err(r->loss, r->loss, e, r->tmp, e_t, p);
  }
  if (o->lambda > 0.0) {
    double e_sq = lce_mul_err(r->tmp, r->lse, r->err_lse, r->lse, r->err_lse, p);
    double e_t = lce_mul_d_err(r->tmp, r->tmp, e_sq, o->lambda, p);
    e = lce_add_err(r->loss, r->loss, e, r->tmp, e_t, p);
  }
  r->err_loss = e;
  if (term == NULL) return;
  /* Magnitudes: every term lse - z_v counts |lse| + |z_v| and both logits' error scales; the
   * z-loss counts lse^2 and 2 |lse| times lse's own magnitude (its first-order error). */
  const double lse = fabs(mpfr_get_d(r->lse, MPFR_RNDN)), mag_lse = r->mag_lse + term_max;
  double m = fabs(mpfr_get_d(r->cy, MPFR_RNDN)) * (lse + fabs(mpfr_get_d(r->z.x[y], MPFR_RNDN)) + term_max + term[y]);
  if (o->smoothing) {
    double s = mpfr_get_d(o->sw, MPFR_RNDN) * (lse + term_max);
    for (int64_t v = 0; v < r->v; v++) s += weight_of(o, v) * (fabs(mpfr_get_d(r->z.x[v], MPFR_RNDN)) + term[v]);
    m += mpfr_get_d(o->ev, MPFR_RNDN) * s;
  }
  if (o->lambda > 0.0) m += o->lambda * (lse * lse + 2.0 * lse * mag_lse);
  r->mag_loss = m;
}

int lce_row_dz(lce_row *r, int64_t y, mpfr_srcptr g, double g_rel, int64_t v0, int64_t v1, mpfr_t *dz, double *err,
               double *mag) {
  const mpfr_prec_t p = r->prec;
  const double u = ldexp(1.0, -(int)p);
  const lce_row_opts *o = &r->opts;
  const double a = lce_add_up(lce_mul_up(2.0, lce_add_up(r->ez, r->rho)), 3.0 * u);
  const int ok = r->certified && !r->underflow && a <= 0.001;
  const double rp = lce_mul_up(1.02 * 1.01, a); /* |p - P| <= rp |p| */
  const double e_cy = label_factor(r, y);
  /* K = (e / V) sum_u w_u + 2 lambda lse: the part of p_v's factor beyond cy. */
  double e_k = 0.0;
  const int has_k = o->smoothing || o->lambda > 0.0;
  mpfr_set_zero(r->k, 1);
  if (o->smoothing) e_k = lce_mul_err(r->k, o->ev, o->err_ev, o->sw, o->err_sw, p);
  if (o->lambda > 0.0) {
    double e_l = lce_mul_d_err(r->tmp, r->lse, r->err_lse, 2.0 * o->lambda, p);
    e_k = lce_add_err(r->k, r->k, e_k, r->tmp, e_l, p);
  }
  const double g_abs = lce_abs_up(g), e_g = lce_mul_up(lce_mul_up(1.01, g_rel), g_abs);
  const double ev = mpfr_get_d(o->ev, MPFR_RNDU), cy = fabs(mpfr_get_d(r->cy, MPFR_RNDU));
  const double kmag = r->kmag = cy + ev * mpfr_get_d(o->sw, MPFR_RNDU) + 2.0 * o->lambda * fabs(mpfr_get_d(r->lse, MPFR_RNDU));
  for (int64_t v = v0; v < v1; v++) {
    const double w_v = weight_of(o, v);
    mpfr_div(r->pv, r->t.x[v], r->s, MPFR_RNDN);
    const double e_p = lce_mul_up(rp, lce_abs_up(r->pv));
    double e_in;
    if (v == y) { /* cy (p_y - 1) = -cy (1 - p_y), without cancellation */
      mpfr_div(r->tmp, r->s_rest, r->s, MPFR_RNDN);
      e_in = lce_mul_err(r->inner, r->cy, e_cy, r->tmp, lce_mul_up(rp, lce_abs_up(r->tmp)), p);
      mpfr_neg(r->inner, r->inner, MPFR_RNDN);
    } else {
      e_in = lce_mul_err(r->inner, r->cy, e_cy, r->pv, e_p, p);
    }
    if (has_k) {
      double e_t = lce_mul_err(r->tmp, r->pv, e_p, r->k, e_k, p);
      e_in = lce_add_err(r->inner, r->inner, e_in, r->tmp, e_t, p);
    }
    if (o->smoothing) {
      double e_t = lce_mul_d_err(r->tmp, o->ev, o->err_ev, w_v, p);
      e_in = lce_sub_err(r->inner, r->inner, e_in, r->tmp, e_t, p);
    }
    double e_dz = lce_mul_err(dz[v], g, e_g, r->inner, e_in, p), f = 1.0;
    if (o->softcap > 0.0) {
      mpfr_srcptr fv = r->f.x[v];
      e_dz = lce_mul_err(dz[v], dz[v], e_dz, fv, lce_mul_up(lce_mul_up(1.01, r->rf), lce_abs_up(fv)), p);
      /* A kernel forms the factor as 1 - t*t (t = z/c): its terms are 1 and t^2, so near
       * saturation (f -> 0) the factor is known only to ~u absolutely, not relatively. */
      f = 2.0 - mpfr_get_d(fv, MPFR_RNDD);
    }
    err[v] = ok ? e_dz : INFINITY;
    mag[v] = g_abs * f * (mpfr_get_d(r->pv, MPFR_RNDU) * kmag + (v == y ? cy : 0.0) + ev * w_v);
  }
  return ok;
}

/* ---- the reduction ---------------------------------------------------------------------------- */

double lce_valid_weight_sum(const lce_case *c, const lce_tensors *in, mpfr_t out) {
  mpfr_t acc;
  mpfr_init2(acc, 320);
  mpfr_set_zero(acc, 1);
  for (int64_t n = 0; n < c->n; n++) {
    int64_t y = in->labels[n];
    if (y != c->ignore_index) mpfr_add_d(acc, acc, c->class_weights ? in->class_weight[y] : 1.0, MPFR_RNDN);
  }
  int inexact = mpfr_set(out, acc, MPFR_RNDN);
  mpfr_clear(acc);
  return inexact ? ldexp(1.0, -(int)mpfr_get_prec(out)) : 0.0;
}

double lce_token_g(const lce_case *c, const lce_tensors *in, int64_t n, mpfr_srcptr sw, double sw_rel, mpfr_t g) {
  if (in->labels[n] == c->ignore_index || (c->reduction == LCE_RED_MEAN && mpfr_zero_p(sw))) {
    mpfr_set_zero(g, 1);
    return 0.0;
  }
  mpfr_set_d(g, in->grad_output[c->reduction == LCE_RED_NONE ? n : 0], MPFR_RNDN);
  if (c->reduction != LCE_RED_MEAN) return 0.0;
  int inexact = mpfr_div(g, g, sw, MPFR_RNDN);
  if (!inexact && sw_rel == 0.0) return 0.0;
  return lce_mul_up(1.01, lce_add_up(sw_rel, ldexp(1.0, -(int)mpfr_get_prec(g))));
}

/* ---- the finite-difference objective ---------------------------------------------------------- */

static mpfr_prec_t max_prec(mpfr_t *x, int64_t n) {
  mpfr_prec_t m = MPFR_PREC_MIN;
  for (int64_t i = 0; i < n; i++)
    if (mpfr_get_prec(x[i]) > m) m = mpfr_get_prec(x[i]);
  return m;
}

static lce_code objective_body(const lce_case *c, const lce_tensors *in, mpfr_t *hidden, mpfr_t *w, mpfr_prec_t prec,
                               mpfr_t out, lce_status *st) {
  mpfr_prec_t pp = max_prec(hidden, c->n * c->h) + max_prec(w, c->v * c->h);
  lce_row r;
  LCE_TRY(lce_row_init(&r, c, in->class_weight, c->h, prec, pp, st));
  mpfr_t g, sw;
  mpfr_inits2(prec, g, sw, (mpfr_ptr)0);
  double sw_rel = lce_valid_weight_sum(c, in, sw);
  mpfr_set_zero(out, 1);
  for (int64_t n = 0; n < c->n; n++) {
    int64_t y = in->labels[n];
    if (y == c->ignore_index) continue;
    lce_row_logits_mp(&r, hidden + n * c->h, w);
    lce_row_forward(&r, y);
    lce_row_loss(&r, y, NULL, 0.0);
    lce_token_g(c, in, n, sw, sw_rel, g);
    mpfr_mul(g, g, r.loss, MPFR_RNDN);
    mpfr_add(out, out, g, MPFR_RNDN);
  }
  mpfr_clears(g, sw, (mpfr_ptr)0);
  lce_row_free(&r);
  return LCE_OK;
}

lce_code lce_oracle_objective(const lce_case *c, const lce_tensors *in, mpfr_t *hidden, mpfr_t *w,
                              mpfr_prec_t prec, mpfr_t out, lce_status *st) {
  LCE_TRY(lce_tensors_validate(c, in, st));
  LCE_CHECK(st, hidden != NULL && w != NULL, LCE_EINVAL, "objective needs hidden and weight values");
  LCE_CHECK(st, prec >= 64 && prec <= 100000, LCE_EINVAL, "precision %ld outside [64, 100000]", (long)prec);
  mpfr_exp_t saved_emin = mpfr_get_emin(), saved_emax = mpfr_get_emax();
  mpfr_set_emin(mpfr_get_emin_min()); /* the oracle's range: no exp of a sane argument underflows */
  mpfr_set_emax(mpfr_get_emax_max());
  lce_code rc = objective_body(c, in, hidden, w, prec, out, st);
  mpfr_set_emin(saved_emin);
  mpfr_set_emax(saved_emax);
  return rc;
}
