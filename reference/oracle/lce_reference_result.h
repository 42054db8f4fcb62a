/* lce_reference_result.h — what a reference tier produces, whichever tier it is:
 *   lce_oracle_result  per-element reference values of every output but d_embedding (its prior, which
 *                      the judge checks against the inputs: lce_output_reference_count), on the host (tier 0 always,
 *                      tier 2 at shapes whose values fit the host);
 *   lce_comparison     what comparing one subject output with its reference yields, computed on the
 *                      host from per-element values (conformance/judge) or on the device from the
 *                      reference that stays there (tier 2 at production shapes). The judge turns
 *                      either into the same metrics (lce_metrics.h) and applies the same bounds. */
#ifndef LCE_REFERENCE_RESULT_H
#define LCE_REFERENCE_RESULT_H

#include "lce_case.h"
#include "lce_output.h"

/* The absolute floor of a d_logit's error scale for a token whose gradient factor has magnitude
 * g_abs and whose p_v multiplies kmag = |cy| + (e / V) sum w + 2 lambda |lse| (the row's factor
 * magnitudes), given unit = 2^emin of the case dtype: the larger of max(1, g_abs) * unit and
 * g_abs * kmag * 2^-126. A d_logit below the dtype's smallest normal errs by up to half a subnormal
 * step whatever g is, so the first never shrinks with g (lce_oracle.c says more); a kernel forms p_v
 * in fp32 before it multiplies it by g and its factors, so a p_v below fp32's range is lost whole and
 * that loss grows with g_abs kmag (a z-loss row of lse 4100 and lambda 5e-3 multiplies it by 43: the
 * second, fuzz/CAMPAIGNS.md). Every tier uses it: tiers 0 and 1 on the host, tier 2 on the device. */
#ifdef __CUDACC__
__host__ __device__
#endif
static inline double lce_dz_floor_of(double g_abs, double kmag, double unit) {
  const double base = (g_abs > 1.0 ? g_abs : 1.0) * unit, lost_p = g_abs * kmag * 0x1p-126;
  return lost_p > base ? lost_p : base;
}

/* One output's reference: value[i] is the double nearest the oracle's MPFR result,
 * err[i] >= |value[i] - exact| (includes the rounding to double), mag[i] = sum of |terms| of the
 * final reduction producing element i (for error scaled by the condition; the smoothing and z-loss
 * terms count like the cross-entropy's, and softcap's factor 1 - (z/c)^2 scales the d_logits terms), rounded[i] = the exact
 * value correctly rounded to the output's format directly from MPFR (never via double), and
 * decisive[i] = 1 when err[i] is small enough that rounded[i] is certain (the class checks use it; the
 * metrics take these and those lce_value_judgeable admits). emag[i] is the element's first-order error scale: mag weighted by the softmax condition
 * of the rows it depends on (1 + the largest logit's sum of |terms|, for gradients; equal to mag for
 * the forward outputs, whose mag already counts the logits' terms). Arrays are NULL and count 0
 * when the output does not apply to the case, and for d_embedding always. rnd[i] (gradients only, NULL where the tier does not
 * compute it): the element computed from the exact d_logits t = dz / g, each rounded to the format
 * the backward GEMMs read (the input dtype; tf32 after it), times g, everything else exact, in plain
 * double (no bound: it is the reference of the coherent d_logit rounding that every kernel storing
 * low-precision d_logits makes, lce_metric_values.rnd_bias, not a certified value). flip[i] (with rnd):
 * how far the element can move when the kernel's fp32 d_logits, each within a modelled error delta of
 * the exact t, round to other neighbours than t does: sum over its terms of |g| (R(t + delta) -
 * R(t - delta)) times the other operand's magnitude (R the rounding rnd applies; lce_fast_rnd.c).
 * tcex[i] (NULL where the case has no subnormal tensor-core operand, for loss, or where the tier does not
 * compute it: tier 1 computes it, tier 0 takes tier 1's, tier 2 has none): how much
 * mag[i] grows when every tensor-core operand read from the inputs (hidden and weight, in the format
 * the GEMMs read) is taken at its format's smallest normal where it is subnormal, a(x) = max(|x|,
 * 2^emin) for x != 0: a Hopper MMA step aligns a product at its operands' exponents clamped to emin,
 * so it truncates a product with a subnormal operand against a(x) a(y), not |x y| (golden/sm_90/
 * policy.txt, the tensor-core terms; lce_fast_align.c). */
typedef struct lce_ref_output {
  int64_t count;
  double *value;
  double *err;
  double *mag;
  double *emag;
  double *rounded;
  unsigned char *decisive;
  double *rnd;
  double *flip;
  double *tcex;
} lce_ref_output;

typedef struct lce_oracle_result {
  lce_ref_output out[LCE_OUT_COUNT];
  int64_t n_valid;
  int64_t decisive, total; /* over all elements of all outputs */
  int precision_bits;      /* MPFR working precision used */
  double worst_rel_err;    /* largest MPFR-level error / max(|value|, mag) over certified elements:
                            * the oracle's accuracy before the rounding to double (~1e-45) */
  int has_rsum;            /* rsum_rel was computed by the tier (tier 1 in its row pass, tier 2 on the GPU); else the judge does */
  double rsum_rel;         /* the largest lce_softmax_sum_replay over the valid tokens (the judge's term rsum) */
} lce_oracle_result;

/* Allocates every referenced output's arrays of res (lce_output_reference_count), zero arrays elsewhere; free
 * with lce_oracle_free (also after a failure). who names the tier in the out-of-memory message. */
lce_code lce_oracle_result_alloc(const lce_case *c, lce_oracle_result *res, const char *who, lce_status *st);
void lce_oracle_free(lce_oracle_result *res);

/* One output of one subject against its reference. The sums run over the judged elements: decisive or
 * lce_value_judgeable, finite reference values of the output's judged range (valid tokens for lse, real vocab rows for
 * d_weight) where the subject's class matches. */
typedef struct lce_comparison {
  int64_t judged;          /* elements in the sums */
  int64_t inconclusive;    /* elements neither decisive nor judgeable: never blamed on the subject */
  double sum_d2;           /* sum (x - r)^2 */
  double sum_r2;           /* sum r^2 */
  double sum_dr;           /* sum (x - r) r */
  double sum_r4;           /* sum r^4: bias's effective element count (sum r^2)^2 / sum r^4 */
  double sum_rnd_r;        /* sum (rnd - r) r: the rounded-d_logit reference's own bias (has_rnd) */
  double sum_rnd2;         /* sum (rnd - r)^2 (has_rnd): the term rndn's numerator squared */
  double sum_flip_r;       /* sum flip |r| (has_rnd and flip): the term flip's numerator */
  double sum_outr_r;       /* sum max(|R(r) - r|, |R(rnd) - rnd|) |r| (has_rnd): the term outr's numerator */
  double sum_outs_r;       /* sum (R(r) - r) r (has_rnd): the signed rounding of a result at r */
  double sum_outs_rnd;     /* sum (R(rnd) - rnd) r (has_rnd): the signed rounding of a result at rnd */
  double sum_outv;         /* sum place^2 r^2 over the elements within D of a boundary (has_rnd; lce_kernel_reach):
                            * the term outv's numerator squared */
  double sum_acc_r;        /* sum m^2 r^2, m = max(mag, 2^-126) (has_rnd): the term acc's numerator squared */
  double sum_acc_m2;       /* sum m^2 (has_rnd): the term accn's numerator squared */
  double sum_flip2;        /* sum flip^2 (has_rnd and flip): the term flipn's numerator squared */
  double sum_mag_r;        /* sum mag |r| (has_rnd or has_tcex): the term pertok's numerator, per unit of u */
  double sum_emag2;        /* sum emag^2: the output's condition ||emag|| / ||r|| */
  double sum_emag4;        /* sum emag^4: the error scale's effective element count (sum emag^2)^2 / sum emag^4;
                            * 0 from a tier that does not sum it (tier 2: the count of r is used) */
  double max_scaled;       /* max |x - r| / emag (0/0 counts as 0) */
  double sum_tc_a2, sum_tc_m2; /* with tcex (a = mag + tcex): sum a^2, sum mag^2 */
  double sum_tc_ar;        /* sum a |r| (against sum_mag_r) */
  double tc_max;           /* max a / mag over elements with mag > 0 */
  int64_t well_conditioned;/* elements without cancellation (mag <= LCE_ULPFRAC_MAXCOND |r|) */
  int64_t beyond_ulps;     /* of those, how many are more than LCE_ULPFRAC_K ulps off */
  unsigned char has_emag;  /* 0: the reference carries no error magnitudes (maxscaled and cond undefined) */
  unsigned char has_ulps;  /* 0: no per-element ulps (device comparison: ulpfrac undefined) */
  unsigned char has_rnd;   /* 1: the reference carries rnd (lce_ref_output), sum_rnd_r is set */
  unsigned char has_tcex;  /* 1: the reference carries tcex (lce_ref_output), the sum_tc_* and tc_max are set */
  unsigned char subject_nonfinite; /* a non-finite subject value where the reference is finite */
  int class_ok;            /* class checks (NaN/Inf positions, writes, untouched buffers, exact zeros) */
  char class_msg[256];     /* the first class violation */
} lce_comparison;

#endif
