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
 * compares their classes.
 *
 * Its token rows and d_weight elements run on OMP_NUM_THREADS threads with the same bits for any
 * count; its memory grows with the inputs and the rows in flight, not with N·V (lce_oracle_internal.h,
 * "memory"). */
#ifndef LCE_ORACLE_H
#define LCE_ORACLE_H

#include "lce_reference_result.h"

#define LCE_ORACLE_PREC 160

/* Runs forward and backward. Rejects invalid cases or tensors with LCE_EINVAL before computing.
 * Prints nothing. */
lce_code lce_oracle_run(const lce_case *c, const lce_tensors *in, lce_oracle_result *res, lce_status *st);

#endif
