/* lce_oracle_backward.c — the tier-0 oracle's gradient elements: d_hidden = dz · W and
 * d_weight = prior + dz^T · hidden, one correctly rounded sum per element.
 *
 * A dz value has p bits and a W or hidden value at most 24 (one limb; tf32-rounded values with tf32), so lce_mul_exact_1 forms
 * each product exactly in one more limb than dz has, and mpfr_sum rounds the element once. W and
 * hidden come as MPFR numbers of the dtype's precision and as doubles for the magnitudes.
 * Given a bound |dz - DZ| <= err per element (lce_oracle_loss.c; dz means ds with softcap), for
 * d_hidden[n, k]
 *     |dh - DH| <= sum_v err_nv |W_vk| + half_ulp(dh),
 * and for d_weight[j, k], whose prior is an exact fp32 term of the same sum,
 *     |dw - DW| <= sum_n err_nj |h_nk| + half_ulp(dw).
 * The sums of absolute values are evaluated in double from upper bounds on |dz| and made upper
 * bounds by lce_sum_bound. A sum whose ternary value says it was exact adds no half ulp, so an
 * element with no dz contribution (all tokens ignored) is exactly its prior, with bound 0. */
#include "lce_oracle_internal.h"

/* The product of a regular number with limbs(a) limbs and a one-limb regular number has at most
 * limbs(a) + 1 limbs and its top bit in the top limb or the bit below, so one mpn_mul_1 and at
 * most a one-bit shift form it exactly; the custom interface then makes x that number. This is
 * mpfr_mul without the rounding, flags and range checks (4x faster on the oracle's hot path).
 * Products whose exponent lies beyond 2^(+-2^60) go through mpfr_mul, which rounds and flags
 * them in the current range; the fast path needs the current range to reach 2^(+-2^60), as the
 * oracle's widest range does (MPFR's default range reaches 2^(+-2^30): fine for operands of sane
 * magnitude, such as dtype values and the tests' inputs). */
/* x[0..n] = a[0..n) * b for normalized a and b, shifted left one bit when the top bit of x[n] is
 * clear; returns 1 when no shift was needed. Inline for 64-bit limbs (the hot path is 1 to 3
 * limbs, where GMP's call overhead dominates), mpn otherwise. */
#if defined(__SIZEOF_INT128__) && GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0
__extension__ typedef unsigned __int128 lce_u128;
static int mul_limbs(mp_limb_t *x, const mp_limb_t *a, mp_size_t n, mp_limb_t b) {
  lce_u128 carry = 0;
  for (mp_size_t i = 0; i < n; i++) {
    lce_u128 t = (lce_u128)a[i] * b + carry;
    x[i] = (mp_limb_t)t;
    carry = t >> 64;
  }
  x[n] = (mp_limb_t)carry;
  if (x[n] >> 63) return 1;
  for (mp_size_t i = n; i > 0; i--) x[i] = (x[i] << 1) | (x[i - 1] >> 63);
  x[0] <<= 1;
  return 0;
}
#else
static int mul_limbs(mp_limb_t *x, const mp_limb_t *a, mp_size_t n, mp_limb_t b) {
  x[n] = mpn_mul_1(x, a, n, b);
  if (x[n] >> (GMP_NUMB_BITS - 1)) return 1;
  mpn_lshift(x, x, n + 1, 1);
  return 0;
}
#endif

void lce_mul_exact_1(mpfr_ptr x, mpfr_srcptr a, mpfr_srcptr b) {
  void *xs = mpfr_custom_get_significand(x);
  const mp_size_t na = (mp_size_t)((mpfr_get_prec(a) + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS);
  const mpfr_prec_t xprec = (mpfr_prec_t)(na + 1) * GMP_NUMB_BITS;
  if (mpfr_zero_p(a) || mpfr_zero_p(b)) {
    mpfr_custom_init_set(x, MPFR_ZERO_KIND, 0, xprec, xs);
    return;
  }
  mpfr_exp_t e = mpfr_get_exp(a) + mpfr_get_exp(b);
  const mpfr_exp_t limit = (mpfr_exp_t)1 << 60;
  if (!mpfr_regular_p(a) || !mpfr_regular_p(b) || e < -limit || e > limit) {
    mpfr_mul(x, a, b, MPFR_RNDN);
    return;
  }
  const mp_limb_t *as = mpfr_custom_get_significand(a), *bs = mpfr_custom_get_significand(b);
  mp_limb_t *xl = xs;
  if (!mul_limbs(xl, as, na, bs[0])) e--;
  int kind = mpfr_signbit(a) != mpfr_signbit(b) ? -MPFR_REGULAR_KIND : MPFR_REGULAR_KIND;
  mpfr_custom_init_set(x, kind, e, xprec, xs);
}

double lce_d_hidden_element(mpfr_t out, mpfr_prec_t prec, mpfr_t *dz, const double *dz_err,
                            const double *dz_mag, const double *dz_emag, double *emag, mpfr_t *w_col,
                            const double *w_col_d, int64_t v, lce_mp_array *prod, double *mag) {
  double se = 0.0, m = 0.0, em = 0.0;
  int64_t terms = 0; /* non-zero terms: exactly zero ones add neither magnitude nor slack */
  for (int64_t j = 0; j < v; j++) {
    lce_mul_exact_1(prod->x[j], dz[j], w_col[j]);
    const double w = fabs(w_col_d[j]);
    if (w == 0.0) continue; /* also avoids Inf * 0 */
    se += dz_err[j] * w;
    m += dz_mag[j] * w;
    em += dz_emag[j] * w;
    terms += dz_err[j] != 0.0;
  }
  int inexact = mpfr_sum(out, prod->ptr, (unsigned long)v, MPFR_RNDN);
  *mag = m;
  *emag = em;
  double e = lce_sum_bound(se, terms);
  return inexact ? lce_add_up(e, lce_half_ulp(out, prec)) : e;
}

double lce_d_weight_element(mpfr_t out, mpfr_prec_t prec, double prior, mpfr_t *dz_col,
                            const double *dz_err_col, const double *dz_mag_col, const double *dz_emag_col,
                            double *emag, mpfr_t *h_col, const double *h_col_d, const int64_t *active,
                            int64_t na, lce_mp_array *prod, double *mag) {
  double se = 0.0, m = 0.0, em = 0.0;
  int64_t terms = 0;
  for (int64_t i = 0; i < na; i++) {
    int64_t n = active[i];
    lce_mul_exact_1(prod->x[i], dz_col[i], h_col[n]);
    /* A zero hidden value makes an exact zero term: no magnitude, no error (and no Inf * 0). A
     * zero dz may still carry an error (its terms can cancel), so only its bound decides. */
    const double h = fabs(h_col_d[n]);
    if (h == 0.0) continue;
    m += dz_mag_col[i] * h;
    em += dz_emag_col[i] * h;
    if (dz_err_col[i] == 0.0) continue;
    se += dz_err_col[i] * h;
    terms++;
  }
  mpfr_set_d(prod->x[na], prior, MPFR_RNDN); /* exact */
  int inexact = mpfr_sum(out, prod->ptr, (unsigned long)(na + 1), MPFR_RNDN);
  *mag = fabs(prior) + m;
  *emag = fabs(prior) + em;
  double e = lce_sum_bound(se, terms);
  return inexact ? lce_add_up(e, lce_half_ulp(out, prec)) : e;
}

void lce_zero_d_hidden_columns(const lce_case *c, const double *w, unsigned char *col_zero) {
  const int64_t H = c->h, V = c->v;
  const int zero_sum = c->softcap == 0 && lce_case_z_loss(c) == 0.0;
  for (int64_t k = 0; k < H; k++) {
    const double c0 = V > 0 ? w[k] : NAN;
    int same = isfinite(c0);
    for (int64_t v = 1; v < V && same; v++) same = w[v * H + k] == c0;
    col_zero[k] = (unsigned char)(same && (c0 == 0.0 || zero_sum));
  }
}
