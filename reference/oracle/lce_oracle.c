/* lce_oracle.c — tier-0 oracle driver (lce_oracle.h): validates the case, runs the per-token
 * forward and backward (lce_oracle_forward.c, lce_oracle_loss.c, lce_oracle_backward.c) in MPFR,
 * and turns every MPFR element into its reference: the nearest double, a bound that includes that
 * last rounding, the format value rounded straight from MPFR, and whether that format value is
 * certain.
 *
 * Order of work: per token row, logits → lse, loss → dz → the row of d_hidden, then d_weight over
 * the vocab in blocks of dz columns (lce_oracle_rows.c: rows and d_weight elements across threads,
 * memory bounded by the columns in flight, not N·V); then the reduced loss and the exact copies
 * (padded rows, the untied embedding's gradient). Padded rows [v, vp) never enter anything; tp and
 * the chunk sizes are the subject's business and change nothing here. With tf32 GEMMs the hidden and
 * W values are rounded to tf32 on loading, so the logits and both gradient GEMMs read them.
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
#include "lce_oracle_driver.h"

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
    free(r->rnd);
    free(r->flip);
    free(r->tcex);
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
    int64_t n = lce_output_reference_count(c, (lce_output_id)o);
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

static void record(oracle_ctx *cx, lce_output_id o, int64_t i, double value, double err, double mag,
                   double rounded, int decisive) {
  lce_ref_output *r = &cx->res->out[o];
  r->value[i] = value;
  r->err[i] = err;
  r->mag[i] = mag;
  r->emag[i] = mag; /* the gradients overwrite it with their conditioned scale */
  r->rounded[i] = rounded;
  r->decisive[i] = (unsigned char)decisive;
  cx->total++;
  cx->decisive += decisive;
}

void lce_oracle_finish(oracle_ctx *cx, lce_output_id o, int64_t i, mpfr_srcptr m, double e_m, double mag) {
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
  if (isfinite(e_m) && scale > 0.0 && e_m / scale > cx->worst_rel_err) cx->worst_rel_err = e_m / scale;
  if (cx->mp != NULL) {
    mpfr_set(cx->mp->value[o].x[i], m, MPFR_RNDN);
    cx->mp->err_mp[o][i] = e_m;
    if (!mpfr_zero_p(m) && mpfr_number_p(m)) {
      double rel = e_m / fabs(mpfr_get_d(m, MPFR_RNDZ));
      if (rel > cx->worst_rel_err_mp) cx->worst_rel_err_mp = rel;
    }
  }
}

/* A non-finite exact element has magnitude 0: only its class is judged. */
void lce_oracle_finish_exact(oracle_ctx *cx, lce_output_id o, int64_t i, double x) {
  const double mag = isfinite(x) ? fabs(x) : 0.0;
  if (cx->mp != NULL) {
    mpfr_set_d(cx->exact, x, MPFR_RNDN);
    lce_oracle_finish(cx, o, i, cx->exact, 0.0, mag);
    return;
  }
  record(cx, o, i, x, 0.0, mag, lce_round_to(lce_output_format(cx->c, o), x), 1);
}

/* ---- the work's memory ------------------------------------------------------------------------ */

static void ctx_free(oracle_ctx *cx) {
  lce_row_free(&cx->row);
  lce_mp_array_free(&cx->dz_row);
  free(cx->dz_row_err);
  free(cx->dz_row_mag);
  free(cx->dz_row_emag);
  free(cx->term);
  free(cx->logits);
  lce_mp_array_free(&cx->prod);
  if (cx->c) mpfr_clears(cx->out, cx->g, cx->diff, cx->exact, (mpfr_ptr)0);
}

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
  free(w->runs);
  free(w->col_asked);
  free(w->slot);
  free(w->active);
  lce_mp_array_free(&w->dz);
  free(w->dz_err);
  free(w->dz_mag);
  free(w->dz_emag);
  free(w->kept);
  lce_mp_array_free(&w->kept_mp);
  lce_mp_array_free(&w->loss_token);
  free(w->loss_err);
  for (int t = 0; w->ctx && t < w->threads; t++) ctx_free(&w->ctx[t]);
  free(w->ctx);
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
  return LCE_OK;
}

/* Whether a running row reads W in MPFR: its logits are not handed over, or one is 0 or NaN (not
 * known). Poisoned rows read nothing. */
static lce_code needs_w_rows(const lce_case *c, const oracle_work *w, int *need, lce_status *st) {
  *need = 0;
  const lce_oracle_subset *sub = w->sub;
  double *s = sub && sub->exact_logits ? malloc((size_t)c->v * sizeof *s) : NULL;
  LCE_CHECK(st, !(sub && sub->exact_logits) || s, LCE_ENOMEM, "out of memory for a row of exact logits");
  for (int64_t n = 0; n < c->n && !*need; n++) {
    if (!w->runs[n] || w->bad_w || w->bad_h[n]) continue;
    if (s == NULL || sub->exact_logits(sub->ctx, n, 0, c->v, s) < c->v) *need = 1;
    for (int64_t v = 0; v < c->v && !*need; v++) *need = s[v] == 0.0;
  }
  free(s);
  return LCE_OK;
}

/* The MPFR copies of the inputs: hidden both ways, and those of W (each V*H numbers) only where a
 * computed element reads them: the row-major one for logits not handed over (or handed over as 0,
 * whose sign mpfr_sum decides), the transposed one for d_hidden. A subset run (tier 1's
 * escalations) often needs neither. */
static lce_code load_mp(const lce_case *c, oracle_work *w, lce_status *st) {
  const int64_t nh = c->n * c->h, vh = c->v * c->h;
  const mpfr_prec_t dp = lce_dtype_precision(c->dtype);
  int need_w;
  LCE_TRY(needs_w_rows(c, w, &need_w, st));
  int need_w_t = w->sub == NULL;
  for (int64_t i = 0; i < nh && !need_w_t; i++) need_w_t = w->sub->d_hidden && w->sub->d_hidden[i];
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

static lce_code ctx_init(oracle_ctx *cx, oracle_work *w, mpfr_prec_t prec, lce_oracle_result *res, lce_oracle_mp *mp,
                         lce_status *st) {
  const lce_case *c = w->c;
  cx->c = c, cx->prec = prec, cx->res = res, cx->mp = mp, cx->w = w;
  mpfr_inits2(prec, cx->out, cx->g, cx->diff, cx->exact, (mpfr_ptr)0);
  LCE_TRY(lce_row_init(&cx->row, c, w->in->class_weight, c->h, prec, lce_mul_exact_prec(lce_dtype_precision(c->dtype)), st));
  LCE_TRY(lce_mp_array_init(&cx->dz_row, c->v, prec, st));
  LCE_TRY(lce_mp_array_init(&cx->prod, c->v > c->n + 1 ? c->v : c->n + 1, lce_mul_exact_prec(prec), st));
  cx->dz_row_err = malloc((size_t)c->v * sizeof *cx->dz_row_err);
  cx->dz_row_mag = malloc((size_t)c->v * sizeof *cx->dz_row_mag);
  cx->dz_row_emag = malloc((size_t)c->v * sizeof *cx->dz_row_emag);
  cx->term = malloc((size_t)c->v * sizeof *cx->term);
  cx->logits = malloc((size_t)c->v * sizeof *cx->logits);
  LCE_CHECK(st, cx->dz_row_err && cx->dz_row_mag && cx->dz_row_emag && cx->term && cx->logits, LCE_ENOMEM,
            "out of memory for the oracle's dz row");
  return LCE_OK;
}

/* The loss buffers, the dz block and the rows' kept state (lce_oracle_driver.h), and each thread's
 * scratch. */
static lce_code alloc_work(const lce_case *c, mpfr_prec_t prec, lce_oracle_result *res, lce_oracle_mp *mp,
                           oracle_work *w, lce_status *st) {
  const int64_t block = w->jb * w->na;
  LCE_TRY(lce_mp_array_init(&w->loss_token, c->n, prec, st));
  /* At least one element, as below: with no active token the rows still form w->dz.x + 0, and
   * arithmetic on a null pointer is undefined even for an offset of zero. */
  LCE_TRY(lce_mp_array_init(&w->dz, block > 0 ? block : 1, prec, st));
  w->loss_err = malloc((size_t)c->n * sizeof *w->loss_err);
  w->dz_err = malloc((size_t)(block > 0 ? block : 1) * sizeof *w->dz_err);
  w->dz_mag = malloc((size_t)(block > 0 ? block : 1) * sizeof *w->dz_mag);
  w->dz_emag = malloc((size_t)(block > 0 ? block : 1) * sizeof *w->dz_emag);
  LCE_CHECK(st, w->loss_err && w->dz_err && w->dz_mag && w->dz_emag, LCE_ENOMEM, "out of memory for the oracle's dz");
  if (w->jb < c->v && w->na > 0) { /* later blocks are recomputed from the rows' state */
    LCE_TRY(lce_mp_array_init(&w->kept_mp, 4 * w->na, prec, st));
    w->kept = malloc((size_t)w->na * sizeof *w->kept);
    LCE_ALLOC_CHECK(st, w->kept);
    for (int64_t i = 0; i < w->na; i++) w->kept[i].s.mp = w->kept_mp.x + 4 * i;
  }
  w->ctx = calloc((size_t)w->threads, sizeof *w->ctx);
  LCE_ALLOC_CHECK(st, w->ctx);
  for (int t = 0; t < w->threads; t++) LCE_TRY(ctx_init(&w->ctx[t], w, prec, res, mp, st));
  return LCE_OK;
}

/* ---- memory estimate -------------------------------------------------------------------------- */

/* One MPFR number of an lce_mp_array: the struct, its pointer in the table, its limbs. */
static double mp_bytes(mpfr_prec_t prec) { return (double)(sizeof(mpfr_t) + sizeof(mpfr_ptr) + mpfr_custom_get_size(prec)); }

double lce_oracle_dz_bytes(mpfr_prec_t prec) { return mp_bytes(prec) + 3.0 * sizeof(double); }

int64_t lce_oracle_block_cols(const lce_case *c, int64_t na, mpfr_prec_t prec, int64_t block_cols) {
  if (block_cols > 0) return block_cols < c->v ? block_cols : c->v;
  const double per_col = (double)(na > 0 ? na : 1) * lce_oracle_dz_bytes(prec);
  const double cols = floor(LCE_ORACLE_BLOCK_BYTES / per_col);
  return cols >= (double)c->v ? c->v : cols < 1.0 ? 1 : (int64_t)cols;
}

double lce_oracle_bytes(const lce_case *c, int threads) {
  const mpfr_prec_t p = LCE_ORACLE_PREC, dp = lce_dtype_precision(c->dtype);
  const double N = (double)c->n, H = (double)c->h, V = (double)c->v;
  double out = 0.0;
  for (int o = 0; o < LCE_OUT_COUNT; o++) out += (double)lce_output_reference_count(c, (lce_output_id)o);
  const double jb = (double)lce_oracle_block_cols(c, c->n, p, 0);
  /* Inputs: doubles both ways and MPFR copies both ways; the result; per row the loss and the plan
   * (and with vocab blocks the kept state); the dz block of every row. */
  double bytes = 16.0 * (N + V) * H + 2.0 * (N + V) * H * mp_bytes(dp) + 41.0 * out + H;
  bytes += N * (mp_bytes(p) + 8.0 + 1.0 + 1.0 + 16.0);
  if (jb < V) bytes += N * (4.0 * mp_bytes(p) + sizeof(oracle_row));
  bytes += N * jb * lce_oracle_dz_bytes(p);
  /* Per thread: the row (z, t, softcap factors, smoothing terms, h products), the dz row with its
   * four double arrays and the handed-over logits, max(V, N + 1) products of the backward sums. */
  const double row = 4.0 * V * mp_bytes(p) + H * mp_bytes(lce_mul_exact_prec(dp)) + V * (mp_bytes(p) + 5.0 * 8.0) +
                     fmax(V, N + 1.0) * mp_bytes(lce_mul_exact_prec(p));
  return bytes + (threads > 0 ? threads : 1) * row;
}

/* ---- the run ---------------------------------------------------------------------------------- */

/* The reduced loss: sum of the token losses (reduction none reports the same sum), divided by
 * sum_n W_n for mean (0 when that is 0); NaN when a valid token is poisoned. Its magnitude is the
 * sum of the token losses' magnitudes: those are the terms an implementation adds, and a batch of
 * confident tokens has a loss far below them. */
static void run_loss(oracle_ctx *cx, oracle_work *w) {
  const lce_case *c = cx->c;
  if (w->poisoned_grad) {
    lce_oracle_finish_exact(cx, LCE_OUT_LOSS, 0, NAN);
    return;
  }
  if (c->reduction == LCE_RED_MEAN && mpfr_zero_p(w->sw)) {
    lce_oracle_finish_exact(cx, LCE_OUT_LOSS, 0, 0.0);
    return;
  }
  double e = 0.0, mag = 0.0;
  for (int64_t n = 0; n < c->n; n++) {
    e = lce_add_up(e, w->loss_err[n]);
    mag += cx->res->out[LCE_OUT_LOSS_TOKEN].mag[n];
  }
  if (mpfr_sum(cx->out, w->loss_token.ptr, (unsigned long)c->n, MPFR_RNDN))
    e = lce_add_up(e, lce_half_ulp(cx->out, cx->prec));
  if (c->reduction == LCE_RED_MEAN) {
    /* sum / SW against SUM / SW_exact, SW = SW_exact (1 + beta), |beta| <= sw_rel:
     * |sum/SW - SUM/SW_exact| <= (e + (|sum| + e) sw_rel) / SW. */
    const double sw_lo = mpfr_get_d(w->sw, MPFR_RNDZ);
    e = lce_add_up(e, lce_mul_up(lce_add_up(lce_abs_up(cx->out), e), w->sw_rel));
    e = nextafter(e / sw_lo, INFINITY);
    if (mpfr_div(cx->out, cx->out, w->sw, MPFR_RNDN)) e = lce_add_up(e, lce_half_ulp(cx->out, cx->prec));
    mag /= sw_lo;
  }
  lce_oracle_finish(cx, LCE_OUT_LOSS, 0, cx->out, e, mag);
}

/* The padded rows of the output weight's gradient: unchanged. */
static void exact_copies(oracle_ctx *cx, const lce_tensors *in) {
  const lce_case *c = cx->c;
  const float *prior = lce_output_weight_prior(c, in);
  for (int64_t i = c->v * c->h; i < c->vp * c->h; i++) lce_oracle_finish_exact(cx, LCE_OUT_D_WEIGHT, i, prior[i]);
}

static int any_flag(const unsigned char *flags, int64_t count) {
  for (int64_t i = 0; flags && i < count; i++)
    if (flags[i]) return 1;
  return 0;
}

static lce_code run_body(const lce_case *c, const lce_tensors *in, mpfr_prec_t prec, lce_oracle_result *res,
                         lce_oracle_mp *mp, oracle_work *w, lce_status *st) {
  const lce_oracle_subset *sub = w->sub;
  if (sub && !sub->loss && !any_flag(sub->d_weight, c->v * c->h) && !any_flag(sub->row, c->n) &&
      !any_flag(sub->d_hidden, c->n * c->h))
    return alloc_results(c, prec, res, mp, st); /* nothing asked */
  w->all_rows = sub == NULL || sub->loss || any_flag(sub->d_weight, c->v * c->h);
  LCE_TRY(load_inputs(c, in, w, st));
  w->sw_rel = lce_valid_weight_sum(c, in, w->sw);
  LCE_TRY(lce_oracle_plan(w, st));
  LCE_TRY(load_mp(c, w, st));
  LCE_TRY(alloc_work(c, prec, res, mp, w, st));
  LCE_TRY(alloc_results(c, prec, res, mp, st));
  lce_oracle_rows(w);
  oracle_ctx *cx = &w->ctx[0];
  if (!sub || sub->loss) run_loss(cx, w);
  if (!sub) exact_copies(cx, in); /* never escalated */
  for (int t = 0; t < w->threads; t++) {
    const oracle_ctx *x = &w->ctx[t];
    res->total += x->total;
    res->decisive += x->decisive;
    res->worst_rel_err = fmax(res->worst_rel_err, x->worst_rel_err);
    if (mp) mp->worst_rel_err_mp = fmax(mp->worst_rel_err_mp, x->worst_rel_err_mp);
  }
  res->n_valid = lce_count_valid(c, in);
  res->precision_bits = (int)prec;
  return LCE_OK;
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
  w.c = c, w.in = in, w.sub = sub, w.block_cols = sub ? sub->block_cols : 0;
  mpfr_init2(w.sw, prec);
  lce_code rc = run_body(c, in, prec, res, mp, &w, st);
  mpfr_clear(w.sw);
  work_free(&w);
  mpfr_set_emin(saved_emin);
  mpfr_set_emax(saved_emax);
  if (rc != LCE_OK) {
    lce_oracle_free(res);
    lce_oracle_mp_free(mp);
  }
  return rc;
}

lce_code lce_oracle_run_prec(const lce_case *c, const lce_tensors *in, mpfr_prec_t prec, lce_oracle_result *res,
                             lce_oracle_mp *mp, lce_status *st) {
  return run_checked(c, in, prec, NULL, res, mp, st);
}

lce_code lce_oracle_run_subset(const lce_case *c, const lce_tensors *in, const lce_oracle_subset *sub,
                               lce_oracle_result *res, lce_status *st) {
  LCE_CHECK(st, sub != NULL, LCE_EINVAL, "oracle subset is NULL");
  return run_checked(c, in, LCE_ORACLE_PREC, sub, res, NULL, st);
}

lce_code lce_oracle_run(const lce_case *c, const lce_tensors *in, lce_oracle_result *res, lce_status *st) {
  return lce_oracle_run_prec(c, in, LCE_ORACLE_PREC, res, NULL, st);
}
