/* lce_metrics.h — error metrics of one subject output against the oracle's unrounded values.
 *
 * Computed over the elements the oracle marks decisive (and, for lse, valid tokens only):
 *   relerr    = ||x - r||_2 / ||r||_2                   (r == 0 everywhere: ||x||_2 / ||emag||_2,
 *                                                        or ||x||_2 when there are no terms either)
 *   bias      = <x - r, r> / <r, r>                      (signed: < 0 means the output shrinks;
 *                                                        undefined when r == 0 everywhere)
 *   ulpfrac   = fraction of well-conditioned elements (mag_i <= LCE_ULPFRAC_MAXCOND * |r_i|) with
 *               |x - r| > LCE_ULPFRAC_K ulps of the output format at r
 *   maxscaled = max_i |x_i - r_i| / emag_i              (0/0 counts as 0)
 * and the output's normwise condition cond = max(1, ||emag||_2 / ||r||_2): how much cancellation the
 * exact result hides, times how ill-conditioned its softmax rows are. mag is the sum of |terms| of
 * the final reduction, emag the first-order error scale (mag weighted by the softmax condition of
 * the rows; lce_oracle.h); ulpfrac's "no cancellation" test uses mag alone. A correct implementation's relerr and bias grow with cond (an fp32 softmax
 * cannot resolve 1 - p_y below 2^-24, so rows with p_y -> 1 have tiny gradients known only to
 * ~100%), so their golden bounds take the `cond` form a + b*cond, while ulpfrac only looks at
 * elements without cancellation.
 * Every metric comes from one lce_comparison (lce_reference_result.h), whether its sums were made
 * here from per-element values (lce_compare_host: long double with compensation, so the metric adds
 * no visible error) or on the device by a tier that keeps its reference there. */
#ifndef LCE_METRICS_H
#define LCE_METRICS_H

#include "lce_reference_result.h"

/* An element without cancellation (mag <= 1.25 |r|) of a correct implementation is within
 * 1.25 (u + fp32 terms) |r| before the final rounding and half an ulp after it: below 2 ulps of
 * its format. So ulpfrac counts elements beyond 2 ulps among those, and a correct subject scores
 * 0 there whatever the data; an accumulation bug does not. */
#define LCE_ULPFRAC_K 2.0
#define LCE_ULPFRAC_MAXCOND 1.25
/* bias and ulpfrac are statistics: over a handful of elements they measure luck, not the
 * implementation (a bias over 4 elements is as large as the relative error). Below this many
 * effective elements (participation ratio (sum r^2)^2 / sum r^4 for bias, well-conditioned
 * elements for ulpfrac) they are reported as undefined and not bounded. */
#define LCE_STAT_MIN_ELEMS 64.0

typedef enum lce_metric {
  LCE_METRIC_RELERR = 0,
  LCE_METRIC_BIAS = 1,
  LCE_METRIC_ULPFRAC = 2,
  LCE_METRIC_MAXSCALED = 3,
  LCE_METRIC_COUNT = 4
} lce_metric;

const char *lce_metric_name(lce_metric m); /* "relerr", "bias", "ulpfrac", "maxscaled" */
int lce_metric_parse(const char *s, lce_metric *out);

typedef struct lce_metric_values {
  double v[LCE_METRIC_COUNT];
  int64_t judged;      /* elements that entered the metrics */
  int64_t inconclusive;/* elements skipped because the oracle could not certify them */
  double ref_norm;     /* ||r||_2 over judged elements (non-zero norms are asserted by tests) */
  double cond;         /* max(1, ||mag||_2 / ||r||_2) over judged elements; 1 when r == 0 */
  double neff;         /* effective element count (sum r^2)^2 / sum r^4; 0 when r == 0 */
  unsigned char undefined[LCE_METRIC_COUNT]; /* 1: too few elements, value NaN, not bounded */
  int64_t well_conditioned; /* judged elements entering ulpfrac */
} lce_metric_values;

/* The sums of subject output o against per-element reference ref over the elements mask selects
 * (NULL: all); leaves cmp's class fields alone (the judge's class checks fill them). */
void lce_compare_host(const lce_case *c, const lce_outputs *out, lce_output_id o, const lce_ref_output *ref,
                      const unsigned char *mask, lce_comparison *cmp);
/* The one function from a comparison to metrics. */
void lce_metrics_from_comparison(const lce_comparison *cmp, lce_metric_values *mv);
/* lce_compare_host, then lce_metrics_from_comparison. */
void lce_metrics_compute(const lce_case *c, const lce_outputs *out, lce_output_id o,
                         const lce_ref_output *ref, const unsigned char *mask, lce_metric_values *mv);

#endif
