/* lce_fast_refine.c — tier 1's second step (lce_fast_internal.h, fast_refine): the d_hidden and
 * d_weight elements that tier 1's double arithmetic could not decide are recomputed in
 * double-double (about 100 bits) and certified again; only what this step cannot decide goes on to
 * tier 0 (Ziv's strategy: escalate by precision steps). Those elements are nearly all gradient
 * sums with heavy cancellation, whose error in double (~13 u of their terms' magnitude, u = 2^-53)
 * is too large for lce_round_certain; here it is ~2^-86 of it. Covered: cases without softcap and
 * z-loss, with finite inputs (dz = g (cy (p - [v = y]) + k p - ev w_v), no transcendental beyond
 * exp); anything else is left to tier 0 as before.
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
 * exp (fast_exp_dd). x = hi + lo, -600 <= hi. k = nearest(hi 64 / ln 2) (|k| < 2^16), ln 2 / 64 =
 * L1 + L2 + L3 + e3 with L1, L2 of 36 bits (k L1, k L2 exact), |L3| < 2^-79, |e3| < 2^-132; r = x - k
 * ln 2 / 64 by TwoSum and three DWPlusFP, |r| <= 0.00545, within 2^-116 (k L3's rounding) + 2^-116
 * (k e3) + 3 DD 0.00545 < 2^-106. exp(r) by Horner on the degree-10 Taylor polynomial with double-double
 * coefficients 1/i! (each within 2^-106): remainder < |r|^11 / 11! 1.01 < 2^-108 relatively; each step
 * y_i = c_i + r y_(i+1) adds 2 DD + 2^-106 and scales the error carried in by |r y_(i+1) / y_i| <=
 * 0.0056, so P is within 2.03 DD + 1.01 2^-106 relatively. exp(x) = 2^(k div 64) T_(k mod 64) exp(r),
 * T_j = 2^(j/64) in double-double (within 2^-106), one DWTimesDW3, the power of two exact: in all
 * 2.03 DD + DD + 4.2 2^-106 < 4 DD = FAST_DD_EXP (test_fast checks it against MPFR).
 *
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

#include "lce_fast_internal.h"
#include "lce_parallel.h"

/* fma is exact-then-rounded wherever it runs: the clone with the FMA instruction inlines it, the
 * baseline calls libm's; the same bits. */
#define REFINE_CLONES FAST_TARGET_CLONES("fma", "default")

#define DD 0x1p-100
#define DD_TINY 0x1p-800 /* below: dropped, counted as error */
#define EXP_TAU 0x1p-865 /* > e^-600: an exp not computed */

typedef struct dd {
  double h, l;
} dd;

static inline dd dd_sum(double a, double b) {
  dd r;
  r.h = fast_two_sum(a, b, &r.l);
  return r;
}

static inline dd dd_add_d(dd x, double y) { /* DWPlusFP */
  const dd s = dd_sum(x.h, y);
  return dd_sum(s.h, x.l + s.l);
}

static inline dd dd_add(dd x, dd y) { /* AccurateDWPlusDW */
  const dd s = dd_sum(x.h, y.h), t = dd_sum(x.l, y.l);
  const dd v = dd_sum(s.h, s.l + t.h);
  return dd_sum(v.h, t.l + v.l);
}

static inline dd dd_mul_d(dd x, double y) { /* DWTimesFP3 */
  const double p = x.h * y, e = fma(x.h, y, -p);
  return dd_sum(p, fma(x.l, y, e));
}

static inline dd dd_mul(dd x, dd y) { /* DWTimesDW3 */
  const double p = x.h * y.h, e = fma(x.h, y.h, -p);
  const double t = fma(x.l, y.h, fma(x.h, y.l, x.l * y.l));
  return dd_sum(p, e + t);
}

static inline dd dd_div(dd x, dd y) {
  const double q = x.h / y.h;
  const dd qy = dd_mul_d(y, q), r = dd_add(x, (dd){-qy.h, -qy.l});
  return dd_sum(q, r.h / y.h);
}

/* ---- exp ---------------------------------------------------------------------------------------- */

enum { EXP_TERMS = 11, EXP_TABLE = 64 };
static dd C[EXP_TERMS], T[EXP_TABLE];
static double L1, L2, L3;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* v's leading double-double at 53 + 53 bits, v changed to the remainder. */
static dd take_dd(mpfr_t v) {
  dd r;
  r.h = mpfr_get_d(v, MPFR_RNDN);
  mpfr_sub_d(v, v, r.h, MPFR_RNDN);
  r.l = mpfr_get_d(v, MPFR_RNDN);
  return r;
}

static void init_constants(void) {
  mpfr_t v, t;
  mpfr_inits2(320, v, t, (mpfr_ptr)0);
  for (int i = 0; i < EXP_TERMS; i++) {
    mpfr_set_ui(v, 1, MPFR_RNDN);
    for (int j = 2; j <= i; j++) mpfr_div_ui(v, v, (unsigned long)j, MPFR_RNDN);
    C[i] = take_dd(v);
  }
  for (int j = 0; j < EXP_TABLE; j++) {
    mpfr_set_ui_2exp(v, (unsigned long)j, -6, MPFR_RNDN);
    mpfr_exp2(v, v, MPFR_RNDN);
    T[j] = take_dd(v);
  }
  mpfr_const_log2(v, MPFR_RNDN);
  mpfr_div_2ui(v, v, 6, MPFR_RNDN);
  mpfr_set_prec(t, 36);
  mpfr_set(t, v, MPFR_RNDN), L1 = mpfr_get_d(t, MPFR_RNDN), mpfr_sub_d(v, v, L1, MPFR_RNDN);
  mpfr_set(t, v, MPFR_RNDN), L2 = mpfr_get_d(t, MPFR_RNDN), mpfr_sub_d(v, v, L2, MPFR_RNDN);
  L3 = mpfr_get_d(v, MPFR_RNDN);
  mpfr_clears(v, t, (mpfr_ptr)0);
}

REFINE_CLONES double fast_exp_dd(double hi, double lo, double *out_lo) {
  pthread_once(&once, init_constants);
  const double k = nearbyint(hi * 0x1.71547652b82fep+6); /* 64 / ln 2 */
  dd r = dd_sum(hi, -k * L1);
  r = dd_add_d(r, -k * L2);
  r = dd_add_d(r, lo);
  r = dd_add_d(r, -k * L3);
  dd y = C[EXP_TERMS - 1];
  for (int i = EXP_TERMS - 2; i >= 0; i--) y = dd_add(C[i], dd_mul(r, y));
  const int64_t ki = (int64_t)k, j = ((ki % EXP_TABLE) + EXP_TABLE) % EXP_TABLE;
  const int e = (int)((ki - j) / EXP_TABLE);
  y = dd_mul(T[j], y);
  const double scale = lce_pow2(e); /* -867 <= e <= 0: a normal power of two; the products round as ldexp does */
  *out_lo = y.l * scale;
  return y.h * scale;
}

/* ---- one row ------------------------------------------------------------------------------------- */

typedef struct refine_row {
  dd *ds;         /* [v] */
  double *m;      /* [v] M_v */
  double rel, ab; /* |ds_v - DS_v| <= rel M_v + ab */
} refine_row;

/* The case's loss options and reduction in double-double (One row above). */
typedef struct refine_opts {
  const float *w; /* class weights, NULL: every weight 1 */
  dd ome, ev, k;
  double rk;
  int mean;
  dd sw; /* mean's divisor */
  double rg;
} refine_opts;

static double weight(const refine_opts *o, int64_t v) { return o->w ? o->w[v] : 1.0; }

static void opts_init(const fast_refine_in *r, refine_opts *o) {
  const lce_case *c = r->c;
  const int64_t V = c->v;
  const double e = lce_case_smoothing(c);
  o->w = c->class_weights ? r->in->class_weight : NULL;
  o->ome = dd_sum(1.0, -e);
  o->ev = dd_div((dd){e, 0.0}, (dd){(double)V, 0.0});
  dd swv = {0.0, 0.0}, sw = {0.0, 0.0};
  for (int64_t v = 0; v < V; v++) swv = dd_add_d(swv, weight(o, v));
  o->k = dd_mul(o->ev, swv);
  o->rk = e > 0.0 ? lce_mul_up(1.01, lce_add_up(2.0 * DD, lce_mul_up(1.01 * DD, (double)V))) : 0.0;
  for (int64_t n = 0; n < c->n; n++)
    if (r->in->labels[n] != c->ignore_index) sw = dd_add_d(sw, weight(o, r->in->labels[n]));
  o->mean = c->reduction == LCE_RED_MEAN;
  o->sw = sw;
  o->rg = o->mean ? lce_mul_up(1.01, lce_add_up(lce_mul_up(1.01 * DD, (double)c->n), DD)) : 0.0;
}

/* The token's g in double-double (lce_fast.c's token_g for the cases covered). */
static dd token_g(const fast_refine_in *r, const refine_opts *o, int64_t n) {
  const lce_case *c = r->c;
  const dd go = {r->in->grad_output[c->reduction == LCE_RED_NONE ? n : 0], 0.0};
  return o->mean ? dd_div(go, o->sw) : go;
}

/* A product kept only from 2^-800 up (One row above); *dropped is set when it is not. */
static inline dd kept(dd x, int *dropped) {
  if (fabs(x.h) >= DD_TINY || x.h == 0.0) return x;
  *dropped = 1;
  return (dd){0.0, 0.0};
}

/* Row n's ds (see One row above) into out; 0 when the row cannot be refined. t: [v] scratch. */
REFINE_CLONES static int row_ds(const fast_refine_in *r, const refine_opts *o, int64_t n, dd *t, refine_row *out) {
  const int64_t V = r->c->v, y = r->in->labels[n];
  dd *ds = out->ds;
  double m = -INFINITY, ez = 0.0;
  for (int64_t v = 0; v < V; v++) { /* the logits, kept in ds for now */
    double e;
    ds[v].h = fast_logit_pair(r->fin, n, v, &ds[v].l, &e);
    if (!(fabs(ds[v].h) <= 0x1p900)) return 0;
    m = fmax(m, ds[v].h);
    ez = fmax(ez, e);
  }
  double ed = 0.0;
  int64_t dropped = 0;
  for (int64_t v = 0; v < V; v++) {
    dd d = dd_sum(ds[v].h, -m);
    if (ds[v].l != 0.0) d = dd_add_d(d, ds[v].l), ed = fmax(ed, lce_mul_up(1.01 * DD, fabs(d.h)));
    if (d.h < -600.0) {
      t[v] = (dd){0.0, 0.0}, dropped++;
      continue;
    }
    t[v].h = fast_exp_dd(d.h, d.l, &t[v].l);
  }
  const double rho = lce_mul_up(1.01, lce_add_up(lce_add_up(ez, ed), FAST_DD_EXP));
  if (!(rho <= 0x1p-60)) return 0;
  dd s = {0.0, 0.0}, sy = {0.0, 0.0};
  for (int64_t v = 0; v < V; v++) {
    s = dd_add(s, t[v]);
    if (v != y) sy = dd_add(sy, t[v]);
  }
  const double tau = dropped ? EXP_TAU : 0.0, vd = lce_mul_up(1.01 * DD, (double)V);
  const double rs = lce_mul_up(1.02, lce_add_up(lce_add_up(rho, vd), lce_mul_up(2.0 * (double)V, tau)));
  const double rp = lce_mul_up(1.02, lce_add_up(lce_add_up(2.0 * rs, rho), DD));
  const dd g = token_g(r, o, n), cy = dd_mul_d(o->ome, weight(o, y));
  const double ga = fabs(g.h), ck = lce_add_up(fabs(cy.h), fabs(o->k.h));
  const int smoothing = o->ev.h != 0.0;
  out->rel = lce_mul_up(1.03, lce_add_up(lce_add_up(rp, o->rk), lce_add_up(o->rg, 5.0 * DD)));
  out->ab = lce_mul_up(lce_mul_up(lce_mul_up(ga, 2.3), ck), lce_mul_up((double)(V + 1), tau));
  int tiny = 0, small = 0;
  for (int64_t v = 0; v < V; v++) {
    const dd p = dd_div(t[v], s);
    dd inner = kept(dd_mul(cy, v == y ? dd_div(sy, s) : p), &small); /* at y: -cy (1 - p_y) = -cy q */
    if (v == y) inner = (dd){-inner.h, -inner.l};
    double mag = fabs(inner.h);
    if (smoothing) {
      const dd t2 = kept(dd_mul(o->k, p), &small), t3 = kept(dd_mul_d(o->ev, weight(o, v)), &small);
      inner = dd_add(dd_add(inner, t2), (dd){-t3.h, -t3.l});
      mag += fabs(t2.h) + fabs(t3.h);
    }
    out->m[v] = ga * mag * 1.01;
    if (out->m[v] < DD_TINY) {
      ds[v] = (dd){0.0, 0.0}, tiny = 1;
      continue;
    }
    ds[v] = dd_mul(g, inner);
  }
  if (small) out->ab = lce_add_up(out->ab, lce_mul_up(3.0 * 0x1p-799, ga));
  if (tiny) out->ab = lce_add_up(out->ab, 0x1p-799);
  out->ab = lce_add_up(out->ab, lce_mul_up(lce_add_up(ga, 1.0), 0x1p-1000)); /* subnormal low parts */
  return 1;
}

/* ---- one element --------------------------------------------------------------------------------- */

/* prior + sum_i ds[i * ds_stride] c[i * c_stride] with its bound (One element above): term i's M_i
 * is m[i * ds_stride], its rel and ab rows[i * row_stride]'s. */
REFINE_CLONES static double refine_dot(double prior, const dd *ds, const double *m, int64_t ds_stride, const double *c,
                                       int64_t c_stride, const refine_row *rows, int64_t row_stride, int64_t count,
                                       double *err) {
  dd x = {prior, 0.0};
  double A = 0.0, P = 0.0, dropped = 0.0;
  for (int64_t i = 0; i < count; i++) {
    const dd d = ds[i * ds_stride];
    const double ci = c[i * c_stride], mag = fabs(d.h) * fabs(ci);
    if (ci == 0.0) continue; /* exactly nothing, whatever ds is */
    const refine_row *rw = &rows[i * row_stride];
    P += (rw->rel * m[i * ds_stride] + rw->ab) * fabs(ci);
    A += mag;
    if (mag == 0.0) continue; /* ds dropped as tiny: its bound ab is in P */
    if (mag < DD_TINY) {
      dropped += 0x1p-799;
      continue;
    }
    x = dd_add(x, dd_mul_d(d, ci));
  }
  const double value = x.h + x.l, Au = lce_mul_up(1.01, lce_sum_bound(A, count));
  double e = lce_add_up(lce_mul_up(1.01, lce_sum_bound(P, 2 * count)), lce_add_up(dropped, (double)(count + 1) * 0x1p-1000));
  e = lce_add_up(e, lce_mul_up(lce_mul_up(1.02 * DD, (double)(count + 1)), lce_add_up(fabs(prior), Au)));
  *err = fast_add_err(value, e, 0.0);
  return value;
}

/* ---- the step ------------------------------------------------------------------------------------ */

static int covered(const fast_refine_in *r) {
  const lce_case *c = r->c;
  if (c->softcap > 0.0 || lce_case_z_loss(c) > 0.0) return 0;
  const int64_t N = c->n, H = c->h, V = c->v;
  for (int64_t i = 0; i < N * H; i++)
    if (!isfinite(r->fin->hidden[i])) return 0;
  for (int64_t i = 0; i < V * H; i++)
    if (!isfinite(r->fin->w[i])) return 0;
  return 1;
}

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
  int64_t rows = 0;
  for (int64_t n = 0; need && n < N; n++) {
    for (int64_t k = 0; k < H && r->active[n] && !need[n]; k++) need[n] = any_dw || !dh->decisive[n * H + k];
    rows += need[n];
  }
  refine_row *rr = calloc((size_t)N, sizeof *rr);
  const int fits = (double)rows * (double)V * (sizeof(dd) + sizeof(double)) <= 64.0 * 0x1p20;
  dd *ds = fits ? malloc((size_t)(rows * V + 1) * sizeof *ds) : NULL;
  double *mm = fits ? malloc((size_t)(rows * V + 1) * sizeof *mm) : NULL;
  unsigned char *ok = calloc((size_t)N, 1);
  int64_t decided = 0;
  if (need == NULL || rr == NULL || ds == NULL || mm == NULL || ok == NULL) goto done;
  for (int64_t n = 0, slot = 0; n < N; n++)
    if (need[n]) rr[n].ds = ds + slot * V, rr[n].m = mm + slot * V, slot++;
  refine_opts opts;
  opts_init(r, &opts);
  int failed = 0;
  LCE_PARALLEL_FOR_IF(rows > 1 && rows * V >= 4096)
  for (int64_t n = 0; n < N; n++) {
    if (!need[n]) continue;
    dd *t = malloc((size_t)V * sizeof *t);
    ok[n] = t != NULL && row_ds(r, &opts, n, t, &rr[n]);
    free(t);
  }
  for (int64_t n = 0; n < N; n++) failed |= need[n] && !ok[n];
  for (int64_t n = 0; n < N; n++) /* d_hidden[n, k] = sum_v ds_nv W_vk */
    for (int64_t k = 0; k < H && ok[n]; k++) {
      const int64_t i = n * H + k;
      if (dh->decisive[i]) continue;
      double err, value = refine_dot(0.0, rr[n].ds, rr[n].m, 1, r->fin->w + k, H, &rr[n], 0, V, &err);
      fast_put(c, res, LCE_OUT_D_HIDDEN, i, value, err, dh->mag[i], dh->emag[i]);
      decided += dh->decisive[i];
    }
  if (any_dw && !failed) { /* d_weight[j, k] = prior + sum_n ds_nj h_nk over the active rows */
    const float *prior = lce_output_weight_prior(c, r->in);
    int64_t *act = malloc((size_t)(rows + 1) * sizeof *act);
    dd *col = malloc((size_t)(rows + 1) * sizeof *col);
    double *mcol = malloc((size_t)(rows + 1) * sizeof *mcol), *hk = malloc((size_t)(rows + 1) * sizeof *hk);
    refine_row *cr = malloc((size_t)(rows + 1) * sizeof *cr);
    int64_t na = 0;
    for (int64_t n = 0; n < N; n++)
      if (need[n]) cr[na] = rr[n], act[na++] = n;
    for (int64_t j = 0; act && col && mcol && hk && cr && j < V; j++)
      for (int64_t k = 0, gathered = 0; k < H; k++) {
        const int64_t i = j * H + k;
        if (dw->decisive[i]) continue;
        for (int64_t a = 0; a < na; a++) {
          if (!gathered) col[a] = rr[act[a]].ds[j], mcol[a] = rr[act[a]].m[j];
          hk[a] = r->fin->hidden[act[a] * H + k];
        }
        gathered = 1;
        double err, value = refine_dot(prior[i], col, mcol, 1, hk, 1, cr, 1, na, &err);
        fast_put(c, res, LCE_OUT_D_WEIGHT, i, value, err, dw->mag[i], dw->emag[i]);
        decided += dw->decisive[i];
      }
    free(act), free(col), free(mcol), free(hk), free(cr);
  }
done:
  free(need), free(rr), free(ds), free(mm), free(ok);
  return decided;
}
