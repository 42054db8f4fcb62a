/* lce_fast.c — tier 1's driver (lce_fast.h): inputs, the token rows in parallel (logits, lse, loss,
 * dz), the reduced loss, certification of every element and the escalation of the undecided ones to
 * tier 0. The row math and its bounds: lce_fast_row.c; the gradients and theirs: lce_fast_grad.c.
 *
 * Reduction. sum_n W_n (mean's divisor) by Sum2 (exact without class weights), g = grad_output / SW
 * within g_rel = 1.01 (sw_rel + u); the loss is Sum2 of the token losses with the sum of their bounds,
 * divided for the mean as tier 0 does (lce_oracle.c, run_loss). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_fast_internal.h"
#include "lce_parallel.h"
#include "lce_progress.h"
#include "lce_time.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- certification ---------------------------------------------------------------------------- */

void fast_put(const lce_case *c, lce_oracle_result *res, lce_output_id o, int64_t i, double value, double err,
              double mag, double emag) {
  lce_ref_output *r = &res->out[o];
  const lce_dtype fmt = lce_output_format(c, o);
  if (!isfinite(value) || !(err >= 0.0)) err = INFINITY;
  /* Where lce_round_certain decides, its rounding is value's own (rounding is monotone). */
  double rounded;
  const int decisive = (err != 0.0 && lce_round_certain(fmt, value, err, &rounded)) || err == 0.0;
  if (!decisive || err == 0.0) rounded = lce_round_to(fmt, value);
  r->value[i] = value, r->err[i] = err, r->mag[i] = mag, r->emag[i] = emag;
  r->rounded[i] = rounded, r->decisive[i] = (unsigned char)decisive;
}

void fast_put_exact(const lce_case *c, lce_oracle_result *res, lce_output_id o, int64_t i, double x) {
  lce_ref_output *r = &res->out[o];
  const double mag = isfinite(x) ? fabs(x) : 0.0;
  r->value[i] = x, r->err[i] = 0.0, r->mag[i] = mag, r->emag[i] = mag;
  r->rounded[i] = lce_round_to(lce_output_format(c, o), x), r->decisive[i] = 1;
  if (r->rnd) r->rnd[i] = x; /* no d_logit reaches an exact element (a padded row's prior, a poisoned row) */
}

/* ---- the work --------------------------------------------------------------------------------- */

static void work_free(fast_work *w) {
  free(w->hidden), free(w->cfl), free(w->w), free(w->w1), free(w->lsb_h), free(w->lsb_w), free(w->bad_h);
  free(w->poison_valid), free(w->failed), free(w->ds), free(w->term), free(w->dzr), free(w->dzq), free(w->active);
  free(w->zs), free(w->zl), free(w->zm), free(w->rows), free(w->err);
  free(w->cond), free(w->a), free(w->b), free(w->ey), free(w->col_zero), free(w->floor), free(w->loss), free(w->loss_err), free(w->inexact), free(w->rsum);
  fast_subnormals_free(&w->sub_h), fast_subnormals_free(&w->sub_w);
}

/* The exponent of the lowest set bit of a finite non-zero double. */
static int lsb_exp(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  const int be = (int)((b >> 52) & 0x7ff);
  const uint64_t m = (b & (((uint64_t)1 << 52) - 1)) | (be ? (uint64_t)1 << 52 : 0); /* the integer significand */
  return (be ? be : 1) - 1075 + __builtin_ctzll(m);
}

static int row_lsb(const double *x, int64_t n) {
  int m = INT_MAX / 4;
  for (int64_t i = 0; i < n; i++)
    if (x[i] != 0.0 && isfinite(x[i])) {
      int e = lsb_exp(x[i]);
      if (e < m) m = e;
    }
  return m;
}

static double input(const lce_case *c, const void *buf, int64_t i) {
  double x = lce_load(c->dtype, buf, (size_t)i);
  return c->gemm == LCE_GEMM_TF32 ? lce_round_tf32(x) : x;
}

/* rows rows of a dtype tensor [rows*h] as the math reads them into x, each row's lowest set bit into
 * lsb and whether it holds a non-finite value into bad; the rows in parallel. */
static void load_rows(const lce_case *c, const void *buf, int64_t rows, double *x, int *lsb, unsigned char *bad) {
  const int64_t H = c->h;
  LCE_PARALLEL_FOR_IF(rows > 1 && rows * H >= LCE_PARALLEL_MIN_MACS)
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t i = r * H; i < (r + 1) * H; i++) {
      x[i] = input(c, buf, i);
      if (!isfinite(x[i])) bad[r] = 1;
    }
    lsb[r] = row_lsb(x + r * H, H);
  }
}

static lce_code load(fast_work *w, lce_status *st) {
  const lce_case *c = w->c;
  const int64_t N = c->n, H = c->h, V = c->v;
  const void *wt = lce_output_weight(c, w->in);
#define FAST_ALLOC(p, count) LCE_ALLOC_CHECK(st, (p) = calloc((size_t)(count), sizeof *(p)))
  FAST_ALLOC(w->hidden, N * H);
  FAST_ALLOC(w->cfl, H);
  FAST_ALLOC(w->w, V * H);
  FAST_ALLOC(w->w1, H);
  FAST_ALLOC(w->lsb_h, N);
  FAST_ALLOC(w->lsb_w, V);
  FAST_ALLOC(w->bad_h, N);
  FAST_ALLOC(w->poison_valid, N);
  FAST_ALLOC(w->failed, N);
  FAST_ALLOC(w->ds, w->block * V);
  FAST_ALLOC(w->term, w->block * V);
  FAST_ALLOC(w->dzr, w->block * V);
  FAST_ALLOC(w->dzq, w->block * V);
  FAST_ALLOC(w->err, w->block * V);
  FAST_ALLOC(w->zs, w->block * V);
  FAST_ALLOC(w->zl, w->block * V);
  FAST_ALLOC(w->zm, w->block * V);
  FAST_ALLOC(w->rows, w->block);
  FAST_ALLOC(w->active, N);
  FAST_ALLOC(w->cond, N);
  FAST_ALLOC(w->a, N);
  FAST_ALLOC(w->b, N);
  FAST_ALLOC(w->ey, N);
  FAST_ALLOC(w->col_zero, H);
  FAST_ALLOC(w->floor, N);
  FAST_ALLOC(w->loss, N);
  FAST_ALLOC(w->loss_err, N);
  unsigned char *bad_w;
  FAST_ALLOC(bad_w, V);
  load_rows(c, w->in->hidden, N, w->hidden, w->lsb_h, w->bad_h);
  load_rows(c, wt, V, w->w, w->lsb_w, bad_w);
  for (int64_t v = 0; v < V; v++) w->bad_w |= bad_w[v];
  free(bad_w);
  lce_zero_d_hidden_columns(c, w->w, w->col_zero); /* exact zeros of d_hidden */
  /* w1[k] sums its column over v in order; the columns in parallel, W_COLS of them at a time. */
  enum { W_COLS = 64 };
  LCE_PARALLEL_FOR_IF(H > W_COLS && V * H >= LCE_PARALLEL_MIN_MACS)
  for (int64_t k0 = 0; k0 < H; k0 += W_COLS)
    for (int64_t v = 0; v < V; v++)
      for (int64_t k = k0; k < k0 + W_COLS && k < H; k++) w->w1[k] += fabs(w->w[v * H + k]);
  FAST_ALLOC(w->inexact, N);
  FAST_ALLOC(w->rsum, N);
  w->fin = (fast_in){N, H, V, w->hidden, w->w, w->lsb_h, w->lsb_w};
#undef FAST_ALLOC
  return LCE_OK;
}

/* sum_n W_n over valid tokens and its relative bound (tier 0's lce_valid_weight_sum). */
static void valid_weight_sum(fast_work *w) {
  const lce_case *c = w->c;
  double s = 0.0, lo = 0.0, m = 0.0, e;
  for (int64_t n = 0; n < c->n; n++) {
    const int64_t y = w->in->labels[n];
    if (y == c->ignore_index) continue;
    const double x = c->class_weights ? w->in->class_weight[y] : 1.0;
    s = lce_two_sum(s, x, &e);
    lo += e;
    m += x;
  }
  w->sw = s + lo;
  w->sw_rel = (c->class_weights && w->sw > 0.0)
                  ? lce_next_up(fast_sum2_bound(w->sw, lce_sum_bound(m, c->n), c->n) / w->sw)
                  : 0.0;
}

/* g of token n and its relative bound (tier 0's lce_token_g); 0 for ignored tokens. */
static double token_g(const fast_work *w, int64_t n, double *g_rel) {
  const lce_case *c = w->c;
  *g_rel = 0.0;
  if (w->in->labels[n] == c->ignore_index || (c->reduction == LCE_RED_MEAN && w->sw == 0.0)) return 0.0;
  const double go = w->in->grad_output[c->reduction == LCE_RED_NONE ? n : 0];
  if (c->reduction != LCE_RED_MEAN) return go;
  *g_rel = lce_mul_up(1.01, lce_add_up(w->sw_rel, FAST_U));
  return go / w->sw;
}

static void poisoned_row(fast_work *w, int64_t n, int valid) {
  const lce_case *c = w->c;
  const double x = valid ? NAN : 0.0;
  fast_put_exact(c, w->res, LCE_OUT_LSE, n, NAN);
  fast_put_exact(c, w->res, LCE_OUT_LOSS_TOKEN, n, x);
  w->loss[n] = x, w->loss_err[n] = 0.0;
  for (int64_t k = 0; k < c->h; k++) fast_put_exact(c, w->res, LCE_OUT_D_HIDDEN, n * c->h + k, x);
  w->poison_valid[n] = (unsigned char)valid;
}

/* err_v <= a term_v + b over the row's v != y (see Gradients above), and the label's own bound ey:
 * the label's term (tier 0's magnitude, label term split) is far above its error, which would make
 * the slope a useless for the other terms. */
static void row_slopes(fast_work *w, int64_t n, int64_t y, const double *term, const double *err) {
  const int64_t V = w->c->v;
  double a = 0.0, b = 0.0;
  for (int64_t v = 0; v < V; v++) {
    if (v == y) continue;
    const double t = term[v];
    if (t >= 0x1p-900) a = fmax(a, lce_next_up(err[v] / t));
    else b = fmax(b, err[v]);
  }
  if (isnan(a) || isnan(b)) a = b = INFINITY;
  w->a[n] = a, w->b[n] = b, w->ey[n] = err[y];
}

/* The judge's softmax-sum replay of valid row n (lce_softmax_sum_replay, term rsum) from the logits
 * at hand, so that the judge need not compute them again: a logit proven exact (r->exact) is also the
 * value of the plain sum the replay defines, since every partial sum of it is exact too (Logits,
 * lce_fast_row.c), and its softcap is the same operations; for another logit, the hi accumulator of
 * its Sum2 chain (fast_dot_block, in zs) is that plain sum, the same additions in the same order from
 * 0, and it takes lce_plain_logit's softcap; every logit of a tf32 case (whose inputs here are
 * tf32-rounded) and a poisoned row's (r NULL) are lce_plain_logit itself. */
static void row_replay(fast_work *w, int64_t n, const fast_row *r, const double *zs, double *z) {
  const lce_case *c = w->c;
  const double cap = c->softcap;
  if (r == NULL || c->gemm == LCE_GEMM_TF32)
    for (int64_t v = 0; v < c->v; v++) z[v] = lce_plain_logit(c, w->in, n, v);
  else
    for (int64_t v = 0; v < c->v; v++) z[v] = r->exact[v] ? r->z[v] : cap > 0 ? cap * tanh(zs[v] / cap) : zs[v];
  w->rsum[n] = lce_softmax_sum_replay(c, z);
}

/* One token: lse, loss and dz (its gradient terms: lce_fast_grad.c). */
static void run_row(fast_work *w, int64_t n) {
  const lce_case *c = w->c;
  const int64_t V = c->v, H = c->h, y = w->in->labels[n];
  const int valid = y != c->ignore_index;
  double *buf = malloc((size_t)(5 * V) * sizeof *buf + (size_t)V);
  if (buf == NULL) {
    w->failed[n] = 1;
    return;
  }
  if (w->bad_w || w->bad_h[n]) {
    if (valid) row_replay(w, n, NULL, NULL, buf);
    poisoned_row(w, n, valid);
    free(buf);
    return;
  }
  fast_row r = {.v = V, .z = buf, .f = buf + V, .t = buf + 2 * V, .term = buf + 3 * V};
  double *zr = buf + 4 * V;
  r.exact = (unsigned char *)(zr + V);
  const int64_t at = (n - w->n0) * V;
  fast_row_logits(&r, &w->fin, &w->opts, n, w->zs + at, w->zl + at, w->zm + at);
  if (valid) row_replay(w, n, &r, w->zs + at, zr);
  fast_row_forward(&r, &w->opts, valid ? y : -1);
  fast_put(c, w->res, LCE_OUT_LSE, n, r.lse, r.err_lse, lce_add_up(r.mag_lse, r.term_max),
      lce_add_up(r.mag_lse, r.term_max));
  if (valid) {
    fast_row_loss(&r, &w->opts, y);
    fast_put(c, w->res, LCE_OUT_LOSS_TOKEN, n, r.loss, r.err_loss, r.mag_loss, r.mag_loss);
    w->loss[n] = r.loss, w->loss_err[n] = r.err_loss;
  } else {
    fast_put_exact(c, w->res, LCE_OUT_LOSS_TOKEN, n, 0.0);
  }
  fast_align_row(w, n, valid, r.kmag);
  double g_rel, g = token_g(w, n, &g_rel);
  if (g == 0.0) {
    for (int64_t k = 0; k < H; k++) fast_put_exact(c, w->res, LCE_OUT_D_HIDDEN, n * H + k, 0.0);
  } else {
    double *ds = w->ds + (n - w->n0) * V, *term = w->term + (n - w->n0) * V, *err = w->err + (n - w->n0) * V;
    fast_row_dz(&r, &w->opts, y, g, g_rel, ds, err, term);
    w->active[n] = 1;
    w->cond[n] = 1.0 + r.term_max;
    w->floor[n] = lce_dz_floor(c, fabs(g), r.kmag);
    row_slopes(w, n, y, term, err);
    double *dzr = w->dzr + (n - w->n0) * V, *dzq = w->dzq + (n - w->n0) * V;
    fast_rnd_row(c, g, ds, V, dzr);
    fast_flip_row(c, &r, &w->opts, y, g, ds, dzq);
  }
  w->inexact[n] = r.inexact_logits;
  free(buf);
}

static void run_loss(fast_work *w, int poisoned) {
  const lce_case *c = w->c;
  if (poisoned) return fast_put_exact(c, w->res, LCE_OUT_LOSS, 0, NAN);
  if (c->reduction == LCE_RED_MEAN && w->sw == 0.0) return fast_put_exact(c, w->res, LCE_OUT_LOSS, 0, 0.0);
  double hi = 0.0, lo = 0.0, m = 0.0, e = 0.0, mag = 0.0, t;
  for (int64_t n = 0; n < c->n; n++) {
    hi = lce_two_sum(hi, w->loss[n], &t);
    lo += t;
    m += fabs(w->loss[n]);
    e = lce_add_up(e, w->loss_err[n]);
    mag += w->res->out[LCE_OUT_LOSS_TOKEN].mag[n];
  }
  double value = hi + lo;
  e = lce_add_up(e, fast_sum2_bound(value, lce_sum_bound(m, c->n), c->n));
  if (c->reduction == LCE_RED_MEAN) {
    e = lce_add_up(e, lce_mul_up(lce_add_up(fabs(value), e), w->sw_rel));
    e = lce_next_up(e / w->sw);
    value /= w->sw;
    e = fast_add_err(value, e, 0.0);
    mag /= w->sw;
  }
  fast_put(c, w->res, LCE_OUT_LOSS, 0, value, e, mag, mag);
}

/* ---- escalation ------------------------------------------------------------------------------- */

static void copy_element(lce_ref_output *dst, const lce_ref_output *src, int64_t i) {
  dst->value[i] = src->value[i], dst->err[i] = src->err[i], dst->mag[i] = src->mag[i];
  dst->emag[i] = src->emag[i], dst->rounded[i] = src->rounded[i], dst->decisive[i] = src->decisive[i];
}

static int64_t handed_logits(void *fin, int64_t n, int64_t v0, int64_t v1, double *s) {
  return fast_row_exact_logits((const fast_in *)fin, n, v0, v1, s);
}

/* Every element tier 1 could not decide is recomputed by tier 0 (lce_oracle_run_subset); a token
 * whose lse or loss escalates takes both from tier 0. */
static lce_code escalate(fast_work *w, lce_fast_stats *stats, lce_status *st) {
  const lce_case *c = w->c;
  const int64_t N = c->n, H = c->h, V = c->v;
  lce_oracle_result *res = w->res;
  unsigned char *row = calloc((size_t)N, 1), *dh = calloc((size_t)(N * H), 1), *dw = calloc((size_t)(V * H), 1);
  lce_code rc = LCE_OK;
  if (row == NULL || dh == NULL || dw == NULL) {
    rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory for tier 1's escalation masks");
    goto done;
  }
  int64_t count = 0, rows = 0;
  int any = 0, all_rows = 0;
  for (int64_t n = 0; n < N; n++) {
    const int lse = !res->out[LCE_OUT_LSE].decisive[n], loss = !res->out[LCE_OUT_LOSS_TOKEN].decisive[n];
    row[n] = (unsigned char)(lse || loss);
    count += lse + loss;
  }
  for (int64_t i = 0; i < N * H; i++) dh[i] = !res->out[LCE_OUT_D_HIDDEN].decisive[i], count += dh[i];
  for (int64_t i = 0; i < V * H; i++) dw[i] = !res->out[LCE_OUT_D_WEIGHT].decisive[i], count += dw[i], all_rows |= dw[i];
  const int loss = !res->out[LCE_OUT_LOSS].decisive[0];
  count += loss;
  all_rows |= loss;
  any = count > 0;
  for (int64_t n = 0; n < N; n++) {
    int asked = row[n];
    for (int64_t k = 0; k < H && !asked; k++) asked = dh[n * H + k];
    rows += all_rows || asked;
  }
  if (stats) stats->escalated = count, stats->recomputed_rows = any ? rows : 0, stats->all_rows = any && all_rows;
  if (!any) goto done;
  lce_fast_cost cost;
  lce_fast_estimate(c, NULL, &cost);
  if (cost.escalation_bytes > lce_available_memory()) { /* tier 0 would not fit: they stay inconclusive */
    if (stats) stats->unescalated = count, stats->escalated = stats->recomputed_rows = 0;
    goto done;
  }
  /* The rows tier 0 recomputes take tier 1's logits where those are proven exact (nearly every bf16
   * and fp16 logit; the others NaN, which tier 0 computes), a row or a block of columns at a time as
   * tier 0 asks: tier 0 then skips its h MPFR products per known logit, with the same results. */
  lce_oracle_subset sub = {row, dh, dw, loss, w->bad_w ? NULL : handed_logits, &w->fin, 0};
  lce_oracle_result t0;
  rc = lce_oracle_run_subset(c, w->in, &sub, &t0, st);
  if (rc != LCE_OK) goto done;
  for (int64_t n = 0; n < N; n++)
    if (row[n]) copy_element(&res->out[LCE_OUT_LSE], &t0.out[LCE_OUT_LSE], n),
                copy_element(&res->out[LCE_OUT_LOSS_TOKEN], &t0.out[LCE_OUT_LOSS_TOKEN], n);
  for (int64_t i = 0; i < N * H; i++)
    if (dh[i]) copy_element(&res->out[LCE_OUT_D_HIDDEN], &t0.out[LCE_OUT_D_HIDDEN], i);
  for (int64_t i = 0; i < V * H; i++)
    if (dw[i]) copy_element(&res->out[LCE_OUT_D_WEIGHT], &t0.out[LCE_OUT_D_WEIGHT], i);
  if (loss) copy_element(&res->out[LCE_OUT_LOSS], &t0.out[LCE_OUT_LOSS], 0);
  lce_oracle_free(&t0);
done:
  free(row), free(dh), free(dw);
  return rc;
}

/* ---- the run ---------------------------------------------------------------------------------- */

/* The counts and the largest relative bound; the elements in parallel (sums of integers and a maximum:
 * the same for any split). */
static void count_elements(lce_oracle_result *res) {
  res->decisive = res->total = 0;
  res->worst_rel_err = 0.0;
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_ref_output *r = &res->out[o];
    int64_t decisive = 0;
    double worst = 0.0;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) reduction(+ : decisive) reduction(max : worst) if (r->count >= LCE_PARALLEL_MIN_MACS)
#endif
    for (int64_t i = 0; i < r->count; i++) {
      decisive += r->decisive[i];
      const double scale = fmax(fabs(r->value[i]), r->mag[i]);
      if (isfinite(r->err[i]) && scale > 0.0 && r->err[i] / scale > worst) worst = r->err[i] / scale;
    }
    res->total += r->count, res->decisive += decisive;
    res->worst_rel_err = fmax(res->worst_rel_err, worst);
  }
}

/* ---- cost --------------------------------------------------------------------------------------- */

/* Rows in flight: the options' count, else their eight arrays (fast_work) in about 1 GiB (at least 16
 * rows): each block streams d_weight's running sums once, so larger blocks read them less often. */
static int64_t block_rows(const lce_case *c, const lce_fast_options *opt) {
  int64_t rows = ((int64_t)1 << 30) / (64 * (c->v > 0 ? c->v : 1));
  if (rows < 16) rows = 16;
  if (opt && opt->block_rows > 0) rows = opt->block_rows;
  return rows > c->n ? (c->n > 0 ? c->n : 1) : rows;
}

void lce_fast_estimate(const lce_case *c, const lce_fast_options *opt, lce_fast_cost *cost) {
  const double N = (double)c->n, H = (double)c->h, V = (double)c->v;
  double out = 0.0; /* the result: value, err, mag, emag, rounded and a flag per element */
  for (int o = 0; o < LCE_OUT_COUNT; o++) out += (double)lce_output_reference_count(c, (lce_output_id)o);
  /* the gradients' coherent d_logit rounding, rnd and flip (run_body, lce_fast_rnd.c) */
  const double grads = (double)(lce_output_count(c, LCE_OUT_D_HIDDEN) + lce_output_count(c, LCE_OUT_D_WEIGHT));
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  cost->block_rows = block_rows(c, opt);
  cost->macs = 3.0 * N * H * V;
  const double refine = fmin(512.0 * 0x1p20, N * V * 48.0); /* the refine step's rows (lce_fast_refine.c) */
  /* Not counted: tcex (8 bytes per element, only where an input operand is subnormal, lce_fast_align.c),
   * whose allocation failing is reported as tier 1 running out of memory. */
  cost->bytes = refine + 41.0 * out + 16.0 * grads + 16.0 * (N + V) * H + 100.0 * N + 4.0 * V + (double)cost->block_rows * (64.0 * V + 32.0 * H) +
                (double)threads * (8.0 * 5.0 * V + V);
  /* Tier 0's own (lce_oracle_bytes: no N V term beyond its block budget) and tier 1's masks. */
  cost->escalation_bytes = lce_oracle_bytes(c, threads) + (N + N * H + V * H);
}

double lce_available_memory(void) {
  const char *limit = getenv("LCE_MEMORY_LIMIT");
  if (limit && *limit) return strtod(limit, NULL);
  FILE *f = fopen("/proc/meminfo", "r");
  double kib = -1.0;
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
  if (f) fclose(f);
  return kib >= 0.0 ? kib * 1024.0 : INFINITY;
}

/* Elements [from, count) of output o are their priors, exactly (in parallel: V H of them at production). */
static void put_priors(fast_work *w, lce_output_id o, int64_t from, const float *prior) {
  const int64_t count = w->res->out[o].count;
  LCE_PARALLEL_FOR_IF(count - from >= LCE_PARALLEL_MIN_MACS)
  for (int64_t i = from; i < count; i++) fast_put_exact(w->c, w->res, o, i, prior[i]);
}

static lce_code run_body(fast_work *w, const lce_fast_options *opt, lce_fast_stats *stats, lce_status *st) {
  const lce_case *c = w->c;
  const int64_t N = c->n, H = c->h, V = c->v;
  lce_fast_cost cost;
  lce_fast_estimate(c, opt, &cost);
  const double avail = lce_available_memory();
  LCE_CHECK(st, cost.bytes <= avail, LCE_ENOMEM,
            "tier 1 needs ~%.1f MiB for this case (%.3g multiply-adds; inputs in double, the result at 41 bytes an "
            "element, %lld rows in flight) and %.1f MiB are available: run it on a machine with more memory, or "
            "judge it with --oracle fp64-gpu", cost.bytes / 0x1p20, cost.macs, (long long)cost.block_rows, avail / 0x1p20);
  w->block = cost.block_rows;
  LCE_TRY(load(w, st));
  LCE_TRY(lce_oracle_result_alloc(c, w->res, "tier 1", st));
  for (int o = LCE_OUT_D_HIDDEN; o <= LCE_OUT_D_WEIGHT; o++) { /* the coherent d_logit rounding (lce_fast_rnd.c) */
    LCE_ALLOC_CHECK(st, w->res->out[o].rnd = calloc((size_t)w->res->out[o].count + 1, sizeof(double)));
    LCE_ALLOC_CHECK(st, w->res->out[o].flip = calloc((size_t)w->res->out[o].count + 1, sizeof(double)));
  }
  LCE_TRY(fast_align_begin(w, st));
  fast_opts_init(&w->opts, c, w->in->class_weight);
  valid_weight_sum(w);
  const int rows_parallel = H * V >= LCE_PARALLEL_MIN_MACS;
  (void)rows_parallel; /* read by the OpenMP pragma only */
  fast_weight_begin(w);
  /* Token blocks in order: their logits together, their rows in parallel, then their d_hidden and
   * their d_weight contributions (lce_fast_grad.c); the floor sum C and the active count in token order. */
  lce_progress progress;
  lce_progress_start(&progress, "tier 1 tokens", (double)N);
  for (w->n0 = 0; w->n0 < N; w->n0 += w->block) {
    const int64_t end = w->n0 + w->block < N ? w->n0 + w->block : N;
    lce_progress_step(&progress, (double)w->n0);
    double t[5];
    t[0] = lce_now_seconds();
    for (int64_t n = w->n0; n < end; n++) w->rows[n - w->n0] = n;
    fast_dot_block(&w->fin, w->rows, end - w->n0, w->zs, w->zl, w->zm);
    t[1] = lce_now_seconds();
    LCE_PARALLEL_FOR_IF(rows_parallel && end - w->n0 > 1)
    for (int64_t n = w->n0; n < end; n++) run_row(w, n);
    for (int64_t n = w->n0; n < end; n++) {
      LCE_CHECK(st, !w->failed[n], LCE_ENOMEM, "out of memory for tier 1's row scratch");
      if (!w->active[n]) continue;
      w->na++;
      fast_axpy_abs(w->floor[n], w->hidden + n * H, H, w->cfl);
    }
    t[2] = lce_now_seconds();
    LCE_CHECK(st, fast_hidden_block(w, end), LCE_ENOMEM, "out of memory for tier 1's d_hidden tiles");
    t[3] = lce_now_seconds();
    fast_weight_block(w, end);
    fast_align_block(w, end);
    t[4] = lce_now_seconds();
    for (int p = 0; stats && p < 4; p++) stats->pass_seconds[p] += t[p + 1] - t[p];
  }
  int poisoned = 0;
  for (int64_t n = 0; n < N; n++) {
    poisoned |= w->poison_valid[n];
    if (stats) stats->inexact_logits += w->inexact[n];
  }
  if (stats) stats->logits = N * V;
  w->res->has_rsum = 1;
  for (int64_t n = 0; n < N; n++) w->res->rsum_rel = fmax(w->res->rsum_rel, w->rsum[n]);
  run_loss(w, poisoned);
  fast_weight_finish(w, poisoned);
  put_priors(w, LCE_OUT_D_WEIGHT, V * H, lce_output_weight_prior(c, w->in)); /* the padded rows */
  if (!poisoned) {
    const double t_refine = lce_now_seconds();
    const fast_refine_in refine = {c, w->in, &w->fin, w->active, opt->refine_all};
    const int64_t refined = fast_refine(&refine, w->res);
    if (stats) stats->refined = refined, stats->refine_seconds = lce_now_seconds() - t_refine;
  }
  const double t_escalate = lce_now_seconds();
  if (opt->escalate) LCE_TRY(escalate(w, stats, st));
  if (stats) stats->escalation_seconds = lce_now_seconds() - t_escalate;
  count_elements(w->res);
  w->res->n_valid = lce_count_valid(c, w->in);
  w->res->precision_bits = 53;
  return LCE_OK;
}

lce_code lce_fast_run_opts(const lce_case *c, const lce_tensors *in, const lce_fast_options *opt,
                           lce_oracle_result *res, lce_fast_stats *stats, lce_status *st) {
  LCE_CHECK(st, res != NULL && opt != NULL, LCE_EINVAL, "tier 1 result or options are NULL");
  memset(res, 0, sizeof *res);
  if (stats) memset(stats, 0, sizeof *stats);
  LCE_TRY(lce_case_validate(c, st));
  LCE_TRY(lce_tensors_validate(c, in, st));
  fast_work w;
  memset(&w, 0, sizeof w);
  w.c = c, w.in = in, w.res = res;
  lce_code rc = run_body(&w, opt, stats, st);
  work_free(&w);
  if (rc != LCE_OK) lce_oracle_free(res);
  return rc;
}

lce_code lce_fast_run(const lce_case *c, const lce_tensors *in, lce_oracle_result *res, lce_fast_stats *stats,
                      lce_status *st) {
  const lce_fast_options opt = {1, 0, 0};
  return lce_fast_run_opts(c, in, &opt, res, stats, st);
}
