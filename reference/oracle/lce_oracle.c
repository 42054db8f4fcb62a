/* lce_oracle.c — tier-0 oracle driver (lce_oracle.h): validates the case, runs the per-token
 * forward and backward (lce_oracle_forward.c, lce_oracle_loss.c, lce_oracle_backward.c) in MPFR,
 * and turns every MPFR element into its reference: the nearest double, a bound that includes that
 * last rounding, the format value rounded straight from MPFR, and whether that format value is
 * certain.
 *
 * Order of work: per token row, logits → lse, loss → dz (kept, transposed) → the row of
 * d_hidden; then the reduced loss, then d_weight over the kept dz, then the exact copies (padded rows,
 * the untied embedding's gradient). Padded rows [v, vp) never enter anything; tp and the chunk
 * sizes are the subject's business and change nothing here. With tf32 GEMMs the hidden and W
 * values are rounded to tf32 on loading, so the logits and both gradient GEMMs read them.
 *
 * Non-finite inputs (lce_case.h) are not errors. A token is poisoned when its hidden row or any
 * real W row holds a NaN or an Inf (after tf32 rounding): its logits are all NaN, so its lse is
 * NaN, and when its label is valid its loss, its d_hidden row and every real d_weight element
 * (through its dz row, which is NaN everywhere — even where g is 0, as IEEE's 0 * NaN is) are NaN,
 * and so is the reduced loss. An ignored token contributes nothing: the kernels skip ignored
 * tokens, so its loss and d_hidden row are exactly 0 even when poisoned (g = 0 must not meet
 * its NaN), and only its lse is NaN. A non-finite prior stays what it is where nothing NaN is
 * added to it. Such elements are reported as their value (NaN, ±Inf) with error 0, decisive,
 * magnitude 0; the judge compares their classes. Padded d_weight rows are always their prior. */
#include <stdlib.h>
#include <string.h>

#include "lce_mpfr_dtype.h"
#include "lce_oracle_internal.h"
#include "lce_progress.h"

/* ---- MPFR arrays ------------------------------------------------------------------------------ */

lce_code lce_mp_array_init(lce_mp_array *a, int64_t n, mpfr_prec_t prec, lce_status *st) {
  memset(a, 0, sizeof *a);
  a->prec = prec;
  if (n <= 0) return LCE_OK;
  size_t bytes = mpfr_custom_get_size(prec);
  a->x = malloc((size_t)n * sizeof *a->x);
  a->ptr = malloc((size_t)n * sizeof *a->ptr);
  a->limbs = malloc((size_t)n * bytes);
  if (a->x == NULL || a->ptr == NULL || a->limbs == NULL) {
    lce_mp_array_free(a);
    return lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory for %lld MPFR numbers of %ld bits",
                    (long long)n, (long)prec);
  }
  a->n = n;
  for (int64_t i = 0; i < n; i++) {
    void *sig = (char *)a->limbs + (size_t)i * bytes;
    mpfr_custom_init(sig, prec);
    mpfr_custom_init_set(a->x[i], MPFR_ZERO_KIND, 0, prec, sig);
    a->ptr[i] = a->x[i];
  }
  return LCE_OK;
}

void lce_mp_array_free(lce_mp_array *a) {
  free(a->x);
  free(a->ptr);
  free(a->limbs);
  memset(a, 0, sizeof *a);
}

/* ---- results ---------------------------------------------------------------------------------- */

void lce_oracle_free(lce_oracle_result *res) {
  if (res == NULL) return;
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    lce_ref_output *r = &res->out[o];
    free(r->value);
    free(r->err);
    free(r->mag);
    free(r->emag);
    free(r->rounded);
    free(r->decisive);
  }
  memset(res, 0, sizeof *res);
}

void lce_oracle_mp_free(lce_oracle_mp *mp) {
  if (mp == NULL) return;
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    lce_mp_array_free(&mp->value[o]);
    free(mp->err_mp[o]);
  }
  memset(mp, 0, sizeof *mp);
}

lce_code lce_oracle_result_alloc(const lce_case *c, lce_oracle_result *res, const char *who, lce_status *st) {
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    int64_t n = lce_output_count(c, (lce_output_id)o);
    if (n == 0) continue;
    lce_ref_output *r = &res->out[o];
    r->count = n;
    r->value = malloc((size_t)n * sizeof *r->value);
    r->err = malloc((size_t)n * sizeof *r->err);
    r->mag = malloc((size_t)n * sizeof *r->mag);
    r->emag = malloc((size_t)n * sizeof *r->emag);
    r->rounded = malloc((size_t)n * sizeof *r->rounded);
    r->decisive = malloc((size_t)n);
    LCE_CHECK(st, r->value && r->err && r->mag && r->emag && r->rounded && r->decisive, LCE_ENOMEM,
              "out of memory for %s's %s (%lld elements)", who, lce_output_name((lce_output_id)o), (long long)n);
  }
  return LCE_OK;
}

/* The result arrays, and with mp the MPFR values and error bounds of every element. */
static lce_code alloc_results(const lce_case *c, mpfr_prec_t prec, lce_oracle_result *res, lce_oracle_mp *mp,
                              lce_status *st) {
  LCE_TRY(lce_oracle_result_alloc(c, res, "the oracle", st));
  for (int o = 0; o < LCE_OUT_COUNT && mp != NULL; o++) {
    int64_t n = res->out[o].count;
    if (n == 0) continue;
    LCE_TRY(lce_mp_array_init(&mp->value[o], n, prec, st));
    mp->err_mp[o] = malloc((size_t)n * sizeof *mp->err_mp[o]);
    LCE_ALLOC_CHECK(st, mp->err_mp[o]);
  }
  return LCE_OK;
}

/* ---- certifying one element ------------------------------------------------------------------- */

typedef struct oracle_ctx {
  const lce_case *c;
  mpfr_prec_t prec;
  lce_oracle_result *res;
  lce_oracle_mp *mp;
  mpfr_t diff, exact; /* scratch of finish and finish_exact */
} oracle_ctx;

static void record(oracle_ctx *cx, lce_output_id o, int64_t i, double value, double err, double mag,
                   double rounded, int decisive) {
  lce_ref_output *r = &cx->res->out[o];
  r->value[i] = value;
  r->err[i] = err;
  r->mag[i] = mag;
  r->emag[i] = mag; /* the gradients overwrite it with their conditioned scale */
  r->rounded[i] = rounded;
  r->decisive[i] = (unsigned char)decisive;
  cx->res->total++;
  cx->res->decisive += decisive;
}

/* Records element i of output o from its MPFR value m, whose distance to the exact value is at
 * most e_m (0: m is exact; +Inf: uncertified), and its magnitude mag (sum of |terms|). */
static void finish(oracle_ctx *cx, lce_output_id o, int64_t i, mpfr_srcptr m, double e_m, double mag) {
  lce_dtype fmt = lce_output_format(cx->c, o);
  double value = mpfr_get_d(m, MPFR_RNDN), err, rounded;
  if (!mpfr_number_p(m)) {
    err = e_m == 0.0 ? 0.0 : INFINITY; /* an exact copy of a non-finite prior, or a failure */
  } else if (!isfinite(value)) {
    err = INFINITY;
  } else {
    mpfr_sub_d(cx->diff, m, value, MPFR_RNDA); /* away from zero: |diff| rounded up, exactly */
    err = lce_add_up(e_m, fabs(mpfr_get_d(cx->diff, MPFR_RNDA)));
  }
  int decisive = 1;
  if (err == 0.0) rounded = lce_round_to(fmt, value); /* value is the exact number */
  else if (!(decisive = lce_round_certain(fmt, value, err, &rounded))) rounded = lce_mpfr_round_to(fmt, m);
  record(cx, o, i, value, err, mag, rounded, decisive);
  /* Certified accuracy at the MPFR level, relative to the element's scale: an element whose exact
   * value is zero (column 0 of W is constant, so d_hidden[n, 0] is exactly 0) is known to ~1e-48
   * of its terms, which is what matters to the judge, not its relative error. */
  double scale = fmax(fabs(value), mag);
  if (isfinite(e_m) && scale > 0.0 && e_m / scale > cx->res->worst_rel_err) cx->res->worst_rel_err = e_m / scale;
  if (cx->mp != NULL) {
    mpfr_set(cx->mp->value[o].x[i], m, MPFR_RNDN);
    cx->mp->err_mp[o][i] = e_m;
    if (!mpfr_zero_p(m) && mpfr_number_p(m)) {
      double rel = e_m / fabs(mpfr_get_d(m, MPFR_RNDZ));
      if (rel > cx->mp->worst_rel_err_mp) cx->mp->worst_rel_err_mp = rel;
    }
  }
}

/* An element whose value is known exactly as a double (zeros, copied priors, NaN). A non-finite
 * one has magnitude 0: only its class is judged. */
static void finish_exact(oracle_ctx *cx, lce_output_id o, int64_t i, double x) {
  const double mag = isfinite(x) ? fabs(x) : 0.0;
  if (cx->mp != NULL) {
    mpfr_set_d(cx->exact, x, MPFR_RNDN);
    finish(cx, o, i, cx->exact, 0.0, mag);
    return;
  }
  record(cx, o, i, x, 0.0, mag, lce_round_to(lce_output_format(cx->c, o), x), 1);
}

/* ---- the run ---------------------------------------------------------------------------------- */

typedef struct oracle_work {
  /* The exact inputs (real rows only; tf32-rounded with tf32 GEMMs) as doubles and as MPFR numbers
   * of the dtype's precision, row-major for the logits and transposed ([k*n + i], [k*v + j]) for
   * the backward, whose inner loops then walk contiguous memory. */
  double *hidden, *w, *hidden_t, *w_t;
  lce_mp_array hidden_mp, w_mp, hidden_mp_t, w_mp_t;
  unsigned char *bad_h;     /* [n] the token's hidden row holds a NaN or Inf */
  int bad_w;                /* a real W row holds a NaN or Inf: every token is poisoned */
  int poisoned_grad;        /* a valid token is poisoned: every real d_weight element is NaN */
  lce_mp_array dz_row;      /* [v] the current row's dz */
  double *dz_row_err;       /* [v] bounds on |dz - exact| */
  double *dz_row_mag;       /* [v] dz's sum of |terms| (label term split) + floor: what an implementation adds */
  double *dz_row_emag;      /* [v] the same terms times the softmax condition + floor: their error scale */
  double *term;             /* [v] error scale of each logit of the current row */
  lce_row row;
  lce_mp_array dz;          /* [v*n] dz of the rows with non-zero g, transposed: [j*n + i] */
  double *dz_err;           /* [v*n] bounds on |dz - exact| */
  double *dz_mag, *dz_emag; /* [v*n] dz_row_mag and dz_row_emag of those rows */
  lce_mp_array loss_token;  /* [n] kept for the reduced loss */
  double *loss_err;         /* [n] */
  int64_t *active;          /* rows with a non-zero g */
  lce_mp_array prod;        /* max(v, n + 1) products for the backward sums */
  mpfr_t out, g, sw;        /* sw: the mean's divisor, sum of w_label over valid tokens */
  double sw_rel;
  const lce_oracle_subset *sub; /* NULL: every element (lce_oracle_run_subset) */
  int all_rows;             /* every token's forward is needed */
  unsigned char *col_zero;  /* [h] d_hidden[n, k] exactly 0 (lce_zero_d_hidden_columns) */
} oracle_work;

static void work_free(oracle_work *w) {
  free(w->hidden);
  free(w->w);
  free(w->hidden_t);
  free(w->w_t);
  free(w->col_zero);
  lce_mp_array_free(&w->hidden_mp);
  lce_mp_array_free(&w->w_mp);
  lce_mp_array_free(&w->hidden_mp_t);
  lce_mp_array_free(&w->w_mp_t);
  free(w->bad_h);
  lce_mp_array_free(&w->dz_row);
  free(w->dz_row_err);
  free(w->dz_row_mag);
  free(w->dz_row_emag);
  free(w->term);
  lce_row_free(&w->row);
  lce_mp_array_free(&w->dz);
  free(w->dz_err);
  free(w->dz_mag);
  free(w->dz_emag);
  lce_mp_array_free(&w->loss_token);
  free(w->loss_err);
  free(w->active);
  lce_mp_array_free(&w->prod);
}

static int row_asked(const unsigned char *flags, int64_t count) {
  for (int64_t i = 0; i < count; i++)
    if (flags[i]) return 1;
  return 0;
}

/* Whether row n's forward runs (every row, or one a subset asks for through its row, its d_hidden). */
static int row_runs(const lce_case *c, const oracle_work *w, int64_t n) {
  return w->all_rows || (w->sub->row && w->sub->row[n]) || (w->sub->d_hidden && row_asked(w->sub->d_hidden + n * c->h, c->h));
}

/* Whether a running row reads W in MPFR: its logits are not given, or one is 0 or NaN (not known). */
static int needs_w_rows(const lce_case *c, const oracle_work *w) {
  for (int64_t n = 0; n < c->n; n++) {
    if (!row_runs(c, w, n)) continue;
    if (!(w->sub && w->sub->logits && w->sub->logits_exact && w->sub->logits_exact[n])) return 1;
    for (int64_t v = 0; v < c->v; v++)
      if (!(w->sub->logits[n * c->v + v] != 0.0) || isnan(w->sub->logits[n * c->v + v])) return 1;
  }
  return 0;
}

/* One input element as the math reads it: exact, tf32-rounded for tf32 GEMMs. */
static double input(const lce_case *c, const void *buf, int64_t i) {
  double x = lce_load(c->dtype, buf, (size_t)i);
  return c->gemm == LCE_GEMM_TF32 ? lce_round_tf32(x) : x;
}

/* Loads the inputs the math reads as doubles (exact) and notes the non-finite ones (lce_case.h:
 * they poison what they reach). Padded rows are never read. */
static lce_code load_inputs(const lce_case *c, const lce_tensors *in, oracle_work *w, lce_status *st) {
  const int64_t nh = c->n * c->h, vh = c->v * c->h;
  const void *wt = lce_output_weight(c, in);
  w->hidden = malloc((size_t)nh * sizeof *w->hidden);
  w->w = malloc((size_t)vh * sizeof *w->w);
  w->hidden_t = malloc((size_t)nh * sizeof *w->hidden_t);
  w->w_t = malloc((size_t)vh * sizeof *w->w_t);
  w->bad_h = calloc((size_t)c->n, 1);
  w->col_zero = calloc((size_t)c->h, 1);
  LCE_CHECK(st, w->hidden && w->w && w->hidden_t && w->w_t && w->bad_h && w->col_zero, LCE_ENOMEM,
            "out of memory loading the oracle's inputs");
  for (int64_t i = 0; i < nh; i++) {
    w->hidden[i] = input(c, in->hidden, i);
    if (!isfinite(w->hidden[i])) w->bad_h[i / c->h] = 1;
  }
  for (int64_t i = 0; i < vh; i++) {
    w->w[i] = input(c, wt, i);
    if (!isfinite(w->w[i])) w->bad_w = 1;
  }
  lce_zero_d_hidden_columns(c, w->w, w->col_zero);
  const mpfr_prec_t dp = lce_dtype_precision(c->dtype);
  /* The MPFR copies of W (each V*H numbers) only where a computed element reads them: the
   * row-major one for logits not given exact (or given as 0, whose sign mpfr_sum decides), the
   * transposed one for d_hidden. A subset run (tier 1's escalations) often needs neither. */
  const int need_w = needs_w_rows(c, w), need_w_t = w->sub == NULL || (w->sub->d_hidden && row_asked(w->sub->d_hidden, nh));
  LCE_TRY(lce_mp_array_init(&w->hidden_mp, nh, dp, st));
  LCE_TRY(lce_mp_array_init(&w->w_mp, need_w ? vh : 0, dp, st));
  LCE_TRY(lce_mp_array_init(&w->hidden_mp_t, nh, dp, st));
  LCE_TRY(lce_mp_array_init(&w->w_mp_t, need_w_t ? vh : 0, dp, st));
  for (int64_t n = 0; n < c->n; n++)
    for (int64_t k = 0; k < c->h; k++) {
      double x = w->hidden[n * c->h + k];
      w->hidden_t[k * c->n + n] = x;
      mpfr_set_d(w->hidden_mp.x[n * c->h + k], x, MPFR_RNDN); /* exact */
      mpfr_set_d(w->hidden_mp_t.x[k * c->n + n], x, MPFR_RNDN);
    }
  for (int64_t j = 0; j < c->v; j++)
    for (int64_t k = 0; k < c->h; k++) {
      double x = w->w[j * c->h + k];
      w->w_t[k * c->v + j] = x;
      if (need_w) mpfr_set_d(w->w_mp.x[j * c->h + k], x, MPFR_RNDN);
      if (need_w_t) mpfr_set_d(w->w_mp_t.x[k * c->v + j], x, MPFR_RNDN);
    }
  return LCE_OK;
}

static lce_code alloc_work(const lce_case *c, const lce_tensors *in, mpfr_prec_t prec, oracle_work *w,
                           lce_status *st) {
  const int64_t nv = c->n * c->v;
  const mpfr_prec_t dp = lce_dtype_precision(c->dtype);
  LCE_TRY(lce_row_init(&w->row, c, in->class_weight, c->h, prec, lce_mul_exact_prec(dp), st));
  LCE_TRY(lce_mp_array_init(&w->dz, nv, prec, st));
  LCE_TRY(lce_mp_array_init(&w->dz_row, c->v, prec, st));
  w->dz_row_err = malloc((size_t)c->v * sizeof *w->dz_row_err);
  w->dz_row_mag = malloc((size_t)c->v * sizeof *w->dz_row_mag);
  w->dz_row_emag = malloc((size_t)c->v * sizeof *w->dz_row_emag);
  w->term = malloc((size_t)c->v * sizeof *w->term);
  LCE_CHECK(st, w->dz_row_err && w->dz_row_mag && w->dz_row_emag && w->term, LCE_ENOMEM,
            "out of memory for the oracle's dz row");
  LCE_TRY(lce_mp_array_init(&w->loss_token, c->n, prec, st));
  LCE_TRY(lce_mp_array_init(&w->prod, c->v > c->n + 1 ? c->v : c->n + 1, lce_mul_exact_prec(prec), st));
  w->dz_err = malloc((size_t)nv * sizeof *w->dz_err);
  w->dz_mag = malloc((size_t)nv * sizeof *w->dz_mag);
  w->dz_emag = malloc((size_t)nv * sizeof *w->dz_emag);
  w->loss_err = malloc((size_t)c->n * sizeof *w->loss_err);
  w->active = malloc((size_t)c->n * sizeof *w->active);
  LCE_CHECK(st, w->dz_err && w->dz_mag && w->dz_emag && w->loss_err && w->active, LCE_ENOMEM,
            "out of memory for the oracle's dz");
  return LCE_OK;
}

/* Sum over k of |h[k] W[v,k]| for one token row and one vocab row: the terms of logit s[v]. Every
 * implementation forms s[v] from them in finite precision, so its error scales with this sum, not
 * with |s[v]|, which cancellation can make arbitrarily small. */
static double logit_terms(const double *h_row, const double *w_row, int64_t H) {
  double s = 0.0;
  for (int64_t k = 0; k < H; k++) s += fabs(h_row[k] * w_row[k]);
  return s * (1.0 + 0x1p-50); /* an upper bound: H <= 2^24 terms, each sum rounding <= 2^-53 */
}

/* The error scale of every logit of row n into w->term; returns the largest. With softcap a
 * logit's error is its own (|z|, from tanh) or the GEMM's scaled by the factor f = dz/ds, so its
 * scale is max(|z|, f terms) — without softcap that is terms itself. */
static double row_terms(const lce_case *c, int64_t n, oracle_work *w) {
  double term_max = 0.0;
  for (int64_t v = 0; v < c->v; v++) {
    double t = logit_terms(w->hidden + n * c->h, w->w + v * c->h, c->h);
    if (c->softcap > 0)
      t = fmax(fabs(mpfr_get_d(w->row.z.x[v], MPFR_RNDU)), mpfr_get_d(w->row.f.x[v], MPFR_RNDU) * t);
    w->term[v] = t;
    term_max = fmax(term_max, t);
  }
  return term_max;
}

/* A poisoned token (see the top of this file). */
static void poisoned_row(oracle_ctx *cx, int64_t n, int valid, oracle_work *w) {
  const int64_t H = cx->c->h;
  const double x = valid ? NAN : 0.0;
  finish_exact(cx, LCE_OUT_LSE, n, NAN);
  finish_exact(cx, LCE_OUT_LOSS_TOKEN, n, x);
  mpfr_set_d(w->loss_token.x[n], x, MPFR_RNDN);
  w->loss_err[n] = 0.0;
  for (int64_t k = 0; k < H; k++) finish_exact(cx, LCE_OUT_D_HIDDEN, n * H + k, x);
  if (valid) w->poisoned_grad = 1;
}

/* The absolute floor of a gradient element's error scale, in units of the formats' unit
 * roundoff: each of the `terms` fp32 multiply-adds that form it is exact only to half the smallest
 * fp32 subnormal (2^-150, i.e. 2^-126 units of 2^-24), and the final rounding to the output format
 * to half its smallest subnormal (2^emin units). Only elements whose terms are all tiny (subnormal
 * hidden rows, underflowing products) feel it. */
static double gemm_floor(const lce_case *c, lce_output_id o, int64_t terms) {
  return (double)terms * 0x1p-126 + ldexp(1.0, lce_dtype_emin(lce_output_format(c, o)));
}

/* The row's dz, kept at column na for d_weight, and its d_hidden row. */
static void row_backward(oracle_ctx *cx, int64_t n, int64_t y, double g_rel, double term_max, int64_t na,
                         oracle_work *w) {
  const lce_case *c = cx->c;
  const int64_t V = c->v, H = c->h;
  mpfr_t *dz = w->dz_row.x;
  mpfr_clear_underflow();
  lce_row_dz(&w->row, y, w->g, g_rel, dz, w->dz_row_err, w->dz_row_mag);
  const int underflow = mpfr_underflow_p();
  /* Magnitudes for the judge count the label term as the two terms every implementation
   * computes, g*cy*p_y and -g*cy (lce_row_dz's mag): an fp32 kernel cannot resolve 1 - p_y below
   * 2^-24, so measuring its error against |g cy (p_y - 1)| alone would call correct kernels wrong
   * on confident rows. The error scale emag weights each term by the row's softmax condition
   * 1 + T (T = the largest logit's error scale): a logit known to an absolute u*T gives p_j to a
   * relative u*T, so a row of logits near -120 carries ~100x the gradient error of a row near 0
   * in every correct implementation. */
  const double g_abs = fabs(mpfr_get_d(w->g, MPFR_RNDU));
  const double softmax_cond = 1.0 + term_max;
  /* And every dz has an absolute floor: stored in the input dtype, a dz below the format's
   * smallest normal number is known only to half its smallest subnormal, 2^(emin - p), not to a
   * relative u = 2^-p. In units of u that is 2^emin: such a dz counts as the smallest normal
   * (fp16: 2^-14, so the d_logits of unlikely tokens vanish in every fp16 kernel). The rounding is
   * absolute whether the kernel stores g*t (then 2^emin, whatever g) or t and scales by g afterwards
   * (then g*2^emin): the floor is the larger, max(1, |g|)*2^emin. A floor of |g|*2^emin undercounted
   * mean-reduced fp16 gradients by 1/g (24x on a fuzz case whose d_logits all underflow). */
  const double dz_floor = lce_dz_floor(c, g_abs);
  for (int64_t j = 0; j < V; j++) {
    const double term = w->dz_row_mag[j];
    if (underflow) w->dz_row_err[j] = INFINITY;
    w->dz_row_mag[j] = term + dz_floor;
    w->dz_row_emag[j] = term * softmax_cond + dz_floor;
    w->dz_mag[j * c->n + na] = w->dz_row_mag[j];
    w->dz_emag[j * c->n + na] = w->dz_row_emag[j];
    w->dz_err[j * c->n + na] = w->dz_row_err[j];
    mpfr_set(w->dz.x[j * c->n + na], dz[j], MPFR_RNDN);
  }
  for (int64_t k = 0; k < H; k++) {
    if (w->sub && !(w->sub->d_hidden && w->sub->d_hidden[n * H + k])) continue;
    double mag, emag;
    mpfr_clear_underflow();
    double e = lce_d_hidden_element(w->out, cx->prec, dz, w->dz_row_err, w->dz_row_mag, w->dz_row_emag, &emag,
                                    w->w_mp_t.x + k * V, w->w_t + k * V, V, &w->prod, &mag);
    if (mpfr_underflow_p()) e = INFINITY;
    if (w->col_zero[k]) mpfr_set_zero(w->out, 1), e = LCE_EXACT_ZERO_ERR; /* proven 0, not the sum's ~1e-49 */
    finish(cx, LCE_OUT_D_HIDDEN, n * H + k, w->out, e, mag);
    cx->res->out[LCE_OUT_D_HIDDEN].emag[n * H + k] = emag + gemm_floor(c, LCE_OUT_D_HIDDEN, V);
  }
}


/* Per token: lse, loss, dz, and the d_hidden row. Returns the number of rows with non-zero g. */
static int64_t run_rows(oracle_ctx *cx, const lce_tensors *in, oracle_work *w) {
  const lce_case *c = cx->c;
  const int64_t H = c->h;
  int64_t na = 0;
  lce_progress progress;
  lce_progress_start(&progress, "tier 0 tokens", (double)c->n);
  for (int64_t n = 0; n < c->n; n++) {
    const int64_t y = in->labels[n];
    const int valid = y != c->ignore_index;
    lce_progress_step(&progress, (double)n);
    if (!row_runs(c, w, n)) continue;
    if (w->bad_w || w->bad_h[n]) {
      poisoned_row(cx, n, valid, w);
      continue;
    }
    if (w->sub && w->sub->logits && w->sub->logits_exact && w->sub->logits_exact[n])
      lce_row_logits_given(&w->row, w->hidden_mp.x + n * H, w->w_mp.x, w->sub->logits + n * c->v);
    else
      lce_row_logits_exact(&w->row, w->hidden_mp.x + n * H, w->w_mp.x);
    lce_row_forward(&w->row, valid ? y : -1);
    /* Magnitudes: lse is a softmax-weighted mean of the logits plus log s, so its terms are at most
     * the largest logit's terms; a token's loss adds its logits' terms (lce_row_loss). */
    const double term_max = row_terms(c, n, w);
    finish(cx, LCE_OUT_LSE, n, w->row.lse, w->row.err_lse, lce_add_up(w->row.mag_lse, term_max));
    if (valid) {
      lce_row_loss(&w->row, y, w->term, term_max);
      mpfr_set(w->loss_token.x[n], w->row.loss, MPFR_RNDN);
      w->loss_err[n] = w->row.err_loss;
      finish(cx, LCE_OUT_LOSS_TOKEN, n, w->row.loss, w->row.err_loss, w->row.mag_loss);
    } else {
      mpfr_set_zero(w->loss_token.x[n], 1);
      w->loss_err[n] = 0.0;
      finish_exact(cx, LCE_OUT_LOSS_TOKEN, n, 0.0);
    }
    /* g: the gradient of the reduced loss with respect to this token's loss. */
    const double g_rel = lce_token_g(c, in, n, w->sw, w->sw_rel, w->g);
    if (mpfr_zero_p(w->g)) { /* ignored token, zero grad_output or zero weight sum: dz exactly zero */
      for (int64_t k = 0; k < H; k++) finish_exact(cx, LCE_OUT_D_HIDDEN, n * H + k, 0.0);
      continue;
    }
    row_backward(cx, n, y, g_rel, term_max, na, w);
    w->active[na++] = n;
  }
  return na;
}

/* The reduced loss: sum of the token losses (reduction none reports the same sum), divided by
 * sum_n W_n for mean (0 when that is 0); NaN when a valid token is poisoned. Its magnitude is the
 * sum of the token losses' magnitudes: those are the terms an implementation adds, and a batch of
 * confident tokens has a loss far below them. */
static void run_loss(oracle_ctx *cx, oracle_work *w) {
  const lce_case *c = cx->c;
  if (w->poisoned_grad) {
    finish_exact(cx, LCE_OUT_LOSS, 0, NAN);
    return;
  }
  if (c->reduction == LCE_RED_MEAN && mpfr_zero_p(w->sw)) {
    finish_exact(cx, LCE_OUT_LOSS, 0, 0.0);
    return;
  }
  double e = 0.0, mag = 0.0;
  for (int64_t n = 0; n < c->n; n++) {
    e = lce_add_up(e, w->loss_err[n]);
    mag += cx->res->out[LCE_OUT_LOSS_TOKEN].mag[n];
  }
  if (mpfr_sum(w->out, w->loss_token.ptr, (unsigned long)c->n, MPFR_RNDN))
    e = lce_add_up(e, lce_half_ulp(w->out, cx->prec));
  if (c->reduction == LCE_RED_MEAN) {
    /* sum / SW against SUM / SW_exact, SW = SW_exact (1 + beta), |beta| <= sw_rel:
     * |sum/SW - SUM/SW_exact| <= (e + (|sum| + e) sw_rel) / SW. */
    const double sw_lo = mpfr_get_d(w->sw, MPFR_RNDZ);
    e = lce_add_up(e, lce_mul_up(lce_add_up(lce_abs_up(w->out), e), w->sw_rel));
    e = nextafter(e / sw_lo, INFINITY);
    if (mpfr_div(w->out, w->out, w->sw, MPFR_RNDN)) e = lce_add_up(e, lce_half_ulp(w->out, cx->prec));
    mag /= sw_lo;
  }
  finish(cx, LCE_OUT_LOSS, 0, w->out, e, mag);
}

/* The output weight's gradient buffer after the run, and the untied embedding's (unchanged). */
static void run_weight_grads(oracle_ctx *cx, const lce_tensors *in, int64_t na, oracle_work *w) {
  const lce_case *c = cx->c;
  const int64_t H = c->h;
  const float *prior = lce_output_weight_prior(c, in);
  for (int64_t j = 0; j < c->v; j++) {
    for (int64_t k = 0; k < H; k++) {
      const int64_t i = j * H + k, col = j * c->n;
      if (w->sub && !(w->sub->d_weight && w->sub->d_weight[i])) continue;
      if (w->poisoned_grad || !isfinite(prior[i])) { /* NaN, or a non-finite prior plus finite terms */
        finish_exact(cx, LCE_OUT_D_WEIGHT, i, w->poisoned_grad ? NAN : prior[i]);
        continue;
      }
      mpfr_clear_underflow();
      double mag, emag, e = lce_d_weight_element(w->out, cx->prec, prior[i], w->dz.x + col, w->dz_err + col,
                                                 w->dz_mag + col, w->dz_emag + col, &emag,
                                                 w->hidden_mp_t.x + k * c->n, w->hidden_t + k * c->n, w->active,
                                                 na, &w->prod, &mag);
      if (mpfr_underflow_p()) e = INFINITY;
      finish(cx, LCE_OUT_D_WEIGHT, i, w->out, e, mag);
      cx->res->out[LCE_OUT_D_WEIGHT].emag[i] = emag + gemm_floor(c, LCE_OUT_D_WEIGHT, na);
    }
  }
  if (w->sub) return; /* the exact copies below are never escalated */
  for (int64_t i = c->v * H; i < c->vp * H; i++) finish_exact(cx, LCE_OUT_D_WEIGHT, i, prior[i]);
  if (!c->tied)
    for (int64_t i = 0; i < c->vp * H; i++) finish_exact(cx, LCE_OUT_D_EMBEDDING, i, in->grad_embedding_prior[i]);
}

static lce_code run_body(const lce_case *c, const lce_tensors *in, mpfr_prec_t prec, lce_oracle_result *res,
                         lce_oracle_mp *mp, oracle_work *w, lce_status *st) {
  if (w->sub && !w->sub->loss && !(w->sub->d_weight && row_asked(w->sub->d_weight, c->v * c->h)) &&
      !(w->sub->row && row_asked(w->sub->row, c->n)) && !(w->sub->d_hidden && row_asked(w->sub->d_hidden, c->n * c->h)))
    return alloc_results(c, prec, res, mp, st); /* nothing asked */
  w->all_rows = w->sub == NULL || w->sub->loss || (w->sub->d_weight && row_asked(w->sub->d_weight, c->v * c->h));
  LCE_TRY(load_inputs(c, in, w, st));
  LCE_TRY(alloc_work(c, in, prec, w, st));
  LCE_TRY(alloc_results(c, prec, res, mp, st));
  oracle_ctx cx = {.c = c, .prec = prec, .res = res, .mp = mp};
  mpfr_inits2(prec, cx.diff, cx.exact, (mpfr_ptr)0);
  w->sw_rel = lce_valid_weight_sum(c, in, w->sw);
  int64_t na = run_rows(&cx, in, w);
  if (!w->sub || w->sub->loss) run_loss(&cx, w);
  if (!w->sub || w->all_rows) run_weight_grads(&cx, in, na, w);
  mpfr_clears(cx.diff, cx.exact, (mpfr_ptr)0);
  res->n_valid = lce_count_valid(c, in);
  res->precision_bits = (int)prec;
  return LCE_OK;
}

static lce_code run_checked(const lce_case *c, const lce_tensors *in, mpfr_prec_t prec, const lce_oracle_subset *sub,
                           lce_oracle_result *res, lce_oracle_mp *mp, lce_status *st);

lce_code lce_oracle_run_prec(const lce_case *c, const lce_tensors *in, mpfr_prec_t prec, lce_oracle_result *res,
                             lce_oracle_mp *mp, lce_status *st) {
  return run_checked(c, in, prec, NULL, res, mp, st);
}

lce_code lce_oracle_run_subset(const lce_case *c, const lce_tensors *in, const lce_oracle_subset *sub,
                               lce_oracle_result *res, lce_status *st) {
  LCE_CHECK(st, sub != NULL, LCE_EINVAL, "oracle subset is NULL");
  return run_checked(c, in, LCE_ORACLE_PREC, sub, res, NULL, st);
}

static lce_code run_checked(const lce_case *c, const lce_tensors *in, mpfr_prec_t prec, const lce_oracle_subset *sub,
                           lce_oracle_result *res, lce_oracle_mp *mp, lce_status *st) {
  LCE_CHECK(st, res != NULL, LCE_EINVAL, "oracle result is NULL");
  memset(res, 0, sizeof *res);
  if (mp != NULL) memset(mp, 0, sizeof *mp);
  LCE_TRY(lce_case_validate(c, st));
  LCE_TRY(lce_tensors_validate(c, in, st));
  LCE_CHECK(st, prec >= 64 && prec <= 100000, LCE_EINVAL, "oracle precision %ld outside [64, 100000]", (long)prec);

  /* The widest exponent range: no MPFR overflow, and underflow only below 2^(-2^62). */
  mpfr_exp_t saved_emin = mpfr_get_emin(), saved_emax = mpfr_get_emax();
  mpfr_set_emin(mpfr_get_emin_min());
  mpfr_set_emax(mpfr_get_emax_max());
  oracle_work w;
  memset(&w, 0, sizeof w);
  w.sub = sub;
  mpfr_inits2(prec, w.out, w.g, w.sw, (mpfr_ptr)0);
  lce_code rc = run_body(c, in, prec, res, mp, &w, st);
  mpfr_clears(w.out, w.g, w.sw, (mpfr_ptr)0);
  work_free(&w);
  mpfr_set_emin(saved_emin);
  mpfr_set_emax(saved_emax);
  if (rc != LCE_OK) {
    lce_oracle_free(res);
    lce_oracle_mp_free(mp);
  }
  return rc;
}

lce_code lce_oracle_run(const lce_case *c, const lce_tensors *in, lce_oracle_result *res, lce_status *st) {
  return lce_oracle_run_prec(c, in, LCE_ORACLE_PREC, res, NULL, st);
}
