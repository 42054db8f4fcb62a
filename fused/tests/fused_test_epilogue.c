/* fused_test_epilogue.c — see fused_test_epilogue.h. */
#include "fused_test_epilogue.h"

#include <math.h>
#include <stdio.h>

#include "lce_dd.h"
#include "lce_dtype.h"
#include "lce_prng.h"

enum { STREAM_FACTOR = 0x45, STREAM_SIGN = 0x46, STREAM_BINADE = 0x47 };

float epilogue_pick_c(float alpha, float acc, uint64_t seed, uint64_t index) {
  const double m = 1.0 + ldexp((double)(lce_rand_u64(seed, STREAM_FACTOR, index) >> 41), -23); /* [1, 2), 24 bits */
  const int binade = (int)lce_rand_below(seed, STREAM_BINADE, index, 3) - 2;                   /* 1/4 .. 2 */
  const double sign = (lce_rand_u64(seed, STREAM_SIGN, index) & 1u) ? -1.0 : 1.0;
  const double base = acc != 0.0f ? (double)alpha * (double)acc : (double)alpha;
  return (float)(sign * ldexp(m, binade) * base);
}

double epilogue_double_error(float alpha, float acc, float c) {
  double e;
  lce_two_sum((double)alpha * (double)acc, (double)c, &e); /* the product exact (24 x 24 bits), TwoSum too */
  return e;
}

int epilogue_exact(float alpha, float acc, float c) {
  const double s = (double)alpha * (double)acc + (double)c;
  return epilogue_double_error(alpha, acc, c) == 0.0 && (double)(float)s == s;
}

static int same_bits(float a, float b) { return lce_f32_bits(a) == lce_f32_bits(b); }

void epilogue_tally_add(epilogue_tally *t, float alpha, const float *acc, const float *c, const float *got,
                        int64_t count) {
  for (int64_t i = 0; i < count; i++) {
    const float f = lce_gemm_epilogue_as(LCE_EPILOGUE_FMA, alpha, acc[i], c[i]);
    const float w = lce_gemm_epilogue_as(LCE_EPILOGUE_TWO_ROUNDINGS, alpha, acc[i], c[i]);
    const int is_f = same_bits(got[i], f), is_w = same_bits(got[i], w);
    t->count++;
    t->differ += !same_bits(f, w);
    t->inexact += !epilogue_exact(alpha, acc[i], c[i]);
    t->fma += is_f, t->two += is_w, t->neither += !is_f && !is_w;
  }
}

int epilogue_tally_verdict(const epilogue_tally *t, int64_t min_differ) {
  if (t->differ < min_differ || t->neither > 0) return -1;
  if (t->fma == t->count) return LCE_EPILOGUE_FMA;
  if (t->two == t->count) return LCE_EPILOGUE_TWO_ROUNDINGS;
  return -1;
}

void epilogue_tally_print(const char *what, float alpha, const epilogue_tally *t, int64_t min_differ) {
  const int v = epilogue_tally_verdict(t, min_differ);
  printf("  %s, alpha %a: %lld elements, %lld inexact, %lld deciding; fma %lld, two roundings %lld, neither %lld: %s\n",
         what, (double)alpha, (long long)t->count, (long long)t->inexact, (long long)t->differ, (long long)t->fma,
         (long long)t->two, (long long)t->neither,
         v >= 0 ? lce_epilogue_rounding_name((lce_epilogue_rounding)v)
         : t->neither > 0 ? "neither candidate"
         : t->differ == 0 ? "both candidates (they coincide on every element)"
         : t->differ < min_differ ? "undecided (too few deciding elements)"
                                  : "a mix of both");
}
