/* lce_mpfr_dtype.c — one correctly rounded step from an MPFR value to bf16/fp16/fp32 (see
 * lce_mpfr_dtype.h).
 *
 * MPFR emulates an IEEE format when the exponent range is set to the format's and the result is
 * passed through mpfr_check_range (overflow, underflow below the subnormal range) and
 * mpfr_subnormalize (fewer bits for subnormals). The input may lie far outside the format's range,
 * and MPFR only accepts operands inside the current range, so the value is first rounded to the
 * format's precision in the caller's (wide) range; the ternary value of that rounding travels
 * through check_range and subnormalize, which use it to avoid double rounding — a value just
 * below a subnormal midpoint that the first rounding moved onto the midpoint still goes down.
 *
 * MPFR exponents are those of a significand in [1/2, 1): a format whose smallest normal is
 * 2^emin and whose largest binade is 2^emax emulates as emin_mpfr = emin - precision + 2 (the
 * exponent of the smallest subnormal, 2^(emin - precision + 1)) and emax_mpfr = emax + 1.
 *
 * The caller's exponent range and MPFR flags are restored, so the oracle can call this between
 * its own operations without disturbing their underflow detection. */
#include "lce_mpfr_dtype.h"

#include <math.h>

/* Rounds x into y, whose precision is the format's, with the format's exponent range. */
static double round_into(lce_dtype t, mpfr_ptr y, mpfr_srcptr x) {
  const int prec = lce_dtype_precision(t);
  mpfr_flags_t saved_flags = mpfr_flags_save();
  mpfr_exp_t saved_emin = mpfr_get_emin(), saved_emax = mpfr_get_emax();

  int inex = mpfr_set(y, x, MPFR_RNDN); /* in the caller's wide range: never over/underflows */
  mpfr_set_emin(lce_dtype_emin(t) - prec + 2);
  mpfr_set_emax(lce_dtype_emax(t) + 1);
  inex = mpfr_check_range(y, inex, MPFR_RNDN);
  mpfr_subnormalize(y, inex, MPFR_RNDN);
  double r = mpfr_get_d(y, MPFR_RNDN); /* exact: every format value is a double */

  mpfr_set_emin(saved_emin);
  mpfr_set_emax(saved_emax);
  mpfr_flags_restore(saved_flags, MPFR_FLAGS_ALL);
  return r;
}

double lce_mpfr_round_to(lce_dtype t, mpfr_srcptr x) {
  if (mpfr_nan_p(x)) return mpfr_signbit(x) ? -NAN : NAN;
  if (mpfr_inf_p(x)) return mpfr_signbit(x) ? -INFINITY : INFINITY;
  if (mpfr_zero_p(x)) return mpfr_signbit(x) ? -0.0 : 0.0;
  /* Stack storage of exactly the format's precision: no allocation per call. */
  switch (t) {
    case LCE_BF16: { MPFR_DECL_INIT(y, 8); return round_into(t, y, x); }
    case LCE_FP16: { MPFR_DECL_INIT(y, 11); return round_into(t, y, x); }
    case LCE_FP32: { MPFR_DECL_INIT(y, 24); return round_into(t, y, x); }
    default: return NAN;
  }
}
