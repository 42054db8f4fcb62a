/* test_mpfr_dtype.c — lce_mpfr_round_to against exact expectations built in MPFR.
 *
 * bf16 and fp16 exhaustively: every finite pattern rounds to itself; the exact midpoint between
 * every pair of neighbours rounds to the even one; midpoint ± 2^-200 ulp (not representable in
 * double, so a via-double rounding would get it wrong) rounds to the right neighbour; overflow
 * and underflow boundaries; and bit-for-bit agreement with lce_round_to() (lce_dtype.c) on every
 * double that is a pattern, a midpoint or a midpoint ± 2^-40 ulp (2^-28 for fp32). fp32: a
 * seeded random sample of patterns with the same checks, the boundaries, and agreement with both
 * lce_round_to() and the C double→float conversion on random doubles.
 *
 * Seed: $LCE_TEST_SEED, default 1. */
#include <float.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_dtype.h"
#include "lce_mpfr_dtype.h"
#include "lce_prng.h"
#include "lce_test.h"

/* Bit-identical comparison of doubles (sign of zero included; any NaN equals any NaN). */
static int same(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return a == b && signbit(a) == signbit(b);
}

/* EXPECT for one rounded value: names the check and the format, prints both values in hex. */
#define EXPECT_VALUE(ok, what, t, got, want) \
  EXPECT(ok, "%s [%s]: got %a want %a", what, lce_dtype_name(t), (double)(got), (double)(want))

/* Rounds the MPFR value m, and its negation, and checks both against want / -want. */
static void expect_round(lce_dtype t, mpfr_t m, double want, const char *what) {
  double got = lce_mpfr_round_to(t, m);
  EXPECT_VALUE(same(got, want), what, t, got, want);
  mpfr_neg(m, m, MPFR_RNDN);
  got = lce_mpfr_round_to(t, m);
  EXPECT_VALUE(same(got, -want), what, t, got, -want);
  mpfr_neg(m, m, MPFR_RNDN);
}

/* Both rounding functions on the double d (and -d) must give want (and -want). */
static void expect_double_agrees(lce_dtype t, double d, double want, const char *what) {
  for (int s = 0; s < 2; s++, d = -d, want = -want) {
    mpfr_t m;
    mpfr_init2(m, 53);
    mpfr_set_d(m, d, MPFR_RNDN);
    double a = lce_mpfr_round_to(t, m), b = lce_round_to(t, d);
    mpfr_clear(m);
    EXPECT_VALUE(same(a, want), what, t, a, want);
    EXPECT_VALUE(same(b, want), "lce_round_to agrees", t, b, want);
  }
}

/* The neighbour pair (a, b) = consecutive finite values with a < b; a_even says whose pattern is
 * even. Checks the midpoint, midpoint ± 2^-200 ulp, and the double-level agreement. */
static void check_pair(lce_dtype t, double a, double b, int a_even) {
  mpfr_t mid, off;
  mpfr_init2(mid, 320);
  mpfr_init2(off, 320);
  mpfr_set_d(mid, a, MPFR_RNDN);
  mpfr_add_d(mid, mid, b, MPFR_RNDN); /* exact at 320 bits */
  mpfr_div_2ui(mid, mid, 1, MPFR_RNDN);
  double even = a_even ? a : b;
  expect_round(t, mid, even, "midpoint rounds to even");

  mpfr_set_d(off, b - a, MPFR_RNDN); /* the ulp, exact */
  mpfr_div_2ui(off, off, 200, MPFR_RNDN);
  mpfr_add(mid, mid, off, MPFR_RNDN);
  expect_round(t, mid, b, "midpoint + 2^-200 ulp rounds up");
  mpfr_mul_2ui(off, off, 1, MPFR_RNDN);
  mpfr_sub(mid, mid, off, MPFR_RNDN);
  expect_round(t, mid, a, "midpoint - 2^-200 ulp rounds down");
  mpfr_clear(mid);
  mpfr_clear(off);

  /* A midpoint has precision+1 bits; 2^-k ulp beside it stays exact in double while
   * precision + 1 + k <= 53: k = 40 for bf16/fp16, 28 for fp32. */
  int k = 52 - lce_dtype_precision(t) < 40 ? 52 - lce_dtype_precision(t) : 40;
  double md = 0.5 * a + 0.5 * b, tiny = ldexp(b - a, -k);
  expect_double_agrees(t, md, even, "double midpoint");
  expect_double_agrees(t, md + tiny, b, "double midpoint + 2^-k ulp");
  expect_double_agrees(t, md - tiny, a, "double midpoint - 2^-k ulp");
}

static void check_value(lce_dtype t, double x) {
  mpfr_t m;
  mpfr_init2(m, 64);
  mpfr_set_d(m, x, MPFR_RNDN);
  expect_round(t, m, x, "format value rounds to itself");
  mpfr_clear(m);
  expect_double_agrees(t, x, x, "format value as double");
}

/* Values far outside the format and the special values. max = largest finite, ulp_top = its ulp,
 * min_sub = smallest subnormal. */
static void check_extremes(lce_dtype t, double max, double ulp_top, double min_sub) {
  mpfr_t m, off;
  mpfr_init2(m, 320);
  mpfr_init2(off, 320);
  mpfr_set_d(m, max, MPFR_RNDN);
  mpfr_set_d(off, ulp_top, MPFR_RNDN);
  mpfr_div_2ui(off, off, 1, MPFR_RNDN);
  mpfr_add(m, m, off, MPFR_RNDN);
  expect_round(t, m, INFINITY, "max + ulp/2 overflows (ties to even: max is odd)");
  mpfr_div_2ui(off, off, 200, MPFR_RNDN);
  mpfr_sub(m, m, off, MPFR_RNDN);
  expect_round(t, m, max, "max + ulp/2 - tiny stays finite");
  expect_double_agrees(t, max + 0.5 * ulp_top, INFINITY, "double overflow threshold");

  mpfr_set_ui_2exp(m, 1, 200, MPFR_RNDN);
  expect_round(t, m, INFINITY, "2^200 overflows");
  mpfr_set_ui_2exp(m, 1, 1000000, MPFR_RNDN);
  expect_round(t, m, INFINITY, "2^1000000 (beyond double) overflows");
  mpfr_set_ui_2exp(m, 1, -1000000, MPFR_RNDN);
  expect_round(t, m, 0.0, "2^-1000000 underflows to signed zero");

  mpfr_set_d(m, min_sub, MPFR_RNDN);
  mpfr_div_2ui(m, m, 1, MPFR_RNDN);
  expect_round(t, m, 0.0, "min_sub/2 ties to zero");
  mpfr_set_d(off, min_sub, MPFR_RNDN);
  mpfr_div_2ui(off, off, 200, MPFR_RNDN);
  mpfr_add(m, m, off, MPFR_RNDN);
  expect_round(t, m, min_sub, "min_sub/2 + tiny rounds to min_sub");
  mpfr_set_d(m, 0.75 * min_sub, MPFR_RNDN);
  expect_round(t, m, min_sub, "3/4 min_sub rounds to min_sub");
  mpfr_set_d(m, 0.25 * min_sub, MPFR_RNDN);
  expect_round(t, m, 0.0, "1/4 min_sub rounds to zero");

  mpfr_set_nan(m);
  double r = lce_mpfr_round_to(t, m);
  EXPECT_VALUE(isnan(r), "NaN stays NaN", t, r, NAN);
  mpfr_set_inf(m, -1);
  r = lce_mpfr_round_to(t, m);
  EXPECT_VALUE(same(r, -INFINITY), "-Inf stays -Inf", t, r, -INFINITY);
  mpfr_set_zero(m, -1);
  r = lce_mpfr_round_to(t, m);
  EXPECT_VALUE(same(r, -0.0), "-0 stays -0", t, r, -0.0);
  mpfr_clear(m);
  mpfr_clear(off);
}

/* Exhaustive over every 16-bit pattern of bf16 or fp16. */
static void check_16bit(lce_dtype t) {
  uint16_t max_pat = t == LCE_BF16 ? 0x7F7F : 0x7BFF; /* largest finite positive */
  double (*decode)(uint16_t) = t == LCE_BF16 ? lce_bf16_to_double : lce_fp16_to_double;
  const int before = lce_test_failures;
  for (uint32_t p = 0; p <= max_pat; p++) {
    double a = decode((uint16_t)p);
    check_value(t, a);
    if (p < max_pat) {
      double b = decode((uint16_t)(p + 1));
      EXPECT_VALUE(b > a, "patterns increase", t, b, a);
      check_pair(t, a, b, (p & 1) == 0);
    }
  }
  double max = decode(max_pat);
  check_extremes(t, max, max - decode((uint16_t)(max_pat - 1)), decode(1));
  EXPECT_VALUE(same(max, lce_dtype_max(t)), "largest finite matches lce_dtype_max", t, max, lce_dtype_max(t));
  /* Every NaN and infinity pattern keeps its class through an MPFR round trip. */
  for (uint32_t p = max_pat + 1u; p <= 0xFFFFu; p++) {
    double x = decode((uint16_t)p);
    if (!isnan(x) && isfinite(x)) continue; /* negative finite: covered through negation */
    mpfr_t m;
    mpfr_init2(m, 64);
    mpfr_set_d(m, x, MPFR_RNDN);
    double r = lce_mpfr_round_to(t, m);
    mpfr_clear(m);
    EXPECT_VALUE(same(r, x), "non-finite pattern keeps its class", t, r, x);
  }
  printf("%s: %u patterns, %u neighbour pairs: %s\n", lce_dtype_name(t), 0x10000u, (unsigned)max_pat,
         lce_test_failures == before ? "ok" : "FAILED");
}

static void check_fp32(long samples) {
  const lce_dtype t = LCE_FP32;
  const uint64_t seed = lce_test_seed();
  const int before = lce_test_failures;
  const uint32_t boundary[] = {0x00000000u, 0x00000001u, 0x007FFFFEu, 0x007FFFFFu, 0x00800000u,
                               0x3F7FFFFFu, 0x3F800000u, 0x7F7FFFFEu};
  for (size_t i = 0; i < sizeof boundary / sizeof boundary[0]; i++) {
    uint32_t p = boundary[i];
    double a = lce_f32_from_bits(p), b = lce_f32_from_bits(p + 1);
    check_value(t, a);
    check_pair(t, a, b, (p & 1) == 0);
  }
  check_value(t, FLT_MAX);
  check_extremes(t, FLT_MAX, FLT_MAX - nextafterf(FLT_MAX, 0.0f), lce_f32_from_bits(1));
  for (long i = 0; i < samples; i++) {
    uint32_t p = (uint32_t)lce_rand_u64(seed, 101, (uint64_t)i) & 0x7FFFFFFFu;
    if (p >= 0x7F7FFFFFu) continue; /* needs a finite upper neighbour */
    double a = lce_f32_from_bits(p), b = lce_f32_from_bits(p + 1);
    check_value(t, a);
    check_pair(t, a, b, (p & 1) == 0);
    /* A random double near the fp32 range: three roundings must agree. */
    uint64_t bits = lce_rand_u64(seed, 102, (uint64_t)i);
    double d = ldexp((double)(bits >> 11) * 0x1p-53 + 0.5, (int)(bits % 300) - 160);
    float cast = (float)d;
    mpfr_t m;
    mpfr_init2(m, 53);
    mpfr_set_d(m, d, MPFR_RNDN);
    double r = lce_mpfr_round_to(t, m);
    mpfr_clear(m);
    EXPECT_VALUE(same(r, cast), "random double vs C float conversion", t, r, cast);
    EXPECT_VALUE(same(lce_round_to(t, d), cast), "random double: lce_round_to vs C float conversion", t,
           lce_round_to(t, d), cast);
  }
  printf("fp32: %ld sampled patterns + boundaries: %s\n", samples, lce_test_failures == before ? "ok" : "FAILED");
}

int main(void) {
  check_16bit(LCE_BF16);
  check_16bit(LCE_FP16);
  check_fp32(200000);
  return lce_test_finish("test_mpfr_dtype");
}
