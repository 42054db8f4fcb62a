/* lce_oracle_driver.h — the tier-0 driver's state, shared by lce_oracle.c (inputs, results,
 * certifying elements, the run, its memory) and lce_oracle_rows.c (the token rows and d_weight,
 * across threads). Not for anything outside those two files. */
#ifndef LCE_ORACLE_DRIVER_H
#define LCE_ORACLE_DRIVER_H

#include "lce_oracle_internal.h"

typedef struct oracle_work oracle_work;

/* One thread's scratch and what it certified (summed into the result after the parallel work). */
typedef struct oracle_ctx {
  const lce_case *c;
  mpfr_prec_t prec;
  lce_oracle_result *res;
  lce_oracle_mp *mp;
  oracle_work *w;
  lce_row row;
  lce_mp_array dz_row;      /* [v] the current row's dz */
  double *dz_row_err;       /* [v] bounds on |dz - exact| */
  double *dz_row_mag;       /* [v] dz's sum of |terms| (label term split) + floor: what an implementation adds */
  double *dz_row_emag;      /* [v] the same terms times the softmax condition + floor: their error scale */
  double *term;             /* [v] error scale of each logit of the current row */
  double *logits;           /* [v] exact logits handed over by the subset's exact_logits */
  lce_mp_array prod;        /* max(v, n + 1) products for the backward sums */
  mpfr_t out, g, diff, exact; /* diff, exact: scratch of lce_oracle_finish */
  mpfr_exp_t saved_emin, saved_emax;
  int64_t total, decisive;
  double worst_rel_err, worst_rel_err_mp;
} oracle_ctx;

/* What a row with a non-zero g keeps for recomputing its dz columns (lce_oracle_rows.c). */
typedef struct oracle_row {
  lce_row_state s;
  double g_rel, cond, floor; /* g's relative bound, the softmax condition 1 + T, the dz floor */
  int dz_underflow;          /* an underflow in the row's dz: none of it is certified */
} oracle_row;

struct oracle_work {
  const lce_case *c;
  const lce_tensors *in;
  /* The exact inputs (real rows only; tf32-rounded with tf32 GEMMs) as doubles and as MPFR numbers
   * of the dtype's precision, row-major for the logits and transposed ([k*n + i], [k*v + j]) for
   * the backward, whose inner loops then walk contiguous memory. */
  double *hidden, *w, *hidden_t, *w_t;
  lce_mp_array hidden_mp, w_mp, hidden_mp_t, w_mp_t;
  unsigned char *bad_h;     /* [n] the token's hidden row holds a NaN or Inf */
  int bad_w;                /* a real W row holds a NaN or Inf: every token is poisoned */
  int poisoned_grad;        /* a valid token is poisoned: every real d_weight element is NaN */
  unsigned char *col_zero;  /* [h] d_hidden[n, k] exactly 0 (lce_zero_d_hidden_columns) */
  const lce_oracle_subset *sub; /* NULL: every element (lce_oracle_run_subset) */
  int all_rows;             /* every token's forward is needed, and d_weight is computed */
  unsigned char *runs;      /* [n] the token's forward runs */
  unsigned char *col_asked; /* [v] a subset asks for an element of that d_weight row (NULL: every row) */
  mpfr_t sw;                /* the mean's divisor, sum of w_label over valid tokens */
  double sw_rel;
  lce_mp_array loss_token;  /* [n] kept for the reduced loss */
  double *loss_err;         /* [n] */
  /* d_weight: the rows with a non-zero g (na of them, in token order; slot[n] is a row's place, -1
   * for the others) and the dz of jb vocab columns of each, transposed: column j - j0 of the block
   * at [(j - j0) * na + slot]. With jb < v, rows keep their state (kept[slot], kept_mp). */
  int64_t *slot, *active, na, jb;
  lce_mp_array dz;
  double *dz_err, *dz_mag, *dz_emag;
  oracle_row *kept;
  lce_mp_array kept_mp;
  int64_t block_cols;       /* the subset's jb, 0: automatic */
  oracle_ctx *ctx;          /* [threads] */
  int threads;
};

/* Records element i of output o from its MPFR value m, whose distance to the exact value is at
 * most e_m (0: m is exact; +Inf: uncertified), and its magnitude mag (sum of |terms|). */
void lce_oracle_finish(oracle_ctx *cx, lce_output_id o, int64_t i, mpfr_srcptr m, double e_m, double mag);
/* An element whose value is known exactly as a double (zeros, copied priors, NaN). */
void lce_oracle_finish_exact(oracle_ctx *cx, lce_output_id o, int64_t i, double x);

/* Vocab columns of dz in flight for na rows: all v when they fit in LCE_ORACLE_BLOCK_BYTES, else
 * fewer, at least one; block_cols > 0 overrides. Bytes one dz element takes: lce_oracle_dz_bytes. */
int64_t lce_oracle_block_cols(const lce_case *c, int64_t na, mpfr_prec_t prec, int64_t block_cols);
double lce_oracle_dz_bytes(mpfr_prec_t prec);

/* Which rows run, which keep dz, the poison flag and the thread count; then the rows and d_weight
 * (lce_oracle_rows.c). lce_oracle_plan before the work's buffers are allocated, lce_oracle_rows
 * after. */
lce_code lce_oracle_plan(oracle_work *w, lce_status *st);
void lce_oracle_rows(oracle_work *w);

#endif
