/* lce_fast_kernels.c — tier 1's inner loops (lce_fast_internal.h), written so that the compiler
 * vectorizes them without changing a bit of any result.
 *
 * The build forbids FMA contraction and fast-math (-ffp-contract=off, -fno-fast-math, top-level
 * CMakeLists.txt), so vector code evaluates exactly the IEEE operations the C source names, in its
 * order, lane by lane. Two shapes of loop follow from that:
 *   - sums along k (a logit) keep FAST_LANES explicit partial sums, k mod FAST_LANES, combined in a
 *     fixed tree and then with the tail: the same order whatever width the vector code has;
 *   - gradient steps (d_hidden and d_weight) are element-wise over k: acc[k] op= d x[k], no sum
 *     across k, so the lanes are independent and vectorizing changes nothing.
 * The file is built with -O3 (reference/oracle/CMakeLists.txt) and, with GCC, each kernel is cloned
 * for AVX2 and AVX-512F beside the baseline (target_clones: the loader picks
 * the clone the CPU runs); every clone computes the same operations, so the bits are those of the
 * baseline code on any machine. test_fast checks tier 1 against tier 0 element by element and the
 * committed reference outputs (test_fast_golden) hold the bits.
 *
 * No FMA is needed: every product here is exact in double. Logit products are of two dtype values
 * (at most 24 significant bits each); in the split dot product (lce_fast.c, fast_dot_bound) d is
 * split into its top 26 bits dh and the rest dl (at most 27 bits), each times a value of at most 24
 * bits. The bound sums (|terms| times coefficients) round, and their order is fixed the same way. */
#include <stdint.h>
#include <string.h>

#include "lce_fast_internal.h"

#define FAST_CLONES LCE_TARGET_CLONES("avx512f", "avx2", "default")

/* Eight doubles as one value (GCC and clang vector extensions): element-wise IEEE operations, lowered
 * to whatever vector width the clone has (AVX-512: one register; the baseline: four SSE2 pairs). */
typedef double fast_v8 __attribute__((vector_size(64)));
typedef uint64_t fast_u8 __attribute__((vector_size(64)));

/* Lane l of the FAST_LANES = 16 partial sums takes the products k = l mod 16 (lanes 0-7 in lo, 8-15
 * in hi); then lanes l and l + 8, l and l + 4, l and l + 2, 0 and 1 are added, then the tail in order. */
FAST_CLONES
double fast_dot_lanes(const double *restrict h, const double *restrict w, int64_t n, double *restrict m_out) {
  const fast_u8 magnitude = (fast_u8){0} + (UINT64_MAX >> 1); /* every bit but the sign: |x| */
  fast_v8 slo = {0}, shi = {0}, mlo = {0}, mhi = {0}, a[4];
  int64_t k = 0;
  for (; k + FAST_LANES <= n; k += FAST_LANES) {
    memcpy(a, h + k, 2 * sizeof a[0]), memcpy(a + 2, w + k, 2 * sizeof a[0]);
    const fast_v8 plo = a[0] * a[2], phi = a[1] * a[3];
    slo += plo, shi += phi;
    mlo += (fast_v8)((fast_u8)plo & magnitude), mhi += (fast_v8)((fast_u8)phi & magnitude);
  }
  double s[8], m[8];
  const fast_v8 s8 = slo + shi, m8 = mlo + mhi;
  memcpy(s, &s8, sizeof s), memcpy(m, &m8, sizeof m);
  for (int width = 4; width > 0; width /= 2)
    for (int l = 0; l < width; l++) s[l] += s[l + width], m[l] += m[l + width];
  double st = s[0], mt = m[0];
  for (; k < n; k++) {
    const double p = h[k] * w[k];
    st += p;
    mt += fabs(p);
  }
  *m_out = mt;
  return st;
}

/* Sum2's two accumulators of count <= FAST_SUM2_BATCH dot products side by side, before their final
 * addition: the TwoSum chain hi over the exact products h_k w_k, k = 0, 1, ..., n - 1 in order, and
 * the plain sum lo of its errors. Lane i runs logit i's chain, each operation the scalar chain's, so
 * each lane has the bits of that logit alone (the lanes never mix); eight chains in one vector hide the latency a single chain waits on. Lanes past
 * count repeat lane 0 and are dropped. */
FAST_CLONES
void fast_sum2_batch(const double *const *h, const double *const *w, int count, int64_t n, double *hi, double *lo) {
  const double *hp[FAST_SUM2_BATCH], *wp[FAST_SUM2_BATCH];
  for (int i = 0; i < FAST_SUM2_BATCH; i++) hp[i] = h[i < count ? i : 0], wp[i] = w[i < count ? i : 0];
  fast_v8 sh = {0}, sl = {0};
  for (int64_t k = 0; k < n; k++) {
    const fast_v8 x = {hp[0][k], hp[1][k], hp[2][k], hp[3][k], hp[4][k], hp[5][k], hp[6][k], hp[7][k]};
    const fast_v8 y = {wp[0][k], wp[1][k], wp[2][k], wp[3][k], wp[4][k], wp[5][k], wp[6][k], wp[7][k]};
    const fast_v8 p = x * y, s = sh + p, bb = s - sh;
    sl += (sh - (s - bb)) + (p - bb);
    sh = s;
  }
  double a[FAST_SUM2_BATCH], b[FAST_SUM2_BATCH];
  memcpy(a, &sh, sizeof a), memcpy(b, &sl, sizeof b);
  for (int i = 0; i < count; i++) hi[i] = a[i], lo[i] = b[i];
}

/* Terms s[0..count) of the split dot product and its magnitude, rnd and flip sums, element-wise
 * over k, each k taking the terms in order (the same sequence of operations per element as one term
 * at a time); x[j] is term j's vector. Each accumulator is loaded and stored once per FAST_TERMS
 * terms, which is what makes the loop compute-bound. with_b selects the third magnitude sum; count
 * and with_b are constants in each caller, so each specializes. */
static inline void grad_steps(const fast_step *restrict s, const double *const restrict *x, int count, int64_t n,
                              double *restrict hi, double *restrict lo, double *restrict a, double *restrict b,
                              double *restrict e, double *restrict r, double *restrict q, int with_b) {
  for (int64_t k = 0; k < n; k++) {
    double h = hi[k], l = lo[k], av = a[k], bv = with_b ? b[k] : 0.0, ev = e[k], rv = r[k], qv = q[k];
    for (int j = 0; j < count; j++) {
      const double xk = x[j][k], ax = fabs(xk);
      const double p = s[j].dh * xk, sum = h + p, bb = sum - h;
      const double err = (h - (sum - bb)) + (p - bb); /* TwoSum(h, p) */
      h = sum;
      l += err + s[j].dl * xk;
      av += s[j].ta * ax;
      if (with_b) bv += s[j].tb * ax;
      ev += s[j].te * ax;
      rv += s[j].tr * xk;
      qv += s[j].tq * ax;
    }
    hi[k] = h, lo[k] = l, a[k] = av, e[k] = ev, r[k] = rv, q[k] = qv;
    if (with_b) b[k] = bv;
  }
}

FAST_CLONES
void fast_grad_step(const fast_step *s, const double *const *x, int count, int64_t n, const fast_acc *acc) {
  const fast_acc c = *acc;
  if (count == FAST_TERMS && c.b) grad_steps(s, x, FAST_TERMS, n, c.hi, c.lo, c.a, c.b, c.e, c.r, c.q, 1);
  else if (count == FAST_TERMS) grad_steps(s, x, FAST_TERMS, n, c.hi, c.lo, c.a, NULL, c.e, c.r, c.q, 0);
  else if (c.b)
    for (int j = 0; j < count; j++) grad_steps(s + j, x + j, 1, n, c.hi, c.lo, c.a, c.b, c.e, c.r, c.q, 1);
  else
    for (int j = 0; j < count; j++) grad_steps(s + j, x + j, 1, n, c.hi, c.lo, c.a, NULL, c.e, c.r, c.q, 0);
}

FAST_CLONES
void fast_axpy_abs(double t, const double *restrict x, int64_t n, double *restrict y) {
  for (int64_t k = 0; k < n; k++) y[k] += t * fabs(x[k]);
}
