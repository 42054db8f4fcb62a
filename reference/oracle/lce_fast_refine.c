/* lce_fast_refine.c — tier 1's second step (lce_fast_internal.h, fast_refine): the d_hidden and
 * d_weight elements that tier 1's double arithmetic could not decide are recomputed in
 * double-double (about 100 bits) and certified again; only what this step cannot decide goes on to
 * tier 0 (Ziv's strategy: escalate by precision steps). Those elements are nearly all gradient
 * sums with heavy cancellation, whose error in double (~13 u of their terms' magnitude, u = 2^-53)
 * is too large for lce_round_certain; here it is ~2^-86 of it. Covered: every case with finite
 * inputs (dz = g (cy (p - [v = y]) + K p - ev w_v) f, K = ev sum_v w_v + 2 lambda lse, f the softcap's
 * sech^2 or 1); a row whose logits exceed 300 softcaps, or whose bounds grow beyond 2^-60, is left
 * to tier 0 as before.
 *
 * Double-double. A pair (h, l) stands for h + l. The operations are those of Joldes, Muller and
 * Popescu ("Tight and rigorous error bounds for basic building blocks of double-word arithmetic",
 * ACM TOMS 44(2), 2017) with every Fast2Sum replaced by TwoSum (exact without its precondition):
 * DWPlusFP (Alg. 4, relative error <= 2u^2), AccurateDWPlusDW (Alg. 6, <= 3u^2 + 13u^3), DWTimesFP3
 * (Alg. 9, <= 2u^2), DWTimesDW3 (Alg. 12, <= 5u^2) and a division q = x_h / y_h, r = x - q y (DWTimesFP3
 * then Alg. 6), q + r_h / y_h: r is within 2u^2 |x| + 3u^2 |r| of x - q y, |x - q y| <= 2u |x|, and
 * r_h / y_h loses u^2 to y's low part and u to its rounding, <= 8u^2 in all. Every operation is
 * therefore taken within DD = 2^-100 = 64 u^2 of its exact result (relative), while no value falls
 * below 2^-800: smaller exps, dz and products are dropped and their whole magnitude counted as error.
 *
 * exp (fast_exp_dd). x = hi + lo, -600 <= hi <= 2^-30. k = nearest(hi 1024 / ln 2) (|k| < 2^20), ln 2 /
 * 1024 = L1 + L2 + L3 + e3 with L1, L2 of 32 bits (k L1, k L2 exact), |L3| < 2^-74.5, |e3| < 2^-127.5;
 * r = x - k ln 2 / 1024 by TwoSum and three DWPlusFP, |r| <= ln 2 / 2048 + |lo| + 2^-43 < 2^-11.5,
 * within 2^-107.5 (k L3's rounding) + 2^-107.5 (k e3) + 3 DD 2^-11.5 < 2^-106.3. exp(r) = 1 + r (1 + r
 * (1/2 + r (1/6 + r W))), W = sum_(i>=4) r^(i-4) / i!: w, the degree-3 part of W, in double by Horner on
 * r_h with the doubles nearest 1/24, 1/120, 1/720, 1/5040 (six roundings over terms summing to <= 0.0417,
 * 6.01 u of it; the coefficients' roundings and r_l's part, below 2^-58), |w - W| < 2^-54.5 with the
 * tail sum_(i>=8) r^(i-4) / i! < 2^-61.3 included, and r^4 |w - W| < 2^-100.5 <= 0.71 DD of the result
 * (>= 0.9997); then four Horner steps in double-double (1/6 within 2^-106, the others exact), each
 * within 2 DD of its result and scaling the error carried in by |r y_(i+1) / y_i| <= 2^-9.5: P within
 * 2.01 DD + 0.71 DD + 2^-106 relatively. exp(x) = 2^(k div 1024) T_(k mod 1024) exp(r), T_j = 2^(j/1024) in
 * double-double (within 2^-106), one DWTimesDW3, the power of two exact: in all 2.72 DD + DD + 3.1 2^-106
 * < 4 DD = FAST_DD_EXP (test_fast checks it against MPFR). The table (16 KiB) is what makes the
 * polynomial short: the degree-10 Taylor polynomial in double-double with 64 entries cost three times as
 * much, and the step's exps were two thirds of it.
 *
 * log (log_dd), for a double-double s with 1/2 <= s <= 2^800 (a row's sum S below). y0 = log(s_h) from
 * libm (any accuracy: it is only a starting point), r = s exp(-y0) - 1 by fast_exp_dd (-600 <= -y0 <=
 * 2^-30), DWTimesDW3 and Alg. 6, and y = y0 + r (DWPlusFP). With R = s e^(-y0) - 1 exactly, log s =
 * y0 + log(1 + R); r is within 4 DD + DD (the product) of 1 + R and DD |r| more (the subtraction):
 * |r - R| <= 5.1 DD (1 + |R|) + DD |r|; and |R - log(1 + R)| <= R^2 / (2 (1 - |R|)) <= 0.51 R^2 for
 * |R| <= rb = 1.01 |r_h| + 2^-90 <= 2^-20 (else not refined). So |y - log s| <= 5.2 DD (1 + rb) +
 * DD |r| + 0.51 rb^2 + DD |y| =: el; with libm's log within a few ulps, rb ~ 2^-50 and el ~ 2^-97.
 *
 * Softcap (softcap_dd), c > 0, of a logit z = hi + lo within ez of the exact S: q = z / c (the
 * division, within DD |q|), so |q - S / c| <= eq = 1.01 DD |q| + ez / c; |q| <= 300 (else the row is not
 * refined). E = fast_exp_dd(-2 |q|) within 4 DD of E* = e^(-2|q|); N = 1 - E and D = 1 + E by Alg. 6:
 * |N - (1 - E*)| <= DD |N| + 4 DD E*, D within 5.01 DD of 1 + E* relatively; t = N / D (the division,
 * DD) with q's sign: |t - tanh q| <= 1.01 DD + 2.01 DD (E* / (1 + E*) <= 1/2) + 5.02 DD + 1.01 DD <= 10 DD
 * absolutely. tanh is 1-Lipschitz, and z' = c t (DWTimesFP3), so
 *     |z' - c tanh(S / c)| <= 1.01 (ez + c (10 DD + 1.01 DD |q|)) + DD |z'|,
 * z' then stands for the logit in everything below (its bound ez'). f = 4 E / (D D) (4 E exact, D D by
 * DWTimesDW3 within 11.1 DD of (1 + E*)^2, the division DD) is within 17 DD of sech^2 q = 4 E* / (1 +
 * E*)^2 relatively, and |d log sech^2 x / dx| = 2 |tanh x| <= 2 gives e^theta, |theta| <= 2 eq, against
 * F = sech^2(S / c): |f - F| <= rf F, rf = 1.02 (17 DD + 2 eq) (a row with rf > 2^-60 is not refined). *
 * One row (row_ds). Logits z_v = hi_v + lo_v within ez_v (fast_logit_pair), m = max hi_v (any shift
 * is exact math: p = exp(Z_v - m) / sum exp(Z_u - m)); d_v = TwoSum(hi_v, -m) (+ lo_v: DWPlusFP) within
 * ed_v = ez_v + 1.01 DD |d_v|. t_v = exp(d_v) for d_v >= -600, else 0 within tau = 2^-865 > e^-600.
 * Against T_v = exp(Z_v - m): |t_v - T_v| <= rho T_v + tau, rho = 1.01 (max ed_v + FAST_DD_EXP)
 * (while that is <= 2^-60, else the row is not refined). S = sum t_v by Alg. 6 (positive terms:
 * each addition within DD of a partial sum <= S): |S - ST| <= rs ST, rs = 1.02 (rho + 1.01 V DD + 2 V
 * tau) as ST >= T_a >= 1/2 (d_a = lo_a). S_y = sum_(v != y) likewise, relative rs, absolute V tau.
 * p_v = t_v / S (v != y) and q = S_y / S: relative rp = 1.02 (2 rs + rho + DD), absolute 2.1 (V + 1)
 * tau. The options (refine_opts, once per case; tier 0's lce_row_opts): e (lce_case_smoothing, a
 * double), 1 - e exact, ev = e / V within DD, SWV = sum_v w_v (class weights, fp32) within 1.01 V DD,
 * k = ev SWV within rk = 1.01 (2 DD + 1.01 V DD); g = grad_output (sum, none) or grad_output / SW
 * (mean; SW = sum of the valid tokens' w_y within 1.01 N DD): relative rg. Per v the terms t1 = cy p_v
 * (cy = (1 - e) w_y, within DD) or -cy q, t2 = k p_v, t3 = -ev w_v, each within 1.01 (rp + rk + 2 DD)
 * relatively, summed by two Alg. 6 additions (2.02 DD of sum |t_i|), times g (DWTimesDW3): with
 * M_v = 1.01 |g| sum |t_i|,
 *     |ds_v - DS_v| <= rel M_v + ab,  rel = 1.03 (rp + rk + rg + 5 DD),
 * ab = |g| 2.3 (V + 1) tau (|cy| + |k|), plus 3 2^-799 |g| when a term was dropped as tiny (below
 * 2^-800), 2^-799 when M_v itself is (ds_v is then 0) and (|g| + 1) 2^-1000 for low parts rounded
 * in the subnormal range. Without the options this is g (p_v - [v = y]).
 * z-loss (lambda > 0, a double taken as exact): lse = m + log_dd(S) (DWPlusFP): against the exact
 * LSE = m + log ST, |log S - log ST| <= 1.01 rs (rs < 2^-58), so lse is within el' = 1.01 rs + el + DD |lse|.
 * The row's K = k + 2 lambda lse (2 lambda exact, DWTimesFP3, Alg. 6) can cancel to nothing (lse < 0),
 * so its error is taken against KM = 1.01 (|k| + 2 lambda (|lse| + 1)): rk, el' and three DD, each at
 * most that fraction of KM, give rkz = 1.01 (rk + el' + 3 DD) and |K - K*| <= rkz KM; t2 = K p_v is then
 * within 1.01 (rkz + rp + 2 DD) of p_v KM, and M_v counts 1.01 p_v KM in place of |t2| (rel with rkz
 * in place of rk; ab with KM in place of |k|).
 * Softcap: ds_v = (g inner) f_v (DWTimesDW3) against DS_v F_v, f_v <= 1 + 17 DD, F_v <= 1:
 * |ds_v - DS_v| <= (rel + 1.01 (rf + DD)) M'_v + 1.01 ab + 2^-1000 with M'_v = 1.01 f_v M_v (the
 * error of g inner scaled by f_v, f's error on |g inner| <= M_v (1 + rel) + ab, the product's DD, a
 * low part in the subnormal range).
 *
 * One element (refine_dot). x = prior + sum_i ds_i c_i over count terms (c_i dtype values, ds_i
 * within rel_i M_i + ab_i): each product by DWTimesFP3, each sum by Alg. 6, within DD of their
 * results, which are at most |prior| + A (A = sum |ds_i c_i|, 1.01 for ds's own error); products below
 * 2^-800 dropped. |x - X| <= sum (rel_i M_i + ab_i) |c_i| + 1.02 DD (count + 1) (|prior| + A) + dropped +
 * (count + 1) 2^-1000 (roundings in the subnormal range of the low parts), every double sum of
 * non-negative terms made an upper bound by lce_sum_bound; the element's value is RN(h + l), so its
 * bound adds u |value|. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lce_fast_internal.h"
#include "lce_parallel.h"
#include "lce_progress.h"

#define REFINE_CLONES LCE_TARGET_CLONES("fma", "default")

#define DD 0x1p-100
#define DD_TINY 0x1p-800 /* below: dropped, counted as error */
#define EXP_TAU 0x1p-865 /* > e^-600: an exp not computed */

/* ---- exp ---------------------------------------------------------------------------------------- */

enum { EXP_TABLE = 1024 };
static lce_dd C3, T[EXP_TABLE]; /* 1/6; 2^(j/1024) */
static double W[4], L1, L2, L3; /* the doubles nearest 1/24, 1/120, 1/720, 1/5040; ln 2 / 1024 in parts */
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* v's leading double-double at 53 + 53 bits, v changed to the remainder. */
static lce_dd take_dd(mpfr_t v) {
  lce_dd r;
  r.h = mpfr_get_d(v, MPFR_RNDN);
  mpfr_sub_d(v, v, r.h, MPFR_RNDN);
  r.l = mpfr_get_d(v, MPFR_RNDN);
  return r;
}

static void init_constants(void) {
  mpfr_t v, t;
  mpfr_inits2(320, v, t, (mpfr_ptr)0);
  mpfr_set_ui(v, 1, MPFR_RNDN);
  mpfr_div_ui(v, v, 6, MPFR_RNDN);
  C3 = take_dd(v);
  static const unsigned long FACT[4] = {24, 120, 720, 5040};
  for (int i = 0; i < 4; i++) W[i] = 1.0 / (double)FACT[i]; /* the exact integers, one rounding */
  for (int j = 0; j < EXP_TABLE; j++) {
    mpfr_set_ui_2exp(v, (unsigned long)j, -10, MPFR_RNDN);
    mpfr_exp2(v, v, MPFR_RNDN);
    T[j] = take_dd(v);
  }
  mpfr_const_log2(v, MPFR_RNDN);
  mpfr_div_2ui(v, v, 10, MPFR_RNDN);
  mpfr_set_prec(t, 32);
  mpfr_set(t, v, MPFR_RNDN), L1 = mpfr_get_d(t, MPFR_RNDN), mpfr_sub_d(v, v, L1, MPFR_RNDN);
  mpfr_set(t, v, MPFR_RNDN), L2 = mpfr_get_d(t, MPFR_RNDN), mpfr_sub_d(v, v, L2, MPFR_RNDN);
  L3 = mpfr_get_d(v, MPFR_RNDN);
  mpfr_clears(v, t, (mpfr_ptr)0);
}

REFINE_CLONES double fast_exp_dd(double hi, double lo, double *out_lo) {
  pthread_once(&once, init_constants);
  const double k = nearbyint(hi * 0x1.71547652b82fep+10); /* 1024 / ln 2 */
  lce_dd r = lce_dd_sum(hi, -k * L1);
  r = lce_dd_add_d(r, -k * L2);
  r = lce_dd_add_d(r, lo);
  r = lce_dd_add_d(r, -k * L3);
  const double w = W[0] + r.h * (W[1] + r.h * (W[2] + r.h * W[3]));
  lce_dd y = lce_dd_add(C3, lce_dd_mul_d(r, w));
  y = lce_dd_add_d(lce_dd_mul(r, y), 0.5);
  y = lce_dd_add_d(lce_dd_mul(r, y), 1.0);
  y = lce_dd_add_d(lce_dd_mul(r, y), 1.0);
  const int64_t ki = (int64_t)k, j = ((ki % EXP_TABLE) + EXP_TABLE) % EXP_TABLE;
  const int e = (int)((ki - j) / EXP_TABLE);
  y = lce_dd_mul(T[j], y);
  const double scale = lce_pow2(e); /* -867 <= e <= 0: a normal power of two; the products round as ldexp does */
  *out_lo = y.l * scale;
  return y.h * scale;
}

/* log(s), 1/2 <= s <= 2^800, within *err (log above); 0 when the starting point is too far off. */
REFINE_CLONES static int log_dd(lce_dd s, lce_dd *y, double *err) {
  const double y0 = log(s.h);
  lce_dd e;
  e.h = fast_exp_dd(-y0, 0.0, &e.l);
  const lce_dd r = lce_dd_add(lce_dd_mul(s, e), (lce_dd){-1.0, 0.0});
  const double rb = lce_add_up(lce_mul_up(1.01, fabs(r.h)), 0x1p-90);
  if (!(rb <= 0x1p-20)) return 0;
  *y = lce_dd_add_d(r, y0);
  double el = lce_add_up(lce_mul_up(5.2 * DD, 1.0 + rb), lce_mul_up(lce_mul_up(0.51, rb), rb));
  *err = lce_add_up(el, lce_mul_up(DD, lce_add_up(fabs(r.h), fabs(y->h))));
  return 1;
}

/* Softcap c of logit *z within *ez, in place (Softcap above): *z = c tanh(z / c) within the new *ez,
 * *f = sech^2(z / c); *rf raised to f's relative bound. 0 when |z / c| > 300. */
REFINE_CLONES static int softcap_dd(double c, lce_dd *z, double *ez, lce_dd *f, double *rf) {
  const lce_dd q = lce_dd_div(*z, (lce_dd){c, 0.0});
  const double aq = fabs(q.h);
  if (!(aq <= 300.0)) return 0;
  const int neg = q.h < 0.0;
  const lce_dd x = neg ? (lce_dd){2.0 * q.h, 2.0 * q.l} : (lce_dd){-2.0 * q.h, -2.0 * q.l}; /* -2 |q|, exact */
  lce_dd e;
  e.h = fast_exp_dd(x.h, x.l, &e.l);
  const lce_dd num = lce_dd_add((lce_dd){1.0, 0.0}, (lce_dd){-e.h, -e.l}), den = lce_dd_add((lce_dd){1.0, 0.0}, e);
  lce_dd t = lce_dd_div(num, den);
  if (neg) t = (lce_dd){-t.h, -t.l};
  *f = lce_dd_div((lce_dd){4.0 * e.h, 4.0 * e.l}, lce_dd_mul(den, den));
  const double eq = lce_add_up(lce_mul_up(1.01 * DD, aq), lce_next_up(*ez / c));
  *rf = fmax(*rf, lce_mul_up(1.02, lce_add_up(17.0 * DD, lce_mul_up(2.0, eq))));
  *z = lce_dd_mul_d(t, c);
  const double ec = lce_mul_up(c, lce_add_up(10.0 * DD, lce_mul_up(1.01 * DD, aq)));
  *ez = lce_add_up(lce_mul_up(1.01, lce_add_up(*ez, ec)), lce_mul_up(DD, fabs(z->h)));
  return 1;
}

/* ---- one row ------------------------------------------------------------------------------------- */

typedef struct refine_row {
  lce_dd *ds;         /* [v] */
  double *m;      /* [v] M_v */
  double rel, ab; /* |ds_v - DS_v| <= rel M_v + ab */
} refine_row;

/* The case's loss options and reduction in double-double (One row above). */
typedef struct refine_opts {
  const float *w; /* class weights, NULL: every weight 1 */
  lce_dd ome, ev, k;
  double rk;
  double lambda, softcap; /* z-loss and softcap (0: none) */
  int mean;
  lce_dd sw; /* mean's divisor */
  double rg;
} refine_opts;

static double weight(const refine_opts *o, int64_t v) { return o->w ? o->w[v] : 1.0; }

static void opts_init(const fast_refine_in *r, refine_opts *o) {
  const lce_case *c = r->c;
  const int64_t V = c->v;
  const double e = lce_case_smoothing(c);
  o->w = c->class_weights ? r->in->class_weight : NULL;
  o->ome = lce_dd_sum(1.0, -e);
  o->ev = lce_dd_div((lce_dd){e, 0.0}, (lce_dd){(double)V, 0.0});
  lce_dd swv = {0.0, 0.0}, sw = {0.0, 0.0};
  for (int64_t v = 0; v < V; v++) swv = lce_dd_add_d(swv, weight(o, v));
  o->k = lce_dd_mul(o->ev, swv);
  o->rk = e > 0.0 ? lce_mul_up(1.01, lce_add_up(2.0 * DD, lce_mul_up(1.01 * DD, (double)V))) : 0.0;
  o->lambda = lce_case_z_loss(c);
  o->softcap = c->softcap > 0.0 ? c->softcap : 0.0;
  for (int64_t n = 0; n < c->n; n++)
    if (r->in->labels[n] != c->ignore_index) sw = lce_dd_add_d(sw, weight(o, r->in->labels[n]));
  o->mean = c->reduction == LCE_RED_MEAN;
  o->sw = sw;
  o->rg = o->mean ? lce_mul_up(1.01, lce_add_up(lce_mul_up(1.01 * DD, (double)c->n), DD)) : 0.0;
}

/* The token's g in double-double (lce_fast.c's token_g for the cases covered). */
static lce_dd token_g(const fast_refine_in *r, const refine_opts *o, int64_t n) {
  const lce_case *c = r->c;
  const lce_dd go = {r->in->grad_output[c->reduction == LCE_RED_NONE ? n : 0], 0.0};
  return o->mean ? lce_dd_div(go, o->sw) : go;
}

/* A product kept only from 2^-800 up (One row above); *dropped is set when it is not. */
static inline lce_dd kept(lce_dd x, int *dropped) {
  if (fabs(x.h) >= DD_TINY || x.h == 0.0) return x;
  *dropped = 1;
  return (lce_dd){0.0, 0.0};
}

/* Row n's ds (see One row above) into out from its logits' plain sums zs and magnitudes zm
 * (fast_dot_block); 0 when the row cannot be refined. t: [2 v] scratch. */
REFINE_CLONES static int row_ds(const fast_refine_in *r, const refine_opts *o, int64_t n, const double *zs,
                                const double *zl, const double *zm, lce_dd *t, refine_row *out) {
  const int64_t V = r->c->v, y = r->in->labels[n];
  lce_dd *ds = out->ds, *f = t + V; /* f: the softcap's factors */
  double m = -INFINITY, ez = 0.0, rf = 0.0;
  for (int64_t v = 0; v < V; v++) { /* the logits, kept in ds for now */
    double e;
    ds[v].h = fast_logit_pair(r->fin, n, v, zs[v], zl[v], zm[v], &ds[v].l, &e);
    if (!(fabs(ds[v].h) <= 0x1p900)) return 0;
    if (o->softcap > 0.0 && !softcap_dd(o->softcap, &ds[v], &e, &f[v], &rf)) return 0;
    m = fmax(m, ds[v].h);
    ez = fmax(ez, e);
  }
  if (!(rf <= 0x1p-60)) return 0;
  double ed = 0.0;
  int64_t dropped = 0;
  for (int64_t v = 0; v < V; v++) {
    lce_dd d = lce_dd_sum(ds[v].h, -m);
    if (ds[v].l != 0.0) d = lce_dd_add_d(d, ds[v].l), ed = fmax(ed, lce_mul_up(1.01 * DD, fabs(d.h)));
    if (d.h < -600.0) {
      t[v] = (lce_dd){0.0, 0.0}, dropped++;
      continue;
    }
    t[v].h = fast_exp_dd(d.h, d.l, &t[v].l);
  }
  const double rho = lce_mul_up(1.01, lce_add_up(lce_add_up(ez, ed), FAST_DD_EXP));
  if (!(rho <= 0x1p-60)) return 0;
  lce_dd s = {0.0, 0.0}, sy = {0.0, 0.0};
  for (int64_t v = 0; v < V; v++) {
    s = lce_dd_add(s, t[v]);
    if (v != y) sy = lce_dd_add(sy, t[v]);
  }
  const double tau = dropped ? EXP_TAU : 0.0, vd = lce_mul_up(1.01 * DD, (double)V);
  const double rs = lce_mul_up(1.02, lce_add_up(lce_add_up(rho, vd), lce_mul_up(2.0 * (double)V, tau)));
  const double rp = lce_mul_up(1.02, lce_add_up(lce_add_up(2.0 * rs, rho), DD));
  const lce_dd g = token_g(r, o, n), cy = lce_dd_mul_d(o->ome, weight(o, y));
  lce_dd k = o->k; /* the row's K (z-loss above): k, plus 2 lambda lse */
  double rk = o->rk, km = fabs(o->k.h);
  if (o->lambda > 0.0) {
    lce_dd L;
    double el;
    if (!log_dd(s, &L, &el)) return 0;
    const lce_dd lse = lce_dd_add_d(L, m);
    el = lce_add_up(lce_add_up(lce_mul_up(1.01, rs), el), lce_mul_up(DD, fabs(lse.h)));
    k = lce_dd_add(k, lce_dd_mul_d(lse, 2.0 * o->lambda));
    km = lce_mul_up(1.01, lce_add_up(km, lce_mul_up(2.0 * o->lambda, lce_add_up(fabs(lse.h), 1.0))));
    rk = lce_mul_up(1.01, lce_add_up(lce_add_up(rk, el), 3.0 * DD));
  }
  const double ga = fabs(g.h), ck = lce_add_up(fabs(cy.h), km);
  const int has_k = o->ev.h != 0.0 || o->lambda > 0.0;
  out->rel = lce_mul_up(1.03, lce_add_up(lce_add_up(rp, rk), lce_add_up(o->rg, 5.0 * DD)));
  if (o->softcap > 0.0) out->rel = lce_add_up(out->rel, lce_mul_up(1.01, lce_add_up(rf, DD)));
  out->ab = lce_mul_up(lce_mul_up(lce_mul_up(ga, 2.3), ck), lce_mul_up((double)(V + 1), tau));
  int tiny = 0, small = 0;
  for (int64_t v = 0; v < V; v++) {
    const lce_dd p = lce_dd_div(t[v], s);
    lce_dd inner = kept(lce_dd_mul(cy, v == y ? lce_dd_div(sy, s) : p), &small); /* at y: -cy (1 - p_y) = -cy q */
    if (v == y) inner = (lce_dd){-inner.h, -inner.l};
    double mag = fabs(inner.h);
    if (has_k) {
      const lce_dd t2 = kept(lce_dd_mul(k, p), &small), t3 = kept(lce_dd_mul_d(o->ev, weight(o, v)), &small);
      inner = lce_dd_add(lce_dd_add(inner, t2), (lce_dd){-t3.h, -t3.l});
      mag += (o->lambda > 0.0 ? 1.01 * fabs(p.h) * km : fabs(t2.h)) + fabs(t3.h);
    }
    out->m[v] = ga * mag * 1.01;
    if (o->softcap > 0.0) out->m[v] *= 1.01 * f[v].h;
    if (out->m[v] < DD_TINY) {
      ds[v] = (lce_dd){0.0, 0.0}, tiny = 1;
      continue;
    }
    ds[v] = lce_dd_mul(g, inner);
    if (o->softcap > 0.0) ds[v] = lce_dd_mul(ds[v], f[v]);
  }
  if (small) out->ab = lce_add_up(out->ab, lce_mul_up(3.0 * 0x1p-799, ga));
  if (tiny) out->ab = lce_add_up(out->ab, 0x1p-799);
  out->ab = lce_add_up(out->ab, lce_mul_up(lce_add_up(ga, 1.0), 0x1p-1000)); /* subnormal low parts */
  if (o->softcap > 0.0) out->ab = lce_add_up(lce_mul_up(1.01, out->ab), 0x1p-1000);
  return 1;
}

/* ---- one element --------------------------------------------------------------------------------- */

/* The running sums of one element (One element above), its terms added in order to its prior. */
typedef struct dot_acc {
  lce_dd x;
  double A, P, dropped;
} dot_acc;

static inline dot_acc dot_begin(double prior) { return (dot_acc){{prior, 0.0}, 0.0, 0.0, 0.0}; }

/* Term ds c with ds's M and its row's rel and ab. */
static inline void dot_add(dot_acc *s, lce_dd d, double m, double ci, const refine_row *rw) {
  const double mag = fabs(d.h) * fabs(ci);
  if (ci == 0.0) return; /* exactly nothing, whatever ds is */
  s->P += (rw->rel * m + rw->ab) * fabs(ci);
  s->A += mag;
  if (mag == 0.0) return; /* ds dropped as tiny: its bound ab is in P */
  if (mag < DD_TINY) {
    s->dropped += 0x1p-799;
    return;
  }
  s->x = lce_dd_add(s->x, lce_dd_mul_d(d, ci));
}

/* The element prior + (count terms) and its bound from its running sums. */
static double dot_finish(const dot_acc *s, double prior, int64_t count, double *err) {
  const double value = s->x.h + s->x.l, Au = lce_mul_up(1.01, lce_sum_bound(s->A, count));
  double e = lce_add_up(lce_mul_up(1.01, lce_sum_bound(s->P, 2 * count)),
                        lce_add_up(s->dropped, (double)(count + 1) * 0x1p-1000));
  e = lce_add_up(e, lce_mul_up(lce_mul_up(1.02 * DD, (double)(count + 1)), lce_add_up(fabs(prior), Au)));
  *err = fast_add_err(value, e, 0.0);
  return value;
}

/* d_hidden[n, k] = sum_v ds_nv W_vk of row n's undecided elements; returns how many it decided. */
REFINE_CLONES static int64_t refine_hidden_row(const fast_refine_in *r, lce_oracle_result *res, int64_t n,
                                               const refine_row *row) {
  const int64_t H = r->c->h, V = r->c->v;
  lce_ref_output *dh = &res->out[LCE_OUT_D_HIDDEN];
  int64_t decided = 0;
  for (int64_t k = 0; k < H; k++) {
    const int64_t i = n * H + k;
    if (dh->decisive[i]) continue;
    dot_acc s = dot_begin(0.0);
    for (int64_t v = 0; v < V; v++) dot_add(&s, row->ds[v], row->m[v], r->fin->w[v * H + k], row);
    double err, value = dot_finish(&s, 0.0, V, &err);
    fast_put(r->c, res, LCE_OUT_D_HIDDEN, i, value, err, dh->mag[i], dh->emag[i]);
    decided += dh->decisive[i];
  }
  return decided;
}

/* Vocab row j's undecided d_weight elements (their indices at, running sums acc): the terms of the
 * rows [a0, a1) of the block (act: their tokens, rows: their ds, from a0), in token order. */
REFINE_CLONES static void refine_weight_terms(const fast_refine_in *r, int64_t j, const int64_t *at, dot_acc *acc,
                                              int64_t count, const int64_t *act, int64_t a0, int64_t a1,
                                              const refine_row *rows) {
  const int64_t H = r->c->h;
  for (int64_t e = 0; e < count; e++) {
    const int64_t k = at[e] - j * H;
    for (int64_t a = a0; a < a1; a++) {
      const refine_row *rw = &rows[a - a0];
      dot_add(&acc[e], rw->ds[j], rw->m[j], r->fin->hidden[act[a] * H + k], rw);
    }
  }
}

/* ---- the step ------------------------------------------------------------------------------------ */

static int covered(const fast_refine_in *r) {
  const lce_case *c = r->c;
  const int64_t N = c->n, H = c->h, V = c->v;
  for (int64_t i = 0; i < N * H; i++)
    if (!isfinite(r->fin->hidden[i])) return 0;
  for (int64_t i = 0; i < V * H; i++)
    if (!isfinite(r->fin->w[i])) return 0;
  return 1;
}

/* The undecided d_weight elements by vocab row: their indices (ascending) and where row j's begin
 * (start[j], start[V] = their count), with a running sum each; 0 when they do not fit in memory
 * (they stay undecided). */
typedef struct weight_list {
  int64_t count, *start, *at;
  dot_acc *acc;
} weight_list;

static int weight_list_make(const lce_ref_output *dw, const float *prior, int64_t V, int64_t H, weight_list *l) {
  memset(l, 0, sizeof *l);
  int64_t count = 0;
  for (int64_t i = 0; i < V * H; i++) count += !dw->decisive[i];
  const double bytes = (double)count * (sizeof(int64_t) + sizeof(dot_acc)) + (double)(V + 1) * sizeof(int64_t);
  if (bytes > 0.5 * lce_available_memory()) return 0;
  l->count = count;
  l->start = malloc((size_t)(V + 1) * sizeof *l->start);
  l->at = malloc((size_t)(count + 1) * sizeof *l->at);
  l->acc = malloc((size_t)(count + 1) * sizeof *l->acc);
  if (l->start == NULL || l->at == NULL || l->acc == NULL) return 0;
  for (int64_t j = 0, e = 0; j < V; j++) {
    l->start[j] = e;
    for (int64_t i = j * H; i < (j + 1) * H; i++)
      if (!dw->decisive[i]) l->acc[e] = dot_begin(prior[i]), l->at[e++] = i;
  }
  l->start[V] = count;
  return 1;
}

static void weight_list_free(weight_list *l) { free(l->start), free(l->at), free(l->acc); }

/* The needed rows go in blocks whose ds, M and logit sums take about 512 MiB (at least one row; W is
 * read from memory once per block): each
 * block's logit sums are computed together (fast_dot_block), its rows in parallel, their d_hidden elements refined, and their terms added to the running
 * sums of the undecided d_weight elements in parallel over vocab rows. Every element takes its terms
 * in token order, so the bits do not depend on the block or the thread count; memory is the block
 * and the undecided elements' running sums, never rows * V. */
int64_t fast_refine(const fast_refine_in *r, lce_oracle_result *res) {
  const lce_case *c = r->c;
  const int64_t N = c->n, H = c->h, V = c->v;
  lce_ref_output *dh = &res->out[LCE_OUT_D_HIDDEN], *dw = &res->out[LCE_OUT_D_WEIGHT];
  int any_dw = 0, any = 0;
  for (int64_t i = 0; i < V * H && !any_dw; i++) any_dw = !dw->decisive[i];
  for (int64_t i = 0; i < N * H && !any; i++) any = !dh->decisive[i];
  if (!(any || any_dw || r->all) || !covered(r)) return 0;
  if (r->all) { /* every element not exact goes through the step (lce_fast_options.refine_all) */
    for (int64_t i = 0; i < V * H; i++) dw->decisive[i] &= dw->err[i] == 0.0, any_dw |= !dw->decisive[i];
    for (int64_t i = 0; i < N * H; i++) dh->decisive[i] &= dh->err[i] <= LCE_EXACT_ZERO_ERR, any |= !dh->decisive[i];
  }
  /* The rows needed: every active one for a d_weight element, else those with an undecided d_hidden. */
  unsigned char *need = calloc((size_t)N, 1);
  int64_t *act = malloc((size_t)(N + 1) * sizeof *act), rows = 0;
  for (int64_t n = 0; need && act && n < N; n++) {
    for (int64_t k = 0; k < H && r->active[n] && !need[n]; k++) need[n] = any_dw || !dh->decisive[n * H + k];
    if (need[n]) act[rows++] = n;
  }
  int64_t block = (int64_t)(512.0 * 0x1p20 / ((double)V * (sizeof(lce_dd) + 4 * sizeof(double))));
  if (block < 1) block = 1;
  if (block > rows) block = rows > 0 ? rows : 1;
  refine_row *rr = calloc((size_t)block, sizeof *rr);
  lce_dd *ds = malloc((size_t)(block * V + 1) * sizeof *ds);
  double *mm = malloc((size_t)(block * V + 1) * sizeof *mm), *zs = malloc((size_t)(block * V + 1) * sizeof *zs),
         *zl = malloc((size_t)(block * V + 1) * sizeof *zl), *zm = malloc((size_t)(block * V + 1) * sizeof *zm);
  unsigned char *ok = calloc((size_t)block, 1);
  int64_t *hidden_decided = calloc((size_t)block, sizeof *hidden_decided), decided = 0;
  weight_list wl = {0, NULL, NULL, NULL};
  if (need == NULL || act == NULL || rr == NULL || ds == NULL || mm == NULL || zs == NULL || zl == NULL || zm == NULL || ok == NULL ||
      hidden_decided == NULL)
    goto done;
  const float *prior = lce_output_weight_prior(c, r->in);
  int weights = any_dw && weight_list_make(dw, prior, V, H, &wl);
  for (int64_t b = 0; b < block; b++) rr[b].ds = ds + b * V, rr[b].m = mm + b * V;
  refine_opts opts;
  opts_init(r, &opts);
  lce_progress progress; /* a production case refines every token row again: minutes */
  lce_progress_start(&progress, "tier 1 refine rows", (double)rows);
  for (int64_t a0 = 0; a0 < rows; a0 += block) {
    const int64_t a1 = a0 + block < rows ? a0 + block : rows;
    lce_progress_step(&progress, (double)a0);
    fast_dot_block(r->fin, act + a0, a1 - a0, zs, zl, zm);
    LCE_PARALLEL_FOR_IF(a1 - a0 > 1 && (a1 - a0) * V >= 4096)
    for (int64_t a = a0; a < a1; a++) {
      lce_dd *t = malloc((size_t)(2 * V) * sizeof *t);
      ok[a - a0] = t != NULL && row_ds(r, &opts, act[a], zs + (a - a0) * V, zl + (a - a0) * V, zm + (a - a0) * V, t, &rr[a - a0]);
      free(t);
      hidden_decided[a - a0] = ok[a - a0] ? refine_hidden_row(r, res, act[a], &rr[a - a0]) : 0;
    }
    for (int64_t a = a0; a < a1; a++) weights &= ok[a - a0], decided += hidden_decided[a - a0];
    if (!weights) continue;
    LCE_PARALLEL_FOR_IF(V > 1 && wl.count * (a1 - a0) >= 4096)
    for (int64_t j = 0; j < V; j++)
      refine_weight_terms(r, j, wl.at + wl.start[j], wl.acc + wl.start[j], wl.start[j + 1] - wl.start[j], act, a0, a1,
                          rr);
  }
  if (weights) { /* d_weight[j, k] = prior + sum_n ds_nj h_nk over the active rows */
    LCE_PARALLEL_FOR_IF(wl.count * rows >= 4096)
    for (int64_t e = 0; e < wl.count; e++) {
      const int64_t i = wl.at[e];
      double err, value = dot_finish(&wl.acc[e], prior[i], rows, &err);
      fast_put(c, res, LCE_OUT_D_WEIGHT, i, value, err, dw->mag[i], dw->emag[i]);
    }
    for (int64_t e = 0; e < wl.count; e++) decided += dw->decisive[wl.at[e]];
  }
done:
  weight_list_free(&wl);
  free(need), free(act), free(rr), free(ds), free(mm), free(zs), free(zl), free(zm), free(ok), free(hidden_decided);
  return decided;
}
