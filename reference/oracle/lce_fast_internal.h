/* lce_fast_internal.h — tier 1's pieces shared by lce_fast.c (driver, gradients, reduction) and
 * lce_fast_row.c (one token row: logits, lse, loss, dz), and its error-free transformations.
 * Bounds are doubles rounded upward (lce_add_up, lce_mul_up from lce_oracle_internal.h). */
#ifndef LCE_FAST_INTERNAL_H
#define LCE_FAST_INTERNAL_H

#include "lce_fast.h"
#include "lce_dd.h"
#include "lce_oracle_internal.h"

#define FAST_U 0x1p-53          /* unit roundoff of double */
#define FAST_LIBM (5.0 * FAST_U) /* relative accuracy taken for libm's exp, log, log1p, tanh, cosh */
#define FAST_TINY 0x1p-1074     /* absolute error of one rounding into the subnormal range */

/* gamma_n^2 = (n u / (1 - n u))^2, rounded up; n u < 1/2. */
static inline double fast_gamma2(int64_t n) {
  double g = lce_next_up((double)n * FAST_U / (1.0 - (double)n * FAST_U));
  return lce_mul_up(g, g);
}

/* Bound on |res - sum| for res from Sum2 or Dot2 over n terms (Ogita, Rump, Oishi 2005, Prop. 4.5
 * and 5.5: |res - S| <= u |S| + gamma_n^2 sum |terms|), given m >= sum |terms|. With |S| <= |res| +
 * err this is err (1 - u) <= u |res| + gamma_n^2 m; each TwoProduct whose low part falls below
 * the normal range adds at most 2^-1074. */
static inline double fast_sum2_bound(double res, double m, int64_t n) {
  double e = lce_add_up(lce_mul_up(FAST_U, fabs(res)), lce_mul_up(fast_gamma2(n), m));
  return lce_add_up(lce_mul_up(e, 1.0 + 0x1p-50), lce_tiny_multiple(n));
}

/* Bound on |res - S| for the split dot product of lce_fast.c (fast_dot_add): each term d x with x
 * of at most 24 significant bits is the exact sum of dh x + dl x (dh: d's top 26 bits, |dl| <=
 * 2^-25 |d|); the dh x go through TwoSum (exact), the TwoSum errors and the dl x into a plain sum lo,
 * 2n additions: |lo - LO| <= gamma_2n (sum |TwoSum errors| + sum |dl x|) <= gamma_2n (n u (1 + gamma_n)
 * + 2^-25) m <= gamma_2n 2^-24 m (n u <= 2^-29), and res = RN(hi + lo) adds u |res|; products
 * below the normal range add 2^-1074 each. m >= sum |terms|. */
typedef struct fast_dot_k { /* the factors of fast_dot_bound that depend on n alone */
  double g24, tiny;
} fast_dot_k;
static inline fast_dot_k fast_dot_factors(int64_t n) {
  const double g = lce_next_up((double)(2 * n) * FAST_U / (1.0 - (double)(2 * n) * FAST_U));
  return (fast_dot_k){lce_mul_up(g, 0x1p-24), lce_tiny_multiple(2 * n + 1)};
}
static inline double fast_dot_bound_k(double res, double m, fast_dot_k k) {
  double e = lce_add_up(lce_mul_up(FAST_U, fabs(res)), lce_mul_up(k.g24, m));
  return lce_add_up(lce_mul_up(e, 1.0 + 0x1p-50), k.tiny);
}
static inline double fast_dot_bound(double res, double m, int64_t n) {
  return fast_dot_bound_k(res, m, fast_dot_factors(n));
}

/* The vectorized inner loops (lce_fast_kernels.c), the same bits as their scalar reading. */
#define FAST_LANES 16 /* partial sums of a logit, k mod FAST_LANES, combined in a fixed tree */

/* A logit's sum of exact products h_k w_k in a fixed order (lanes), and in *m the sum of |h_k w_k|. */
double fast_dot_lanes(const double *restrict h, const double *restrict w, int64_t n, double *restrict m);

/* Sum2's accumulators hi[i], lo[i] of the dot products h[i] . w[i] over n terms, i < count <=
 * FAST_SUM2_BATCH, each the bits of its own chain (lce_fast_kernels.c). */
#define FAST_SUM2_BATCH 8
void fast_sum2_batch(const double *const *h, const double *const *w, int count, int64_t n, double *hi, double *lo);

/* One term d of a split dot product (fast_dot_bound), the coefficients of its magnitude sums, and
 * its d_logit as the rnd and flip references take it (lce_fast_rnd.c). */
typedef struct fast_step {
  double dh, dl;     /* d = dh + dl, dh its top 26 bits */
  double ta, tb, te; /* a[k] += ta |x_k|, b[k] += tb |x_k|, e[k] += te |x_k| */
  double tr, tq;     /* r[k] += tr x_k, q[k] += tq |x_k| */
} fast_step;

/* The accumulators of a gradient row, element-wise over k: the split dot product (hi, lo), the
 * magnitude sums (a, b, e; b NULL where not kept) and the rnd and flip sums (r, q). */
typedef struct fast_acc {
  double *hi, *lo, *a, *b, *e, *r, *q;
} fast_acc;

/* For each term j < count (at most FAST_TERMS) in order: hi, lo += d_j x_j (TwoSum of dh x_jk into
 * hi, its error and dl x_jk into lo), a and e (and b) += t_j |x_j|, r += tr_j x_j, q += tq_j |x_j|,
 * element-wise over k < n. The same bits as count calls with one term each, and the rnd and flip
 * sums the same bits as their own loops over the terms (no operation mixes them with the others):
 * one pass over x serves all of them. */
#define FAST_TERMS 4
void fast_grad_step(const fast_step *s, const double *const *x, int count, int64_t n, const fast_acc *acc);
/* y[k] += t |x_k| for k < n. */
void fast_axpy_abs(double t, const double *restrict x, int64_t n, double *restrict y);

/* Running bounds (tier 0's lce_add_err / lce_mul_err in double): r = RN(a op b) from computed a, b
 * within ea, eb of the exact operands; RN adds u |r| (and 2^-1074 in the subnormal range). */
static inline double fast_add_err(double r, double ea, double eb) {
  return lce_add_up(lce_add_up(ea, eb), lce_add_up(lce_mul_up(FAST_U, fabs(r)), FAST_TINY));
}
static inline double fast_mul_err(double r, double a, double ea, double b, double eb) {
  double e = lce_add_up(lce_add_up(lce_mul_up(fabs(a), eb), lce_mul_up(fabs(b), ea)), lce_mul_up(ea, eb));
  return fast_add_err(r, e, 0.0);
}

/* The case's loss options in double (tier 0's lce_row_opts). */
typedef struct fast_opts {
  double softcap, lambda;
  int smoothing;
  const float *class_weight; /* [v], NULL: every weight 1 */
  double ome, e_ome;         /* 1 - e */
  double ev, e_ev;           /* e / V */
  double sw, e_sw;           /* sum_v w_v */
} fast_opts;

/* The inputs as the math reads them (exact doubles, tf32-rounded with tf32 GEMMs), and per row the
 * exponent of its lowest set bit (the exactness proof of the logits, lce_fast_row.c). */
typedef struct fast_in {
  int64_t n, h, v;
  const double *hidden, *w; /* [n*h], [v*h] */
  const int *lsb_h, *lsb_w; /* [n], [v]; INT_MAX/4 for an all-zero row */
} fast_in;

/* One token row's state (per thread). */
typedef struct fast_row {
  int64_t v;
  double *z, *f, *t, *term; /* [v] logits, softcap factors, exp(z - max), logit error scales */
  unsigned char *exact;     /* [v] logit v proven exact in plain double (Logits, lce_fast_row.c); NULL: not kept */
  double ez, rf;            /* bound on |z_v - Z_v| (all v); relative bound of every f_v */
  double rho, rs, rsy;      /* relative bounds: each t_v, S, S_y (against their exact values) */
  double s, s_y;            /* sum_v t_v, sum_{v != y} t_v */
  int certified;
  int64_t inexact_logits;
  double lse, err_lse, mag_lse, ce, err_ce, loss, err_loss, mag_loss, term_max, cy, e_cy;
  double kmag;              /* |cy| + ev sw + 2 lambda |lse|: p_v's factor magnitude (set by fast_row_loss) */
} fast_row;

void fast_opts_init(fast_opts *o, const lce_case *c, const float *class_weight);
/* The logits of the rows n = rows[i], i < count, against every vocab row, at [i V + v]: the plain sum
 * s = fast_dot_lanes(h_n, w_v) and its magnitude m, and where s is not proven exact (Logits,
 * lce_fast_row.c) Sum2's accumulators in its place, hi in s and lo in lo (else lo = 0). In parallel
 * over tiles of FAST_TILE_VOCAB vocab rows that stay in cache while FAST_TILE_TOKENS token rows at a
 * time pass them (W is read from memory once per block of rows instead of once per row), the Sum2
 * chains FAST_SUM2_BATCH at a time. Each value has the bits of its own computation alone. */
#define FAST_TILE_VOCAB 16
#define FAST_TILE_TOKENS 8
void fast_dot_block(const fast_in *in, const int64_t *rows, int64_t count, double *s, double *lo, double *m);
/* Row n's logits from its fast_dot_block values s[v], lo[v], m[v]. */
void fast_row_logits(fast_row *r, const fast_in *in, const fast_opts *o, int64_t n, const double *s,
                     const double *lo, const double *m);
/* The logits v in [v0, v1) of row n (before softcap) into s[v - v0]: each one proven exact in plain
 * double (the test of lce_fast_row.c's Logits) as its value, the others NaN (for tier 0: not known);
 * returns how many are known. */
int64_t fast_row_exact_logits(const fast_in *in, int64_t n, int64_t v0, int64_t v1, double *s);
/* Logit v of row n as the unevaluated sum hi + lo (the return value and *lo) within *err of the exact
 * logit, given its fast_dot_block values s, slo, m: s with lo = err = 0 where proven exact, else
 * Sum2's two accumulators (s, slo) before
 * their final addition, within gamma_(H-1)^2 sum |h_k w_k| (Ogita, Rump, Oishi 2005, the proof of
 * Prop. 4.5: the TwoSum errors sum to at most gamma_(H-1) sum |h_k w_k| in magnitude, and their
 * plain sum lo is within gamma_(H-1) of that). */
double fast_logit_pair(const fast_in *in, int64_t n, int64_t v, double s, double slo, double m, double *lo, double *err);
void fast_row_forward(fast_row *r, const fast_opts *o, int64_t y);
void fast_row_loss(fast_row *r, const fast_opts *o, int64_t y);
/* ds (dz times f) of a valid label with g != 0 (relative error g_rel) into ds[0..v), bounds into
 * err (+Inf when the row is not certified), tier 0's term magnitudes into mag. */
void fast_row_dz(fast_row *r, const fast_opts *o, int64_t y, double g, double g_rel, double *ds, double *err,
                 double *mag);

/* The reference of the coherent d_logit rounding (lce_fast_rnd.c, lce_ref_output.rnd): a row's ds
 * as a kernel stores them, round(ds / g) * g in the format the GEMMs read, into dzr; d_hidden's and
 * d_weight's rnd are then sum_j dzr_j w_jk and sum_n dzr_nj h_nk, added in term order by
 * fast_grad_step (tr). */
void fast_rnd_row(const lce_case *c, double g, const double *ds, int64_t v, double *dzr);
/* The rounding decisions a kernel's fp32 d_logit errors can change (lce_ref_output.flip): per d_logit
 * dzq_v = |g| (R(t + delta_v) - R(t - delta_v)) with t = ds_v / g and delta_v the modelled fp32 error
 * of t (lce_fast_rnd.c); flip is then sum_j dzq_j |w_jk| and sum_n dzq_nj |h_nk| (fast_grad_step, tq). */
void fast_flip_row(const lce_case *c, const fast_row *r, const fast_opts *o, int64_t y, double g, const double *ds,
                   double *dzq);

/* Stores one element and certifies it as tier 0 does (lce_fast.c). */
void fast_put(const lce_case *c, lce_oracle_result *res, lce_output_id o, int64_t i, double value, double err,
              double mag, double emag);
/* An element known exactly (tier 0's finish_exact). */
void fast_put_exact(const lce_case *c, lce_oracle_result *res, lce_output_id o, int64_t i, double x);

/* An input tensor's subnormal entries (as the GEMMs read them), row by row: row r's are k[at[r] ..
 * at[r + 1]), each with d = 2^emin - |x| (lce_fast_align.c). */
typedef struct fast_subnormals {
  int64_t *at, *k;
  double *d;
} fast_subnormals;
void fast_subnormals_free(fast_subnormals *s);

/* A run's state (lce_fast.c), shared with the gradient passes (lce_fast_grad.c). */
typedef struct fast_work {
  const lce_case *c;
  const lce_tensors *in;
  lce_oracle_result *res;
  fast_opts opts;
  fast_in fin;
  double *hidden, *w, *w1;          /* inputs; w1[k] = sum_v |W_vk| */
  int *lsb_h, *lsb_w;
  unsigned char *bad_h;
  int bad_w;
  unsigned char *poison_valid, *failed; /* [n] per row, reduced after the parallel loop */
  int64_t n0, block;                /* the rows in flight: [n0, n0 + block) */
  double *ds, *term, *err, *dzr, *dzq; /* [block*v] their ds, its term magnitude and bound (rows with g != 0), ds
                                     * as stored, the roundings their fp32 errors can change (lce_fast_rnd.c) */
  double *zs, *zl, *zm;             /* [block*v] their logits' sums and magnitudes (fast_dot_block) */
  int64_t *rows;                    /* [block] their token indices */
  double *cfl;                      /* [h] sum_n floor_n |h_nk| over the active rows so far */
  int64_t na;                       /* active rows so far */
  unsigned char *active;            /* [n] g != 0 and not poisoned */
  double *cond, *a, *b, *floor;     /* [n] softmax condition, bound slopes (v != y), dz floor */
  double *ey;                       /* [n] bound on |ds_y - DS_y| of the label */
  unsigned char *col_zero;          /* [h] d_hidden[n, k] is exactly 0 for every active row */
  double *loss, *loss_err;          /* [n] token losses as the reduction adds them */
  int64_t *inexact;                 /* [n] logits of the row not proven exact */
  double *rsum;                     /* [n] the row's softmax-sum replay (row_replay), 0 for ignored tokens */
  double sw, sw_rel;
  int64_t inexact_logits;
  int align;                        /* tcex is kept: tensor-core GEMMs and a subnormal input operand */
  double amin;                      /* 2^emin of the GEMMs' input format */
  fast_subnormals sub_h, sub_w;     /* the subnormal entries of hidden and W */
} fast_work;

/* The tensor cores' alignment excess (lce_ref_output.tcex; lce_fast_align.c): fast_align_begin
 * lists the subnormal input operands once the inputs are loaded and allocates tcex where there are
 * any; fast_align_row sets lse's and loss_token's of row n (kmag: the row's factor magnitude, when
 * valid); fast_align_block adds the active rows [n0, end)'s to d_hidden's and d_weight's once their
 * d_logit terms are in the block. No-ops without tcex. */
lce_code fast_align_begin(fast_work *w, lce_status *st);
void fast_align_row(fast_work *w, int64_t n, int valid, double kmag);
void fast_align_block(fast_work *w, int64_t end);

/* The gradient passes (lce_fast_grad.c) over the rows in flight [n0, end) once their ds are in the
 * block arrays: d_hidden of their active rows, complete; d_weight's running sums (value: hi, err:
 * lo, mag: A, emag: B, rounded: E) begun for every vocab row by fast_weight_begin, raised by
 * fast_weight_block for each block in token order, turned into the elements by fast_weight_finish.
 * fast_hidden_block returns 0 when its scratch does not fit in memory. */
int fast_hidden_block(fast_work *w, int64_t end);
void fast_weight_begin(fast_work *w);
void fast_weight_block(fast_work *w, int64_t end);
void fast_weight_finish(fast_work *w, int poisoned);

/* Tier 1's second step (lce_fast_refine.c): the undecided d_hidden and d_weight elements of res
 * recomputed in double-double and certified again (mag and emag kept); returns how many it
 * decided. A case it does not cover (non-finite inputs, its rows beyond its memory budget) or a row
 * it cannot bound (logits beyond 300 softcaps) is left as it was. active[n]: the token's g is non-zero. */
typedef struct fast_refine_in {
  const lce_case *c;
  const lce_tensors *in;
  const fast_in *fin;
  const unsigned char *active;
  int all;    /* every element not exact, decided or not (lce_fast_options.refine_all) */
} fast_refine_in;
int64_t fast_refine(const fast_refine_in *r, lce_oracle_result *res);

/* exp(x) in double-double for x = hi + lo, -600 <= hi <= 2^-30, within FAST_DD_EXP relatively. */
#define FAST_DD_EXP 0x1p-98
double fast_exp_dd(double hi, double lo, double *out_lo);

#endif
