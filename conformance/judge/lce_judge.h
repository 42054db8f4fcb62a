/* lce_judge.h — the verdict on one subject run: class checks, then metrics, then the golden bound.
 *
 * Fixed order (STYLE.md rule 6):
 *   1. class checks: every element written (no poison NaN left), guard regions intact, NaN/±Inf
 *      positions and signs equal to the oracle's, buffers that must stay untouched bit-identical
 *      (d_embedding when untied; padded rows of d_weight), exact outputs exact (zero gradients of
 *      an all-ignored batch);
 *   2. metrics (lce_metrics.h) on decisive elements;
 *   3. each metric against its golden bound, with the % of budget used. A missing golden entry for
 *      a judged (class, dtype, output, metric) is an error, not a pass. */
#ifndef LCE_JUDGE_H
#define LCE_JUDGE_H

#include <stdio.h>

#include "lce_golden.h"
#include "lce_reference.h"

typedef struct lce_output_verdict {
  int judged;                         /* 0 when the output does not apply to the case */
  int class_ok;
  char class_msg[256];                /* first class violation, e.g. "element 17: NaN (expected finite)" */
  lce_metric_values metrics;
  int64_t inner;                      /* K of the subject's reduction, which the bounds used */
  double bound[LCE_METRIC_COUNT];
  double budget_pct[LCE_METRIC_COUNT]; /* 100 * metric / bound (|bias| for bias) */
  int metric_ok[LCE_METRIC_COUNT];
  unsigned char unbounded[LCE_METRIC_COUNT]; /* 1: its bound needs the error magnitudes the reference does
                                              * not carry (metrics.no_mags): measured, not bounded */
  int pass;
} lce_output_verdict;

typedef struct lce_verdict {
  int pass;
  lce_output_verdict out[LCE_OUT_COUNT];
  lce_output_id worst_output;  /* the output and metric with the highest budget use */
  lce_metric worst_metric;     /* (or the first class failure) */
  double worst_pct;
  int64_t inconclusive;        /* oracle elements that could not be judged */
  int unbounded;               /* metrics left unbounded for want of the reference's magnitudes */
  unsigned not_provided;       /* a bit per output the subject does not produce (lce_outputs.not_provided) */
  char summary[256];           /* "FAIL d_hidden relerr 412% of budget" / "pass (max 38% d_hidden relerr)" */
} lce_verdict;

/* Judges subject outputs out (bounded by golden class subject_class)
 * against reference ref: on the host from its per-element values, or, for a reference kept on the
 * device (LCE_REF_DEVICE), through its tier's compare. g may be NULL: class checks and metrics only,
 * no bounds (`lcecheck measure`, which feeds golden regeneration). inner[o] is the inner size K of the
 * subject's reduction producing output o (lce_subject_inner; the K of the lineark/sqrtk/condk golden
 * forms); NULL: lce_output_inner. outputs: a bit per lce_output_id to judge (0: every output that
 * applies to the case); the others are left unjudged. Returns LCE_EINVAL when a golden entry is missing; the verdict
 * itself (pass/fail) is in v. */
lce_code lce_judge(const lce_case *c, const lce_tensors *in, const lce_reference *ref, const lce_outputs *out,
                   const lce_golden *g, const char *subject_class, const int64_t *inner, unsigned outputs,
                   lce_verdict *v, lce_status *st);
/* 1 for the outputs whose errors carry the softmax denominators' fp32 running sums (term rsum): lse
 * and loss_token absolutely (lse = m + log s), the gradients through every p_v = exp(z_v - lse). */
int lce_output_has_rsum(lce_output_id o);
/* 1 for the outputs made token by token (lse, loss_token, d_hidden's rows), whose few-element term
 * counts distinct tokens only (lce_metric_values.token_share). */
int lce_output_per_token(lce_output_id o);
/* What the golden terms scale with on output ov of case c (its metrics and inner size filled). */
void lce_bound_scales_of(const lce_case *c, lce_output_id o, const lce_output_verdict *ov, lce_bound_scales *s);
/* s's tensor-core alignment ratio set to metric m's (lce_metric_values.tcx), before a bound of m. */
void lce_bound_scales_for(lce_bound_scales *s, const lce_output_verdict *ov, lce_metric m);
/* The same with ms set as the bound applier sets it: the maxscaled bound of golden g (class
 * subject_class; g may be NULL, ms then 0) at those scales. */
void lce_bound_scales_at(const lce_golden *g, const char *subject_class, const lce_case *c, lce_output_id o,
                         const lce_output_verdict *ov, lce_bound_scales *s);
/* The one bound applier: each defined metric of ov (metrics and inner filled) against the golden
 * entry of (class, lce_case_precision(c), o) at ov's scales; an undefined metric is reported, not
 * bounded; a missing entry for a defined metric is LCE_EINVAL. */
lce_code lce_bounds_apply(const lce_golden *g, const char *subject_class, const lce_case *c, lce_output_id o,
                          lce_output_verdict *ov, lce_status *st);

/* The verdict v of case c in full, each line starting with prefix: per judged output its cond, neff
 * and derived scales, then every metric with its bound and, for a model-form entry of golden g (class
 * subject_class; g may be NULL), each term's coefficient, scale and contribution (lce_explain.c). */
void lce_verdict_explain(FILE *f, const char *prefix, const lce_golden *g, const char *subject_class,
                         const lce_case *c, const lce_verdict *v);

#endif
