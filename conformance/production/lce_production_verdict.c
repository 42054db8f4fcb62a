/* lce_production_verdict.c — the verdict of one (subject, output) at a production shape from the sums
 * the device reduced (lce_production.h): class checks first, then the metrics, then each metric against
 * the per-architecture golden, with the % of budget used (STYLE.md rule 6). No GPU needed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lce_production.h"

const char *lce_prod_verdict_name(lce_prod_verdict v) {
  static const char *const NAMES[] = {"measured", "pass", "FAIL", "CLASS FAIL", "no bound"};
  return (unsigned)v < sizeof NAMES / sizeof NAMES[0] ? NAMES[v] : "?";
}

/* Class checks: guards, non-finite positions, and for d_embedding (untied) the prior left exactly as it
 * was. 1 when they pass; otherwise 0 with the message. */
static int class_checks(lce_output_id o, const lce_prod_raw *raw, lce_prod_output_result *r) {
  if (!raw->guards_ok) {
    snprintf(r->class_msg, sizeof r->class_msg, "guard region overwritten (a write outside the output buffers)");
    return 0;
  }
  if (raw->class_mismatch > 0) {
    snprintf(r->class_msg, sizeof r->class_msg, "%lld elements with the wrong class (NaN/Inf), first at %lld",
             (long long)raw->class_mismatch, (long long)raw->first_mismatch);
    return 0;
  }
  if (o == LCE_OUT_D_EMBEDDING && raw->sum_d2 != 0.0) {
    snprintf(r->class_msg, sizeof r->class_msg, "untied: the embedding gradient changed (sum (x-prior)^2 = %.3g)",
             raw->sum_d2);
    return 0;
  }
  return 1;
}

static void metrics(const lce_prod_raw *raw, lce_prod_output_result *r) {
  const double rn2 = raw->sum_r2;
  r->compared = raw->compared;
  r->v[LCE_METRIC_RELERR] = sqrt(rn2 > 0.0 ? raw->sum_d2 / rn2 : raw->sum_d2);
  r->defined[LCE_METRIC_RELERR] = raw->compared > 0;
  r->neff = raw->sum_r4 > 0.0 ? rn2 * rn2 / raw->sum_r4 : 0.0;
  r->v[LCE_METRIC_BIAS] = rn2 > 0.0 ? raw->sum_dr / rn2 : NAN;
  r->defined[LCE_METRIC_BIAS] = rn2 > 0.0 && r->neff >= LCE_STAT_MIN_ELEMS;
  const int mags = raw->sum_emag2 >= 0.0;
  r->v[LCE_METRIC_MAXSCALED] = mags ? raw->max_scaled : NAN;
  r->defined[LCE_METRIC_MAXSCALED] = mags && raw->compared > 0;
  r->v[LCE_METRIC_ULPFRAC] = NAN; /* needs per-element ulps: not reduced on the device */
  r->cond = mags && rn2 > 0.0 ? fmax(1.0, sqrt(raw->sum_emag2 / rn2)) : 1.0;
  for (int m = 0; m < LCE_METRIC_COUNT; m++)
    if (!r->defined[m]) r->v[m] = NAN;
}

void lce_prod_judge_output(const lce_case *c, const char *golden_class, lce_output_id o, const lce_prod_raw *raw,
                           const lce_golden *g, lce_prod_output_result *r) {
  memset(r, 0, sizeof *r);
  r->output = o;
  r->inner = lce_prod_inner(golden_class, c, o);
  r->exact_only = o == LCE_OUT_D_EMBEDDING;
  for (int m = 0; m < LCE_METRIC_COUNT; m++) r->bound[m] = NAN, r->budget_pct[m] = NAN, r->v[m] = NAN;
  r->cond = 1.0;
  r->class_ok = class_checks(o, raw, r);
  if (!r->class_ok) {
    r->verdict = LCE_PROD_CLASS_FAIL;
    return;
  }
  if (r->exact_only) { /* bit-exact: nothing to measure, nothing to bound */
    r->compared = raw->compared;
    r->verdict = g ? LCE_PROD_PASS : LCE_PROD_MEASURED;
    return;
  }
  metrics(raw, r);
  if (g == NULL) {
    r->verdict = LCE_PROD_MEASURED;
    return;
  }
  int fail = 0, missing = 0;
  for (int m = 0; m < LCE_METRIC_COUNT; m++) {
    if (!r->defined[m]) continue;
    const lce_golden_entry *e = lce_golden_find(g, golden_class, lce_case_precision(c), o, (lce_metric)m);
    if (e == NULL) {
      missing += m == LCE_METRIC_RELERR || m == LCE_METRIC_BIAS; /* these two must be bounded */
      continue;
    }
    const double bound = lce_golden_bound(e, r->inner, r->cond), value = fabs(r->v[m]);
    r->bound[m] = bound;
    r->bounded[m] = 1;
    r->budget_pct[m] = bound > 0.0 ? 100.0 * value / bound : (value > 0.0 ? INFINITY : 0.0);
    fail += !(value <= bound); /* a NaN metric fails */
  }
  r->verdict = fail ? LCE_PROD_FAIL : (missing ? LCE_PROD_NO_BOUND : LCE_PROD_PASS);
}
