/* lce_mpfr_dtype.h — rounding an MPFR value straight to bf16/fp16/fp32 (never via double: that
 * can double-round), with the format's exponent range so subnormals and overflow come out right. */
#ifndef LCE_MPFR_DTYPE_H
#define LCE_MPFR_DTYPE_H

#include <mpfr.h>

#include "lce_dtype.h"

/* x correctly rounded (round-to-nearest-even) to format t; returned as the exact double value. */
double lce_mpfr_round_to(lce_dtype t, mpfr_srcptr x);

#endif
