/* lce_metrics.h — error metrics of one subject output against the oracle's unrounded values. This
 * comment is the one definition of the metrics; README.md and golden/policy.txt point here.
 *
 * Computed over the elements whose reference value is accurate enough for them: decisive, or known within
 * 1/64 ulp of the output format away from underflow (lce_value_judgeable); for lse, valid tokens only:
 *   relerr    = ||x - r||_2 / ||r||_2                   (r == 0 everywhere: ||x||_2 / ||emag||_2,
 *                                                        or ||x||_2 when there are no terms either)
 *   bias      = <x - r, r> / <r, r>                      (signed: < 0 means the output shrinks;
 *                                                        undefined when r == 0 everywhere)
 *   ulpfrac   = the fraction of the elements without cancellation, mag_i <= LCE_ULPFRAC_MAXCOND * |r_i|,
 *               that are more than LCE_ULPFRAC_K ulps of the output's storage format off, |x_i - r_i| >
 *               LCE_ULPFRAC_K * ulp(max(|r_i|, |x_i|)) (the storage format, lce_output_format: the case
 *               dtype for d_hidden, fp32 for loss, loss_token, lse and the weight gradient; the larger
 *               magnitude's ulp, below)
 *   maxscaled = max_i |x_i - r_i| / emag_i              (0/0 counts as 0)
 * and the output's normwise condition cond = max(1, ||emag||_2 / ||r||_2): how much cancellation the
 * exact result hides, times how ill-conditioned its softmax rows are. mag is the sum of |terms| of
 * the final reduction, emag the first-order error scale (mag weighted by the softmax condition of
 * the rows; lce_oracle.h); ulpfrac's "no cancellation" test uses mag alone. A correct implementation's relerr and bias grow with cond (an fp32 softmax
 * cannot resolve 1 - p_y below 2^-24, so rows with p_y -> 1 have tiny gradients known only to
 * ~100%), so their golden bounds take the `cond` form a + b*cond, while ulpfrac only looks at
 * elements without cancellation.
 * Undefined metrics: bias and ulpfrac over fewer than LCE_STAT_MIN_ELEMS effective elements, every
 * metric of an output with no judged element or judged by its class checks only (the untied
 * embedding's gradient, the loss of reduction none), ulpfrac of a device comparison (no per-element
 * ulps). An undefined metric is NaN with its flag set, is not bounded, and is printed as "-" or
 * "undefined" in text and null in JSON, never as 0.
 * Every metric comes from one lce_comparison (lce_reference_result.h), whether its sums were made
 * here from per-element values (lce_compare_host: double-double sums of exact products, so the metric
 * adds no visible error) or on the device by a tier that keeps its reference there. */
#ifndef LCE_METRICS_H
#define LCE_METRICS_H

#include "lce_reference_result.h"

/* Where ulpfrac is 0 for a correct implementation, and where it is not. An element without
 * cancellation of a bf16/fp16 d_hidden (the one output stored in the case dtype) is within
 * 1.25 (u + e) |r| before its final rounding, u the dtype's unit roundoff (the d_logits rounding)
 * and e the fp32 part (golden/policy.txt: Ghid - 2u, the softmax and the sum over V). Since
 * ulp(r) > u |r|, while e <= u/5 that is below 1.5 ulps and the final rounding (half an ulp) keeps
 * it below 2: ulpfrac 0 whatever the data. The final rounding is half an ulp of the result's binade,
 * which is r's binade's next when r lies just below a power of two and the error carries the result
 * over it (fuzz: bf16 r = 0.99993, the result 1.0078125, 2.02 ulps of r's binade, 1.01 of the
 * result's): so the ulps are counted in the larger magnitude's binade, where the bound holds (1.5 ulps
 * of r's binade are at most 1.5 of the larger, plus half of the result's). Measured 0 on every bf16/fp16 d_hidden of the default
 * and wide matrices with a defined ulpfrac (147 and 1 cases, V up to 8192). The outputs stored in
 * fp32 carry errors of coarser steps before their last rounding: the weight gradient sums terms
 * whose d_logits were rounded to the dtype (2^16 fp32 ulps for bf16, 2^13 for fp16) and fp32
 * d_hidden, lse and loss_token sums over V and H (gamma_V, Dz, Dp: up to many fp32 ulps). There a
 * correct implementation's ulpfrac need not be 0 (default matrix: weight gradient up to 1 for every
 * dtype, 0.88 on the README's example; fp32 d_hidden 0.81; lse and loss_token 0 to 0.14 on the few
 * cases with enough tokens, 0.29 on the medium matrix's fp16 loss_token at H 1024, V 32000; wide
 * matrix: weight gradient 0.0005 to 0.9999). For lse, loss_token and the weight gradient the model
 * allows every element more than LCE_ULPFRAC_K ulps, so their bound is the whole output; fp32 and tf32
 * d_hidden's is measured, up to the whole output (golden/policy.txt). */
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
  int64_t inconclusive;/* elements neither decisive nor lce_value_judgeable: skipped, never blamed */
  double ref_norm;     /* ||r||_2 over judged elements (non-zero norms are asserted by tests) */
  double cond;         /* max(1, ||mag||_2 / ||r||_2) over judged elements; 1 when r == 0 or without magnitudes */
  double neff;         /* effective element count (sum r^2)^2 / sum r^4; 0 when r == 0 */
  double neff_emag;    /* the error scale's: (sum emag^2)^2 / sum emag^4; 0 without emag or its sum (tier 2) */
  double rnd_bias;     /* the bias <rnd - r, r> / <r, r> of the reference's rounded-d_logit values
                        * (lce_ref_output.rnd) over the same elements; NaN when it has none */
  double rnd_norm;     /* ||rnd - r|| / ||r|| of the same elements (||rnd - r|| / ||emag|| where r == 0
                        * everywhere); NaN when the reference has no rnd (term rndn) */
  double outr_bias;    /* sum_i max(|R(r_i) - r_i|, |R(rnd_i) - rnd_i|) |r_i| / <r, r>: the most the output's own
                        * rounding R moves the bias of a result at r or at rnd (gradients with rnd), else 0 */
  double outs_r;       /* sum_i (R(r_i) - r_i) r_i / <r, r>: the bias the output rounding gives a result at r */
  double outs_rnd;     /* sum_i (R(rnd_i) - rnd_i) r_i / <r, r>: the bias it adds to a result at rnd (both: NaN
                        * where the reference has no rnd) */
  double outv_bias;    /* sqrt(sum_i p_i^2 r_i^2) / <r, r> over the elements whose r_i or rnd_i sits within D_i of a
                        * rounding boundary of the output format, p_i the larger place there, D_i as
                        * lce_kernel_reach says: one standard deviation of the bias from the
                        * output roundings a kernel's own error can change (term outv; NaN where outs_* are) */
  double flip_bias;    /* sum_i flip_i |r_i| / <r, r> (lce_ref_output.flip): the most the roundings a
                        * kernel's fp32 d_logit errors can change move the bias from rnd_bias; else 0 */
  double acc_bias;     /* sqrt(sum_i m_i^2 r_i^2) / <r, r>, m_i = max(mag_i, 2^-126) (gradients with rnd), else 0:
                        * the bias an fp32 accumulation with roundings within u32 m_i can add, per
                        * unit of u32 sqrt(L/3) (term acc) */
  double acc_norm;     /* ||m|| / ||r|| (||m|| / ||emag|| when r == 0 everywhere; gradients with rnd), else 0:
                        * the same accumulation's normwise error per unit of u32 sqrt(L/3) (term accn; pertokn's
                        * ||m|| / ||r|| too) */
  double flip_norm;    /* ||flip|| / ||r|| (||flip|| / ||emag|| when r == 0 everywhere; gradients with rnd), else 0:
                        * the most the kernel's fp32 d_logit errors move the output normwise (term flipn) */
  double g_rel;        /* the relative error of the loss gradient g an fp32 kernel computes (term gsc; set
                        * by the judge, which has the labels and weights), else 0 */
  double token_share;  /* distinct valid tokens / valid tokens (set by the judge for the per-token outputs,
                        * lce_output_per_token), else 1: the few-element term's neff is scaled by it */
  double rsum_rel;     /* the relative error of the rows' softmax denominators summed in fp32 in row order
                        * (term rsum; set by the judge, which has the inputs), else 0 */
  double mag_bias;     /* sum_i mag_i |r_i| / <r, r> (gradients with rnd), else 0: the bias per unit of u that an
                        * error of u per term of every element can add, all taken one way; >= 1 where
                        * mag >= |r|, and large where the terms cancel (term pertok) */
  double tcx[LCE_METRIC_COUNT]; /* the tensor-core alignment ratio each metric sees (>= 1; 1 where the reference
                        * has no excess, lce_ref_output.tcex): with a = mag + tcex, relerr's ||a|| / ||mag||,
                        * bias's sum a |r| / sum mag |r|, maxscaled's max a_i / mag_i; ulpfrac's 1. The
                        * tensor-core terms (k, h, cond*h; golden/sm_90/policy.txt) scale with it */
  unsigned char undefined[LCE_METRIC_COUNT]; /* 1: too few elements, value NaN, not bounded */
  unsigned char no_mags; /* 1: the reference carries no error magnitudes (tier 2 on the device, dropped
                          * for memory): cond, maxscaled and the rnd terms do not exist, and no bound
                          * that needs them is evaluated (lce_golden_needs_mags, lce_bounds_apply) */
  int64_t well_conditioned; /* judged elements entering ulpfrac */
} lce_metric_values;

/* The sums of subject output o against per-element reference ref over the elements mask selects
 * (NULL: all); leaves cmp's class fields alone (the judge's class checks fill them). */
void lce_compare_host(const lce_case *c, const lce_outputs *out, lce_output_id o, const lce_ref_output *ref,
                      const unsigned char *mask, lce_comparison *cmp);

/* The same in steps, for a caller that loads the subject's values in blocks anyway (the judge, whose
 * class checks read the same elements): lce_compare_begin, then lce_compare_block over consecutive
 * blocks [i0, i1) in ascending order with x[i - i0] the subject's element i (lce_output_load), then
 * lce_compare_end. Every sum sees the elements in the same order and each block ends with the same fold
 * (lce_metrics.c): in blocks of LCE_COMPARE_BLOCK, as lce_compare_host's, the same bits as lce_compare_host. */
#define LCE_COMPARE_BLOCK 1024
typedef struct lce_compare_acc {
  double s[20], c[20];      /* double-double sums, high and low parts (lce_metrics.c): d^2, r^2, d r, emag^2, r^4, (rnd - r) r, flip |r|, the output rounding
                             * (term outr), m^2 r^2 and m^2 (m = max(mag, 2^-126): the accumulation terms acc and accn),
                             * flip^2, emag^4, mag |r| (term pertok), (rnd - r)^2 (term rndn), the signed output
                             * roundings at r and at rnd and their variance (terms rnds, outv), and with tcex
                             * a^2, mag^2, a |r| (a = mag + tcex: tcx, against mag |r|); lce_metrics.c's SUM_* */
  double maxscaled;
  double tc_max;            /* max a_i / mag_i (with tcex) */
} lce_compare_acc;
void lce_compare_begin(lce_compare_acc *acc, const lce_ref_output *ref, lce_comparison *cmp);
void lce_compare_block(const lce_case *c, lce_output_id o, const double *x, int64_t i0, int64_t i1,
                       const lce_ref_output *ref, const unsigned char *mask, lce_compare_acc *acc, lce_comparison *cmp);
void lce_compare_end(const lce_compare_acc *acc, lce_comparison *cmp);
/* Every metric undefined (NaN, flagged): an output with no metric, reported as undefined, never 0. */
void lce_metrics_undefined(lce_metric_values *mv);
/* The one function from a comparison to metrics. */
void lce_metrics_from_comparison(const lce_comparison *cmp, lce_metric_values *mv);

#endif
