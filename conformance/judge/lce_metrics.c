/* lce_metrics.c — error metrics of one subject output against the oracle (see lce_metrics.h).
 *
 * Every sum is a double-double (an unevaluated pair hi + lo) into which each term enters as the exact
 * value of its product (TwoProduct: p + e = a b exactly, by fma; a product of three or four factors within
 * about 2^-104 of its exact value): a d_weight of millions of elements summed naively in double would add
 * relative error ~1e-10 to the metric, and a bias of 1e-9 (a real tensor-core effect) must stay
 * measurable. The low part gathers the high parts' TwoSum errors in plain double and is folded into the
 * high part at the end of every block the caller passes (LCE_COMPARE_BLOCK, here and in the judge), so a sum
 * of n terms is within about n b 2^-106 (b the block length) of their exact sum, relative to the largest
 * magnitude a partial sum reaches, and rounds once at the end: the double nearest the exact sum unless
 * that lies within this distance of a tie, so the same bits in any order of the elements but with that
 * small chance. (Without the fold the low part's own roundings grow as n^2 2^-106: 0.04 ulp at n = 10^8.)
 * In double arithmetic without branches: long double would run on the x87 unit, several times slower,
 * and this loop sees every element. Elements whose oracle value is non-finite in the output format are
 * left to the class checks (their metric would be Inf - Inf); a subject value
 * that is non-finite where the oracle is finite makes the metrics infinite (bias NaN: its sign is
 * meaningless), so no bound can pass it even if a caller skipped the class checks. */
#include "lce_metrics.h"

#include "lce_dd.h"

#include <math.h>
#include <string.h>

static const char *const METRIC_NAMES[LCE_METRIC_COUNT] = {"relerr", "bias", "ulpfrac", "maxscaled"};

const char *lce_metric_name(lce_metric m) {
  return (unsigned)m < LCE_METRIC_COUNT ? METRIC_NAMES[m] : "?";
}

int lce_metric_parse(const char *s, lce_metric *out) {
  for (int m = 0; m < LCE_METRIC_COUNT; m++)
    if (strcmp(s, METRIC_NAMES[m]) == 0) return *out = (lce_metric)m, 1;
  return 0;
}

/* The sums of lce_compare_acc, in this order. */
enum { SUM_ERR2, SUM_REF2, SUM_CROSS, SUM_MAG2, SUM_REF4, SUM_RND, SUM_FLIP, SUM_OUTR, SUM_ACC, SUM_ACCM, SUM_FLIP2, SUM_MAG4, SUM_MAGR, SUM_RND2,
       SUM_OUTS_R, SUM_OUTS_RND, SUM_OUTV, SUM_TC_A2, SUM_TC_M2, SUM_TC_AR, SUM_COUNT };
_Static_assert(SUM_COUNT == sizeof(((lce_compare_acc *)0)->s) / sizeof(double) &&
                   SUM_COUNT == sizeof(((lce_compare_acc *)0)->c) / sizeof(double),
               "lce_compare_acc holds every sum and its low part");

/* The terms are double-doubles (lce_dd.h) that only enter sums, so need not be normalized. |h + l|: */
static inline lce_dd dd_abs(lce_dd x) { return x.h < 0.0 ? (lce_dd){-x.h, -x.l} : x; }

/* (h + l) b within about 2^-105 |(h + l) b|: h b exactly, l b rounded (|l| <= ulp(h) / 2). */
static inline lce_dd dd_scale(lce_dd x, double b) {
  lce_dd p = lce_dd_prod(x.h, b);
  p.l += x.l * b;
  return p;
}

/* (h + l)^2 within about 2^-104 of it: h^2 exactly, 2 h l rounded, l^2 (2^-106 of it) dropped. */
static inline lce_dd dd_square(lce_dd x) {
  lce_dd p = lce_dd_prod(x.h, x.h);
  p.l += 2.0 * x.h * x.l;
  return p;
}

/* Sum k += x: TwoSum of the high parts, its error and x's low part into the low sum. */
static inline void acc_add(lce_compare_acc *a, int k, lce_dd x) {
  double e;
  a->s[k] = lce_two_sum(a->s[k], x.h, &e);
  a->c[k] += e + x.l;
}

/* The sum rounded once; an infinite high part (a term beyond double's range) is the sum, where its
 * low part holds Inf - Inf. */
static double acc_value(const lce_compare_acc *a, int k) { return isfinite(a->s[k]) ? a->s[k] + a->c[k] : a->s[k]; }

/* Statistics over too few elements are undefined (see LCE_STAT_MIN_ELEMS); so is bias where r == 0
 * everywhere (neff 0) and ulpfrac without per-element ulps (well_conditioned 0). */
static void mark_undefined(lce_metric_values *mv) {
  if (mv->neff < LCE_STAT_MIN_ELEMS) mv->undefined[LCE_METRIC_BIAS] = 1, mv->v[LCE_METRIC_BIAS] = NAN;
  if ((double)mv->well_conditioned < LCE_STAT_MIN_ELEMS)
    mv->undefined[LCE_METRIC_ULPFRAC] = 1, mv->v[LCE_METRIC_ULPFRAC] = NAN;
}

void lce_metrics_undefined(lce_metric_values *mv) {
  for (int m = 0; m < LCE_METRIC_COUNT; m++) mv->undefined[m] = 1, mv->v[m] = NAN;
}

void lce_compare_begin(lce_compare_acc *acc, const lce_ref_output *ref, lce_comparison *cmp) {
  memset(acc, 0, sizeof *acc);
  cmp->judged = cmp->inconclusive = cmp->well_conditioned = cmp->beyond_ulps = 0;
  cmp->has_emag = cmp->has_ulps = 1;
  cmp->has_rnd = ref->rnd != NULL;
  cmp->has_tcex = ref->tcex != NULL;
  cmp->subject_nonfinite = 0;
}

/* Where p sits among the output format's rounding boundaries, R(p) = rounded: the distance to the
 * nearer boundary (the midpoints between R(p) and its neighbours, whose spacing differs on either side
 * of a power of two), and the larger spacing, the place an element moves by when it crosses one. */
typedef struct boundary {
  double dist, place;
} boundary;

static boundary boundary_at(lce_dtype fmt, double p, double rounded) {
  const double a = fabs(rounded), e = fabs(p) - a;
  const double above = lce_ulp(fmt, a), below = a > 0.0 ? lce_ulp(fmt, a * (1.0 - 0x1p-40)) : above;
  return (boundary){fmin(above / 2 - e, below / 2 + e), fmax(above, below)};
}

/* fma inline where the CPU has it (lce_dd.h): TwoProduct is most of this loop. */
LCE_TARGET_CLONES("fma", "default")
void lce_compare_block(const lce_case *c, lce_output_id o, const double *x, int64_t i0, int64_t i1,
                       const lce_ref_output *ref, const unsigned char *mask, lce_compare_acc *acc, lce_comparison *cmp) {
  const lce_dtype fmt = lce_output_format(c, o);
  double maxscaled = acc->maxscaled;
  /* How far a correct kernel's element may sit from r or rnd before its output rounding (term outv,
   * lce_kernel_reach): its output rounding can differ from R(r) or R(rnd) only where r or rnd sits within
   * D_i of a boundary. */
  double d_pertok, d_acc;
  lce_kernel_reach(c, o, &d_pertok, &d_acc);
  for (int64_t i = i0; i < i1; i++) {
    if (mask != NULL && !mask[i]) continue;
    if (!ref->decisive[i] && !lce_value_judgeable(fmt, ref->value[i], ref->err[i])) {
      cmp->inconclusive++;
      continue;
    }
    if (!isfinite(ref->rounded[i]) || !isfinite(ref->value[i])) continue; /* class checks judge it */
    const double xi = x[i - i0], r = ref->value[i], ar = fabs(r);
    cmp->judged++;
    int well = ref->mag[i] <= LCE_ULPFRAC_MAXCOND * ar;
    double emag = ref->emag ? ref->emag[i] : ref->mag[i];
    cmp->well_conditioned += well;
    const lce_dd emag2 = lce_dd_prod(emag, emag);
    acc_add(acc, SUM_MAG2, emag2);
    acc_add(acc, SUM_MAG4, dd_square(emag2));
    if (!isfinite(xi)) {
      cmp->subject_nonfinite = 1;
      cmp->beyond_ulps += well;
      continue;
    }
    const lce_dd d = lce_dd_sum(xi, -r), r2 = lce_dd_prod(r, r);
    acc_add(acc, SUM_ERR2, dd_square(d));
    acc_add(acc, SUM_REF2, r2);
    acc_add(acc, SUM_REF4, dd_square(r2));
    acc_add(acc, SUM_CROSS, dd_scale(d, r));
    if (cmp->has_rnd) {
      const lce_dd dr = lce_dd_sum(ref->rnd[i], -r);
      acc_add(acc, SUM_RND, dd_scale(dr, r));
      acc_add(acc, SUM_RND2, dd_square(dr));
    }
    if (cmp->has_rnd && ref->flip != NULL) {
      acc_add(acc, SUM_FLIP, lce_dd_prod(ref->flip[i], ar));
      acc_add(acc, SUM_FLIP2, lce_dd_prod(ref->flip[i], ref->flip[i]));
    }
    const double m = ref->mag[i] > 0x1p-126 ? ref->mag[i] : 0x1p-126; /* an fp32 rounding's scale (acc, outv) */
    if (cmp->has_rnd) { /* the output rounding at r or at rnd, whichever is larger (lce_metrics.h, outr_bias) */
      const double rnd_rounded = lce_round_to(fmt, ref->rnd[i]);
      const double at_rnd = fabs(rnd_rounded - ref->rnd[i]); /* beyond the format: a class check's */
      const lce_dd out_r = lce_dd_sum(ref->rounded[i], -r), at_r = dd_abs(out_r);
      const int rnd_larger = isfinite(at_rnd) && (at_rnd > at_r.h || (at_rnd == at_r.h && at_r.l < 0.0));
      acc_add(acc, SUM_OUTR, rnd_larger ? lce_dd_prod(at_rnd, ar) : dd_scale(at_r, ar));
      /* The same roundings signed (outs_*), and the variance of the ones the kernel's own error can
       * change (outv_bias): an element within D_i of a boundary (at r or at rnd) may move by one place. */
      acc_add(acc, SUM_OUTS_R, dd_scale(out_r, r));
      if (isfinite(at_rnd)) acc_add(acc, SUM_OUTS_RND, dd_scale(lce_dd_sum(rnd_rounded, -ref->rnd[i]), r));
      const boundary at_r_b = boundary_at(fmt, r, ref->rounded[i]);
      const boundary at_rnd_b = isfinite(at_rnd) ? boundary_at(fmt, ref->rnd[i], rnd_rounded) : at_r_b;
      const double reach = (ref->flip != NULL ? ref->flip[i] : 0.0) + d_pertok * ref->mag[i] + d_acc * m;
      if (at_r_b.dist <= reach || at_rnd_b.dist <= reach) {
        const double place = fmax(at_r_b.place, at_rnd_b.place); /* a power of two */
        acc_add(acc, SUM_OUTV, dd_square(lce_dd_prod(place, r)));
      }
    }
    if (cmp->has_rnd) { /* an fp32 rounding errs by u32 of its result, and by u32 2^-126 below the normal range */
      acc_add(acc, SUM_ACC, dd_square(lce_dd_prod(m, r)));
      acc_add(acc, SUM_ACCM, lce_dd_prod(m, m));
    }
    if (cmp->has_rnd || cmp->has_tcex) acc_add(acc, SUM_MAGR, lce_dd_prod(ref->mag[i], ar));
    if (cmp->has_tcex) { /* the magnitude the tensor cores align against, a = mag + tcex (lce_metric_values.tcx) */
      const double mg = ref->mag[i], a = mg + ref->tcex[i];
      acc_add(acc, SUM_TC_A2, lce_dd_prod(a, a));
      acc_add(acc, SUM_TC_M2, lce_dd_prod(mg, mg));
      acc_add(acc, SUM_TC_AR, lce_dd_prod(a, ar));
      if (mg > 0.0 && a / mg > acc->tc_max) acc->tc_max = a / mg;
    }
    /* In ulps of the larger magnitude's binade (lce_metrics.h): an r just below a power of two whose
     * result rounds above it is measured in the ulps the result was rounded to. */
    const lce_dd ad = dd_abs(d);
    const double ulps = LCE_ULPFRAC_K * lce_ulp(fmt, fmax(ar, fabs(xi)));
    if (well && (ad.h > ulps || (ad.h == ulps && ad.l > 0.0))) cmp->beyond_ulps++;
    double scaled;
    if (emag > 0) { /* |d| / emag rounded once: the quotient of the high part, corrected by its remainder */
      scaled = ad.h / emag;
      if (isfinite(scaled) && isfinite(emag)) scaled += (fma(-scaled, emag, ad.h) + ad.l) / emag;
    } else {
      scaled = ad.h == 0 ? 0 : INFINITY; /* no terms, no room for error */
    }
    if (scaled > maxscaled) maxscaled = scaled;
  }
  acc->maxscaled = maxscaled;
  for (int k = 0; k < SUM_COUNT; k++) /* the fold; an infinite sum stays one (acc_value) */
    if (isfinite(acc->s[k])) acc->s[k] = lce_two_sum(acc->s[k], acc->c[k], &acc->c[k]);
}

void lce_compare_end(const lce_compare_acc *acc, lce_comparison *cmp) {
  cmp->sum_d2 = acc_value(acc, SUM_ERR2), cmp->sum_r2 = acc_value(acc, SUM_REF2);
  cmp->sum_dr = acc_value(acc, SUM_CROSS), cmp->sum_r4 = acc_value(acc, SUM_REF4);
  cmp->sum_emag2 = acc_value(acc, SUM_MAG2), cmp->sum_emag4 = acc_value(acc, SUM_MAG4);
  cmp->max_scaled = acc->maxscaled;
  cmp->sum_rnd_r = acc_value(acc, SUM_RND), cmp->sum_flip_r = acc_value(acc, SUM_FLIP);
  cmp->sum_rnd2 = acc_value(acc, SUM_RND2);
  cmp->sum_outr_r = acc_value(acc, SUM_OUTR);
  cmp->sum_outs_r = acc_value(acc, SUM_OUTS_R), cmp->sum_outs_rnd = acc_value(acc, SUM_OUTS_RND);
  cmp->sum_outv = acc_value(acc, SUM_OUTV);
  cmp->sum_acc_r = acc_value(acc, SUM_ACC), cmp->sum_acc_m2 = acc_value(acc, SUM_ACCM);
  cmp->sum_flip2 = acc_value(acc, SUM_FLIP2);
  cmp->sum_mag_r = acc_value(acc, SUM_MAGR);
  cmp->sum_tc_a2 = acc_value(acc, SUM_TC_A2), cmp->sum_tc_m2 = acc_value(acc, SUM_TC_M2);
  cmp->sum_tc_ar = acc_value(acc, SUM_TC_AR);
  cmp->tc_max = acc->tc_max;
}

void lce_compare_host(const lce_case *c, const lce_outputs *out, lce_output_id o, const lce_ref_output *ref,
                      const unsigned char *mask, lce_comparison *cmp) {
  enum { BLOCK = LCE_COMPARE_BLOCK };
  double x[BLOCK];
  lce_compare_acc acc;
  lce_compare_begin(&acc, ref, cmp);
  for (int64_t i0 = 0; i0 < ref->count; i0 += BLOCK) {
    const int64_t i1 = i0 + BLOCK < ref->count ? i0 + BLOCK : ref->count;
    lce_output_load(c, out, o, i0, i1, x);
    lce_compare_block(c, o, x, i0, i1, ref, mask, &acc, cmp);
  }
  lce_compare_end(&acc, cmp);
}

/* sqrt(sum_sq) relative to ||r|| (rr = <r, r>), or to the error scale ||emag|| (m2) where r == 0
 * everywhere, as relerr is; 0 where both are 0. */
static double relative_norm(double sum_sq, double rr, double m2) {
  return rr > 0 ? sqrt(sum_sq / rr) : m2 > 0 ? sqrt(sum_sq / m2) : 0.0;
}

void lce_metrics_from_comparison(const lce_comparison *cmp, lce_metric_values *mv) {
  memset(mv, 0, sizeof *mv);
  const double rr = cmp->sum_r2, m2 = cmp->has_emag ? cmp->sum_emag2 : 0.0;
  mv->judged = cmp->judged;
  mv->inconclusive = cmp->inconclusive;
  mv->well_conditioned = cmp->has_ulps ? cmp->well_conditioned : 0;
  mv->ref_norm = sqrt(rr);
  mv->cond = rr > 0 && m2 > 0 ? fmax(1.0, sqrt(m2 / rr)) : 1.0;
  mv->no_mags = !cmp->has_emag;
  mv->neff = cmp->sum_r4 > 0 ? rr * rr / cmp->sum_r4 : 0.0;
  /* The same count of the error scale: where the errors can be (golden/policy.txt, ms*cond/sqrtn). */
  mv->neff_emag = cmp->has_emag && cmp->sum_emag4 > 0 ? m2 * m2 / cmp->sum_emag4 : 0.0;
  mv->rnd_bias = cmp->has_rnd && rr > 0 ? cmp->sum_rnd_r / rr : NAN;
  /* ||rnd - r|| / ||r||: the relative error of a result at rnd, which relerr sees whole where the d_logit
   * roundings scatter (|rnd_bias| <= rnd_norm; term rndn); ||rnd - r|| / ||emag|| where r == 0 everywhere. */
  mv->rnd_norm = !cmp->has_rnd ? NAN : relative_norm(cmp->sum_rnd2, rr, m2);
  /* |<e, r>| <= sum_i flip_i |r_i| for the error e the roundings a kernel's fp32 d_logit errors can
   * change make (lce_ref_output.flip): the bias they can add to rnd's. */
  mv->flip_bias = cmp->has_rnd && rr > 0 ? cmp->sum_flip_r / rr : 0.0;
  /* |<R(x) - x, r>| <= sum_i max(|R(r_i) - r_i|, |R(rnd_i) - rnd_i|) |r_i| to first order: the most the
   * output's own rounding (R, to the output's format) moves the bias of a kernel's result x, which sits
   * at r (fp32 d_logits) or at rnd (rounded d_logits) up to its fp32 sums (term outr). */
  mv->outr_bias = cmp->has_rnd && rr > 0 ? cmp->sum_outr_r / rr : 0.0;
  /* The same roundings signed: a kernel at R(r) has bias outs_r, one at R(rnd) rnd_bias + outs_rnd, up
   * to the output roundings its own error (|delta_i| <= D_i) changes: only where r_i or rnd_i sits within
   * D_i of a boundary, by one place; those crossings follow delta's sign, which the GEMM's operands
   * scatter between elements, so their sum beyond its mean (which the linear terms bound) has a
   * standard deviation <= outv_bias. NaN without rnd. */
  const int outs = cmp->has_rnd && rr > 0;
  mv->outs_r = outs ? cmp->sum_outs_r / rr : NAN;
  mv->outs_rnd = outs ? cmp->sum_outs_rnd / rr : NAN;
  mv->outv_bias = outs ? sqrt(cmp->sum_outv) / rr : NAN;
  /* The fp32 accumulation of L terms per element (terms acc and accn): each rounding errs by at most
   * u32 of a partial sum, and every partial sum is at most m_i = max(mag_i, 2^-126); independent and
   * uniform, the element's error has variance <= L u32^2 m_i^2 / 3, the bias (independent elements)
   * a standard deviation <= u32 sqrt(L/3) sqrt(sum m^2 r^2) / <r, r>, and ||e|| an rms <= u32 sqrt(L/3)
   * ||m||. These are per unit of u32 sqrt(L/3); lce_bound_scales_of knows L. */
  mv->acc_bias = cmp->has_rnd && rr > 0 ? sqrt(cmp->sum_acc_r) / rr : 0.0;
  /* ||e|| <= ||flip|| for the error e the kernel's fp32 d_logit errors make (|e_i| <= flip_i): term flipn. */
  mv->flip_norm = !cmp->has_rnd ? 0.0 : relative_norm(cmp->sum_flip2, rr, m2);
  /* |<e, r>| <= u sum_i mag_i |r_i| for an error e_i within u of element i's terms, each term's own
   * rounding, all taken one way (term pertok: a token's own g applied with roundings of its own). */
  mv->mag_bias = cmp->has_rnd && rr > 0 ? cmp->sum_mag_r / rr : 0.0;
  mv->acc_norm = !cmp->has_rnd ? 0.0 : relative_norm(cmp->sum_acc_m2, rr, m2);
  /* The tensor cores' alignment ratio per metric (lce_metric_values.tcx): what their error, which scales
   * with each element's a = mag + tcex instead of mag, adds over the terms' own measure of it. */
  for (int m = 0; m < LCE_METRIC_COUNT; m++) mv->tcx[m] = 1.0;
  if (cmp->has_tcex) {
    if (cmp->sum_tc_m2 > 0) mv->tcx[LCE_METRIC_RELERR] = fmax(1.0, sqrt(cmp->sum_tc_a2 / cmp->sum_tc_m2));
    if (cmp->sum_mag_r > 0) mv->tcx[LCE_METRIC_BIAS] = fmax(1.0, cmp->sum_tc_ar / cmp->sum_mag_r);
    mv->tcx[LCE_METRIC_MAXSCALED] = fmax(1.0, cmp->tc_max);
  }
  if (!cmp->has_emag) mv->undefined[LCE_METRIC_MAXSCALED] = 1, mv->v[LCE_METRIC_MAXSCALED] = NAN;
  if (mv->judged == 0) { /* nothing to judge (e.g. lse of an all-ignored batch): no metric exists */
    lce_metrics_undefined(mv);
    return;
  }
  mv->v[LCE_METRIC_ULPFRAC] = mv->well_conditioned ? (double)cmp->beyond_ulps / (double)mv->well_conditioned : 0.0;
  if (cmp->subject_nonfinite) {
    mv->v[LCE_METRIC_RELERR] = INFINITY;
    mv->v[LCE_METRIC_BIAS] = NAN;
    if (cmp->has_emag) mv->v[LCE_METRIC_MAXSCALED] = INFINITY;
    mark_undefined(mv); /* the same statistics exist (or not) as for a finite subject */
    return;
  }
  /* With r == 0 everywhere (terms that cancel exactly, e.g. one vocab row with label smoothing) the
   * error is measured against the terms' scale ||emag||, and against nothing (||x - r|| = ||x||)
   * when there are no terms either; a bias (a projection on r) does not exist: undefined. */
  mv->v[LCE_METRIC_RELERR] = rr > 0 ? sqrt(cmp->sum_d2 / rr) : m2 > 0 ? sqrt(cmp->sum_d2 / m2) : sqrt(cmp->sum_d2);
  mv->v[LCE_METRIC_BIAS] = rr > 0 ? cmp->sum_dr / rr : 0.0;
  if (cmp->has_emag) mv->v[LCE_METRIC_MAXSCALED] = cmp->max_scaled;
  mark_undefined(mv);
}
