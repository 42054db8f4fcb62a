/* lce_gemm_model.c — the GEMM arithmetic models of lce_gemm_model.h: the table of architectures and
 * one exact evaluation of an MMA step.
 *
 * The step (every row but ieee), d = c + sum_{i<k} a_i·b_i:
 *   1. Specials first: a NaN operand or c, Inf·0, or +Inf and -Inf among the exact products and c
 *      give NaN (nan_bits); otherwise an infinite product or c gives that infinity.
 *   2. Every finite term gets an alignment exponent: c its fp32 exponent (subnormals: -126); a
 *      product ea + eb, the operands' exponents in their format (subnormals: the format's emin),
 *      i.e. the product's significand is taken in [1, 4) (align_normalized: the exact product's own
 *      exponent instead). Zero terms take part only with zeros_align, as exponent -126 each.
 *   3. E = the largest alignment exponent; every term (c too) is truncated to a multiple of
 *      q = 2^(E - 23 - extra_bits): toward zero, or toward -inf with term_floor.
 *   4. The integer sum of the truncated terms (exact: int64) times q is rounded to fp32 with
 *      final_round, with subnormal results (or ftz_output), overflow to +-Inf (or saturation),
 *      and the sign of a zero by zero_sign.
 * Products of bf16/fp16/tf32 values (indeed of any two floats) are exact in double, and a term
 * scaled by 2^-(E-23-extra_bits) is below 2^28 in magnitude, so steps 3-4 are exact by
 * construction: the only rounding is the one the row specifies.
 *
 * Two evaluations of the step give the same bits: fused_step follows the rule term by term for any
 * row (lce_mma_step_rule), and fast_block serves the rows whose fields are those of sm80/sm90/sm100
 * (fast_row) on blocks without NaN or Inf, several columns at a time (the host twin's GEMMs run
 * through it: the rule's version costs ~8 s per 10^9 products on one core). Its shortcuts, each
 * exact: an operand's alignment exponent from its bits (zero: -126, else max(biased - 127, emin));
 * 2^n built from bits; the truncation toward zero of a scaled term by the int64 conversion; and the
 * sum s·2^q (|s| < 2^33, exact in double) rounded toward zero to fp32 by rounding it to nearest and
 * stepping one place toward zero where that went up in magnitude (beyond FLT_MAX the nearest is Inf,
 * one place below it FLT_MAX, which is RZ; at or above 2^128 the row overflows to Inf).
 * test_gemm_model compares the two on random blocks with specials, subnormals and cancellation.
 *
 * Sources, and where they disagree (each disagreement is a field; the rows follow MMA-Sim, which
 * was checked against H100/H200 mma and wgmma with random vectors):
 *   MMA-Sim (microsoft/MMA-Sim, mmasim/simulator: fused_sum, nv_fused_dot_add; arch table of
 *     accumulator fractional bits: Volta 23, Turing/Ampere/Ada 24, Hopper/Blackwell 25; Ampere's
 *     k16 bf16/fp16 and k8 tf32 MMAs are two half-size fused steps): alignment by ea + eb with
 *     subnormal exponents clamped to the format's emin; zero operands and zero c carry exponent
 *     -126 and take part in the max; terms truncated toward zero; final RZ to fp32 with subnormal
 *     results; NaN -> 0x7fffffff; overflow -> Inf; every zero result +0.
 *   MATLAB-tensor-core (north-numerical-computing; Khattak & Mikaitis, "Accurate Models of NVIDIA
 *     Tensor Cores", arXiv 2512.07004; models/H100TC.m, B200TC.m, A100TC.m, tools/GEMM.m): block
 *     FMA of 16 products (tf32: 8) with 2 extra alignment bits on H100/H200/B200, 8 (tf32: 4) with
 *     1 on A100; final RZ; truncation (no sticky bit); products >= 2 normalized with one more bit
 *     kept, which gives the same quantum as ea + eb; subnormal inputs and outputs kept; overflow
 *     -> Inf; NaN and Inf decided over the whole block from the exact products. Differences from
 *     MMA-Sim: zero products and a zero c are removed before the max (zeros_align 0), and an
 *     underflow keeps its sign (LCE_MMA_ZERO_UNDERFLOW_SIGNED).
 * Neither model flushes subnormals (ftz_* 0), and neither keeps a -0 (zero_sign IEEE is offered
 * for the probe). */
#include "lce_gemm_model.h"

#include "lce_dd.h"
#include "lce_dtype.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#define MMA_SIM "microsoft/MMA-Sim (mmasim/simulator)"
#define MATLAB_TC "north-numerical-computing/MATLAB-tensor-core, arXiv 2512.07004"

static const lce_gemm_arch table[] = {
    {.name = "ieee",
     .source = "IEEE 754 binary32: one fmaf per product in k order (CUDA-core GEMMs, fused-host's default)",
     .ieee = 1,
     .products = {1, 1, 1},
     .final_round = LCE_MMA_RNE,
     .zero_sign = LCE_MMA_ZERO_IEEE,
     .nan_bits = 0x7fc00000u},
    {.name = "sm80",
     .source = "A100: " MMA_SIM " Ampere (24 fractional bits, k16 as two k8 halves); " MATLAB_TC " A100TC.m",
     .products = {8, 8, 4},
     .extra_bits = 1,
     .zeros_align = 1,
     .final_round = LCE_MMA_RZ,
     .zero_sign = LCE_MMA_ZERO_PLUS,
     .nan_bits = 0x7fffffffu},
    {.name = "sm90",
     .source = "H100/H200: " MMA_SIM " Hopper (25 fractional bits); " MATLAB_TC " H100TC.m; bit-exact with "
               "mma.sync on an H200 over 307200 probe vectors (conformance/GPU_RUNS.md, 2026-12-03)",
     .products = {16, 16, 8},
     .extra_bits = 2,
     .zeros_align = 1,
     .final_round = LCE_MMA_RZ,
     .zero_sign = LCE_MMA_ZERO_PLUS,
     .nan_bits = 0x7fffffffu},
    {.name = "sm100",
     .source = "B200: " MMA_SIM " Blackwell (25 fractional bits); " MATLAB_TC " B200TC.m",
     .products = {16, 16, 8},
     .extra_bits = 2,
     .zeros_align = 1,
     .final_round = LCE_MMA_RZ,
     .zero_sign = LCE_MMA_ZERO_PLUS,
     .nan_bits = 0x7fffffffu},
};

size_t lce_gemm_arch_count(void) { return sizeof table / sizeof table[0]; }

const lce_gemm_arch *lce_gemm_arch_at(size_t i) { return i < lce_gemm_arch_count() ? &table[i] : NULL; }

const lce_gemm_arch *lce_gemm_arch_find(const char *name) {
  for (size_t i = 0; name != NULL && i < lce_gemm_arch_count(); i++)
    if (strcmp(table[i].name, name) == 0) return &table[i];
  return NULL;
}

/* ---- operands ------------------------------------------------------------------------------ */


/* Exponent of the smallest normal value of each operand format. */
static const int format_emin[LCE_MMA_FORMATS] = {-126, -14, -126};

/* The operand as the tensor core reads it: tf32 MMAs read the upper 19 bits of an fp32 register
 * (a no-op on tf32 values), and ftz_inputs zeroes the format's subnormals. */
static float operand(const lce_gemm_arch *m, lce_mma_format fmt, float x) {
  if (fmt == LCE_MMA_TF32 && !isnan(x)) x = lce_f32_from_bits(lce_f32_bits(x) & 0xffffe000u);
  if (m->ftz_inputs && x != 0.0f && fabsf(x) < ldexpf(1.0f, format_emin[fmt])) x = copysignf(0.0f, x);
  return x;
}

/* floor(log2 |x|) of a finite non-zero float, clamped to emin (subnormals of the format). */
static int operand_exponent(float x, int emin) {
  const int e = (int)((lce_f32_bits(x) >> 23) & 0xffu) - 127; /* -127: an fp32 subnormal, below every emin */
  return e < emin ? emin : e;
}

/* floor(log2 |p|) of a finite non-zero double. */
static int double_exponent(double p) {
  uint64_t u;
  memcpy(&u, &p, sizeof u);
  int e = (int)((u >> 52) & 0x7ffu) - 1023;
  return e == -1023 ? ilogb(p) : e;
}

#define ZERO_EXPONENT (-126) /* the exponent zeros_align gives a zero operand or c (MMA-Sim) */
#define NO_EXPONENT INT_MIN

/* Alignment exponent of the product x·y = p (NO_EXPONENT: it does not take part). */
static int product_exponent(const lce_gemm_arch *m, lce_mma_format fmt, float x, float y, double p) {
  if (p == 0.0) {
    if (!m->zeros_align) return NO_EXPONENT;
    int ex = x == 0.0f ? ZERO_EXPONENT : operand_exponent(x, format_emin[fmt]);
    int ey = y == 0.0f ? ZERO_EXPONENT : operand_exponent(y, format_emin[fmt]);
    return ex + ey;
  }
  if (m->align_normalized) return double_exponent(p);
  return operand_exponent(x, format_emin[fmt]) + operand_exponent(y, format_emin[fmt]);
}

static int max_int(int a, int b) { return a > b ? a : b; }

/* A scaled term as an integer: toward zero, or toward -inf with term_floor. |v| < 2^28. */
static int64_t truncate_term(const lce_gemm_arch *m, double v) {
  return (int64_t)(m->term_floor ? floor(v) : trunc(v));
}

/* ---- the aligned sum to fp32 --------------------------------------------------------------- */

/* s·2^q as fp32 under the row's rounding, subnormal, overflow and zero-sign rules; all_neg_zero:
 * every term was a -0 (for LCE_MMA_ZERO_IEEE). */
static float sum_to_fp32(const lce_gemm_arch *m, int64_t s, int q, int all_neg_zero) {
  const int neg = s < 0;
  const float zero = neg && m->zero_sign != LCE_MMA_ZERO_PLUS ? -0.0f : 0.0f;
  if (s == 0) return m->zero_sign == LCE_MMA_ZERO_IEEE && all_neg_zero ? -0.0f : 0.0f;
  const uint64_t mag = neg ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
  const int lead = 63 - __builtin_clzll(mag) + q; /* exponent of the leading bit */
  if (m->ftz_output && lead < -126) return zero;
  const int ulp = max_int(lead - 23, -149); /* exponent of the result's last place */
  uint64_t mant;
  if (q >= ulp) {
    mant = mag << (q - ulp); /* exact: fewer than 24 bits */
  } else {
    const int sh = ulp - q;
    mant = sh < 64 ? mag >> sh : 0;
    if (m->final_round == LCE_MMA_RNE && sh <= 64) {
      const uint64_t rem = sh < 64 ? mag & (((uint64_t)1 << sh) - 1) : mag;
      const uint64_t half = (uint64_t)1 << (sh - 1);
      if (rem > half || (rem == half && (mant & 1u))) mant++;
    }
  }
  if (mant == 0) return zero;
  const double v = ldexp((double)mant, ulp); /* mant <= 2^24: exact */
  const float r = v > FLT_MAX ? (m->overflow_saturates ? FLT_MAX : INFINITY) : (float)v;
  return neg ? -r : r;
}

/* ---- steps ----------------------------------------------------------------------------------- */

/* One fused step over k products with strides (the tensor-core rows). */
static float fused_step(const lce_gemm_arch *m, lce_mma_format fmt, float c, const float *a, ptrdiff_t sa,
                        const float *b, ptrdiff_t sb, int64_t k) {
  int nan = isnan(c), pos_inf = c == INFINITY, neg_inf = c == -INFINITY;
  int all_neg_zero = c == 0.0f && signbit(c);
  int emax = NO_EXPONENT;
  if (c != 0.0f) emax = operand_exponent(c, -126);
  else if (m->zeros_align) emax = ZERO_EXPONENT;
  for (int64_t i = 0; i < k; i++) {
    const float x = operand(m, fmt, a[i * sa]), y = operand(m, fmt, b[i * sb]);
    const double p = (double)x * (double)y;
    if (isnan(p)) { nan = 1; continue; } /* NaN operand, or Inf·0 */
    if (isinf(p)) { pos_inf |= p > 0, neg_inf |= p < 0; continue; }
    all_neg_zero &= p == 0.0 && signbit(p);
    emax = max_int(emax, product_exponent(m, fmt, x, y, p));
  }
  if (nan || (pos_inf && neg_inf)) return lce_f32_from_bits(m->nan_bits);
  if (pos_inf || neg_inf) return pos_inf ? INFINITY : -INFINITY;
  if (emax == NO_EXPONENT) return sum_to_fp32(m, 0, 0, all_neg_zero); /* only zeros, none aligned */
  const int q = emax - 23 - m->extra_bits;
  const double scale = ldexp(1.0, -q);
  int64_t s = truncate_term(m, (double)c * scale);
  for (int64_t i = 0; i < k; i++) {
    const float x = operand(m, fmt, a[i * sa]), y = operand(m, fmt, b[i * sb]);
    s += truncate_term(m, (double)x * (double)y * scale);
  }
  return sum_to_fp32(m, s, q, all_neg_zero);
}

/* The ieee row: sequential fmaf. fmaf is correctly rounded wherever it runs, so the FMA instruction
 * and libm's fmaf give the same bits; where the CPU has FMA the loop uses the instruction inline
 * (without it every step was a call through the PLT: an eighth of `check --matrix default`). */
#if defined(__x86_64__) && defined(__GNUC__)
#define FMAF_DISPATCH 1
__attribute__((target("fma"))) static float fmaf_chain_hw(float c, const float *a, ptrdiff_t sa, const float *b,
                                                          ptrdiff_t sb, int64_t k) {
  for (int64_t i = 0; i < k; i++) c = __builtin_fmaf(a[i * sa], b[i * sb], c);
  return c;
}

/* Eight chains at once, each its own sequence of fmaf in order (the same bits as one at a time): a
 * chain waits on its previous fmaf's latency, eight independent ones fill that wait. */
__attribute__((target("fma"))) static void fmaf_chains8_hw(float c, const float *a, ptrdiff_t sa, const float *b,
                                                           ptrdiff_t sb, ptrdiff_t step, int64_t k, float *out) {
  float r[8];
  for (int j = 0; j < 8; j++) r[j] = c;
  for (int64_t i = 0; i < k; i++) {
    const float x = a[i * sa], *bi = b + i * sb;
    for (int j = 0; j < 8; j++) r[j] = __builtin_fmaf(x, bi[j * step], r[j]);
  }
  for (int j = 0; j < 8; j++) out[j] = r[j];
}
#endif

static float fmaf_chain(float c, const float *a, ptrdiff_t sa, const float *b, ptrdiff_t sb, int64_t k) {
#ifdef FMAF_DISPATCH
  if (__builtin_cpu_supports("fma")) return fmaf_chain_hw(c, a, sa, b, sb, k);
#endif
  for (int64_t i = 0; i < k; i++) c = fmaf(a[i * sa], b[i * sb], c);
  return c;
}

/* ---- the fast evaluation (same bits; the header says why) ----------------------------------- */

enum { FAST_PRODUCTS = 16, FAST_COLUMNS = 8 };

/* The rows fast_block serves: alignment by ea + eb with zeros at -126, truncation toward zero, RZ
 * to fp32 with subnormal results, overflow to Inf, every zero +0, nothing flushed. */
static int fast_row(const lce_gemm_arch *m, lce_mma_format fmt) {
  return !m->ieee && !m->align_normalized && m->zeros_align && !m->term_floor && m->final_round == LCE_MMA_RZ &&
         !m->ftz_inputs && !m->ftz_output && !m->overflow_saturates && m->zero_sign == LCE_MMA_ZERO_PLUS &&
         m->products[fmt] <= FAST_PRODUCTS;
}

static double pow2(int e) { /* 2^e for -1022 <= e <= 1023 */
  const uint64_t u = (uint64_t)(e + 1023) << 52;
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* The alignment exponent of a finite operand's bits u (zero: -126, as zeros_align gives it; else
 * operand_exponent's), and whether they are an Inf or NaN (biased exponent 255). */
static int fast_exponent(uint32_t u, int emin) {
  return (u & 0x7fffffffu) == 0 ? ZERO_EXPONENT : operand_exponent(lce_f32_from_bits(u), emin);
}
static int special_bits(uint32_t u) { return ((u >> 23) & 0xffu) == 0xffu; }

/* s·2^q rounded toward zero to fp32 (s != 0), overflow to Inf, zero +0. */
static float fast_sum_to_fp32(int64_t s, int q) {
  const double d = (double)s * pow2(q); /* exact: |s| < 2^33, -277 <= q <= 229 */
  if (fabs(d) >= 0x1p128) return d > 0 ? INFINITY : -INFINITY;
  float f = (float)d;
  if (fabsf(f) > fabs(d)) f = lce_f32_from_bits(lce_f32_bits(f) - 1u);
  return f == 0.0f ? 0.0f : f;
}

/* One step of k products (k <= FAST_PRODUCTS) for each of `cols` columns at once: c[j] =
 * step(c[j], a, b + j·step). A block whose a holds a special value, and a column whose b or c does,
 * is evaluated by the rule (fused_step). */
LCE_TARGET_CLONES("avx2", "default")
static void fast_block(const lce_gemm_arch *m, lce_mma_format fmt, float *c, const float *a, ptrdiff_t sa,
                       const float *b, ptrdiff_t sb, ptrdiff_t step, int k, int cols) {
  const uint32_t mask = fmt == LCE_MMA_TF32 ? 0xffffe000u : 0xffffffffu; /* tf32 reads the upper 19 bits */
  const int emin = format_emin[fmt], shift = 23 + m->extra_bits;
  double xa[FAST_PRODUCTS];
  int ea[FAST_PRODUCTS], special = 0;
  for (int i = 0; i < k; i++) {
    const uint32_t u = lce_f32_bits(a[i * sa]) & mask;
    special |= special_bits(u);
    ea[i] = fast_exponent(u, emin), xa[i] = (double)lce_f32_from_bits(u);
  }
  for (int j = 0; j < cols; j++) {
    const float *bj = b + j * step;
    const uint32_t uc = lce_f32_bits(c[j]);
    uint32_t ub[FAST_PRODUCTS];
    for (int i = 0; i < k; i++) ub[i] = lce_f32_bits(bj[i * sb]) & mask;
    int spec = special | special_bits(uc), emax = fast_exponent(uc, -126);
    for (int i = 0; i < k; i++) {
      const int e = ea[i] + fast_exponent(ub[i], emin);
      spec |= special_bits(ub[i]), emax = e > emax ? e : emax;
    }
    if (spec) {
      c[j] = fused_step(m, fmt, c[j], a, sa, bj, sb, k);
      continue;
    }
    const int q = emax - shift;
    const double scale = pow2(-q);
    /* Each scaled term is below 2^28 in magnitude: its truncation fits an int32. */
    int64_t s = (int64_t)((double)c[j] * scale);
    for (int i = 0; i < k; i++) s += (int32_t)(xa[i] * (double)lce_f32_from_bits(ub[i]) * scale);
    c[j] = s == 0 ? 0.0f : fast_sum_to_fp32(s, q);
  }
}

/* ---- steps and dots ------------------------------------------------------------------------ */

float lce_mma_step_rule(const lce_gemm_arch *arch, lce_mma_format fmt, float c, const float *a, const float *b, int k) {
  if (arch->ieee) return fmaf_chain(c, a, 1, b, 1, k);
  return fused_step(arch, fmt, c, a, 1, b, 1, k);
}

float lce_mma_step(const lce_gemm_arch *arch, lce_mma_format fmt, float c, const float *a, const float *b, int k) {
  if (!fast_row(arch, fmt) || k > FAST_PRODUCTS) return lce_mma_step_rule(arch, fmt, c, a, b, k);
  fast_block(arch, fmt, &c, a, 1, b, 1, 0, k, 1);
  return c;
}

void lce_gemm_dots(const lce_gemm_arch *arch, lce_mma_format fmt, float c, const float *a, ptrdiff_t stride_a,
                   const float *b, ptrdiff_t stride_b, ptrdiff_t step_b, int64_t k, int64_t count, float *out) {
  int64_t j = 0;
#ifdef FMAF_DISPATCH
  if (arch->ieee && __builtin_cpu_supports("fma"))
    for (; j + 8 <= count; j += 8) fmaf_chains8_hw(c, a, stride_a, b + j * step_b, stride_b, step_b, k, out + j);
#endif
  if (fast_row(arch, fmt)) {
    const int64_t len = arch->products[fmt];
    for (; j < count; j += FAST_COLUMNS) {
      const int cols = count - j < FAST_COLUMNS ? (int)(count - j) : FAST_COLUMNS;
      float acc[FAST_COLUMNS];
      for (int t = 0; t < cols; t++) acc[t] = c;
      for (int64_t k0 = 0; k0 < k; k0 += len)
        fast_block(arch, fmt, acc, a + k0 * stride_a, stride_a, b + j * step_b + k0 * stride_b, stride_b, step_b,
                   (int)(k - k0 < len ? k - k0 : len), cols);
      for (int t = 0; t < cols; t++) out[j + t] = acc[t];
    }
  }
  for (; j < count; j++) out[j] = lce_gemm_dot(arch, fmt, c, a, stride_a, b + j * step_b, stride_b, k);
}

float lce_gemm_dot(const lce_gemm_arch *arch, lce_mma_format fmt, float c, const float *a, ptrdiff_t stride_a,
                   const float *b, ptrdiff_t stride_b, int64_t k) {
  if (arch->ieee) return fmaf_chain(c, a, stride_a, b, stride_b, k);
  if (fast_row(arch, fmt)) {
    lce_gemm_dots(arch, fmt, c, a, stride_a, b, stride_b, 0, k, 1, &c);
    return c;
  }
  const int64_t step = arch->products[fmt];
  for (int64_t k0 = 0; k0 < k; k0 += step) {
    const int64_t len = k - k0 < step ? k - k0 : step;
    c = fused_step(arch, fmt, c, a + k0 * stride_a, stride_a, b + k0 * stride_b, stride_b, len);
  }
  return c;
}

/* ---- the epilogue ---------------------------------------------------------------------------- */

float lce_gemm_epilogue_as(lce_epilogue_rounding r, float alpha, float acc, float c) {
  if (r == LCE_EPILOGUE_FMA) return fmaf(alpha, acc, c);
  const float scaled = alpha * acc; /* rounded here: the build never contracts (-ffp-contract=off) */
  return scaled + c;
}

const char *lce_epilogue_rounding_name(lce_epilogue_rounding r) {
  return r == LCE_EPILOGUE_FMA ? "fma(alpha, acc, C)" : "round(round(alpha*acc) + C)";
}

float lce_gemm_epilogue(float alpha, float acc, float c) { return lce_gemm_epilogue_as(LCE_GEMM_EPILOGUE, alpha, acc, c); }
