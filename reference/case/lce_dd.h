/* lce_dd.h — double-double arithmetic (a value held as the unevaluated sum h + l of two doubles) and
 * functions compiled once per instruction set, shared by tier 1's refinement (lce_fast_refine.c) and
 * the judge's sums (lce_metrics.c).
 *
 * The error-free transformations are exact in round-to-nearest double arithmetic without -ffast-math
 * (gradual underflow aside: a TwoProduct whose low part falls below 2^-1022 loses up to 2^-1075):
 *   TwoSum (Knuth)      s + e = a + b
 *   TwoProduct (fma)    p + e = a b
 * The double-double operations are those of Joldes, Muller and Popescu, "Tight and rigorous error
 * bounds for basic building blocks of double-word arithmetic" (ACM TOMS 44, 2017), by their names there;
 * each result is normalized (|l| <= ulp(h) / 2). */
#ifndef LCE_DD_H
#define LCE_DD_H

#include <math.h>

/* Functions cloned per instruction set (GCC's target_clones: the loader picks the clone the CPU
 * runs); every clone computes the same IEEE operations, so the same bits (fma is exact-then-rounded
 * wherever it runs: a clone with the FMA instruction inlines it, the baseline calls libm's). GCC only:
 * clang 14 leaves the clones' dispatcher undefined at link time. LCE_NO_CLONES builds the baseline alone. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(LCE_NO_CLONES) && \
    !defined(__SANITIZE_ADDRESS__)
#define LCE_TARGET_CLONES(...) __attribute__((target_clones(__VA_ARGS__)))
#else
#define LCE_TARGET_CLONES(...)
#endif

typedef struct lce_dd {
  double h, l;
} lce_dd;

/* TwoSum (Knuth): s + *e = a + b exactly, also with gradual underflow. */
static inline double lce_two_sum(double a, double b, double *e) {
  double s = a + b, bb = s - a;
  *e = (a - (s - bb)) + (b - bb);
  return s;
}

/* a + b exactly, as a double-double. */
static inline lce_dd lce_dd_sum(double a, double b) {
  lce_dd r;
  r.h = lce_two_sum(a, b, &r.l);
  return r;
}

/* TwoProduct: a b exactly, as a double-double (see the header for underflow). */
static inline lce_dd lce_dd_prod(double a, double b) {
  const double p = a * b;
  return (lce_dd){p, fma(a, b, -p)};
}

static inline lce_dd lce_dd_add_d(lce_dd x, double y) { /* DWPlusFP */
  const lce_dd s = lce_dd_sum(x.h, y);
  return lce_dd_sum(s.h, x.l + s.l);
}

static inline lce_dd lce_dd_add(lce_dd x, lce_dd y) { /* AccurateDWPlusDW */
  const lce_dd s = lce_dd_sum(x.h, y.h), t = lce_dd_sum(x.l, y.l);
  const lce_dd v = lce_dd_sum(s.h, s.l + t.h);
  return lce_dd_sum(v.h, t.l + v.l);
}

static inline lce_dd lce_dd_mul_d(lce_dd x, double y) { /* DWTimesFP3 */
  const double p = x.h * y, e = fma(x.h, y, -p);
  return lce_dd_sum(p, fma(x.l, y, e));
}

static inline lce_dd lce_dd_mul(lce_dd x, lce_dd y) { /* DWTimesDW3 */
  const double p = x.h * y.h, e = fma(x.h, y.h, -p);
  const double t = fma(x.l, y.h, fma(x.h, y.l, x.l * y.l));
  return lce_dd_sum(p, e + t);
}

static inline lce_dd lce_dd_div(lce_dd x, lce_dd y) {
  const double q = x.h / y.h;
  const lce_dd qy = lce_dd_mul_d(y, q), r = lce_dd_add(x, (lce_dd){-qy.h, -qy.l});
  return lce_dd_sum(q, r.h / y.h);
}

#endif
