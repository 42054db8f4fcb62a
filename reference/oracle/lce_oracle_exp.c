/* lce_oracle_exp.c — exp(x) correctly rounded to nearest at 160 bits (the oracle's precision) for
 * -2^12 <= x <= -2^-33, in 256-bit fixed point, ~8x faster than mpfr_exp there (and tanh, sech of
 * 2^-8 <= |q| < 2^12 from that exp, lce_tanh_sech_rn, for the softcap); every other
 * argument, and every one whose rounding the fixed point cannot decide, goes to mpfr_exp. The
 * correctly rounded value is unique, so the result is mpfr_exp's bit for bit (test_oracle's exp
 * test compares them on random arguments). Tier 0's exps (lce_oracle_forward.c) were most of its
 * time and most of tier 1's escalations.
 *
 * Fixed point. A number is 4 limbs of 64 bits, the top one its integer part: eps = 2^-192 is the
 * unit. Every operation truncates (rounds down), so each computed value is below the exact one.
 * Constants (ln 2, exp(j/2^8), exp(j/2^16), 1/i!) are computed once with MPFR at 320 bits rounded
 * down and truncated: each below its exact value by less than 2 eps.
 *
 * Reduction. a = -x > 0 is exact in fixed point (160 bits, 2^-33 <= a < 2^12). q = ceil(a / ln 2)
 * (from a double, then corrected), R = q LN2 - A with 0 <= R < LN2; since LN2 <= ln 2 < LN2 + 2 eps,
 * the exact r = q ln 2 - a lies in [R, R + 2 q eps], and exp(x) = 2^-q exp(r).
 * exp(R) = T1[j1] T2[j2] exp(s) with j1, j2 the top two bytes of R's fraction (j1 <= 177 as
 * R < ln 2, so T1 < 1.9967; T2 < 1.0039) and 0 <= s < 2^-16.
 *
 * Error. exp(s) by Horner on the degree-10 Taylor polynomial: each step loses < eps (truncation)
 * plus < 2 eps (its constant), later steps scale earlier losses by s, so the sum is below
 * 3.001 eps, and the remainder sum_{i>10} s^i/i! < 2^-201; so 0 <= exp(s) - P < 3.002 eps.
 * Y1 = T1 T2 (truncated): T1 T2 - Y1 < 2 (2 eps) + 1.004 (2 eps) + eps = 7.008 eps.
 * Y = Y1 P: exp(R) - Y < 2.004 (3.002 eps) + 1.0001 (7.008 eps) + eps < 14.03 eps, and Y <= exp(R).
 * exp(r) - exp(R) <= exp(R) (e^(2 q eps) - 1) < 4.001 q eps. So exp(r) lies in [Y, Y + E eps],
 * E = 15 + 5 q.
 *
 * Rounding. exp(r) in [1, 2) takes 160 bits: the integer bit and 159 of the 192 fraction bits; the
 * other 33 bits (rem) say where Y lies between two 160-bit numbers, the midpoint at rem = 2^32.
 * When [rem, rem + E] holds no midpoint (rem + E < 2^32: round down; 2^32 < rem and rem + E <
 * 2^32 + 2^33: round up) every number in it, exp(r) included, rounds the same way. exp of a non-zero
 * dyadic number is never a midpoint, but equality falls back anyway. Y outside [1, 2 - E eps) (a
 * binade edge) falls back too. The result 2^-q times that is far inside MPFR's range: no flag is
 * raised, as mpfr_exp raises none there except inexact (which the oracle does not read). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "lce_oracle_internal.h"

#if defined(__SIZEOF_INT128__) && GMP_NUMB_BITS == 64 && GMP_NAIL_BITS == 0
#define FAST_EXP 1
__extension__ typedef unsigned __int128 u128;

typedef struct fx {
  uint64_t l[4]; /* l[3]: integer part; l[2..0]: 192 fraction bits, l[2] the top */
} fx;

enum { T_SIZE = 256, TAYLOR = 10 };
static fx LN2, T1[T_SIZE], T2[T_SIZE], C[TAYLOR + 1];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* floor(v 2^192) of a non-negative v < 2^64 into f. */
static void fx_from_mpfr(fx *f, mpfr_t v, mpz_t z) {
  mpfr_mul_2ui(v, v, 192, MPFR_RNDZ);
  mpfr_get_z(z, v, MPFR_RNDZ);
  for (int i = 0; i < 4; i++) f->l[i] = (uint64_t)mpz_getlimbn(z, i);
}

static void init_constants(void) {
  mpfr_t v;
  mpz_t z;
  mpfr_init2(v, 320);
  mpz_init(z);
  mpfr_const_log2(v, MPFR_RNDD);
  fx_from_mpfr(&LN2, v, z);
  for (int j = 0; j < T_SIZE; j++) {
    mpfr_set_ui_2exp(v, (unsigned long)j, -8, MPFR_RNDN); /* exact */
    mpfr_exp(v, v, MPFR_RNDD);
    fx_from_mpfr(&T1[j], v, z);
    mpfr_set_ui_2exp(v, (unsigned long)j, -16, MPFR_RNDN);
    mpfr_exp(v, v, MPFR_RNDD);
    fx_from_mpfr(&T2[j], v, z);
  }
  mpfr_set_ui(v, 1, MPFR_RNDN);
  for (int i = 0; i <= TAYLOR; i++) {
    if (i > 1) mpfr_div_ui(v, v, (unsigned long)i, MPFR_RNDD); /* 1/i!, below it */
    mpfr_t t;
    mpfr_init2(t, 320);
    mpfr_set(t, v, MPFR_RNDN);
    fx_from_mpfr(&C[i], t, z);
    mpfr_clear(t);
  }
  mpz_clear(z);
  mpfr_clear(v);
  mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* this thread's constants, not needed again */
}

/* a b truncated (both < 4: the product's integer part fits its limb). */
static fx fx_mul(const fx *a, const fx *b) {
  uint64_t p[8] = {0};
  for (int i = 0; i < 4; i++) {
    u128 carry = 0;
    for (int j = 0; j < 4; j++) {
      u128 t = (u128)a->l[i] * b->l[j] + p[i + j] + carry;
      p[i + j] = (uint64_t)t;
      carry = t >> 64;
    }
    p[i + 4] = (uint64_t)carry;
  }
  fx r = {{p[3], p[4], p[5], p[6]}};
  return r;
}

static fx fx_add(const fx *a, const fx *b) {
  fx r;
  u128 carry = 0;
  for (int i = 0; i < 4; i++) {
    u128 t = (u128)a->l[i] + b->l[i] + carry;
    r.l[i] = (uint64_t)t;
    carry = t >> 64;
  }
  return r;
}

/* r = a - b; returns 1 when that borrowed (a < b). */
static int fx_sub(fx *r, const fx *a, const fx *b) {
  uint64_t borrow = 0;
  for (int i = 0; i < 4; i++) {
    const uint64_t x = a->l[i], y = b->l[i];
    r->l[i] = x - y - borrow;
    borrow = (x < y) || (x == y && borrow);
  }
  return (int)borrow;
}

/* a q for a small q (the product < 2^64). */
static fx fx_mul_small(const fx *a, uint64_t q) {
  fx r;
  u128 carry = 0;
  for (int i = 0; i < 4; i++) {
    u128 t = (u128)a->l[i] * q + carry;
    r.l[i] = (uint64_t)t;
    carry = t >> 64;
  }
  return r;
}

static int fx_less(const fx *a, const fx *b) {
  for (int i = 3; i >= 0; i--)
    if (a->l[i] != b->l[i]) return a->l[i] < b->l[i];
  return 0;
}

/* exp(-a) for a = 0.m 2^ex (m: the 3 significand limbs of a 160-bit number; a_d: a as a double)
 * with 2^-33 <= a < 2^12: exp(-a) = 2^-q exp(r), exp(r) in [Y, Y + E eps] with Y in [1, 2) (see
 * Reduction and Error above). 0 when out of range or at a binade edge. */
static int exp_approx(const uint64_t *m, mpfr_exp_t ex, double a_d, fx *Y, int64_t *q_out, uint64_t *E) {
  if (ex > 12 || ex < -32) return 0;
  /* A: the 192-bit significand m (its low 32 bits zero at 160 bits) times 2^ex, in eps units. */
  fx A = {{m[0], m[1], m[2], 0}};
  if (ex > 0) {
    A.l[3] = m[2] >> (64 - ex);
    for (int i = 2; i > 0; i--) A.l[i] = (A.l[i] << ex) | (A.l[i - 1] >> (64 - ex));
    A.l[0] <<= ex;
  } else if (ex < 0) {
    const int s = (int)-ex; /* <= 32: only the zero low bits leave */
    for (int i = 0; i < 2; i++) A.l[i] = (A.l[i] >> s) | (A.l[i + 1] << (64 - s));
    A.l[2] >>= s;
  }
  int64_t q = (int64_t)ceil(a_d / 0.6931471805599453);
  fx R;
  for (int tries = 0;; tries++) { /* R = q LN2 - A in [0, LN2) */
    if (tries == 3 || q < 0) return 0;
    const fx qln2 = fx_mul_small(&LN2, (uint64_t)q);
    if (fx_sub(&R, &qln2, &A)) {
      q++;
      continue;
    }
    if (!fx_less(&R, &LN2)) {
      q--;
      continue;
    }
    break;
  }
  const int j1 = (int)(R.l[2] >> 56), j2 = (int)((R.l[2] >> 48) & 0xff);
  fx s = R;
  s.l[2] &= ((uint64_t)1 << 48) - 1;
  fx P = C[TAYLOR];
  for (int i = TAYLOR - 1; i >= 0; i--) {
    P = fx_mul(&P, &s);
    P = fx_add(&P, &C[i]);
  }
  const fx Y1 = fx_mul(&T1[j1], &T2[j2]);
  *Y = fx_mul(&Y1, &P);
  *q_out = q;
  *E = 15 + 5 * (uint64_t)q;
  return Y->l[3] == 1; /* below 1 or at 2: a binade edge */
}

/* The fast path of lce_exp_rn; 0 when it cannot decide (the caller then asks mpfr_exp). */
static int exp_fixed(mpfr_ptr out, mpfr_srcptr x) {
  fx Y;
  int64_t q;
  uint64_t E;
  if (!exp_approx((const uint64_t *)mpfr_custom_get_significand(x), mpfr_get_exp(x), -mpfr_get_d(x, MPFR_RNDN), &Y,
                  &q, &E))
    return 0;
  const uint64_t rem = Y.l[0] & (((uint64_t)1 << 33) - 1), half = (uint64_t)1 << 32;
  int up;
  if (rem + E < half) up = 0;
  else if (rem > half && rem + E < half + ((uint64_t)1 << 33)) up = 1;
  else return 0;
  /* The 160-bit significand, top-aligned in 3 limbs: the integer bit, then the fraction's top 159. */
  mp_limb_t sig[3];
  sig[2] = ((uint64_t)1 << 63) | (Y.l[2] >> 1);
  sig[1] = (Y.l[2] << 63) | (Y.l[1] >> 1);
  sig[0] = ((Y.l[1] << 63) | (Y.l[0] >> 1)) & ~(((uint64_t)1 << 32) - 1);
  mpfr_exp_t e = 1 - (mpfr_exp_t)q;
  if (up) {
    u128 t = (u128)sig[0] + ((uint64_t)1 << 32);
    sig[0] = (uint64_t)t;
    t = (u128)sig[1] + (uint64_t)(t >> 64);
    sig[1] = (uint64_t)t;
    t = (u128)sig[2] + (uint64_t)(t >> 64);
    sig[2] = (uint64_t)t;
    if (t >> 64) sig[2] = (uint64_t)1 << 63, e++; /* rounded up to 2 */
  }
  mpfr_t r;
  mpfr_custom_init_set(r, MPFR_REGULAR_KIND, e, 160, sig);
  mpfr_set(out, r, MPFR_RNDN); /* exact: the same precision */
  return 1;
}


/* A 256-bit MPFR number on the stack (custom interface: no allocation). */
#define STACK_MPFR(name)                                         \
  mp_limb_t name##_limbs[256 / GMP_NUMB_BITS];                   \
  mpfr_t name;                                                   \
  mpfr_custom_init(name##_limbs, 256);                           \
  mpfr_custom_init_set(name, MPFR_ZERO_KIND, 0, 256, name##_limbs)

/* Rounds b (256 bits, |b - exact| <= rho |b|, exact not a 160-bit midpoint) to out (160 bits) when
 * that rounding is certain (mpfr_can_round, with the one extra bit that rounding to nearest asks);
 * returns 0 otherwise. */
static int round_certain_160(mpfr_ptr out, mpfr_srcptr b, double rho) {
  int e;
  frexp(rho, &e); /* rho < 2^e: |b - exact| < 2^(EXP(b) + e) */
  if (!mpfr_can_round(b, -e - 1, MPFR_RNDN, MPFR_RNDZ, 161)) return 0;
  mpfr_set(out, b, MPFR_RNDN);
  return 1;
}

/* tanh and sech of q from u = exp(-|q|) (lce_tanh_sech_rn): u is within a relative eta above the
 * computed one. u2 = RN(u^2) is within kappa u2 of U^2, kappa = 2.0001 eta + 2^-255; num = RN(1 - u2)
 * and den = RN(1 + u2) within u2 kappa plus their own half ulp; so tanh |q| = num / den has relative
 * error rho_t <= 1.02 (u2 kappa (1 / num + 1) + 3 2^-256) and sech q = 2u / den rho_s <= 1.02 (eta +
 * u2 kappa + 2 2^-256); doubled for the double arithmetic that evaluates them (rounded up). Exact
 * values are never 160-bit midpoints: tanh and sech of a non-zero dyadic number are transcendental. */
static int tanh_sech_fixed(mpfr_ptr t_out, mpfr_ptr s_out, mpfr_srcptr q) {
  fx Y;
  int64_t k;
  uint64_t E;
  if (mpfr_get_exp(q) < -7) return 0; /* |q| < 2^-8: 1 - u^2 cancels too much */
  if (!exp_approx((const uint64_t *)mpfr_custom_get_significand(q), mpfr_get_exp(q), fabs(mpfr_get_d(q, MPFR_RNDN)),
                  &Y, &k, &E))
    return 0;
  STACK_MPFR(u);
  STACK_MPFR(u2);
  STACK_MPFR(num);
  STACK_MPFR(den);
  STACK_MPFR(t);
  /* u = Y 2^-k exactly (Y: 193 bits): its limbs shifted so that the integer bit is the top one. */
  mp_limb_t *ul = u_limbs;
  ul[3] = (Y.l[3] << 63) | (Y.l[2] >> 1);
  ul[2] = (Y.l[2] << 63) | (Y.l[1] >> 1);
  ul[1] = (Y.l[1] << 63) | (Y.l[0] >> 1);
  ul[0] = Y.l[0] << 63;
  mpfr_custom_init_set(u, MPFR_REGULAR_KIND, 1 - (mpfr_exp_t)k, 256, u_limbs);
  const double eta = lce_mul_up((double)E, 0x1p-192); /* Y >= 1: E eps is a relative E 2^-192 */
  const double kappa = lce_add_up(lce_mul_up(2.0001, eta), 0x1p-255);
  mpfr_sqr(u2, u, MPFR_RNDN);
  mpfr_ui_sub(num, 1, u2, MPFR_RNDN);
  mpfr_add_ui(den, u2, 1, MPFR_RNDN);
  const double u2k = lce_mul_up(mpfr_get_d(u2, MPFR_RNDU), kappa);
  const double rho_t = lce_mul_up(2.04, lce_add_up(lce_mul_up(u2k, lce_add_up(1.0 / mpfr_get_d(num, MPFR_RNDD), 1.0)), 3 * 0x1p-256));
  const double rho_s = lce_mul_up(2.04, lce_add_up(lce_add_up(eta, u2k), 2 * 0x1p-256));
  mpfr_div(t, num, den, MPFR_RNDN);
  mpfr_mul_2ui(u, u, 1, MPFR_RNDN); /* 2u, exact */
  mpfr_div(u2, u, den, MPFR_RNDN);  /* sech |q| = sech q */
  if (!round_certain_160(t_out, t, rho_t) || !round_certain_160(s_out, u2, rho_s)) return 0;
  if (mpfr_signbit(q)) mpfr_neg(t_out, t_out, MPFR_RNDN);
  return 1;
}
#endif

int lce_tanh_sech_rn(mpfr_ptr t, mpfr_ptr s, mpfr_srcptr q) {
#ifdef FAST_EXP
  if (mpfr_get_prec(t) == 160 && mpfr_get_prec(s) == 160 && mpfr_get_prec(q) == 160 && mpfr_regular_p(q)) {
    pthread_once(&once, init_constants);
    if (tanh_sech_fixed(t, s, q)) return 1;
  }
#endif
  mpfr_tanh(t, q, MPFR_RNDN);
  mpfr_sech(s, q, MPFR_RNDN);
  return 0;
}

int lce_exp_rn(mpfr_ptr r, mpfr_srcptr x) {
#ifdef FAST_EXP
  if (mpfr_get_prec(r) == 160 && mpfr_get_prec(x) == 160 && mpfr_regular_p(x) && mpfr_signbit(x)) {
    pthread_once(&once, init_constants);
    if (exp_fixed(r, x)) return 1;
  }
#endif
  mpfr_exp(r, x, MPFR_RNDN);
  return 0;
}
