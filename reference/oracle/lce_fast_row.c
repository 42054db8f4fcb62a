/* lce_fast_row.c — tier 1's token row in double: logits (softcap included), lse, the token loss with
 * every option, and dz, each with a rigorous bound. The math and its order are tier 0's
 * (lce_oracle_forward.c, lce_oracle_loss.c); the error analysis is tier 0's with double's unit
 * roundoff and libm in place of correctly rounded MPFR.
 *
 * Error analysis. u = 2^-53; capital letters are exact quantities; every + - * / rounds to nearest,
 * so r = RN(x) has |r - x| <= u |r| + 2^-1074 (the second term only in the subnormal range). libm's
 * exp, log, log1p, tanh and cosh are taken within 2.5 ulp, i.e. within l = 5u of their result
 * (glibc's libm-test-ulps lists at most 2 ulp for these in double); an assumption about the
 * platform, and the one thing tier 0 certifies for us (test_fast compares every element).
 * gamma_n = n u / (1 - n u). Sum2 and Dot2 (Ogita, Rump, Oishi 2005) over n terms give res with
 * |res - S| <= u |S| + gamma_n^2 sum |terms| (fast_sum2_bound).
 *
 * Logits. Products of dtype values are exact in double (at most 24 + 24 significant bits, exponents
 * far inside double's range), so only the sum rounds. Exact sums: every product h_k W_vk is an
 * integer multiple of Q = 2^(lsb(h row) + lsb(W row v)) (lsb: the exponent of the lowest set bit over
 * the row), hence so is every partial sum, in any order, whose magnitude is at most M = sum |h_k W_vk|;
 * when M < 2^53 Q each partial sum is representable and the plain double sum is exact in any order
 * (fast_dot_lanes sums in lanes): s_v = S_v. M is the same loop's double sum of |p_k| (any order of
 * H non-negative terms), within gamma_(H-1) M <= 2^-29 M of it (H <= 2^24), so the test
 * m (1 + 2^-28) < 2^53 Q is a proof. bf16 and fp16 rows pass it unless a row mixes magnitudes over
 * ~2^37 (bf16) or ~2^31 (fp16); otherwise s_v = Sum2 of the exact products, within
 * ES_v = fast_sum2_bound(s_v, M, H). Softcap c, as tier 0: q = RN(s / c), t = tanh q, z = RN(c t):
 *     |z - c tanh(S / c)| <= ES + c (hq + l |t|) + u |z|,  hq = u |q| (+ 2^-1074),
 * and f = RN(1 / RN(ch^2)), ch = cosh q: against F = sech^2(S / c), |q - S/c| <= eq = hq + ES / c and
 * |d log sech^2 / dq| <= 2, so f = F e^theta (1 + l)^2 (1 + u)^2 with |theta| <= 2 eq: by tier 0's
 * product lemma |f - F| <= rf F, rf = 1.02 (2 eq + 2l + 2u) while that sum is <= 0.001. A factor
 * below 2^-1000 (cosh^2 near overflow, |s/c| > ~345) is not certified (its row escalates).
 * EZ = max_v of the logit bounds; term_v as tier 0 (lce_oracle.c's logit_terms, same loop and order).
 *
 * Exponentials. a = argmax (first), m = z_a, d_v = RN(z_v - m) within hd = max u |d_v|, t_v = exp(d_v),
 * t_a = 1: t_v = exp(z_v - m) e^(+-hd) (1 + l): relative rho = 1.01 (hd + l) (hd <= 0.0099), and an
 * exp in the subnormal range is off by at most 2.5 * 2^-1074 < 2^-1072 absolutely: tau = 2^-1072.
 * S = Sum2(t) (non-negative terms: sum |t| = S): against T = sum exp(z_v - m) >= 1,
 *     |S - T| <= rho T + V tau + (u + gamma_V^2)(1 + 2^-50) S, so RS = 1.02 (rho + V tau + 1.01 (u + gamma_V^2)),
 * and S_y = Sum2 over v != y likewise, RSY = RS, but with V tau absolute (S_y may be tiny).
 * lse = RN(m + RN(log S)), L = log S: |L - log T| <= 1.01 RS (RS <= 0.0099), LSE is 1-Lipschitz:
 *     err_lse = EZ + 1.01 RS + l |L| + u |lse|,  mag_lse = |m| + |L|.
 * ce: when t_y >= 2^-64, ce = log1p(r), r = RN(S_y / t_y) = Q (1 + delta) + eta, Q = sum_{v != y}
 * exp(Z_v - Z_y), |delta| <= DL = 1.02 (2 EZ + 2 rho + 1.01 (u + gamma_V^2) + u), |eta| <= 1.01 V tau
 * 2^64; log1p is 1-Lipschitz on [0, inf) and |log1p(Q(1+delta)) - log1p(Q)| <= 1.01 DL log1p(Q), so
 * with h = l |ce| + 2^-1074 and log1p(Q) <= (|ce| + h + eta) / (1 - 1.01 DL):
 *     err_ce = 1.02 DL (|ce| + h + eta) + h + eta   (DL <= 0.001);
 * otherwise ce = RN(lse - z_y) within err_lse + EZ + u |ce|.
 *
 * Loss and dz: tier 0's formulas (lce_oracle_loss.c) through the running bounds fast_add_err,
 * fast_mul_err. The smoothing sum SM = Sum2 of a_v = RN(RN(lse - z_v) w_v): each a_v within
 * w_v (err_lse + EZ) + 2.01 u |a_v|, the sum adds fast_sum2_bound. p_v = RN(t_v / S) and
 * 1 - p_y = RN(S_y / S) carry rho (or RSY), RS, the division and e^(+-2 EZ) (P depends on the
 * differences of logits): relative rp = 1.03 (2 EZ + 2 RS + u) while that is <= 0.001, plus
 * absolutely 2^-1071 (p_v) and V 2^-1071 (1 - p_y) from the subnormal exps. g within 1.01 g_rel |g|,
 * f within 1.01 rf |f|. mag is tier 0's term magnitude |g| fac (p kmag + cy [v = y] + ev w_v) from
 * the double values (equal to tier 0's to rounding). */
#include <stdlib.h>
#include <string.h>

#include "lce_fast_internal.h"
#include "lce_parallel.h"

static double weight_of(const fast_opts *o, int64_t v) { return o->class_weight ? o->class_weight[v] : 1.0; }

void fast_opts_init(fast_opts *o, const lce_case *c, const float *class_weight) {
  const double e = lce_case_smoothing(c);
  memset(o, 0, sizeof *o);
  o->softcap = c->softcap;
  o->lambda = lce_case_z_loss(c);
  o->smoothing = e > 0.0;
  o->class_weight = c->class_weights ? class_weight : NULL;
  o->ome = 1.0 - e;
  o->e_ome = fast_add_err(o->ome, 0.0, 0.0);
  o->ev = e / (double)c->v;
  o->e_ev = fast_add_err(o->ev, 0.0, 0.0);
  /* sum_v w_v: Sum2 of fp32 values (exact without class weights: V < 2^53 ones). */
  double s = 0.0, lo = 0.0, m = 0.0, err;
  for (int64_t v = 0; v < c->v; v++) {
    double w = weight_of(o, v);
    s = lce_two_sum(s, w, &err);
    lo += err;
    m += w;
  }
  o->sw = s + lo;
  o->e_sw = o->class_weight ? fast_sum2_bound(o->sw, lce_sum_bound(m, c->v), c->v) : 0.0;
}

/* The exactness proof of a logit's plain sum (Logits above): every partial sum is a multiple of
 * 2^lsb below 2^53 2^lsb in magnitude, whatever the order of the sum. */
static int sum_proven_exact(double m, int lsb) { return lsb > 900 || m * (1.0 + 0x1p-28) < lce_pow2(53 + lsb); }

/* Sum2 of the pending logits (rows[i], v) of fast_dot_block, side by side. */
static void sum2_pending(const fast_in *in, const int64_t *rows, const int64_t *pi, const int64_t *pv, int count,
                         double *s, double *lo) {
  const int64_t H = in->h, V = in->v;
  const double *h[FAST_SUM2_BATCH] = {0}, *w[FAST_SUM2_BATCH] = {0};
  double hi[FAST_SUM2_BATCH], l[FAST_SUM2_BATCH];
  for (int j = 0; j < count; j++) h[j] = in->hidden + rows[pi[j]] * H, w[j] = in->w + pv[j] * H;
  fast_sum2_batch(h, w, count, H, hi, l);
  for (int j = 0; j < count; j++) s[pi[j] * V + pv[j]] = hi[j], lo[pi[j] * V + pv[j]] = l[j];
}

void fast_dot_block(const fast_in *in, const int64_t *rows, int64_t count, double *s, double *lo, double *m) {
  const int64_t H = in->h, V = in->v, tiles = (V + FAST_TILE_VOCAB - 1) / FAST_TILE_VOCAB;
  LCE_PARALLEL_FOR_IF(tiles > 1 && count * H * V >= LCE_PARALLEL_MIN_MACS)
  for (int64_t t = 0; t < tiles; t++) {
    const int64_t v0 = t * FAST_TILE_VOCAB, v1 = v0 + FAST_TILE_VOCAB < V ? v0 + FAST_TILE_VOCAB : V;
    for (int64_t i0 = 0; i0 < count; i0 += FAST_TILE_TOKENS) {
      const int64_t i1 = i0 + FAST_TILE_TOKENS < count ? i0 + FAST_TILE_TOKENS : count;
      for (int64_t v = v0; v < v1; v++)
        for (int64_t i = i0; i < i1; i++)
          s[i * V + v] = fast_dot_lanes(in->hidden + rows[i] * H, in->w + v * H, H, &m[i * V + v]), lo[i * V + v] = 0.0;
    }
    int64_t pi[FAST_SUM2_BATCH], pv[FAST_SUM2_BATCH]; /* the tile's logits not proven exact, by vocab row */
    int pending = 0;
    for (int64_t v = v0; v < v1; v++)
      for (int64_t i = 0; i < count; i++) {
        if (sum_proven_exact(m[i * V + v], in->lsb_h[rows[i]] + in->lsb_w[v])) continue;
        pi[pending] = i, pv[pending++] = v;
        if (pending == FAST_SUM2_BATCH) sum2_pending(in, rows, pi, pv, pending, s, lo), pending = 0;
      }
    if (pending > 0) sum2_pending(in, rows, pi, pv, pending, s, lo);
  }
}

/* Logit v of the row from its fast_dot_block values: s itself when it is proven exact, else Sum2's
 * s + lo; sets *es. */
static double logit(double s, double lo, double m, int64_t H, int lsb, double *es, int *inexact) {
  *es = 0.0;
  *inexact = 0;
  if (sum_proven_exact(m, lsb)) return s;
  s = s + lo;
  *es = fast_sum2_bound(s, lce_sum_bound(m, H), H);
  *inexact = 1;
  return s;
}

double fast_logit_pair(const fast_in *in, int64_t n, int64_t v, double s, double slo, double m, double *lo, double *err) {
  const int64_t H = in->h;
  *lo = 0.0, *err = 0.0;
  if (sum_proven_exact(m, in->lsb_h[n] + in->lsb_w[v])) return s;
  *lo = slo;
  *err = lce_add_up(lce_mul_up(fast_gamma2(H), lce_sum_bound(m, H)), lce_tiny_multiple(H));
  return s;
}

int64_t fast_row_exact_logits(const fast_in *in, int64_t n, int64_t v0, int64_t v1, double *s) {
  const int64_t H = in->h;
  const double *h = in->hidden + n * H;
  int64_t known = 0;
  for (int64_t v = v0; v < v1; v++) {
    double m, sum = fast_dot_lanes(h, in->w + v * H, H, &m);
    const int exact = sum_proven_exact(m, in->lsb_h[n] + in->lsb_w[v]);
    s[v - v0] = exact ? sum : NAN;
    known += exact;
  }
  return known;
}

/* Softcap of logit v in place, its factor f_v; returns the logit's bound, raises r->rf. */
static double softcap_logit(fast_row *r, const fast_opts *o, int64_t v, double es) {
  const double c = o->softcap, q = r->z[v] / c;
  const double hq = lce_add_up(lce_mul_up(FAST_U, fabs(q)), FAST_TINY);
  const double t = tanh(q), ch = cosh(q);
  r->z[v] = c * t;
  r->f[v] = 1.0 / (ch * ch);
  const double eq = lce_add_up(hq, lce_next_up(es / c));
  const double a = lce_add_up(lce_mul_up(2.0, eq), 2.0 * (FAST_LIBM + FAST_U));
  const int ok = a <= 0.001 && r->f[v] >= 0x1p-1000;
  r->rf = fmax(r->rf, ok ? lce_mul_up(1.02, a) : INFINITY);
  const double e = lce_add_up(es, lce_mul_up(c, lce_add_up(hq, lce_mul_up(FAST_LIBM, fabs(t)))));
  return fast_add_err(r->z[v], e, 0.0);
}

void fast_row_logits(fast_row *r, const fast_in *in, const fast_opts *o, int64_t n, const double *s,
                     const double *lo, const double *ms) {
  const int64_t H = in->h;
  r->ez = 0.0, r->rf = 0.0, r->term_max = 0.0, r->inexact_logits = 0;
  for (int64_t v = 0; v < r->v; v++) {
    double m = ms[v], es;
    int inexact;
    r->z[v] = logit(s[v], lo[v], m, H, in->lsb_h[n] + in->lsb_w[v], &es, &inexact);
    r->inexact_logits += inexact;
    if (r->exact) r->exact[v] = (unsigned char)!inexact;
    double term = m * (1.0 + 0x1p-50); /* tier 0's logit_terms */
    if (o->softcap > 0) {
      es = softcap_logit(r, o, v, es);
      term = fmax(fabs(r->z[v]), r->f[v] * term);
    }
    r->term[v] = term;
    r->term_max = fmax(r->term_max, term);
    r->ez = fmax(r->ez, es);
  }
}

void fast_row_forward(fast_row *r, const fast_opts *o, int64_t y) {
  (void)o;
  const int64_t V = r->v;
  const double *z = r->z;
  double *t = r->t;
  int64_t a = 0;
  for (int64_t v = 0; v < V; v++)
    if (z[v] > z[a]) a = v;
  double hd = 0.0;
  for (int64_t v = 0; v < V; v++) {
    const double d = z[v] - z[a];
    hd = fmax(hd, FAST_U * fabs(d));
    t[v] = v == a ? 1.0 : exp(d);
  }
  const double g2 = fast_gamma2(V), vtau = lce_tiny_multiple(4 * V);
  r->certified = hd <= 0.0099;
  r->rho = lce_mul_up(1.01, lce_add_up(hd, FAST_LIBM));
  const double rsum = lce_mul_up(1.01, lce_add_up(FAST_U, g2));
  r->rs = lce_mul_up(1.02, lce_add_up(lce_add_up(r->rho, vtau), rsum));
  r->rsy = r->rs;
  double s = 0.0, lo = 0.0, sy = 0.0, loy = 0.0, e;
  for (int64_t v = 0; v < V; v++) {
    s = lce_two_sum(s, t[v], &e);
    lo += e;
    if (v == y) continue;
    sy = lce_two_sum(sy, t[v], &e);
    loy += e;
  }
  r->s = s + lo, r->s_y = sy + loy;
  if (!(r->rs <= 0.0099)) r->certified = 0;
  const double L = log(r->s);
  r->lse = z[a] + L;
  double el = lce_add_up(lce_add_up(r->ez, lce_mul_up(1.01, r->rs)), lce_mul_up(FAST_LIBM, fabs(L)));
  r->err_lse = r->certified ? fast_add_err(r->lse, el, 0.0) : INFINITY;
  r->mag_lse = lce_add_up(fabs(z[a]), fabs(L));
  if (y < 0 || y >= V) return;
  if (t[y] < 0x1p-64) { /* p_y < 2^-64: ce > 44, nothing cancels */
    r->ce = r->lse - z[y];
    r->err_ce = fast_add_err(r->ce, r->err_lse, r->ez);
    return;
  }
  r->ce = log1p(r->s_y / t[y]);
  const double dl = lce_mul_up(1.02, lce_add_up(lce_add_up(lce_mul_up(2.0, lce_add_up(r->ez, r->rho)), rsum), FAST_U));
  const double eta = lce_mul_up(1.01, vtau * 0x1p64);
  const double h = lce_add_up(lce_mul_up(FAST_LIBM, fabs(r->ce)), FAST_TINY);
  const double he = lce_add_up(h, eta);
  r->err_ce = (r->certified && dl <= 0.001)
                  ? lce_add_up(lce_mul_up(lce_mul_up(1.02, dl), lce_add_up(fabs(r->ce), he)), he)
                  : INFINITY;
}

void fast_row_loss(fast_row *r, const fast_opts *o, int64_t y) {
  const int64_t V = r->v;
  r->cy = o->ome * weight_of(o, y);
  r->e_cy = fast_mul_err(r->cy, o->ome, o->e_ome, weight_of(o, y), 0.0);
  r->kmag = fabs(r->cy) + o->ev * o->sw + 2.0 * o->lambda * fabs(r->lse);
  double loss = r->cy * r->ce;
  double e = fast_mul_err(loss, r->cy, r->e_cy, r->ce, r->err_ce);
  const double term_max = r->term_max;
  if (o->smoothing) {
    double hi = 0.0, lo = 0.0, m = 0.0, err;
    for (int64_t v = 0; v < V; v++) {
      double a_v = (r->lse - r->z[v]) * weight_of(o, v);
      hi = lce_two_sum(hi, a_v, &err);
      lo += err;
      m += fabs(a_v);
    }
    const double sm = hi + lo, m_up = lce_sum_bound(m, V);
    const double sw_up = lce_add_up(o->sw, o->e_sw);
    double e_sm = lce_add_up(lce_mul_up(sw_up, lce_add_up(r->err_lse, r->ez)), lce_mul_up(2.01 * FAST_U, m_up));
    e_sm = lce_add_up(e_sm, fast_sum2_bound(sm, m_up, V));
    const double tm = o->ev * sm;
    const double e_t = fast_mul_err(tm, o->ev, o->e_ev, sm, e_sm);
    loss += tm;
    e = fast_add_err(loss, e, e_t);
  }
  if (o->lambda > 0.0) {
    const double sq = r->lse * r->lse, e_sq = fast_mul_err(sq, r->lse, r->err_lse, r->lse, r->err_lse);
    const double tz = o->lambda * sq, e_t = fast_mul_err(tz, sq, e_sq, o->lambda, 0.0);
    loss += tz;
    e = fast_add_err(loss, e, e_t);
  }
  r->loss = loss;
  r->err_loss = e;
  /* Magnitudes: tier 0's lce_row_loss, term for term. */
  const double lse = fabs(r->lse), mag_lse = r->mag_lse + term_max;
  double m = fabs(r->cy) * (lse + fabs(r->z[y]) + term_max + r->term[y]);
  if (o->smoothing) {
    double s = o->sw * (lse + term_max);
    for (int64_t v = 0; v < V; v++) s += weight_of(o, v) * (fabs(r->z[v]) + r->term[v]);
    m += o->ev * s;
  }
  if (o->lambda > 0.0) m += o->lambda * (lse * lse + 2.0 * lse * mag_lse);
  r->mag_loss = m;
}

void fast_row_dz(fast_row *r, const fast_opts *o, int64_t y, double g, double g_rel, double *ds, double *err,
                 double *mag) {
  const double a = lce_add_up(lce_mul_up(2.0, lce_add_up(r->ez, r->rs)), FAST_U);
  const int ok = r->certified && a <= 0.001 && isfinite(r->err_lse);
  const double rp = lce_mul_up(1.03, a), tau_p = 0x1p-1071, tau_q = lce_tiny_multiple(8 * r->v);
  double k = 0.0, e_k = 0.0;
  const int has_k = o->smoothing || o->lambda > 0.0;
  if (o->smoothing) {
    k = o->ev * o->sw;
    e_k = fast_mul_err(k, o->ev, o->e_ev, o->sw, o->e_sw);
  }
  if (o->lambda > 0.0) {
    const double tl = 2.0 * o->lambda * r->lse, e_l = fast_mul_err(tl, r->lse, r->err_lse, 2.0 * o->lambda, 0.0);
    k += tl;
    e_k = fast_add_err(k, e_k, e_l);
  }
  const double g_abs = fabs(g), e_g = lce_mul_up(lce_mul_up(1.01, g_rel), g_abs);
  const double cy = fabs(r->cy), kmag = r->kmag;
  for (int64_t v = 0; v < r->v; v++) {
    const double w_v = weight_of(o, v), p = r->t[v] / r->s;
    const double e_p = lce_add_up(lce_mul_up(rp, p), tau_p);
    double inner, e_in;
    if (v == y) { /* cy (p_y - 1) = -cy (1 - p_y), without cancellation */
      const double q = r->s_y / r->s;
      inner = -(r->cy * q);
      e_in = fast_mul_err(inner, r->cy, r->e_cy, q, lce_add_up(lce_mul_up(rp, q), tau_q));
    } else {
      inner = r->cy * p;
      e_in = fast_mul_err(inner, r->cy, r->e_cy, p, e_p);
    }
    if (has_k) {
      const double tk = p * k, e_t = fast_mul_err(tk, p, e_p, k, e_k);
      inner += tk;
      e_in = fast_add_err(inner, e_in, e_t);
    }
    if (o->smoothing) {
      const double ts = o->ev * w_v, e_t = fast_mul_err(ts, o->ev, o->e_ev, w_v, 0.0);
      inner -= ts;
      e_in = fast_add_err(inner, e_in, e_t);
    }
    double d = g * inner, e_d = fast_mul_err(d, g, e_g, inner, e_in), fac = 1.0;
    if (o->softcap > 0.0) {
      const double f = r->f[v], dd = d * f;
      e_d = fast_mul_err(dd, d, e_d, f, lce_mul_up(lce_mul_up(1.01, r->rf), f));
      d = dd;
      fac = 2.0 - f;
    }
    ds[v] = d;
    err[v] = ok ? e_d : INFINITY;
    mag[v] = g_abs * fac * (p * kmag + (v == y ? cy : 0.0) + o->ev * w_v);
  }
}
