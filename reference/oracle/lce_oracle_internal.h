/* lce_oracle_internal.h — the tier-0 oracle's pieces, shared by lce_oracle*.c and the oracle's
 * own tests (test_oracle.c, bench_oracle.c); not part of the public contract (lce_oracle.h).
 *
 *   lce_oracle.c           driver: validation, result buffers, rounding and certifying elements, memory
 *   lce_oracle_rows.c      the token rows and d_weight across threads, dz in vocab blocks
 *   lce_oracle_forward.c   per-token logits (softcap included), lse and the cross-entropy part
 *   lce_oracle_exp.c       exp, tanh and sech correctly rounded at 160 bits, in fixed point
 *   lce_oracle_loss.c      the token loss with its options, dz, g, and the finite-difference objective
 *   lce_oracle_backward.c  d_hidden and d_weight
 *
 * Error bounds are doubles that are upper bounds on the true error: each step that computes one
 * rounds upward (lce_add_up, lce_mul_up), so the bound never undershoots through its own
 * double arithmetic. A bound of +Inf means "not certified" and makes an element inconclusive. */
#ifndef LCE_ORACLE_INTERNAL_H
#define LCE_ORACLE_INTERNAL_H

#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <string.h>

#include "lce_oracle.h"

/* ---- upward-rounded bound arithmetic on non-negative doubles --------------------------------- */

/* The absolute floor of a gradient element's error scale, in units of the formats' unit roundoff
 * (tiers 0 and 1 alike): each of the `terms` fp32 multiply-adds that form it is exact only to half the
 * smallest fp32 subnormal (2^-150, i.e. 2^-126 units of 2^-24), and the final rounding to the output
 * format to half its smallest subnormal (2^emin units). Only elements whose terms are all tiny
 * (subnormal hidden rows, underflowing products) feel it. */
static inline double lce_gemm_floor(const lce_case *c, lce_output_id o, int64_t terms) {
  return (double)terms * 0x1p-126 + ldexp(1.0, lce_dtype_emin(lce_output_format(c, o)));
}

/* n 2^-1074 exactly: for n < 2^52 the subnormal whose bits are n, without a multiplication into the
 * subnormal range (x86 runs those through a microcode assist, ~100 times slower: it was a third of
 * tier 1's time, one per element bound). */
static inline double lce_tiny_multiple(int64_t n) {
  if (n < 0 || n >= ((int64_t)1 << 52)) return (double)n * 0x1p-1074;
  const uint64_t b = (uint64_t)n;
  double x;
  memcpy(&x, &b, sizeof x);
  return x;
}

static inline double lce_add_up(double a, double b) {
  double s = a + b;
  return s == 0.0 ? 0.0 : lce_next_up(s);
}

static inline double lce_mul_up(double a, double b) {
  if (a == 0.0 || b == 0.0) return 0.0;
  return lce_next_up(a * b);
}

/* Upper bound on sum_i a_i*b_i (a_i, b_i >= 0, n terms, n < 2^40) given s, the same sum
 * evaluated in double with round-to-nearest: each product loses at most a relative 2^-53 plus
 * 2^-1075 absolute (underflow), the running sum at most gamma_(n-1) relative. n counts only the
 * terms with a_i, b_i both non-zero (the others are exactly zero). */
static inline double lce_sum_bound(double s, int64_t n) {
  if (n == 0) return 0.0;
  double slack = lce_add_up(s, lce_tiny_multiple(n));
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

/* r = exp(x) rounded to nearest: mpfr_exp(r, x, MPFR_RNDN)'s value and flags (inexact aside), in
 * fixed point where both have 160 bits and -2^12 <= x <= -2^-33 (tier 0's exps), mpfr_exp otherwise
 * (lce_oracle_exp.c). Returns 1 when the fixed point answered. */
int lce_exp_rn(mpfr_ptr r, mpfr_srcptr x);
/* t = tanh(q) and s = sech(q) rounded to nearest: mpfr_tanh's and mpfr_sech's values and flags
 * (inexact aside), from one fixed-point exp where all three have 160 bits and 2^-8 <= |q| < 2^12,
 * MPFR's functions otherwise. Returns 1 when the fixed point answered. */
int lce_tanh_sech_rn(mpfr_ptr t, mpfr_ptr s, mpfr_srcptr q);

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

/* ---- error-carrying MPFR operations ----------------------------------------------------------
 * Each forms r from computed operands a, b whose distances to the exact operands A, B are at most
 * ea, eb, and returns a bound on |r - exact result|: the propagated error (|ab - AB| <=
 * |a| eb + |b| ea + ea eb) plus half an ulp of r when the operation was inexact. r may alias an
 * operand: the bound reads the operands first. */

static inline double lce_add_err(mpfr_ptr r, mpfr_srcptr a, double ea, mpfr_srcptr b, double eb, mpfr_prec_t p) {
  double e = lce_add_up(ea, eb);
  return mpfr_add(r, a, b, MPFR_RNDN) ? lce_add_up(e, lce_half_ulp(r, p)) : e;
}

static inline double lce_sub_err(mpfr_ptr r, mpfr_srcptr a, double ea, mpfr_srcptr b, double eb, mpfr_prec_t p) {
  double e = lce_add_up(ea, eb);
  return mpfr_sub(r, a, b, MPFR_RNDN) ? lce_add_up(e, lce_half_ulp(r, p)) : e;
}

static inline double lce_mul_err(mpfr_ptr r, mpfr_srcptr a, double ea, mpfr_srcptr b, double eb, mpfr_prec_t p) {
  double e = lce_add_up(lce_add_up(lce_mul_up(lce_abs_up(a), eb), lce_mul_up(lce_abs_up(b), ea)), lce_mul_up(ea, eb));
  return mpfr_mul(r, a, b, MPFR_RNDN) ? lce_add_up(e, lce_half_ulp(r, p)) : e;
}

/* r = a * d for an exact double d. */
static inline double lce_mul_d_err(mpfr_ptr r, mpfr_srcptr a, double ea, double d, mpfr_prec_t p) {
  double e = lce_mul_up(ea, fabs(d));
  return mpfr_mul_d(r, a, d, MPFR_RNDN) ? lce_add_up(e, lce_half_ulp(r, p)) : e;
}

/* Exact zeros of d_hidden (both tiers). A column k of W holding one finite value c makes
 * d_hidden[n, k] = c sum_v DS_v for the exact DS. Without softcap (ds = dz), sum_v DZ_v =
 * g ((1 - e) w_y (sum_v P_v - 1) + (e / V) (SW sum_v P_v - sum_v w_v) + 2 lambda lse sum_v P_v) =
 * 2 g lambda lse, since sum_v P_v = 1 and SW = sum_v w_v exactly (lce_row_dz, lce_oracle_loss.c); so
 * without softcap and z-loss, or when c = 0, d_hidden[n, k] is exactly 0 for every active row.
 * Both tiers report it as 0 with err 2^-1074 (decisive: below every format's smallest subnormal),
 * not err 0: the judge reads value 0 with err 0 as a zero the subject must reproduce exactly
 * (lce_judge.c, check_exact), which a subject's rounded sum of ds_v W_vk is not. Tier 0's own sum
 * would be ~1e-49 within ~1e-48: inconclusive for fp32, whose subnormal ulp is 2^-149.
 * lce_zero_d_hidden_columns sets col_zero[k] for those columns of w ([v*h] doubles). */
#define LCE_EXACT_ZERO_ERR 0x1p-1074
void lce_zero_d_hidden_columns(const lce_case *c, const double *w, unsigned char *col_zero);

/* ---- one token row: logits, lse, loss and dz (lce_oracle_forward.c, lce_oracle_loss.c) --------- */

/* The case's loss options as the row math uses them (lce_case.h): e and lambda are the doubles
 * lce_case_smoothing and lce_case_z_loss return, taken as exact. */
typedef struct lce_row_opts {
  double softcap;            /* c, 0: none */
  double lambda;             /* z-loss weight */
  int smoothing;             /* e > 0 */
  const float *class_weight; /* [v], NULL: every weight 1 */
  mpfr_t one_minus_e, ev, sw; /* 1 - e, e / V, sum_v w_v */
  double err_one_minus_e, err_ev, err_sw; /* their bounds */
} lce_row_opts;

typedef struct lce_row {
  mpfr_prec_t prec;
  int64_t v;
  lce_row_opts opts;
  lce_mp_array z;     /* [v] logits of the row (precision prec), set with ez by the logit functions */
  lce_mp_array f;     /* [v] softcap only: the derivative factor 1 - (z/c)^2 = sech^2(s/c) */
  lce_mp_array t;     /* [v] exp(z - max) */
  lce_mp_array aux;   /* [v] smoothing terms w_v (lse - z_v) */
  lce_mp_array prod;  /* [h] products feeding one logit */
  mpfr_t d, s, s_rest, tmp, k, cy, pv, inner; /* scratch; k, cy: see lce_oracle_loss.c */
  mpfr_t lse, ce, loss; /* results of lce_row_forward (ce) and lce_row_loss (loss); valid labels only */
  double ez;          /* bound on |z_v - exact z_v|, all v (set with the logits) */
  double rf;          /* softcap: bound on the relative error of every f_v */
  double rho;         /* bound on the relative error of each exp(z_v - max) */
  int certified;      /* 0 when a precondition of the error analysis failed: bounds are +Inf */
  int cap_underflow;  /* a softcap factor underflowed (|s/c| beyond ~3e18) */
  int underflow;      /* an exp (or a softcap factor) underflowed: lse and loss stay certified, dz does not */
  double err_lse, mag_lse, err_ce, err_loss, mag_loss;
  double kmag;        /* |cy| + ev sw + 2 lambda |lse| rounded up: p_v's factor magnitude (set by lce_row_dz) */
  mpfr_t zmax;        /* the largest logit, z[amax] (set by lce_row_forward) */
  int64_t amax;
} lce_row;

/* What lce_row_dz reads of a row beyond its t_v and f_v, kept so that the driver can recompute any
 * of the row's ds_v later (d_weight in vocab blocks) with the same bits: the largest logit, S, S_y,
 * lse (mp: 4 numbers of the row's precision, the caller's storage) and the row's bounds and flags. */
typedef struct lce_row_state {
  mpfr_t *mp;
  int64_t amax;
  double ez, rf, rho;
  int certified, underflow;
} lce_row_state;
void lce_row_save(const lce_row *r, lce_row_state *s);
void lce_row_restore(lce_row *r, const lce_row_state *s);

/* Options of case c (class_weight: the tensors' weights, NULL without) for rows of c->v logits from
 * h products of precision prod_prec (lce_mul_exact_prec(dtype precision) for dtype inputs). */
lce_code lce_row_init(lce_row *r, const lce_case *c, const float *class_weight, int64_t h, mpfr_prec_t prec,
                      mpfr_prec_t prod_prec, lce_status *st);
void lce_row_free(lce_row *r);
/* The options part of lce_row_init (lce_oracle_loss.c). */
void lce_row_opts_init(lce_row_opts *o, const lce_case *c, const float *class_weight, mpfr_prec_t prec);
void lce_row_opts_clear(lce_row_opts *o);

/* Logits of one row from dtype values (one-limb MPFR numbers): s_v = sum_k h[k]*w[v*h+k], every
 * product exact (lce_mul_exact_1), the sum correctly rounded; then the softcap z_v = c tanh(s_v/c)
 * and its factor f_v when the case has one. */
void lce_row_logits_exact(lce_row *r, mpfr_t *h_row, mpfr_t *w);
/* The same when the caller knows exact sums s[v] as doubles (tier 1's proven-exact logits, for its
 * escalations): the non-zero ones are taken as they are; the zeros (whose sign is mpfr_sum's) and
 * the NaNs (not known) computed; s NULL: none known. Same values and bounds as lce_row_logits_exact,
 * without its h exact products per known logit. */
void lce_row_logits_given(lce_row *r, mpfr_t *h_row, mpfr_t *w, const double *s);
/* The logits v in [v0, v1) only, as lce_row_logits_given computes them (s[v - v0], s may be NULL:
 * none known); the row's bounds (ez, rf) are left as scratch: for recomputing logits of a row whose
 * bounds lce_row_restore brings back. */
void lce_row_logits_range(lce_row *r, mpfr_t *h_row, mpfr_t *w, const double *s, int64_t v0, int64_t v1);
/* The same from MPFR inputs of any precision (products exact at the prod precision). */
void lce_row_logits_mp(lce_row *r, mpfr_t *h_row, mpfr_t *w);

/* lse (always) and the cross-entropy part lse - z_y (when 0 <= y < v) from r->z, with bounds. */
void lce_row_forward(lce_row *r, int64_t y);
/* t_v = exp(z_v - max) for v in [v0, v1) as lce_row_forward computes them (r->amax, r->zmax). */
void lce_row_exp_range(lce_row *r, int64_t v0, int64_t v1);

/* The token loss of a valid label y after lce_row_forward: (1 - e) w_y CE + (e / V) sum_v w_v
 * (lse - z_v) + lambda lse^2, into r->loss with r->err_loss. With term[] (the logits' error scales,
 * lce_oracle.c; term_max their maximum) it also sets r->mag_loss. */
void lce_row_loss(lce_row *r, int64_t y, const double *term, double term_max);

/* ds_v (dz_v times the softcap factor) of a valid label y with g != 0 into dz[v] for v in [v0, v1) (each
 * v independent of the others: the same bits for any range): err[v] bounds
 * |ds_v - exact| (+Inf when the row is not certified), mag[v] = |g| f_v times the sum of |terms|
 * of dz_v (p_v ((1 - e) w_y + (e / V) sum w + 2 lambda |lse|) + (1 - e) w_y [v == y] + (e / V) w_v).
 * g_rel is the relative error of g (0 when g is exact). Returns 0 when the row is not certified. */
int lce_row_dz(lce_row *r, int64_t y, mpfr_srcptr g, double g_rel, int64_t v0, int64_t v1, mpfr_t *dz, double *err,
               double *mag);

/* ---- reduction (lce_oracle_loss.c) ------------------------------------------------------------- */

/* sum_n W_n over valid tokens (class weights; the count of valid tokens without) into out; returns
 * its relative error bound (0 when exact). */
double lce_valid_weight_sum(const lce_case *c, const lce_tensors *in, mpfr_t out);
/* g[n] into g for a valid token n (sw: lce_valid_weight_sum, sw_rel its bound); returns g's relative
 * error bound. Ignored tokens and a zero sw give g = 0 exactly. */
double lce_token_g(const lce_case *c, const lce_tensors *in, int64_t n, mpfr_srcptr sw, double sw_rel, mpfr_t g);
/* lce_dz_floor_of (lce_reference_result.h) for case c. */
static inline double lce_dz_floor(const lce_case *c, double g_abs, double kmag) {
  return lce_dz_floor_of(g_abs, kmag, ldexp(1.0, lce_dtype_emin(c->dtype)));
}

/* ---- backward (lce_oracle_backward.c) --------------------------------------------------------- */

/* x = a * b exactly, for b of at most one limb (precision <= 64). x must come from an
 * lce_mp_array of precision lce_mul_exact_prec(precision of a): its value is rebuilt in place. */
void lce_mul_exact_1(mpfr_ptr x, mpfr_srcptr a, mpfr_srcptr b);
static inline mpfr_prec_t lce_mul_exact_prec(mpfr_prec_t a_prec) {
  return ((a_prec + GMP_NUMB_BITS - 1) / GMP_NUMB_BITS + 1) * GMP_NUMB_BITS;
}

/* Element (n, k) of d_hidden = sum_j dz[j] * w_col[j] from one row's dz (upper bounds dz_err[j] on
 * |dz - exact|) and column k of W (w_col[j] = W[j, k], as MPFR numbers and
 * as doubles: contiguous, for the cache). Value into out, returns the error bound and sets
 * *mag = sum_j dz_mag[j] |W_jk| (dz_mag: the row's term magnitudes, label term split) and
 * *emag = sum_j dz_emag[j] |W_jk| (the same weighted by the softmax condition). prod holds >= v
 * numbers of precision lce_mul_exact_prec(prec). */
double lce_d_hidden_element(mpfr_t out, mpfr_prec_t prec, mpfr_t *dz, const double *dz_err,
                            const double *dz_mag, const double *dz_emag, double *emag, mpfr_t *w_col,
                            const double *w_col_d, int64_t v, lce_mp_array *prod, double *mag);

/* Element (j, k) of d_weight = prior + sum_i dz_col[i] * h_col[active[i]] over the na rows with a
 * non-zero g: dz_col[i] = dz[active[i], j], with upper bounds dz_err_col on |dz - exact|, dz_mag_col the term magnitudes (label term split); h_col[n] = hidden[n, k] as
 * MPFR numbers and doubles. Returns the error bound; *mag = |prior| + sum dz_mag |h| and
 * *emag = |prior| + sum dz_emag |h| (dz_emag: dz_mag times each row's softmax condition). prod holds
 * >= na + 1 numbers of precision lce_mul_exact_prec(prec). */
double lce_d_weight_element(mpfr_t out, mpfr_prec_t prec, double prior, mpfr_t *dz_col,
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

/* ---- memory ------------------------------------------------------------------------------------
 * Tier 0 holds the inputs (as doubles and as MPFR numbers of the dtype's precision, each both ways),
 * the result, a few numbers per token, each thread's row scratch (O(V + N)), and for d_weight the dz
 * of the tokens with a non-zero g in vocab blocks: all V columns when they fit in
 * LCE_ORACLE_BLOCK_BYTES, else fewer, the later blocks recomputed from each row's kept state. So it
 * grows with (N + V) H and the rows in flight, never with N V beyond that budget. */
#define LCE_ORACLE_BLOCK_BYTES ((double)(64 << 20))

/* Peak bytes of a full run of case c (every row, d_weight) on `threads` threads, at LCE_ORACLE_PREC. */
double lce_oracle_bytes(const lce_case *c, int threads);

/* ---- escalation: tier 0 for a few elements (the fast tier, lce_fast.h) ----------------------- */

/* Which elements lce_oracle_run_subset computes. row[n]: the token's forward (lse, loss_token);
 * d_hidden[n*h + k] and d_weight[j*h + k] (real rows j < v): those gradient elements; loss: the
 * reduced loss. A d_weight element or the loss needs the forward of every token, so those run all
 * rows' forward (and dz) but still write only the elements asked for. NULL arrays ask for none. */
typedef struct lce_oracle_subset {
  const unsigned char *row;
  const unsigned char *d_hidden;
  const unsigned char *d_weight;
  int loss;
  /* Optional: exact_logits(ctx, n, v0, v1, s) puts the exact logits s_nj (before softcap) of row n,
   * j in [v0, v1), into s[j - v0], NaN where not known (lce_row_logits_given), and returns how many
   * it knows; the same answer every call, from any thread. NULL: every row computes its own. */
  int64_t (*exact_logits)(void *ctx, int64_t n, int64_t v0, int64_t v1, double *s);
  void *ctx;
  /* d_weight's dz kept this many vocab columns at a time (0: automatic, see "memory" below): the
   * same bits for any value; tests set it to reach the recomputed blocks at small shapes. */
  int64_t block_cols;
} lce_oracle_subset;

/* lce_oracle_run for the elements sub names: res is allocated at full size as by lce_oracle_run, but
 * only the elements asked for are written (every other element is unspecified, and res->decisive,
 * res->total and res->worst_rel_err count only what was written). Same values, bounds and flags as
 * the full run for every element written. */
lce_code lce_oracle_run_subset(const lce_case *c, const lce_tensors *in, const lce_oracle_subset *sub,
                               lce_oracle_result *res, lce_status *st);

/* The scalar whose gradient the backward computes, J = sum_n g[n] * loss[n] (sum and mean:
 * grad_output[0] * loss), evaluated at precision prec for arbitrary real inputs: hidden [n*h]
 * and w [v*h] (real rows only) as MPFR numbers of any precision, used as given (tf32 rounding is
 * the caller's); labels, grad_output, class weights and the loss options come from c and in. For
 * finite-difference checks of the gradients. */
lce_code lce_oracle_objective(const lce_case *c, const lce_tensors *in, mpfr_t *hidden, mpfr_t *w,
                              mpfr_prec_t prec, mpfr_t out, lce_status *st);

#endif
