/* lce_dtype.c — exact conversions between double and bf16 / fp16 / fp32 (see lce_dtype.h).
 *
 * One rounding routine serves all three formats: scale x so that the format's quantum at x's
 * binade (clamped at the subnormal quantum) becomes 1, round to an integer with rint() in the
 * default round-to-nearest-even mode, and scale back. Both scalings are exact powers of two, so
 * the only rounding is rint's, which is the correct one. Overflow follows IEEE: a result whose
 * magnitude, rounded with unbounded exponent, exceeds the largest finite value becomes ±Inf. */
#include "lce_dtype.h"

#include <math.h>
#include <string.h>

typedef struct format_info {
  const char *name;
  size_t size;
  int precision, emin, emax;
} format_info;

static const format_info FORMATS[LCE_DTYPE_COUNT] = {
    [LCE_BF16] = {"bf16", 2, 8, -126, 127},
    [LCE_FP16] = {"fp16", 2, 11, -14, 15},
    [LCE_FP32] = {"fp32", 4, 24, -126, 127},
};

const char *lce_dtype_name(lce_dtype t) { return (unsigned)t < LCE_DTYPE_COUNT ? FORMATS[t].name : "?"; }

int lce_dtype_parse(const char *s, lce_dtype *out) {
  for (int t = 0; t < LCE_DTYPE_COUNT; t++) {
    if (strcmp(s, FORMATS[t].name) == 0) {
      *out = (lce_dtype)t;
      return 1;
    }
  }
  return 0;
}

size_t lce_dtype_size(lce_dtype t) { return FORMATS[t].size; }
int lce_dtype_precision(lce_dtype t) { return FORMATS[t].precision; }
int lce_dtype_emin(lce_dtype t) { return FORMATS[t].emin; }
int lce_dtype_emax(lce_dtype t) { return FORMATS[t].emax; }
double lce_dtype_unit_roundoff(lce_dtype t) { return ldexp(1.0, -FORMATS[t].precision); }

double lce_dtype_max(lce_dtype t) {
  const format_info *f = &FORMATS[t];
  return ldexp(2.0 - ldexp(1.0, 1 - f->precision), f->emax);
}

double lce_round_format(double x, int p, int emin, int emax, int ties_away) {
  if (x == 0.0 || !isfinite(x)) return x;
  int e = ilogb(x);
  if (e < emin) e = emin;
  const int q = e - (p - 1); /* exponent of the quantum at x: scaling by it is exact, so rounding is once */
  const double y = ldexp(x, -q), r = ldexp(ties_away ? round(y) : rint(y), q); /* both keep a zero's sign */
  return fabs(r) > ldexp(2.0 - ldexp(1.0, 1 - p), emax) ? copysign(INFINITY, x) : r;
}

double lce_round_to(lce_dtype t, double x) {
  if (isnan(x)) return signbit(x) ? -NAN : NAN;
  return lce_round_format(x, FORMATS[t].precision, FORMATS[t].emin, FORMATS[t].emax, 0);
}

uint16_t lce_bf16_from_double(double x) {
  float f = (float)lce_round_to(LCE_BF16, x); /* exact: every bf16 value is a float */
  const uint32_t u = lce_f32_bits(f);
  if (isnan(f)) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN, sign kept */
  return (uint16_t)(u >> 16);
}

double lce_bf16_to_double(uint16_t bits) {
  return lce_f32_from_bits((uint32_t)bits << 16);
}

uint16_t lce_fp16_from_double(double x) {
  uint16_t sign = signbit(x) ? 0x8000u : 0u;
  if (isnan(x)) return (uint16_t)(sign | 0x7e00u);
  double r = fabs(lce_round_to(LCE_FP16, x));
  if (isinf(r)) return (uint16_t)(sign | 0x7c00u);
  if (r == 0.0) return sign;
  int e = ilogb(r);
  if (e < -14) return (uint16_t)(sign | (uint16_t)ldexp(r, 24)); /* subnormal: r / 2^-24 */
  uint16_t mant = (uint16_t)(ldexp(r, 10 - e) - 1024.0);
  return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | mant);
}

double lce_fp16_to_double(uint16_t bits) {
  double sign = (bits & 0x8000u) ? -1.0 : 1.0;
  int exp = (bits >> 10) & 0x1f;
  int mant = bits & 0x3ff;
  if (exp == 0x1f) return mant ? copysign(NAN, sign) : sign * INFINITY;
  if (exp == 0) return sign * ldexp((double)mant, -24);
  return sign * ldexp(1024.0 + mant, exp - 25);
}

double lce_load(lce_dtype t, const void *buf, size_t i) {
  switch (t) {
    case LCE_BF16: return lce_bf16_to_double(((const uint16_t *)buf)[i]);
    case LCE_FP16: return lce_fp16_to_double(((const uint16_t *)buf)[i]);
    case LCE_FP32: return ((const float *)buf)[i];
    default: return NAN;
  }
}

void lce_store(lce_dtype t, void *buf, size_t i, double x) {
  switch (t) {
    case LCE_BF16: ((uint16_t *)buf)[i] = lce_bf16_from_double(x); break;
    case LCE_FP16: ((uint16_t *)buf)[i] = lce_fp16_from_double(x); break;
    case LCE_FP32: ((float *)buf)[i] = (float)lce_round_to(LCE_FP32, x); break;
    default: break;
  }
}

double lce_ulp(lce_dtype t, double x) {
  const format_info *f = &FORMATS[t];
  int e = (x == 0.0 || isnan(x)) ? f->emin : isinf(x) ? f->emax : ilogb(x);
  if (e < f->emin) e = f->emin;
  if (e > f->emax) e = f->emax;
  return ldexp(1.0, e - (f->precision - 1));
}

int lce_round_certain(lce_dtype t, double value, double err, double *rounded) {
  if (!(err <= ldexp(lce_ulp(t, value), -12))) return 0;
  double lo = lce_round_to(t, nextafter(value - err, -INFINITY));
  double hi = lce_round_to(t, nextafter(value + err, INFINITY));
  if (!(lo == hi)) return 0;
  *rounded = lo == 0.0 ? copysign(0.0, value) : lo;
  return 1;
}
