/* test_gemm_model.c — the GEMM arithmetic models of lce_gemm_model.h:
 *   the table (rows, sources, the public models' parameters);
 *   hand-worked sm90 steps, one per rule: truncation of a small term next to a big one (and the
 *   extra bits changed by data), a carry into the next binade, exact cancellation and the sign of
 *   zero, subnormal operands, products and results, NaN/Inf propagation and overflow;
 *   an independent evaluation of 10^5 random steps (wide exponent spread, zeros, subnormals, all
 *   three formats): long double sums converted to fp32 under the C library's round-toward-zero;
 *   lce_gemm_dot as consecutive steps with strides and a short last block; ieee == sequential fmaf;
 *   the K scaling measured on an H200: for randn bf16 data the sm90 model's relative
 *   error is 1.16e-9·K and its bias -1.0e-9·K within 10% at K = 4096 and K = 131072, while ieee's
 *   bias is tiny. */
#include <fenv.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_test.h"
#include "lce_dtype.h"
#include "lce_gemm_model.h"
#include "lce_prng.h"

static const lce_gemm_arch *arch(const char *name) {
  const lce_gemm_arch *m = lce_gemm_arch_find(name);
  EXPECT(m != NULL, "no arch %s", name);
  return m;
}

/* Bitwise equality (tells -0 from +0 and compares NaN payloads). */
#define EXPECT_BITS(got, want, what) \
  EXPECT(lce_f32_bits(got) == lce_f32_bits(want), "%s: got %a (%08x), want %a (%08x)", what, got, lce_f32_bits(got), want, lce_f32_bits(want))

static float step1(const lce_gemm_arch *m, float c, float a, float b) { return lce_mma_step(m, LCE_MMA_BF16, c, &a, &b, 1); }

static void test_table(void) {
  EXPECT(lce_gemm_arch_count() == 4, "%zu rows", lce_gemm_arch_count());
  const char *names[] = {"ieee", "sm80", "sm90", "sm100"};
  for (size_t i = 0; i < 4; i++) {
    const lce_gemm_arch *m = lce_gemm_arch_at(i);
    EXPECT(m && strcmp(m->name, names[i]) == 0 && m->source && m->source[0], "row %zu", i);
  }
  EXPECT(lce_gemm_arch_at(4) == NULL && lce_gemm_arch_find("sm75") == NULL && lce_gemm_arch_find(NULL) == NULL,
         "lookups beyond the table");
  const lce_gemm_arch *sm90 = arch("sm90"), *sm80 = arch("sm80"), *sm100 = arch("sm100");
  EXPECT(arch("ieee")->ieee && !sm90->ieee, "ieee flags");
  EXPECT(sm90->products[LCE_MMA_BF16] == 16 && sm90->products[LCE_MMA_FP16] == 16 && sm90->products[LCE_MMA_TF32] == 8 &&
             sm90->extra_bits == 2 && sm90->final_round == LCE_MMA_RZ && sm90->nan_bits == 0x7fffffffu,
         "sm90 parameters");
  EXPECT(sm80->products[LCE_MMA_BF16] == 8 && sm80->products[LCE_MMA_TF32] == 4 && sm80->extra_bits == 1, "sm80 parameters");
  EXPECT(sm100->products[LCE_MMA_BF16] == 16 && sm100->extra_bits == 2, "sm100 parameters");
}

/* Truncation, with c = 1 (exponent 0, 2 extra bits: quantum 2^-25):
 *   one product 3·2^-25 is exact at the quantum; the sum 1 + 0.75 ulp truncates to 1 (fmaf: up);
 *   eight products 3·2^-26 each truncate to 2^-25 before the sum: 1 + 2^-22, where the sum
 *   truncated once would be 1 + 3·2^-23 and fmaf, adding 0.375 ulp eight times, stays at 1;
 *   two products 3·2^-25 give 1 + 2^-23, and a row copied with extra_bits 0 (the table is data)
 *   drops them both (0.75 of its quantum 2^-23);
 *   c is truncated like a product: 1 - (2^-24 + 2^-26) keeps only -2^-24 of c, giving 1 - 2^-24
 *   where the exact sum truncated once is 1 - 2^-23. */
static void test_truncation(void) {
  const lce_gemm_arch *sm90 = arch("sm90"), *ieee = arch("ieee");
  EXPECT_BITS(step1(sm90, 1.0f, 0x1.8p-24f, 1.0f), 1.0f, "1 + 0.75 ulp");
  EXPECT_BITS(step1(ieee, 1.0f, 0x1.8p-24f, 1.0f), 0x1.000002p0f, "ieee rounds 1 + 0.75 ulp up");
  EXPECT_BITS(step1(sm90, -1.0f, 0x1.8p-24f, -1.0f), -1.0f, "truncation is toward zero for negative sums");
  float a[8], b[8];
  for (int i = 0; i < 8; i++) a[i] = 0x1.8p-25f, b[i] = 1.0f;
  EXPECT_BITS(lce_mma_step(sm90, LCE_MMA_BF16, 1.0f, a, b, 8), 0x1.000004p0f, "eight small terms truncated each");
  EXPECT_BITS(lce_mma_step(ieee, LCE_MMA_BF16, 1.0f, a, b, 8), 1.0f, "ieee adds them one by one");
  a[0] = a[1] = 0x1.8p-24f;
  EXPECT_BITS(lce_mma_step(sm90, LCE_MMA_BF16, 1.0f, a, b, 2), 0x1.000002p0f, "two 3·2^-25 terms kept with 2 bits");
  lce_gemm_arch no_extra = *sm90;
  no_extra.extra_bits = 0;
  EXPECT_BITS(lce_mma_step(&no_extra, LCE_MMA_BF16, 1.0f, a, b, 2), 1.0f, "dropped without extra bits");
  EXPECT_BITS(step1(sm90, -0x1.4p-24f, 1.0f, 1.0f), 0x1.fffffep-1f, "c truncated like a product");
}

/* c = 2 - 2^-23 plus 16 products 2^-24 (all exact at quantum 2^-25): the exact sum 2 + 7·2^-23 has
 * crossed into the next binade, where the last place is 2^-22, and truncates to 2 + 3·2^-22. fmaf
 * gets 2: each 2^-24 rounds away at 2 - 2^-23 (a tie, to even) and at 2. */
static void test_carry(void) {
  float a[16], b[16];
  for (int i = 0; i < 16; i++) a[i] = 0x1p-24f, b[i] = 1.0f;
  const float c = 0x1.fffffep0f;
  EXPECT_BITS(lce_mma_step(arch("sm90"), LCE_MMA_BF16, c, a, b, 16), 0x1.000006p1f, "carry into the next binade");
  EXPECT_BITS(lce_mma_step(arch("ieee"), LCE_MMA_BF16, c, a, b, 16), 2.0f, "ieee");
}

/* An exact zero is +0 under the public models whatever the terms' signs; fmaf keeps -0 + -0. The
 * IEEE zero rule is one field away. */
static void test_signed_zero(void) {
  const lce_gemm_arch *sm90 = arch("sm90");
  EXPECT_BITS(step1(sm90, -1.0f, 1.0f, 1.0f), 0.0f, "cancellation");
  EXPECT_BITS(step1(sm90, 1.0f, -1.0f, 1.0f), 0.0f, "cancellation (negative product)");
  EXPECT_BITS(step1(sm90, -0.0f, -0.0f, 1.0f), 0.0f, "-0 + -0 under sm90");
  EXPECT_BITS(step1(arch("ieee"), -0.0f, -0.0f, 1.0f), -0.0f, "-0 + -0 under ieee");
  lce_gemm_arch ieee_zero = *sm90;
  ieee_zero.zero_sign = LCE_MMA_ZERO_IEEE;
  EXPECT_BITS(step1(&ieee_zero, -0.0f, -0.0f, 1.0f), -0.0f, "-0 + -0 with the IEEE zero rule");
  EXPECT_BITS(step1(&ieee_zero, -1.0f, 1.0f, 1.0f), 0.0f, "cancellation with the IEEE zero rule");
}

static void test_subnormals(void) {
  const lce_gemm_arch *sm90 = arch("sm90");
  /* bf16 subnormal operand: 2^-130 · 2^-10 = 2^-140, exact at quantum 2^-151 (the zero c's -126). */
  EXPECT_BITS(step1(sm90, 0.0f, 0x1p-130f, 0x1p-10f), 0x1p-140f, "bf16 subnormal operand");
  /* fp16 subnormals take the format's emin -14: 2^-24 · 2^-24 = 2^-48 exactly. */
  float h = 0x1p-24f;
  EXPECT_BITS(lce_mma_step(sm90, LCE_MMA_FP16, 0.0f, &h, &h, 1), 0x1p-48f, "fp16 subnormal operands");
  /* A subnormal result: 2^-126 - 3·2^-128 = 2^-128, kept (no flush). */
  EXPECT_BITS(step1(sm90, 0x1p-126f, -0x1.8p-127f, 1.0f), 0x1p-128f, "subnormal result");
  lce_gemm_arch ftz = *sm90;
  ftz.ftz_output = 1;
  EXPECT_BITS(step1(&ftz, 0x1p-126f, -0x1.8p-127f, 1.0f), 0.0f, "flushed with ftz_output");
  ftz.ftz_output = 0, ftz.ftz_inputs = 1;
  EXPECT_BITS(step1(&ftz, 0.0f, 0x1p-130f, 0x1p-10f), 0.0f, "flushed with ftz_inputs");
  /* 16 products 2^-153 sum to 2^-149 exactly, but the zero c's exponent -126 takes part in the max
   * (MMA-Sim): each is below the quantum 2^-151 and truncates to 0. Without zeros in the max
   * (MATLAB-tensor-core) they are aligned among themselves and the sum is the smallest subnormal. */
  float a[16], b[16];
  for (int i = 0; i < 16; i++) a[i] = 0x1p-133f, b[i] = 0x1p-20f;
  EXPECT_BITS(lce_mma_step(sm90, LCE_MMA_BF16, 0.0f, a, b, 16), 0.0f, "tiny products under a zero c");
  lce_gemm_arch no_zeros = *sm90;
  no_zeros.zeros_align = 0;
  EXPECT_BITS(lce_mma_step(&no_zeros, LCE_MMA_BF16, 0.0f, a, b, 16), 0x1p-149f, "zeros out of the max");
}

static void test_specials(void) {
  const lce_gemm_arch *sm90 = arch("sm90");
  const float canonical = lce_mma_step(sm90, LCE_MMA_BF16, NAN, NULL, NULL, 0);
  EXPECT(lce_f32_bits(canonical) == 0x7fffffffu, "NaN c gives %08x", lce_f32_bits(canonical));
  EXPECT_BITS(step1(sm90, 1.0f, NAN, 1.0f), canonical, "NaN operand");
  EXPECT_BITS(step1(sm90, 1.0f, INFINITY, 0.0f), canonical, "Inf·0");
  float a[2] = {INFINITY, -INFINITY}, b[2] = {1.0f, 1.0f};
  EXPECT_BITS(lce_mma_step(sm90, LCE_MMA_BF16, 0.0f, a, b, 2), canonical, "+Inf and -Inf products");
  EXPECT_BITS(step1(sm90, INFINITY, -1.0f, 0x1p100f), INFINITY, "+Inf c with a finite product");
  EXPECT_BITS(step1(sm90, -INFINITY, 1.0f, 1.0f), -INFINITY, "-Inf c with a finite product");
  EXPECT_BITS(step1(sm90, 1.0f, -INFINITY, -2.0f), INFINITY, "an infinite product");
  /* Overflow: FLT_MAX + 2^104 = 2^128 exactly (quantum 2^102) goes to Inf, or saturates by data. */
  EXPECT_BITS(step1(sm90, FLT_MAX, 0x1p104f, 1.0f), INFINITY, "overflow");
  EXPECT_BITS(step1(sm90, -FLT_MAX, -0x1p104f, 1.0f), -INFINITY, "negative overflow");
  lce_gemm_arch sat = *sm90;
  sat.overflow_saturates = 1;
  EXPECT_BITS(step1(&sat, FLT_MAX, 0x1p104f, 1.0f), FLT_MAX, "saturating overflow");
}

/* ---- an independent evaluation of one step ------------------------------------------------- */

/* The same rules written with the C library: frexp for exponents, ldexpl/truncl for the aligned
 * terms, an exact long double sum (at most 17 integers below 2^28), and the conversion to float
 * under fesetround(FE_TOWARDZERO), which rounds toward zero with gradual underflow (IEEE overflow
 * under RZ gives FLT_MAX, so Inf is decided here; zeros are +0). Built with -frounding-math. */
static int reference_exponent(float x, int emin) {
  int e;
  frexpf(x, &e);
  return e - 1 < emin ? emin : e - 1;
}

static float reference_step(lce_mma_format fmt, int extra_bits, float c, const float *a, const float *b, int k) {
  static const int emin[LCE_MMA_FORMATS] = {-126, -14, -126};
  int e = c == 0.0f ? -126 : reference_exponent(c, -126);
  for (int i = 0; i < k; i++) {
    int ea = a[i] == 0.0f ? -126 : reference_exponent(a[i], emin[fmt]);
    int eb = b[i] == 0.0f ? -126 : reference_exponent(b[i], emin[fmt]);
    if (ea + eb > e) e = ea + eb;
  }
  const int q = e - 23 - extra_bits;
  long double s = truncl(ldexpl((long double)c, -q));
  for (int i = 0; i < k; i++) s += truncl(ldexpl((long double)a[i] * (long double)b[i], -q));
  const long double v = ldexpl(s, q);
  if (fabsl(v) >= 0x1p128L) return v > 0 ? INFINITY : -INFINITY;
  fesetround(FE_TOWARDZERO);
  volatile float r = (float)v;
  fesetround(FE_TONEAREST);
  return r == 0.0f ? 0.0f : r;
}

/* A random value of the format around 2^center (spread +-spread binades), sometimes 0 or tiny. */
static float random_operand(lce_mma_format fmt, uint64_t seed, uint64_t i, int center, int spread) {
  const uint64_t kind = lce_rand_below(seed, 11, i, 16);
  if (kind == 0) return lce_rand_below(seed, 12, i, 2) ? -0.0f : 0.0f;
  const int lo = kind == 1 ? (fmt == LCE_MMA_FP16 ? -26 : -136) : center - spread;
  const int e = lo + (int)lce_rand_below(seed, 13, i, (uint64_t)(kind == 1 ? 8 : 2 * spread + 1));
  const double x = ldexp(lce_rand_uniform(seed, 14, i) + 1.0, e) * (lce_rand_below(seed, 15, i, 2) ? -1 : 1);
  if (fmt == LCE_MMA_TF32) return (float)lce_round_tf32(x);
  return (float)lce_round_to(fmt == LCE_MMA_BF16 ? LCE_BF16 : LCE_FP16, x);
}

static void test_against_reference(void) {
  const lce_gemm_arch *sm90 = arch("sm90");
  const uint64_t seed = lce_test_seed();
  int mismatches = 0;
  for (uint64_t t = 0; t < 100000; t++) {
    const lce_mma_format fmt = (lce_mma_format)(t % 3);
    const int k = 1 + (int)lce_rand_below(seed, 1, t, (uint64_t)sm90->products[fmt]);
    const int spread = (int)lce_rand_below(seed, 2, t, 12), center = fmt == LCE_MMA_FP16 ? -2 : -20;
    float a[16], b[16];
    for (int i = 0; i < k; i++) {
      a[i] = random_operand(fmt, seed, t * 64 + (uint64_t)i, center, spread);
      b[i] = random_operand(fmt, seed, t * 64 + 32 + (uint64_t)i, center, spread);
    }
    /* c: fp32 near the products' scale (cancellation and carries), or far above or below it. */
    const int ce = 2 * center + (int)lce_rand_below(seed, 3, t, 61) - 30;
    float c = (float)ldexp((lce_rand_uniform(seed, 4, t) + 1.0) * (lce_rand_below(seed, 5, t, 2) ? -1 : 1), ce);
    if (lce_rand_below(seed, 6, t, 8) == 0) c = 0.0f;
    if (lce_rand_below(seed, 7, t, 8) == 0) { /* exact cancellation of the first product */
      c = (float)(-(double)a[0] * (double)b[0]);
      if ((double)c != -(double)a[0] * (double)b[0]) c = 0.0f;
    }
    const float got = lce_mma_step(sm90, fmt, c, a, b, k), want = reference_step(fmt, sm90->extra_bits, c, a, b, k);
    if (lce_f32_bits(got) != lce_f32_bits(want) && mismatches++ < 5)
      EXPECT(0, "step %llu (format %d, k %d, c %a): model %a, reference %a", (unsigned long long)t, (int)fmt, k, c, got,
             want);
  }
  EXPECT(mismatches == 0, "%d of 100000 random steps differ from the reference", mismatches);
}

/* lce_mma_step's fast evaluation against the rule (lce_mma_step_rule), bit for bit, for every
 * tensor-core row and format: random blocks whose operands and c range from subnormal to the edge of
 * overflow (sums beyond FLT_MAX and beyond 2^128), with zeros of both signs, raw fp32 operands for
 * tf32 (the low bits the core ignores), cancellation, NaN and Inf; and lce_gemm_dots over 11 strided
 * columns (a group of eight and a short one) against chains of rule steps. */
static float wild_operand(lce_mma_format fmt, uint64_t seed, uint64_t i, int center) {
  const uint64_t kind = lce_rand_below(seed, 21, i, 64);
  if (kind == 0) return NAN;
  if (kind == 1) return lce_rand_below(seed, 22, i, 2) ? INFINITY : -INFINITY;
  if (kind == 2 && fmt == LCE_MMA_TF32) return (float)ldexp(lce_rand_uniform(seed, 23, i) - 0.5, center);
  return random_operand(fmt, seed, i, center, 6);
}

static void test_fast_equals_rule(void) {
  const uint64_t seed = lce_test_seed();
  int mismatches = 0, checked = 0;
  for (size_t r = 0; r < lce_gemm_arch_count(); r++) {
    const lce_gemm_arch *m = lce_gemm_arch_at(r);
    if (m->ieee) continue;
    for (uint64_t t = 0; t < 30000; t++) {
      const lce_mma_format fmt = (lce_mma_format)(t % 3);
      const int k = 1 + (int)lce_rand_below(seed, 31, t, (uint64_t)m->products[fmt]);
      /* centers: fp16 within its range; the others from deep subnormal products to overflowing ones */
      const int center = fmt == LCE_MMA_FP16 ? -10 + (int)lce_rand_below(seed, 32, t, 22)
                                             : -70 + (int)lce_rand_below(seed, 32, t, 200);
      float a[16], b[16];
      for (int i = 0; i < k; i++) {
        a[i] = wild_operand(fmt, seed, t * 64 + (uint64_t)i, center / 2);
        b[i] = wild_operand(fmt, seed, t * 64 + 32 + (uint64_t)i, center - center / 2);
      }
      float c = (float)ldexp(lce_rand_uniform(seed, 33, t) - 0.5, center + (int)lce_rand_below(seed, 34, t, 9) - 4);
      const uint64_t ck = lce_rand_below(seed, 35, t, 16);
      if (ck == 0) c = lce_rand_below(seed, 36, t, 2) ? -0.0f : 0.0f;
      if (ck == 1) c = (float)(-(double)a[0] * (double)b[0]); /* cancellation when exact */
      if (ck == 2) c = lce_rand_below(seed, 36, t, 3) == 0 ? NAN : (float)ldexp(1.0, 127) * 1.5f;
      const float got = lce_mma_step(m, fmt, c, a, b, k), want = lce_mma_step_rule(m, fmt, c, a, b, k);
      checked++;
      if (lce_f32_bits(got) != lce_f32_bits(want) && mismatches++ < 5)
        EXPECT(0, "%s step %llu (format %d, k %d, c %a): fast %a (%08x), rule %a (%08x)", m->name, (unsigned long long)t,
               (int)fmt, k, c, got, lce_f32_bits(got), want, lce_f32_bits(want));
    }
    for (int f = 0; f < LCE_MMA_FORMATS; f++) {
      enum { K = 70, COLS = 11 };
      const lce_mma_format fmt = (lce_mma_format)f;
      float a[2 * K], b[K * COLS * 2], out[COLS];
      for (int i = 0; i < 2 * K; i++) a[i] = wild_operand(fmt, seed, 100000u + (uint64_t)i, -3);
      for (int i = 0; i < K * COLS * 2; i++) b[i] = random_operand(fmt, seed, 200000u + (uint64_t)i, -3, 20);
      b[5 * 2 * K + 14] = INFINITY; /* one special in column 5: that column by the rule, the others fast */
      lce_gemm_dots(m, fmt, 0.25f, a, 2, b, 2, 2 * K, K, COLS, out); /* column j: b[j·2K + 2i] */
      for (int j = 0; j < COLS; j++) {
        float want = 0.25f;
        for (int k0 = 0; k0 < K; k0 += m->products[f]) {
          const int len = K - k0 < m->products[f] ? K - k0 : m->products[f];
          float ak[16], bk[16];
          for (int i = 0; i < len; i++) ak[i] = a[2 * (k0 + i)], bk[i] = b[j * 2 * K + 2 * (k0 + i)];
          want = lce_mma_step_rule(m, fmt, want, ak, bk, len);
        }
        checked++;
        if (lce_f32_bits(out[j]) != lce_f32_bits(want) && mismatches++ < 5)
          EXPECT(0, "%s format %d: dots column %d: fast %a, rule %a", m->name, f, j, out[j], want);
      }
    }
  }
  EXPECT(mismatches == 0, "%d of %d fast evaluations differ from the rule", mismatches, checked);
}

/* lce_gemm_dot = consecutive steps of products[fmt] (the last one short), with strides; and the
 * ieee row = sequential fmaf, for lce_mma_step and lce_gemm_dot alike. */
static void test_dot_blocks(void) {
  enum { K = 53 };
  float a[2 * K], b[3 * K], ac[K], bc[K];
  for (int i = 0; i < K; i++) {
    ac[i] = a[2 * i] = (float)lce_round_to(LCE_BF16, lce_rand_normal(5, 1, (uint64_t)i));
    bc[i] = b[3 * i] = (float)lce_round_to(LCE_BF16, lce_rand_normal(5, 2, (uint64_t)i));
  }
  for (size_t r = 0; r < lce_gemm_arch_count(); r++) {
    const lce_gemm_arch *m = lce_gemm_arch_at(r);
    for (int f = 0; f < LCE_MMA_FORMATS; f++) {
      const lce_mma_format fmt = (lce_mma_format)f;
      float want = 0.5f;
      if (m->ieee) {
        for (int i = 0; i < K; i++) want = fmaf(ac[i], bc[i], want);
        EXPECT_BITS(lce_mma_step(m, fmt, 0.5f, ac, bc, K), want, "ieee step is an fmaf chain");
      } else {
        for (int k0 = 0; k0 < K; k0 += m->products[f]) {
          const int len = K - k0 < m->products[f] ? K - k0 : m->products[f];
          want = lce_mma_step(m, fmt, want, ac + k0, bc + k0, len);
        }
      }
      char what[64];
      snprintf(what, sizeof what, "%s format %d: strided dot", m->name, f);
      EXPECT_BITS(lce_gemm_dot(m, fmt, 0.5f, a, 2, b, 3, K), want, what);
    }
  }
}

/* ---- K scaling ------------------------------------------------------------------------------ */

/* The error of one model over the outputs of C = A·B^T, A and B [rows x K] of randn values rounded
 * to bf16 (lce_prng streams per K), against r exact: bf16 products are exact in double and the
 * Neumaier-compensated sum of K of them is within 2u|r| + 2K^2 u^2 sum|p| of the exact sum, below
 * 1e-15 relative here, nine orders below the errors measured. Metrics as conformance/judge/lce_metrics.h:
 * relerr = ||x - r|| / ||r||, bias = <x - r, r> / <r, r> over all outputs; stderr_rel is the
 * standard error of the bias from 16 batches (by row of A; batches share B's rows, whose
 * correlation is weak: an error depends on the whole product path) relative to the bias. */
typedef struct scaling {
  double relerr, bias, stderr_rel;
} scaling;

static double exact_dot(const float *a, const float *b, int64_t k) {
  double s = 0.0, comp = 0.0;
  for (int64_t i = 0; i < k; i++) {
    const double p = (double)a[i] * (double)b[i], t = s + p;
    comp += fabs(s) >= fabs(p) ? (s - t) + p : (p - t) + s;
    s = t;
  }
  return s + comp;
}

static scaling measure(const lce_gemm_arch *m, int64_t k, int rows) {
  enum { BATCHES = 16 };
  scaling out = {0};
  float *a = malloc(sizeof(float) * (size_t)(rows * k)), *b = malloc(sizeof(float) * (size_t)(rows * k));
  EXPECT(a && b, "out of memory");
  if (!a || !b) goto done;
  for (int64_t e = 0; e < rows * k; e++) {
    a[e] = (float)lce_round_to(LCE_BF16, lce_rand_normal(lce_test_seed(), 2 * (uint64_t)k, (uint64_t)e));
    b[e] = (float)lce_round_to(LCE_BF16, lce_rand_normal(lce_test_seed(), 2 * (uint64_t)k + 1, (uint64_t)e));
  }
  double num[BATCHES] = {0}, den[BATCHES] = {0}, sq = 0.0;
  for (int i = 0; i < rows; i++) {
    for (int j = 0; j < rows; j++) {
      const float *ai = a + i * k, *bj = b + j * k;
      const double r = exact_dot(ai, bj, k), x = lce_gemm_dot(m, LCE_MMA_BF16, 0.0f, ai, 1, bj, 1, k);
      num[i % BATCHES] += (x - r) * r, den[i % BATCHES] += r * r, sq += (x - r) * (x - r);
    }
  }
  double n = 0.0, d = 0.0, mean = 0.0, var = 0.0;
  for (int t = 0; t < BATCHES; t++) n += num[t], d += den[t], mean += num[t] / den[t] / BATCHES;
  for (int t = 0; t < BATCHES; t++) var += (num[t] / den[t] - mean) * (num[t] / den[t] - mean) / (BATCHES - 1);
  out.relerr = sqrt(sq / d), out.bias = n / d, out.stderr_rel = sqrt(var / BATCHES) / fabs(out.bias);
done:
  free(a), free(b);
  return out;
}

/* Output counts: the bias of one output is a path average with a relative spread of order 1, so
 * its mean over N outputs is known to ~1/sqrt(N): 9216 outputs at K = 4096 and 1024 at K = 131072
 * give standard errors of about 1% and 3% (printed and checked below 3.4%), so the 10% check is a
 * 3-sigma statement about the model, not luck; together ~3 s (1.7e8 modelled products). */
static void test_k_scaling(void) {
  static const struct {
    int64_t k;
    int rows;
  } sizes[] = {{4096, 96}, {131072, 32}};
  const double want_relerr = 1.16e-9, want_bias = -1.0e-9; /* per unit of K, H200 cuBLAS */
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    const int64_t k = sizes[s].k;
    const scaling tc = measure(arch("sm90"), k, sizes[s].rows), ieee = measure(arch("ieee"), k, sizes[s].rows / 2);
    printf("K %6lld  sm90: relerr %.3e = %.3e K  bias %.3e = %.3e K (stderr %.1f%%)   ieee: relerr %.3e  bias %.2e\n",
           (long long)k, tc.relerr, tc.relerr / (double)k, tc.bias, tc.bias / (double)k, 100 * tc.stderr_rel, ieee.relerr,
           ieee.bias);
    EXPECT(tc.stderr_rel < 0.034, "K %lld: bias standard error %.1f%%: too few outputs for a 10%% check", (long long)k,
           100 * tc.stderr_rel);
    EXPECT(fabs(tc.relerr / (want_relerr * (double)k) - 1.0) < 0.10, "K %lld: sm90 relerr %.3e K, want 1.16e-9 K +-10%%",
           (long long)k, tc.relerr / (double)k);
    EXPECT(fabs(tc.bias / (want_bias * (double)k) - 1.0) < 0.10, "K %lld: sm90 bias %.3e K, want -1.0e-9 K +-10%%",
           (long long)k, tc.bias / (double)k);
    EXPECT(fabs(ieee.bias) < 0.02 * fabs(tc.bias), "K %lld: ieee bias %.2e is not tiny next to sm90's %.2e", (long long)k,
           ieee.bias, tc.bias);
  }
}

int main(void) {
  test_table();
  test_truncation();
  test_carry();
  test_signed_zero();
  test_subnormals();
  test_specials();
  test_against_reference();
  test_fast_equals_rule();
  test_dot_blocks();
  test_k_scaling();
  return lce_test_finish("test_gemm_model");
}
