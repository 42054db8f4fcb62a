/* lce_oracle_rows.c — tier 0's token rows and d_weight (lce_oracle_driver.h), across threads
 * (lce_parallel.h) with the same bits for any thread count: each row's arithmetic and each element's
 * sum is its own; only which rows and elements run at once changes.
 *
 * Rows: per token, logits → lse, loss → dz → the row of d_hidden, and for d_weight the dz of vocab
 * columns [0, jb) of every row with a non-zero g, kept transposed. d_weight then runs over the vocab
 * in blocks of jb columns: the first from the kept dz, each later block after recomputing its
 * columns' dz in every such row from the row's kept state (lce_row_state: the largest logit, S, S_y,
 * lse, the bounds and flags; the logits and exps of those columns recomputed: the same bits). Memory
 * then holds jb * na dz, not v * n; jb = v (nothing recomputed) whenever that fits in
 * LCE_ORACLE_BLOCK_BYTES.
 *
 * MPFR keeps its exponent range, flags and caches per thread: each thread widens its range for the
 * work and restores it after, and a worker frees its caches before it goes back to the pool. A case
 * too small to gain from threads (or an MPFR without thread-local state) runs on the calling thread. */
#include <stdlib.h>
#include <string.h>

#include "lce_oracle_driver.h"
#include "lce_parallel.h"
#include "lce_progress.h"

/* Exact products (or exps, ~30 products each) below which the rows stay on one thread: tens of
 * milliseconds of tier-0 work. A parallel region, the threads' scratch and their MPFR constants cost
 * far less, but each loop ends in a barrier that waits for the slowest thread: on a shared machine a
 * thread that loses its core stalls the others, and the default matrix's small cases (1e5 products)
 * judged with --oracle mpfr took 36 s on one thread and 51 s on two at load 8 with a 2^15 floor. */
#define ORACLE_PARALLEL_MIN_PRODUCTS ((double)(1 << 20))

static int row_asked(const unsigned char *flags, int64_t count) {
  for (int64_t i = 0; i < count; i++)
    if (flags[i]) return 1;
  return 0;
}

/* Whether row n's forward runs (every row, or one a subset asks for through its row, its d_hidden). */
static int row_runs(const lce_case *c, const oracle_work *w, int64_t n) {
  return w->all_rows || (w->sub->row && w->sub->row[n]) || (w->sub->d_hidden && row_asked(w->sub->d_hidden + n * c->h, c->h));
}

lce_code lce_oracle_plan(oracle_work *w, lce_status *st) {
  const lce_case *c = w->c;
  w->runs = malloc((size_t)c->n);
  w->slot = malloc((size_t)c->n * sizeof *w->slot);
  w->active = malloc((size_t)c->n * sizeof *w->active);
  LCE_CHECK(st, w->runs && w->slot && w->active, LCE_ENOMEM, "out of memory planning the oracle's rows");
  mpfr_t g;
  mpfr_init2(g, mpfr_get_prec(w->sw));
  int64_t rows = 0;
  for (int64_t n = 0; n < c->n; n++) {
    const int valid = w->in->labels[n] != c->ignore_index, bad = w->bad_w || w->bad_h[n];
    w->runs[n] = (unsigned char)row_runs(c, w, n);
    w->slot[n] = -1;
    rows += w->runs[n];
    if (!w->runs[n]) continue;
    if (valid && bad) w->poisoned_grad = 1; /* its dz row is NaN: so is every real d_weight element */
    if (!w->all_rows || bad) continue;
    lce_token_g(c, w->in, n, w->sw, w->sw_rel, g);
    if (!mpfr_zero_p(g)) w->slot[n] = w->na, w->active[w->na++] = n;
  }
  mpfr_clear(g);
  if (w->sub && w->all_rows) { /* the dz columns an escalation needs: those of its d_weight rows */
    w->col_asked = calloc((size_t)(c->v > 0 ? c->v : 1), 1);
    LCE_ALLOC_CHECK(st, w->col_asked);
    for (int64_t j = 0; j < c->v && w->sub->d_weight; j++) w->col_asked[j] = (unsigned char)row_asked(w->sub->d_weight + j * c->h, c->h);
  }
  const double work = (double)rows * (double)c->v * (double)(c->h + 30) + (w->all_rows ? (double)w->na * c->v * c->h : 0.0);
  w->threads = 1;
  if (mpfr_buildopt_tls_p() && work >= ORACLE_PARALLEL_MIN_PRODUCTS) {
    w->threads = lce_thread_limit();
    if (w->threads > rows && !w->all_rows) w->threads = rows > 0 ? (int)rows : 1;
  }
  w->jb = lce_oracle_block_cols(c, w->na, mpfr_get_prec(w->sw), w->block_cols);
  return LCE_OK;
}

/* ---- one row ---------------------------------------------------------------------------------- */

/* Sum over k of |h[k] W[v,k]| for one token row and one vocab row: the terms of logit s[v]. Every
 * implementation forms s[v] from them in finite precision, so its error scales with this sum, not
 * with |s[v]|, which cancellation can make arbitrarily small. */
static double logit_terms(const double *h_row, const double *w_row, int64_t H) {
  double s = 0.0;
  for (int64_t k = 0; k < H; k++) s += fabs(h_row[k] * w_row[k]);
  return s * (1.0 + 0x1p-50); /* an upper bound: H <= 2^24 terms, each sum rounding <= 2^-53 */
}

/* The error scale of every logit of row n into cx->term; returns the largest. With softcap a
 * logit's error is its own (|z|, from tanh) or the GEMM's scaled by the factor f = dz/ds, so its
 * scale is max(|z|, f terms) — without softcap that is terms itself. */
static double row_terms(oracle_ctx *cx, int64_t n) {
  const lce_case *c = cx->c;
  const oracle_work *w = cx->w;
  double term_max = 0.0;
  for (int64_t v = 0; v < c->v; v++) {
    double t = logit_terms(w->hidden + n * c->h, w->w + v * c->h, c->h);
    if (c->softcap > 0)
      t = fmax(fabs(mpfr_get_d(cx->row.z.x[v], MPFR_RNDU)), mpfr_get_d(cx->row.f.x[v], MPFR_RNDU) * t);
    cx->term[v] = t;
    term_max = fmax(term_max, t);
  }
  return term_max;
}

/* A poisoned token (lce_oracle.c says what it reaches). */
static void poisoned_row(oracle_ctx *cx, int64_t n, int valid) {
  const int64_t H = cx->c->h;
  const double x = valid ? NAN : 0.0;
  lce_oracle_finish_exact(cx, LCE_OUT_LSE, n, NAN);
  lce_oracle_finish_exact(cx, LCE_OUT_LOSS_TOKEN, n, x);
  mpfr_set_d(cx->w->loss_token.x[n], x, MPFR_RNDN);
  cx->w->loss_err[n] = 0.0;
  for (int64_t k = 0; k < H; k++) lce_oracle_finish_exact(cx, LCE_OUT_D_HIDDEN, n * H + k, x);
}

/* The bounds and scales of dz_v, v in [v0, v1) (with cols, those it flags), in the thread's row arrays. Magnitudes for the
 * judge count the label term as the two terms every implementation computes, g*cy*p_y and -g*cy
 * (lce_row_dz's mag): an fp32 kernel cannot resolve 1 - p_y below 2^-24, so measuring its error
 * against |g cy (p_y - 1)| alone would call correct kernels wrong on confident rows. The error
 * scale emag weights each term by the row's softmax condition 1 + T (T = the largest logit's error
 * scale): a logit known to an absolute u*T gives p_j to a relative u*T, so a row of logits near
 * -120 carries ~100x the gradient error of a row near 0 in every correct implementation. Both add
 * the row's dz floor (lce_dz_floor). */
static void dz_scales(oracle_ctx *cx, const oracle_row *kr, const unsigned char *cols, int64_t v0, int64_t v1) {
  for (int64_t j = v0; j < v1; j++) {
    if (cols && !cols[j]) continue;
    const double term = cx->dz_row_mag[j];
    if (kr->dz_underflow) cx->dz_row_err[j] = INFINITY;
    cx->dz_row_mag[j] = term + kr->floor;
    cx->dz_row_emag[j] = term * kr->cond + kr->floor;
  }
}

/* Columns [v0, v1) of the thread's dz row into the block (column j - v0) at the row's slot; with cols,
 * only those it flags. */
static void keep_dz(oracle_ctx *cx, int64_t slot, const unsigned char *cols, int64_t v0, int64_t v1) {
  oracle_work *w = cx->w;
  for (int64_t j = v0; j < v1; j++) {
    if (cols && !cols[j]) continue;
    const int64_t i = (j - v0) * w->na + slot;
    w->dz_mag[i] = cx->dz_row_mag[j];
    w->dz_emag[i] = cx->dz_row_emag[j];
    w->dz_err[i] = cx->dz_row_err[j];
    mpfr_set(w->dz.x[i], cx->dz_row.x[j], MPFR_RNDN);
  }
}

/* ds_v of the thread's row for v in [v0, v1), with cols only those it flags (lce_row_dz on each run of
 * flagged columns: each v is independent of the others). */
static void row_dz(oracle_ctx *cx, int64_t y, double g_rel, const unsigned char *cols, int64_t v0, int64_t v1) {
  for (int64_t j = v0; j < v1;) {
    if (cols && !cols[j]) {
      j++;
      continue;
    }
    int64_t e = j + 1;
    while (e < v1 && !(cols && !cols[e])) e++;
    lce_row_dz(&cx->row, y, cx->g, g_rel, j, e, cx->dz_row.x, cx->dz_row_err, cx->dz_row_mag);
    j = e;
  }
}

/* Whether no ds_v of the row can underflow: every t_v (and softcap factor) at or above 2^(-2^60), so
 * that the few factors of at least 2^-2000 (g, weights, e / V) that dz multiplies in stay far above
 * the oracle's underflow threshold 2^(-2^62). Then the row's dz underflow flag is 0 whichever
 * columns are computed; a row that underflowed in its forward is not certified either way. */
static int dz_cannot_underflow(const lce_row *r) {
  const mpfr_exp_t limit = -((mpfr_exp_t)1 << 60);
  if (r->underflow) return 0;
  for (int64_t v = 0; v < r->v; v++) {
    if (!mpfr_regular_p(r->t.x[v]) || mpfr_get_exp(r->t.x[v]) < limit) return 0;
    if (r->opts.softcap > 0 && (!mpfr_regular_p(r->f.x[v]) || mpfr_get_exp(r->f.x[v]) < limit)) return 0;
  }
  return 1;
}

/* The row's dz (its first jb columns kept for d_weight, with the row's state where later columns
 * are recomputed) and its d_hidden row. A subset that asks for none of the row's d_hidden elements
 * gets only the dz columns of the d_weight rows it asks for (none for the loss alone), where that
 * cannot change the row's underflow flag: the same bits, a fraction of the MPFR work. */
static void row_backward(oracle_ctx *cx, int64_t n, int64_t y, double g_rel, double term_max) {
  const lce_case *c = cx->c;
  oracle_work *w = cx->w;
  const int64_t V = c->v, H = c->h, slot = w->slot[n];
  mpfr_t *dz = cx->dz_row.x;
  const int full = !w->col_asked || (w->sub->d_hidden && row_asked(w->sub->d_hidden + n * H, H)) ||
                   !dz_cannot_underflow(&cx->row);
  const unsigned char *cols = full ? NULL : w->col_asked;
  mpfr_clear_underflow();
  row_dz(cx, y, g_rel, cols, 0, V);
  oracle_row local, *kr = slot >= 0 && w->kept ? &w->kept[slot] : &local;
  kr->dz_underflow = mpfr_underflow_p();
  kr->g_rel = g_rel;
  kr->cond = 1.0 + term_max;
  kr->floor = lce_dz_floor(c, fabs(mpfr_get_d(cx->g, MPFR_RNDU)), cx->row.kmag);
  if (kr != &local) lce_row_save(&cx->row, &kr->s);
  dz_scales(cx, kr, cols, 0, V);
  if (slot >= 0) keep_dz(cx, slot, cols, 0, w->jb);
  for (int64_t k = 0; k < H; k++) {
    if (w->sub && !(w->sub->d_hidden && w->sub->d_hidden[n * H + k])) continue;
    double mag, emag;
    mpfr_clear_underflow();
    double e = lce_d_hidden_element(cx->out, cx->prec, dz, cx->dz_row_err, cx->dz_row_mag, cx->dz_row_emag, &emag,
                                    w->w_mp_t.x + k * V, w->w_t + k * V, V, &cx->prod, &mag);
    if (mpfr_underflow_p()) e = INFINITY;
    if (w->col_zero[k]) mpfr_set_zero(cx->out, 1), e = LCE_EXACT_ZERO_ERR; /* proven 0, not the sum's ~1e-49 */
    lce_oracle_finish(cx, LCE_OUT_D_HIDDEN, n * H + k, cx->out, e, mag);
    cx->res->out[LCE_OUT_D_HIDDEN].emag[n * H + k] = emag + lce_gemm_floor(c, LCE_OUT_D_HIDDEN, V);
  }
}

/* The exact logits of row n, columns [v0, v1), where the subset hands them over (else NULL). */
static const double *handed_logits(oracle_ctx *cx, int64_t n, int64_t v0, int64_t v1) {
  const lce_oracle_subset *sub = cx->w->sub;
  if (!sub || !sub->exact_logits) return NULL;
  sub->exact_logits(sub->ctx, n, v0, v1, cx->logits);
  return cx->logits;
}

/* One token: lse, loss, dz and the d_hidden row. */
static void run_row(oracle_ctx *cx, int64_t n) {
  const lce_case *c = cx->c;
  oracle_work *w = cx->w;
  const int64_t H = c->h, y = w->in->labels[n];
  const int valid = y != c->ignore_index;
  if (w->bad_w || w->bad_h[n]) {
    poisoned_row(cx, n, valid);
    return;
  }
  lce_row_logits_given(&cx->row, w->hidden_mp.x + n * H, w->w_mp.x, handed_logits(cx, n, 0, c->v));
  lce_row_forward(&cx->row, valid ? y : -1);
  /* Magnitudes: lse is a softmax-weighted mean of the logits plus log s, so its terms are at most
   * the largest logit's terms; a token's loss adds its logits' terms (lce_row_loss). */
  const double term_max = row_terms(cx, n);
  lce_oracle_finish(cx, LCE_OUT_LSE, n, cx->row.lse, cx->row.err_lse, lce_add_up(cx->row.mag_lse, term_max));
  if (valid) {
    lce_row_loss(&cx->row, y, cx->term, term_max);
    mpfr_set(w->loss_token.x[n], cx->row.loss, MPFR_RNDN);
    w->loss_err[n] = cx->row.err_loss;
    lce_oracle_finish(cx, LCE_OUT_LOSS_TOKEN, n, cx->row.loss, cx->row.err_loss, cx->row.mag_loss);
  } else {
    mpfr_set_zero(w->loss_token.x[n], 1);
    w->loss_err[n] = 0.0;
    lce_oracle_finish_exact(cx, LCE_OUT_LOSS_TOKEN, n, 0.0);
  }
  /* g: the gradient of the reduced loss with respect to this token's loss. */
  const double g_rel = lce_token_g(c, w->in, n, w->sw, w->sw_rel, cx->g);
  if (mpfr_zero_p(cx->g)) { /* ignored token, zero grad_output or zero weight sum: dz exactly zero */
    for (int64_t k = 0; k < H; k++) lce_oracle_finish_exact(cx, LCE_OUT_D_HIDDEN, n * H + k, 0.0);
    return;
  }
  row_backward(cx, n, y, g_rel, term_max);
}

/* ---- d_weight --------------------------------------------------------------------------------- */

/* Columns [j0, j1) of the dz of the i-th row with a non-zero g, recomputed from its kept state into
 * the block: the same bits as its row pass computed. */
static void recompute_dz(oracle_ctx *cx, int64_t i, int64_t j0, int64_t j1) {
  oracle_work *w = cx->w;
  const int64_t n = w->active[i];
  const oracle_row *kr = &w->kept[i];
  lce_row_logits_range(&cx->row, w->hidden_mp.x + n * cx->c->h, w->w_mp.x, handed_logits(cx, n, j0, j1), j0, j1);
  lce_row_restore(&cx->row, &kr->s);
  lce_row_exp_range(&cx->row, j0, j1);
  lce_token_g(cx->c, w->in, n, w->sw, w->sw_rel, cx->g);
  row_dz(cx, w->in->labels[n], kr->g_rel, w->col_asked, j0, j1);
  dz_scales(cx, kr, w->col_asked, j0, j1);
  keep_dz(cx, i, w->col_asked, j0, j1);
}

/* Row j of the output weight's gradient (a real vocab row), its dz column at j - j0 of the block. */
static void weight_row(oracle_ctx *cx, int64_t j, int64_t j0) {
  const lce_case *c = cx->c;
  const oracle_work *w = cx->w;
  const int64_t H = c->h, col = (j - j0) * w->na;
  const float *prior = lce_output_weight_prior(c, w->in);
  for (int64_t k = 0; k < H; k++) {
    const int64_t i = j * H + k;
    if (w->sub && !(w->sub->d_weight && w->sub->d_weight[i])) continue;
    if (w->poisoned_grad || !isfinite(prior[i])) { /* NaN, or a non-finite prior plus finite terms */
      lce_oracle_finish_exact(cx, LCE_OUT_D_WEIGHT, i, w->poisoned_grad ? NAN : prior[i]);
      continue;
    }
    mpfr_clear_underflow();
    double mag, emag, e = lce_d_weight_element(cx->out, cx->prec, prior[i], w->dz.x + col, w->dz_err + col,
                                               w->dz_mag + col, w->dz_emag + col, &emag,
                                               w->hidden_mp_t.x + k * c->n, w->hidden_t + k * c->n, w->active,
                                               w->na, &cx->prod, &mag);
    if (mpfr_underflow_p()) e = INFINITY;
    lce_oracle_finish(cx, LCE_OUT_D_WEIGHT, i, cx->out, e, mag);
    cx->res->out[LCE_OUT_D_WEIGHT].emag[i] = emag + lce_gemm_floor(c, LCE_OUT_D_WEIGHT, w->na);
  }
}

/* Whether a subset asks for any d_weight element of vocab rows [j0, j1). */
static int block_asked(const oracle_work *w, int64_t j0, int64_t j1) {
  const int64_t H = w->c->h;
  return !w->sub || (w->sub->d_weight && row_asked(w->sub->d_weight + j0 * H, (j1 - j0) * H));
}

/* ---- the parallel work ------------------------------------------------------------------------ */

static void thread_begin(oracle_ctx *cx) {
  cx->saved_emin = mpfr_get_emin(), cx->saved_emax = mpfr_get_emax();
  mpfr_set_emin(mpfr_get_emin_min()); /* the oracle's range: no overflow, underflow only below 2^(-2^62) */
  mpfr_set_emax(mpfr_get_emax_max());
}

static void thread_end(oracle_ctx *cx) {
  mpfr_set_emin(cx->saved_emin);
  mpfr_set_emax(cx->saved_emax);
  if (lce_thread_index() != 0) mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE); /* a pool thread's constants */
}

void lce_oracle_rows(oracle_work *w) {
  const lce_case *c = w->c;
  lce_progress rows, cols;
  lce_progress_start(&rows, "tier 0 tokens", (double)c->n);
  LCE_PARALLEL_REGION(w->threads) {
    oracle_ctx *cx = &w->ctx[lce_thread_index()];
    const int reporter = lce_thread_index() == 0; /* progress: what thread 0 has reached */
    thread_begin(cx);
    LCE_FOR_DYNAMIC
    for (int64_t n = 0; n < c->n; n++) {
      if (reporter) lce_progress_step(&rows, (double)n);
      if (w->runs[n]) run_row(cx, n);
    }
    if (reporter && w->all_rows) lce_progress_start(&cols, "tier 0 d_weight rows", (double)c->v);
    for (int64_t j0 = 0; w->all_rows && j0 < c->v; j0 += w->jb) {
      const int64_t j1 = j0 + w->jb < c->v ? j0 + w->jb : c->v;
      if (!block_asked(w, j0, j1)) continue;
      if (j0 > 0 && !w->poisoned_grad) {
        LCE_FOR_DYNAMIC
        for (int64_t i = 0; i < w->na; i++) recompute_dz(cx, i, j0, j1);
      }
      LCE_FOR_DYNAMIC
      for (int64_t j = j0; j < j1; j++) {
        if (reporter) lce_progress_step(&cols, (double)j);
        weight_row(cx, j, j0);
      }
    }
    thread_end(cx);
  }
}
