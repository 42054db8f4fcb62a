/* lce_oracle.h — tier 0 oracle: FLCE forward and backward in MPFR, the truth every subject is
 * judged against.
 *
 * Logits are correctly rounded dot products (exact products of dtype values, exact accumulation
 * with mpfr_sum); max, exp, sum, log, softmax and the gradients are computed in MPFR at
 * LCE_ORACLE_PREC bits, and every reported element carries a rigorous absolute error bound on
 * |value - exact|. An element whose bound is not far below its output format's resolution is
 * "inconclusive": the judge must not blame a subject for it, and the oracle counts them.
 *
 * It computes the whole math of lce_case.h: tf32 input rounding, softcap, label smoothing, z-loss
 * and class weights. Non-finite inputs are not errors: the elements they reach (lce_case.h; the
 * details, e.g. that ignored tokens stay exactly 0, are in lce_oracle.c) are reported as value NaN
 * (or the non-finite prior itself), err 0, decisive, rounded the same, mag and emag 0: the judge
 * compares their classes. */
#ifndef LCE_ORACLE_H
#define LCE_ORACLE_H

#include "lce_case.h"
#include "lce_output.h"

#define LCE_ORACLE_PREC 160

/* One output's reference: value[i] is the double nearest the oracle's MPFR result,
 * err[i] >= |value[i] - exact| (includes the rounding to double), mag[i] = sum of |terms| of the
 * final reduction producing element i (for error scaled by the condition; the smoothing and z-loss
 * terms count like the cross-entropy's, and softcap's factor 1 - (z/c)^2 scales the d_logits terms), rounded[i] = the exact
 * value correctly rounded to the output's format directly from MPFR (never via double), and
 * decisive[i] = 1 when err[i] is small enough that rounded[i] is certain and the element can be
 * judged. emag[i] is the element's first-order error scale: mag weighted by the softmax condition
 * of the rows it depends on (1 + the largest logit's sum of |terms|, for gradients; equal to mag for
 * the forward outputs, whose mag already counts the logits' terms). Arrays are NULL and count 0
 * when the output does not apply to the case. */
typedef struct lce_ref_output {
  int64_t count;
  double *value;
  double *err;
  double *mag;
  double *emag;
  double *rounded;
  unsigned char *decisive;
} lce_ref_output;

typedef struct lce_oracle_result {
  lce_ref_output out[LCE_OUT_COUNT];
  int64_t n_valid;
  int64_t decisive, total; /* over all elements of all outputs */
  int precision_bits;      /* MPFR working precision used */
  double worst_rel_err;    /* largest MPFR-level error / max(|value|, mag) over certified elements:
                            * the oracle's accuracy before the rounding to double (~1e-45) */
} lce_oracle_result;

/* Runs forward and backward. Rejects invalid cases or tensors with LCE_EINVAL before computing.
 * Prints nothing. */
lce_code lce_oracle_run(const lce_case *c, const lce_tensors *in, lce_oracle_result *res, lce_status *st);
void lce_oracle_free(lce_oracle_result *res);

#endif
