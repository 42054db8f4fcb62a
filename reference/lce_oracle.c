/* lce_oracle.c — tier-0 oracle driver (lce_oracle.h): validates the case, runs the per-token
 * forward and backward (lce_oracle_forward.c, lce_oracle_backward.c) in MPFR, and turns every
 * MPFR element into its reference: the nearest double, a bound that includes that last rounding,
 * the format value rounded straight from MPFR, and whether that format value is certain.
 *
 * Order of work: per token row, logits → lse, loss → dz (kept, transposed) → the row of
 * d_hidden; then the reduced loss, then d_weight over the kept dz, then the exact copies (padded rows,
 * the untied embedding's gradient). Padded rows [v, vp) never enter anything; tp and the chunk
 * sizes are the subject's business and change nothing here. */
#include <stdlib.h>
#include <string.h>

#include "lce_mpfr_dtype.h"
#include "lce_oracle_internal.h"

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

static lce_code alloc_results(const lce_case *c, mpfr_prec_t prec, lce_oracle_result *res, lce_oracle_mp *mp,
                              lce_status *st) {
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
              "out of memory for the oracle's %s (%lld elements)", lce_output_name((lce_output_id)o), (long long)n);
    if (mp == NULL) continue;
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

/* Whether the format value of the exact number is certain, and which it is. The exact value lies
 * in [value - err, value + err]; lo and hi widen that interval by one double ulp each way (so
 * the double arithmetic cannot shrink it), and when both round to the same format value, so
 * does every number between them (rounding is monotone; -0 and +0 count as one value) — a double
 * rounds to the format
 * correctly with lce_round_to. The 2^-12 ulp margin keeps the judge's metrics, which use value
 * itself, meaningful at the format's resolution. */
static int certify(lce_dtype fmt, double value, double err, double *rounded) {
  if (!(err <= ldexp(lce_ulp(fmt, value), -12))) return 0;
  double lo = lce_round_to(fmt, nextafter(value - err, -INFINITY));
  double hi = lce_round_to(fmt, nextafter(value + err, INFINITY));
  if (!(lo == hi)) return 0;
  /* An interval around zero rounds to -0 at one end and +0 at the other: the value 0 is certain,
   * its sign is not a class the judge checks; report the sign of value. */
  *rounded = lo == 0.0 ? copysign(0.0, value) : lo;
  return 1;
}

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
  else if (!(decisive = certify(fmt, value, err, &rounded))) rounded = lce_mpfr_round_to(fmt, m);
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

/* An element whose value is known exactly as a double (zeros, copied priors). */
static void finish_exact(oracle_ctx *cx, lce_output_id o, int64_t i, double x) {
  if (cx->mp != NULL) {
    mpfr_set_d(cx->exact, x, MPFR_RNDN);
    finish(cx, o, i, cx->exact, 0.0, fabs(x));
    return;
  }
  record(cx, o, i, x, 0.0, fabs(x), lce_round_to(lce_output_format(cx->c, o), x), 1);
}

/* ---- the run ---------------------------------------------------------------------------------- */

typedef struct oracle_work {
  /* The exact inputs (real rows only) as doubles and as MPFR numbers of the dtype's precision,
   * row-major for the logits and transposed ([k*n + i], [k*v + j]) for the backward, whose inner
   * loops then walk contiguous memory. */
  double *hidden, *w, *hidden_t, *w_t;
  lce_mp_array hidden_mp, w_mp, hidden_mp_t, w_mp_t;
  lce_mp_array dz_row;      /* [v] the current row's dz */
  double *dz_row_abs;       /* [v] upper bounds on its |dz| */
  double *dz_row_mag;       /* [v] |g| (p_j + [j == y]) + floor: the terms an implementation subtracts */
  double *dz_row_emag;      /* [v] |g| (p_j + [j == y]) * softmax condition + floor: their error scale */
  lce_row row;
  lce_mp_array dz;          /* [v*n] dz of the rows with non-zero dz, transposed: [j*n + i] */
  double *dz_abs, *dz_err;  /* [v*n] upper bounds on |dz| and on |dz - exact| */
  double *dz_mag, *dz_emag; /* [v*n] dz_row_mag of those rows; times the softmax condition, plus the floor */
  lce_mp_array loss_token;  /* [n] kept for the reduced loss */
  double *loss_err;         /* [n] */
  int64_t *active;          /* rows with a non-zero dz */
  lce_mp_array prod;        /* max(v, n + 1) products for the backward sums */
  mpfr_t out, g;
} oracle_work;

static void work_free(oracle_work *w) {
  free(w->hidden);
  free(w->w);
  free(w->hidden_t);
  free(w->w_t);
  lce_mp_array_free(&w->hidden_mp);
  lce_mp_array_free(&w->w_mp);
  lce_mp_array_free(&w->hidden_mp_t);
  lce_mp_array_free(&w->w_mp_t);
  lce_mp_array_free(&w->dz_row);
  free(w->dz_row_abs);
  free(w->dz_row_mag);
  lce_row_free(&w->row);
  lce_mp_array_free(&w->dz);
  free(w->dz_abs);
  free(w->dz_err);
  free(w->dz_mag);
  free(w->dz_emag);
  free(w->dz_row_emag);
  lce_mp_array_free(&w->loss_token);
  free(w->loss_err);
  free(w->active);
  lce_mp_array_free(&w->prod);
}

/* Loads the inputs the math reads as doubles (exact) and rejects non-finite ones: the oracle
 * certifies finite inputs only. Padded rows are never read. */
static lce_code load_inputs(const lce_case *c, const lce_tensors *in, oracle_work *w, lce_status *st) {
  const int64_t nh = c->n * c->h, vh = c->v * c->h;
  const void *wt = c->tied ? in->embedding : in->weight;
  const float *prior = c->tied ? in->grad_embedding_prior : in->grad_weight_prior;
  w->hidden = malloc((size_t)nh * sizeof *w->hidden);
  w->w = malloc((size_t)vh * sizeof *w->w);
  w->hidden_t = malloc((size_t)nh * sizeof *w->hidden_t);
  w->w_t = malloc((size_t)vh * sizeof *w->w_t);
  LCE_CHECK(st, w->hidden && w->w && w->hidden_t && w->w_t, LCE_ENOMEM, "out of memory loading the oracle's inputs");
  for (int64_t i = 0; i < nh; i++) {
    w->hidden[i] = lce_load(c->dtype, in->hidden, (size_t)i);
    LCE_CHECK(st, isfinite(w->hidden[i]), LCE_EINVAL, "hidden[%lld] = %g is not finite", (long long)i, w->hidden[i]);
  }
  for (int64_t i = 0; i < vh; i++) {
    w->w[i] = lce_load(c->dtype, wt, (size_t)i);
    LCE_CHECK(st, isfinite(w->w[i]), LCE_EINVAL, "%s[%lld] (a real vocab row) = %g is not finite",
              c->tied ? "embedding" : "weight", (long long)i, w->w[i]);
    LCE_CHECK(st, isfinite(prior[i]), LCE_EINVAL, "gradient prior [%lld] (a real vocab row) = %g is not finite",
              (long long)i, (double)prior[i]);
  }
  for (int64_t i = 0; i < (c->reduction == LCE_RED_NONE ? c->n : 1); i++)
    LCE_CHECK(st, isfinite(in->grad_output[i]), LCE_EINVAL, "grad_output[%lld] = %g is not finite", (long long)i,
              (double)in->grad_output[i]);
  const mpfr_prec_t dp = lce_dtype_precision(c->dtype);
  LCE_TRY(lce_mp_array_init(&w->hidden_mp, nh, dp, st));
  LCE_TRY(lce_mp_array_init(&w->w_mp, vh, dp, st));
  LCE_TRY(lce_mp_array_init(&w->hidden_mp_t, nh, dp, st));
  LCE_TRY(lce_mp_array_init(&w->w_mp_t, vh, dp, st));
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
      mpfr_set_d(w->w_mp.x[j * c->h + k], x, MPFR_RNDN);
      mpfr_set_d(w->w_mp_t.x[k * c->v + j], x, MPFR_RNDN);
    }
  return LCE_OK;
}

static lce_code alloc_work(const lce_case *c, mpfr_prec_t prec, oracle_work *w, lce_status *st) {
  const int64_t nv = c->n * c->v;
  const mpfr_prec_t dp = lce_dtype_precision(c->dtype);
  LCE_TRY(lce_row_init(&w->row, c->v, c->h, prec, lce_mul_exact_prec(dp), st));
  LCE_TRY(lce_mp_array_init(&w->dz, nv, prec, st));
  LCE_TRY(lce_mp_array_init(&w->dz_row, c->v, prec, st));
  w->dz_row_abs = malloc((size_t)c->v * sizeof *w->dz_row_abs);
  w->dz_row_mag = malloc((size_t)c->v * sizeof *w->dz_row_mag);
  w->dz_row_emag = malloc((size_t)c->v * sizeof *w->dz_row_emag);
  LCE_CHECK(st, w->dz_row_abs && w->dz_row_mag && w->dz_row_emag, LCE_ENOMEM, "out of memory for the oracle's dz row");
  LCE_TRY(lce_mp_array_init(&w->loss_token, c->n, prec, st));
  LCE_TRY(lce_mp_array_init(&w->prod, c->v > c->n + 1 ? c->v : c->n + 1, lce_mul_exact_prec(prec), st));
  w->dz_abs = malloc((size_t)nv * sizeof *w->dz_abs);
  w->dz_err = malloc((size_t)nv * sizeof *w->dz_err);
  w->dz_mag = malloc((size_t)nv * sizeof *w->dz_mag);
  w->dz_emag = malloc((size_t)nv * sizeof *w->dz_emag);
  w->loss_err = malloc((size_t)c->n * sizeof *w->loss_err);
  w->active = malloc((size_t)c->n * sizeof *w->active);
  LCE_CHECK(st, w->dz_abs && w->dz_err && w->dz_mag && w->dz_emag && w->loss_err && w->active, LCE_ENOMEM, "out of memory for the oracle's dz");
  return LCE_OK;
}

/* Sum over k of |h[k] W[v,k]| for one token row and one vocab row: the terms of logit z[v]. Every
 * implementation forms z[v] from them in finite precision, so its error scales with this sum, not
 * with |z[v]|, which cancellation can make arbitrarily small. */
static double logit_terms(const double *h_row, const double *w_row, int64_t H) {
  double s = 0.0;
  for (int64_t k = 0; k < H; k++) s += fabs(h_row[k] * w_row[k]);
  return s * (1.0 + 0x1p-50); /* an upper bound: H <= 2^24 terms, each sum rounding <= 2^-53 */
}

/* Per token: lse, loss, dz, and the d_hidden row. Returns the number of rows with non-zero dz. */
static int64_t run_rows(oracle_ctx *cx, const lce_tensors *in, int64_t n_valid, oracle_work *w) {
  const lce_case *c = cx->c;
  const int64_t V = c->v, H = c->h;
  const double u = ldexp(1.0, -(int)cx->prec);
  int64_t na = 0;
  for (int64_t n = 0; n < c->n; n++) {
    const int64_t y = in->labels[n];
    const int valid = y != c->ignore_index;
    lce_row_logits_exact(&w->row, w->hidden_mp.x + n * H, w->w_mp.x);
    lce_row_forward(&w->row, valid ? y : -1);
    /* Magnitudes: lse is a softmax-weighted mean of the logits plus log s, so its terms are at most
     * the largest logit's terms; a token's loss adds the label logit's terms. */
    double terms_max = 0.0;
    for (int64_t v = 0; v < V; v++) terms_max = fmax(terms_max, logit_terms(w->hidden + n * H, w->w + v * H, H));
    finish(cx, LCE_OUT_LSE, n, w->row.lse, w->row.err_lse, lce_add_up(w->row.mag_lse, terms_max));
    if (valid) {
      mpfr_set(w->loss_token.x[n], w->row.loss, MPFR_RNDN);
      w->loss_err[n] = w->row.err_loss;
      double terms_y = logit_terms(w->hidden + n * H, w->w + y * H, H);
      finish(cx, LCE_OUT_LOSS_TOKEN, n, w->row.loss, w->row.err_loss,
             lce_add_up(w->row.mag_loss, lce_add_up(terms_max, terms_y)));
    } else {
      mpfr_set_zero(w->loss_token.x[n], 1);
      w->loss_err[n] = 0.0;
      finish_exact(cx, LCE_OUT_LOSS_TOKEN, n, 0.0);
    }

    /* g: the gradient of the reduced loss with respect to this token's loss. */
    double g_rel = 0.0;
    mpfr_set_d(w->g, valid ? in->grad_output[c->reduction == LCE_RED_NONE ? n : 0] : 0.0, MPFR_RNDN);
    if (valid && c->reduction == LCE_RED_MEAN) g_rel = mpfr_div_si(w->g, w->g, (long)n_valid, MPFR_RNDN) ? u : 0.0;
    if (mpfr_zero_p(w->g)) { /* ignored token or zero grad_output: dz row exactly zero */
      for (int64_t k = 0; k < H; k++) finish_exact(cx, LCE_OUT_D_HIDDEN, n * H + k, 0.0);
      continue;
    }
    mpfr_t *dz = w->dz_row.x;
    mpfr_clear_underflow();
    double delta = lce_row_dz(&w->row, y, w->g, g_rel, dz);
    if (mpfr_underflow_p()) delta = INFINITY;
    /* Magnitudes for the judge count the label term as the two terms every implementation
     * computes, g*p_y and -g: an fp32 kernel cannot resolve 1 - p_y below 2^-24, so measuring its
     * error against |g (p_y - 1)| alone would call correct kernels wrong on confident rows. Since
     * g p_y = |g| - |dz_y|, that term is 2|g| - |dz_y|, which is >= |dz_y|. The error scale emag
     * weights each term by the row's softmax condition 1 + T (T = the largest logit's sum of
     * |terms|): a logit known to an absolute u*T gives p_j to a relative u*T, so a row of logits
     * near -120 carries ~100x the gradient error of a row near 0 in every correct implementation. */
    const double g_abs = fabs(mpfr_get_d(w->g, MPFR_RNDU));
    const double softmax_cond = 1.0 + terms_max;
    /* And every dz has an absolute floor: stored in the input dtype, a dz below the format's
     * smallest normal number is known only to half its smallest subnormal, 2^(emin - p), not to a
     * relative u = 2^-p. In units of u that is 2^emin: such a dz counts as the smallest normal
     * (fp16: 2^-14, so the d_logits of unlikely tokens vanish in every fp16 kernel). */
    const double dz_floor = g_abs * ldexp(1.0, lce_dtype_emin(c->dtype));
    for (int64_t j = 0; j < V; j++) { /* keep the row for d_weight, at column na */
      w->dz_row_abs[j] = lce_abs_up(dz[j]);
      double term = j == y ? 2.0 * g_abs - w->dz_row_abs[j] : w->dz_row_abs[j];
      if (term < w->dz_row_abs[j]) term = w->dz_row_abs[j];
      w->dz_row_mag[j] = term + dz_floor;
      w->dz_row_emag[j] = term * softmax_cond + dz_floor;
      w->dz_mag[j * c->n + na] = w->dz_row_mag[j];
      w->dz_emag[j * c->n + na] = w->dz_row_emag[j];
      mpfr_set(w->dz.x[j * c->n + na], dz[j], MPFR_RNDN);
      w->dz_abs[j * c->n + na] = w->dz_row_abs[j];
      w->dz_err[j * c->n + na] = lce_mul_up(lce_mul_up(1.01, delta), w->dz_row_abs[j]);
    }
    for (int64_t k = 0; k < H; k++) {
      double mag, emag, e = lce_d_hidden_element(w->out, cx->prec, dz, w->dz_row_abs, w->dz_row_mag, w->dz_row_emag, &emag, delta, w->w_mp_t.x + k * V,
                                           w->w_t + k * V, V, &w->prod, &mag);
      if (mpfr_underflow_p()) e = INFINITY;
      finish(cx, LCE_OUT_D_HIDDEN, n * H + k, w->out, e, mag);
      cx->res->out[LCE_OUT_D_HIDDEN].emag[n * H + k] = emag;
    }
    w->active[na++] = n;
  }
  return na;
}

/* The reduced loss: sum of the token losses (reduction none reports the same sum), divided by
 * #valid for mean (0 when nothing is valid). Its magnitude is the sum of the token losses'
 * magnitudes (|lse| + |z_y| each): those are the terms an implementation adds, and a batch of
 * confident tokens has a loss far below them. */
static void run_loss(oracle_ctx *cx, int64_t n_valid, oracle_work *w) {
  const lce_case *c = cx->c;
  double e = 0.0, mag = 0.0;
  for (int64_t n = 0; n < c->n; n++) {
    e = lce_add_up(e, w->loss_err[n]);
    mag += cx->res->out[LCE_OUT_LOSS_TOKEN].mag[n];
  }
  if (mpfr_sum(w->out, w->loss_token.ptr, (unsigned long)c->n, MPFR_RNDN))
    e = lce_add_up(e, lce_half_ulp(w->out, cx->prec));
  if (c->reduction == LCE_RED_MEAN && n_valid > 0) {
    int inexact = mpfr_div_si(w->out, w->out, (long)n_valid, MPFR_RNDN);
    e = lce_mul_up(e, 1.0 / (double)n_valid * (1.0 + 0x1p-52));
    if (inexact) e = lce_add_up(e, lce_half_ulp(w->out, cx->prec));
    mag /= (double)n_valid;
  }
  finish(cx, LCE_OUT_LOSS, 0, w->out, e, mag);
}

/* The output weight's gradient buffer after the run, and the untied embedding's (unchanged). */
static void run_weight_grads(oracle_ctx *cx, const lce_tensors *in, int64_t na, oracle_work *w) {
  const lce_case *c = cx->c;
  const int64_t H = c->h;
  const float *prior = c->tied ? in->grad_embedding_prior : in->grad_weight_prior;
  for (int64_t j = 0; j < c->v; j++) {
    for (int64_t k = 0; k < H; k++) {
      mpfr_clear_underflow();
      const int64_t col = j * c->n;
      double mag, emag, e = lce_d_weight_element(w->out, cx->prec, prior[j * H + k], w->dz.x + col, w->dz_abs + col,
                                           w->dz_err + col, w->dz_mag + col, w->dz_emag + col, &emag, w->hidden_mp_t.x + k * c->n, w->hidden_t + k * c->n,
                                           w->active, na, &w->prod, &mag);
      if (mpfr_underflow_p()) e = INFINITY;
      finish(cx, LCE_OUT_D_WEIGHT, j * H + k, w->out, e, mag);
      cx->res->out[LCE_OUT_D_WEIGHT].emag[j * H + k] = emag;
    }
  }
  for (int64_t i = c->v * H; i < c->vp * H; i++) finish_exact(cx, LCE_OUT_D_WEIGHT, i, prior[i]);
  if (!c->tied)
    for (int64_t i = 0; i < c->vp * H; i++) finish_exact(cx, LCE_OUT_D_EMBEDDING, i, in->grad_embedding_prior[i]);
}

static lce_code run_body(const lce_case *c, const lce_tensors *in, mpfr_prec_t prec, lce_oracle_result *res,
                         lce_oracle_mp *mp, oracle_work *w, lce_status *st) {
  LCE_TRY(load_inputs(c, in, w, st));
  LCE_TRY(alloc_work(c, prec, w, st));
  LCE_TRY(alloc_results(c, prec, res, mp, st));
  oracle_ctx cx = {.c = c, .prec = prec, .res = res, .mp = mp};
  mpfr_inits2(prec, cx.diff, cx.exact, (mpfr_ptr)0);
  int64_t n_valid = lce_count_valid(c, in);
  int64_t na = run_rows(&cx, in, n_valid, w);
  run_loss(&cx, n_valid, w);
  run_weight_grads(&cx, in, na, w);
  mpfr_clears(cx.diff, cx.exact, (mpfr_ptr)0);
  res->n_valid = n_valid;
  res->precision_bits = (int)prec;
  return LCE_OK;
}

lce_code lce_oracle_run_prec(const lce_case *c, const lce_tensors *in, mpfr_prec_t prec, lce_oracle_result *res,
                             lce_oracle_mp *mp, lce_status *st) {
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
  mpfr_inits2(prec, w.out, w.g, (mpfr_ptr)0);
  lce_code rc = run_body(c, in, prec, res, mp, &w, st);
  mpfr_clears(w.out, w.g, (mpfr_ptr)0);
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
