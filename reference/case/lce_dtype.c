/* lce_dtype.c — exact conversions between double and bf16 / fp16 / fp32 (see lce_dtype.h).
 *
 * One rounding routine serves all three formats: scale x so that the format's quantum at x's
 * binade (clamped at the subnormal quantum) becomes 1, round to an integer to nearest even (by
 * adding and subtracting 1.5 * 2^52, which is what rint does in the default mode), and scale back.
 * Both scalings are exact powers of two, so the only rounding is the integer one, which is the
 * correct one. Exponents and powers of two come from the bits (no libm call: tier 1 rounds every
 * element of its result three times); where x is a normal number of the format the rounding is done
 * on the bits instead (lce_round_format), and fp32 is the conversion instruction (lce_round_to). Overflow follows IEEE: a result whose
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

/* The largest finite values, (2 - 2^(1 - precision)) 2^emax. */
static const double MAXIMA[LCE_DTYPE_COUNT] = {[LCE_BF16] = 0x1.fep127, [LCE_FP16] = 0x1.ffcp15, [LCE_FP32] = 0x1.fffffep127};

double lce_dtype_max(lce_dtype t) { return MAXIMA[t]; }

/* floor(log2 |x|) of a finite non-zero x, from its exponent bits (ilogb for double subnormals). */
static int binade(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  const int be = (int)((b >> 52) & 0x7ff);
  return be == 0 ? ilogb(x) : be - 1023;
}

double lce_round_format(double x, int p, int emin, int emax, int ties_away) {
  if (x == 0.0 || !isfinite(x)) return x;
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  const int be = (int)((b >> 52) & 0x7ff);
  if (be != 0 && be - 1023 >= emin && p >= 1 && p < 53) {
    /* x is normal in the format too: its quantum is that of the double's bits above the lowest
     * 53 - p, so rounding is an integer add on the magnitude's bits (to nearest even: half - 1 plus
     * the kept last bit; away: half) and a mask; a carry out of the significand moves to the next
     * binade as the rounding does. The same value as the scaling below, in a few integer steps. */
    const int drop = 53 - p;
    const uint64_t sign = b & 0x8000000000000000ull, mag = b ^ sign, half = (uint64_t)1 << (drop - 1);
    const uint64_t up = ties_away ? half : half - 1 + ((mag >> drop) & 1);
    const uint64_t rb = sign | ((mag + up) & ~(((uint64_t)1 << drop) - 1));
    double r;
    memcpy(&r, &rb, sizeof r);
    if (fabs(r) > (2.0 - lce_pow2(1 - p)) * lce_pow2(emax)) return copysign(INFINITY, x);
    return r;
  }
  int e = binade(x);
  if (e < emin) e = emin;
  const int q = e - (p - 1); /* exponent of the quantum at x: scaling by it is exact, so rounding is once */
  /* y = x / 2^q is exact and |y| < 2^p <= 2^24; to nearest even, adding and subtracting 1.5 * 2^52
   * rounds it to an integer (what rint does in the default mode, without the call). */
  const double y = x * lce_pow2(-q), magic = 0x1.8p52;
  const double r = (ties_away ? round(y) : (y + magic) - magic) * lce_pow2(q);
  if (fabs(r) > (2.0 - lce_pow2(1 - p)) * lce_pow2(emax)) return copysign(INFINITY, x);
  return r == 0.0 ? copysign(0.0, x) : r; /* a zero keeps its sign */
}

double lce_round_to(lce_dtype t, double x) {
  if (isnan(x)) return signbit(x) ? -NAN : NAN;
  /* fp32: the conversion instruction rounds to nearest even with fp32's gradual underflow, overflow
   * at max + half an ulp and the sign of a zero, in one step from the double: lce_round_format's
   * result for (24, -126, 127), bit for bit (compared on 2e8 doubles, midpoints included), in a
   * fraction of its time (it was a tenth of check --matrix default with tier 1). */
  if (t == LCE_FP32) return (double)(float)x;
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
  /* A NaN keeps its payload, as the hardware's fp16 -> fp32 conversion does (and lce_bf16_to_double):
   * the exchange door marks a runner's NaN apart from the untouched poison by its lowest payload bit. */
  if (exp == 0x1f && mant) return lce_f32_from_bits((uint32_t)(bits & 0x8000u) << 16 | 0x7f800000u | (uint32_t)mant << 13);
  if (exp == 0x1f) return sign * INFINITY;
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
  int e = (x == 0.0 || isnan(x)) ? f->emin : isinf(x) ? f->emax : binade(x);
  if (e < f->emin) e = f->emin;
  if (e > f->emax) e = f->emax;
  return lce_pow2(e - (f->precision - 1));
}

int lce_value_judgeable(lce_dtype t, double value, double err) {
  return !isfinite(value) || err == 0.0 ||
         (fabs(value) >= fmax(LCE_JUDGEABLE_MIN, lce_pow2(lce_dtype_emin(t))) && err <= lce_ulp(t, value) * 0x1p-6);
}

int lce_round_certain(lce_dtype t, double value, double err, double *rounded) {
  if (!(err <= lce_ulp(t, value) * 0x1p-12)) return 0; /* exact: an ulp is at least 2^-149 */
  double lo = lce_round_to(t, lce_next_down(value - err));
  double hi = lce_round_to(t, lce_next_up(value + err));
  if (!(lo == hi)) return 0;
  *rounded = lo == 0.0 ? copysign(0.0, value) : lo;
  return 1;
}
