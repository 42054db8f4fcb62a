/* lce_oracle_internal.h — the tier-0 oracle's pieces, shared by lce_oracle*.c and the oracle's
 * own tests (test_oracle.c, bench_oracle.c); not part of the public contract (lce_oracle.h).
 *
 *   lce_oracle.c           driver: validation, result buffers, rounding and certifying elements
 *   lce_oracle_forward.c   per-token forward (logits, lse, loss, dz) and the error derivation
 *   lce_oracle_backward.c  d_hidden and d_weight
 *
 * Error bounds are doubles that are upper bounds on the true error: each step that computes one
 * rounds upward (lce_add_up, lce_mul_up), so the bound never undershoots through its own
 * double arithmetic. A bound of +Inf means "not certified" and makes an element inconclusive. */
#ifndef LCE_ORACLE_INTERNAL_H
#define LCE_ORACLE_INTERNAL_H

#include <math.h>
#include <mpfr.h>

#include "lce_oracle.h"

/* ---- upward-rounded bound arithmetic on non-negative doubles --------------------------------- */

static inline double lce_add_up(double a, double b) {
  double s = a + b;
  return s == 0.0 ? 0.0 : nextafter(s, INFINITY);
}

static inline double lce_mul_up(double a, double b) {
  if (a == 0.0 || b == 0.0) return 0.0;
  return nextafter(a * b, INFINITY);
}

/* Upper bound on sum_i a_i*b_i (a_i, b_i >= 0, n terms, n < 2^40) given s, the same sum
 * evaluated in double with round-to-nearest: each product loses at most a relative 2^-53 plus
 * 2^-1075 absolute (underflow), the running sum at most gamma_(n-1) relative. n counts only the
 * terms with a_i, b_i both non-zero (the others are exactly zero). */
static inline double lce_sum_bound(double s, int64_t n) {
  if (n == 0) return 0.0;
  double slack = lce_add_up(s, (double)n * 0x1p-1074);
  return lce_mul_up(slack, 1.0 + (double)(n + 2) * 0x1p-52);
}

/* Half an ulp of x at precision prec: the error bound of a round-to-nearest MPFR operation whose
 * result is x, and at most 2^-prec |x|. Zero for x == 0: without underflow MPFR returns zero
 * only for an exactly zero result. Rounded up to the smallest subnormal when below it. */
static inline double lce_half_ulp(mpfr_srcptr x, mpfr_prec_t prec) {
  if (mpfr_zero_p(x)) return 0.0;
  if (!mpfr_number_p(x)) return INFINITY;
  mpfr_exp_t e = mpfr_get_exp(x) - prec - 1;
  if (e < -1074) return 0x1p-1074;
  if (e > 1023) return INFINITY;
  return ldexp(1.0, (int)e);
}

/* Upper bound on |x| as a double (rounded away from zero; +Inf beyond the double range). */
static inline double lce_abs_up(mpfr_srcptr x) { return fabs(mpfr_get_d(x, MPFR_RNDA)); }

/* ---- MPFR arrays in one allocation (custom interface: no per-element malloc) ----------------- */

typedef struct lce_mp_array {
  mpfr_t *x;      /* [n], each of precision prec; never resize or mpfr_clear them */
  mpfr_ptr *ptr;  /* [n], ptr[i] = x[i]: the table mpfr_sum takes */
  void *limbs;
  int64_t n;
  mpfr_prec_t prec;
} lce_mp_array;

lce_code lce_mp_array_init(lce_mp_array *a, int64_t n, mpfr_prec_t prec, lce_status *st);
void lce_mp_array_free(lce_mp_array *a);

/* ---- one token row: forward and dz (lce_oracle_forward.c) ------------------------------------ */

typedef struct lce_row {
  mpfr_prec_t prec;
  int64_t v;
  lce_mp_array z;     /* [v] logits of the row (precision prec), set with ez by lce_row_logits_exact */
  lce_mp_array t;     /* [v] exp(z - max) */
  lce_mp_array prod;  /* [h] products feeding one logit */
  mpfr_t d, s, s_rest, tmp;
  mpfr_t lse, loss;   /* results of lce_row_forward (loss only when the label is valid) */
  double ez;          /* bound on |z_v - exact z_v|, all v (set with the logits) */
  double rho;         /* bound on the relative error of each exp(z_v - max) */
  int certified;      /* 0 when a precondition of the error analysis failed: bounds are +Inf */
  int underflow;      /* an exp underflowed: lse and loss stay certified, dz does not */
  double err_lse, mag_lse, err_loss, mag_loss;
} lce_row;

/* v logits of precision prec, from h products of precision prod_prec (lce_mul_exact_prec(dtype
 * precision) when the inputs are dtype values). */
lce_code lce_row_init(lce_row *r, int64_t v, int64_t h, mpfr_prec_t prec, mpfr_prec_t prod_prec, lce_status *st);
void lce_row_free(lce_row *r);

/* Logits of one row from dtype values (one-limb MPFR numbers): z_v = sum_k h[k]*w[v*h+k], every
 * product exact (lce_mul_exact_1), the sum correctly rounded. */
void lce_row_logits_exact(lce_row *r, mpfr_t *h_row, mpfr_t *w);

/* lse (always) and loss (when 0 <= y < v) from r->z, with their bounds. */
void lce_row_forward(lce_row *r, int64_t y);

/* dz_v = g * (softmax_v - [v == y]) into dz[0..v) for a valid label y and g != 0; returns the
 * relative error bound delta of every dz_v (|dz_v - exact| <= delta |exact|), +Inf if uncertified.
 * g_rel is the relative error of g itself (0 when g is exact). */
double lce_row_dz(lce_row *r, int64_t y, mpfr_srcptr g, double g_rel, mpfr_t *dz);

/* ---- backward (lce_oracle_backward.c) --------------------------------------------------------- */

/* x = a * b exactly, for b of at most one limb (precision <= 64). x must come from an
 * lce_mp_array of precision lce_mul_exact_prec(precision of a): its value is rebuilt in place. */
void lce_mul_exact_1(mpfr_ptr x, mpfr_srcptr a, mpfr_srcptr b);
static inline mpfr_prec_t lce_mul_exact_prec(mpfr_prec_t a_prec) {
  return ((a_prec + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS + 1) * GMP_NUMB_BITS;
}

/* Element (n, k) of d_hidden = sum_j dz[j] * w_col[j] from one row's dz (relative bound delta,
 * absolute values bounded above by dz_abs[j]) and column k of W (w_col[j] = W[j, k], as MPFR
 * numbers and as doubles: contiguous, for the cache). Value into out, returns the error bound and
 * sets *mag = sum_j dz_mag[j] |W_jk| (dz_mag: the row's term magnitudes, label term split) and
 * *emag = sum_j dz_emag[j] |W_jk| (the same weighted by the softmax condition). prod holds >= v
 * numbers of precision lce_mul_exact_prec(prec). */
double lce_d_hidden_element(mpfr_t out, mpfr_prec_t prec, mpfr_t *dz, const double *dz_abs, const double *dz_mag,
                            const double *dz_emag, double *emag, double delta,
                            mpfr_t *w_col, const double *w_col_d, int64_t v, lce_mp_array *prod, double *mag);

/* Element (j, k) of d_weight = prior + sum_i dz_col[i] * h_col[active[i]] over the na rows with a
 * non-zero dz: dz_col[i] = dz[active[i], j], with upper bounds dz_abs_col on |dz| and dz_err_col
 * on |dz - exact|, dz_mag_col the term magnitudes (label term split); h_col[n] = hidden[n, k] as
 * MPFR numbers and doubles. Returns the error bound; *mag = |prior| + sum dz_mag |h| and
 * *emag = |prior| + sum dz_emag |h| (dz_emag: dz_mag times each row's softmax condition). prod holds
 * >= na + 1 numbers of precision lce_mul_exact_prec(prec). */
double lce_d_weight_element(mpfr_t out, mpfr_prec_t prec, double prior, mpfr_t *dz_col, const double *dz_abs_col,
                            const double *dz_err_col, const double *dz_mag_col, const double *dz_emag_col,
                            double *emag, mpfr_t *h_col, const double *h_col_d, const int64_t *active,
                            int64_t na, lce_mp_array *prod, double *mag);

/* ---- entry points for tests ------------------------------------------------------------------- */

/* The MPFR values behind a result, before their rounding to double, with their own bounds
 * (err_mp[i] >= |value[i] - exact|). */
typedef struct lce_oracle_mp {
  lce_mp_array value[LCE_OUT_COUNT];
  double *err_mp[LCE_OUT_COUNT];
  double worst_rel_err_mp; /* largest err_mp/|value| over non-zero elements */
} lce_oracle_mp;

/* lce_oracle_run at working precision prec (>= 64); when mp is not NULL it also receives the MPFR
 * values (free with lce_oracle_mp_free). */
lce_code lce_oracle_run_prec(const lce_case *c, const lce_tensors *in, mpfr_prec_t prec, lce_oracle_result *res,
                             lce_oracle_mp *mp, lce_status *st);
void lce_oracle_mp_free(lce_oracle_mp *mp);

/* The scalar whose gradient the backward computes, J = sum_n g[n] * loss[n] (sum and mean:
 * grad_output[0] * loss), evaluated at precision prec for arbitrary real inputs: hidden [n*h]
 * and w [v*h] (real rows only) as MPFR numbers of any precision; labels and grad_output come
 * from in. For finite-difference checks of the gradients. */
lce_code lce_oracle_objective(const lce_case *c, const lce_tensors *in, mpfr_t *hidden, mpfr_t *w,
                              mpfr_prec_t prec, mpfr_t out, lce_status *st);

#endif
