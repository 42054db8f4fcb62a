/* lce_dtype.h — the input formats (bf16, fp16, fp32) and exact conversions between them and double.
 *
 * Every dtype value is exactly representable in double, so loads are exact. Stores round once,
 * from double, with round-to-nearest-even, gradual underflow and overflow to ±Inf; NaN stays NaN
 * (quietened, sign kept). Callers that hold an unrounded MPFR value must use lce_mpfr_round_to()
 * (lce_mpfr_dtype.h) instead, because rounding to double first and then to bf16/fp16 can
 * double-round. */
#ifndef LCE_DTYPE_H
#define LCE_DTYPE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum lce_dtype { LCE_BF16 = 0, LCE_FP16 = 1, LCE_FP32 = 2, LCE_DTYPE_COUNT = 3 } lce_dtype;

const char *lce_dtype_name(lce_dtype t);         /* "bf16", "fp16", "fp32" */
int lce_dtype_parse(const char *s, lce_dtype *out); /* 1 on success, 0 if unknown */
size_t lce_dtype_size(lce_dtype t);              /* storage bytes: 2, 2, 4 */
int lce_dtype_precision(lce_dtype t);            /* significand bits incl. implicit: 8, 11, 24 */
int lce_dtype_emin(lce_dtype t);                 /* exponent of the smallest normal: -126, -14, -126 */
int lce_dtype_emax(lce_dtype t);                 /* exponent of the largest finite: 127, 15, 127 */
double lce_dtype_max(lce_dtype t);               /* largest finite value */
double lce_dtype_unit_roundoff(lce_dtype t);     /* u = 2^-precision */

/* The bit pattern of an fp32 value, and the fp32 value of a bit pattern (no conversion). Inline:
 * the GEMM models call them per product. */
static inline uint32_t lce_f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static inline float lce_f32_from_bits(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* nextafter(x, +Inf) and nextafter(x, -Inf), inline (bits): NaN and the infinity in the direction
 * of travel stay, a zero of either sign becomes the smallest subnormal of that direction. Error
 * bounds take one per operation, where libm's out-of-line nextafter was a tenth of tier 1's time. */
static inline double lce_next_up(double x) {
  if (x != x || x == (double)INFINITY) return x;
  if (x == 0.0) return 0x1p-1074;
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  b = x > 0.0 ? b + 1 : b - 1; /* a negative x moves toward zero */
  memcpy(&x, &b, sizeof x);
  return x;
}
static inline double lce_next_down(double x) { return -lce_next_up(-x); }

/* 2^e: from the bits for a normal result, ldexp outside that range (no libm call on the hot paths
 * that need powers of two per element). */
static inline double lce_pow2(int e) {
  if (e < -1022 || e > 1023) return ldexp(1.0, e);
  const uint64_t b = (uint64_t)(e + 1023) << 52;
  double x;
  memcpy(&x, &b, sizeof x);
  return x;
}

/* Bit-level conversions (round-to-nearest-even from double). */
uint16_t lce_bf16_from_double(double x);
double lce_bf16_to_double(uint16_t bits);
uint16_t lce_fp16_from_double(double x);
double lce_fp16_to_double(uint16_t bits);

/* x rounded to format t, returned as a double holding that exact value. */
double lce_round_to(lce_dtype t, double x);
/* x rounded to the binary format of precision p (bits, the implicit one included) and exponent range
 * [emin, emax]: to nearest, ties to even or (ties_away) away from zero; subnormals below emin,
 * overflow to a signed infinity; zeros, infinities and NaN returned as they are. */
double lce_round_format(double x, int p, int emin, int emax, int ties_away);

/* Element i of a buffer stored in format t. */
double lce_load(lce_dtype t, const void *buf, size_t i);
void lce_store(lce_dtype t, void *buf, size_t i, double x); /* rounds with lce_round_to */

/* Size of one unit in the last place of format t at magnitude |x| (subnormal-aware; for |x| at or
 * above the largest finite value, the ulp of the top binade). */
double lce_ulp(lce_dtype t, double x);

/* Whether an exact number known only to lie in [value - err, value + err] has a certain format-t
 * value, and which (into *rounded): err must be within 2^-12 of an ulp of t at value (so that the
 * judge's metrics, which use value itself, stay meaningful at the format's resolution), and both
 * ends of the interval, widened by one double ulp each way (so the double arithmetic cannot shrink
 * it), must round to the same format value — then so does every number between them (rounding is
 * monotone). An interval around zero rounds to -0 at one end and +0 at the other: the value 0 is
 * certain, its sign is not a class the judge checks, and *rounded takes the sign of value. The
 * oracles' decisive flag (tier 0 lce_oracle.c, tier 2 reference/gpu/lce_ref64_host.c). */
int lce_round_certain(lce_dtype t, double value, double err, double *rounded);
/* Whether the judge's metrics (relerr, bias, maxscaled, ulpfrac and the derived sums, all of which compare
 * a subject with value itself) may take an element whose exact number lies within err of value, beside the
 * elements whose rounding is certain (lce_round_certain, the oracles' decisive flag): an exact (err 0) or
 * non-finite value (the class checks judge it), or a value at least LCE_JUDGEABLE_MIN and in t's normal
 * range with err within 2^-6 of an ulp of t there, so that the reference's own error moves no element's
 * error by more than u/32 of t. Nearer underflow an element needs its certain rounding, as before this
 * rule: there the subject's output rounding, or the fp32 products and sums that make the element, take
 * fixed absolute steps (2^-149) that the error scales do not carry (fused-host campaigns at the bare
 * normal-range rule: one-logit rows whose fp32 lse of 1e-44, and of 1.2e-38 made of subnormal products,
 * failed by up to 600x). Both host and device comparisons use decisive || this (lce_metrics.c,
 * reference/gpu/lce_ref64_compare.cu); an element outside both is inconclusive. Tier 2's a-priori bound
 * rarely certifies an fp32 rounding at production shapes (err ~1e-10 of |value| on an 8192-token weight
 * gradient, above the 2^-35 lce_round_certain asks) but is well inside this. */
#define LCE_JUDGEABLE_MIN 0x1p-102 /* fp32's smallest normal times 2^24: a 2^-149 step is 2^-47 of it */
int lce_value_judgeable(lce_dtype t, double value, double err);

#endif
