/* lce_fast_grad.c — tier 1's gradient passes (lce_fast_internal.h): d_hidden of the rows in flight
 * and d_weight's running sums, each element a split dot product over its terms in ascending order.
 *
 * Gradients. d_hidden[n, k] = sum_v ds_v W_vk and d_weight[j, k] = prior + sum_n ds_nj h_nk, each a
 * split dot product (fast_dot_add: d's top 26 bits and the rest, each times a dtype value exactly,
 * the first through TwoSum; fast_dot_bound). Each ds_v carries its own bound err_v, so for d_hidden
 *     |dh - DH| <= E + fast_dot_bound(dh, 1.01 T1 + E, V),   E = sum_v err_v |W_vk|,
 * T1 = sum_v term_v |W_vk| (term_v: tier 0's dz term magnitude; |DS_v| <= 1.01 term_v, so
 * |ds_v| <= 1.01 term_v + err_v; every double sum of non-negative products is made an upper bound by
 * lce_sum_bound, and a NaN E (an infinite err_v times a zero W_vk) counts as +Inf). For d_weight the
 * dz rows are not kept with their bounds: err_nj <= a_n term_nj + b_n over j != y_n (a_n: max err/term
 * over the row's terms >= 2^-900 other than the label's, b_n: max err over the others) and
 * err_ny <= ey_n, the label's own bound — the label's term (the split label term |g| (1 - e) w_y) is
 * far above its error, so it is kept out of the slope. With e_nj that bound (rounded upward),
 *     |dw - DW| <= E + fast_dot_bound(dw, |prior| + 1.01 A + E, na + 1),   E = sum_n e_nj |h_nk|,
 * A = sum_n term_nj |h_nk|. mag and emag are tier 0's sums (term + floor, cond term + floor, plus
 * lce_gemm_floor; cond_n = 1 + the row's largest logit scale), regrouped: equal to tier 0's to rounding.
 *
 * Exact zeros of d_hidden: the constant columns of W (lce_zero_d_hidden_columns, lce_oracle_internal.h).
 *
 * Tiling. Both passes are memory-bound when each token streams all of W (V x H doubles) and each
 * d_weight row streams all the block's hidden rows, so they run in tiles of columns k: d_hidden in
 * tasks of HIDDEN_TOKENS rows x HIDDEN_COLS columns (W read once per task, the rows' accumulators
 * in cache), d_weight in tasks of WEIGHT_ROWS vocab rows whose columns go HIDDEN_COLS at a time (the
 * block's hidden columns in cache across the task's rows, each row's accumulators across the block's
 * tokens). Every element is computed element-wise (fast_grad_step), its terms in the same order as
 * untiled: the same bits for any tile, block and thread count. */
#include <stdlib.h>
#include <string.h>

#include "lce_fast_internal.h"
#include "lce_parallel.h"

enum { HIDDEN_TOKENS = 16, HIDDEN_COLS = 512, WEIGHT_ROWS = 16 };

/* d += x * y for the split dot product (fast_dot_bound): dh = d's top 26 bits, exact products. */
static inline double top26(double d) {
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  b &= ~(((uint64_t)1 << 27) - 1);
  memcpy(&d, &b, sizeof d);
  return d;
}

/* The d_hidden elements k in [k0, k1) of the active rows among [na, nb) of the block: their split dot
 * products over v in order (the row's ds, term and err in the block; the same pass over W sums the
 * row's rnd and flip, dzr and dzq: lce_fast_rnd.c), then each element with its bound. The propagated
 * error is sum_v err_v |W_vk| itself (E, an upper bound by lce_sum_bound), |ds_v| <= 1.01 term_v +
 * err_v. scratch: [4 HIDDEN_TOKENS HIDDEN_COLS], the rows' accumulators. */
static void hidden_tile(fast_work *w, int64_t na, int64_t nb, int64_t k0, int64_t k1, double *scratch) {
  const lce_case *c = w->c;
  const int64_t H = c->h, V = c->v, kn = k1 - k0;
  const lce_ref_output *out = &w->res->out[LCE_OUT_D_HIDDEN];
  int64_t row[HIDDEN_TOKENS], rows = 0;
  fast_acc acc[HIDDEN_TOKENS];
  for (int64_t n = na; n < nb; n++) {
    if (!w->active[n]) continue;
    double *a = scratch + 4 * HIDDEN_COLS * rows;
    memset(a, 0, 4 * HIDDEN_COLS * sizeof *a);
    acc[rows] = (fast_acc){a, a + HIDDEN_COLS, a + 2 * HIDDEN_COLS, NULL, a + 3 * HIDDEN_COLS,
                           out->rnd + n * H + k0, out->flip + n * H + k0};
    row[rows++] = n;
  }
  if (rows == 0) return;
  for (int64_t v0 = 0; v0 < V; v0 += FAST_TERMS) {
    const int count = V - v0 < FAST_TERMS ? (int)(V - v0) : FAST_TERMS;
    const double *x[FAST_TERMS];
    for (int j = 0; j < count; j++) x[j] = w->w + (v0 + j) * H + k0;
    for (int64_t j = v0 + FAST_TERMS; j < v0 + 2 * FAST_TERMS && j < V; j++) /* the next terms' W, ahead */
      for (int64_t k = 0; k < kn; k += 8) __builtin_prefetch(w->w + j * H + k0 + k);
    for (int64_t i = 0; i < rows; i++) {
      const int64_t at = (row[i] - w->n0) * V + v0;
      fast_step s[FAST_TERMS];
      for (int j = 0; j < count; j++) {
        const double d = w->ds[at + j], dh = top26(d);
        s[j] = (fast_step){dh, d - dh, w->term[at + j], 0.0, w->err[at + j], w->dzr[at + j], w->dzq[at + j]};
      }
      fast_grad_step(s, x, count, kn, &acc[i]);
    }
  }
  const double gf = lce_gemm_floor(c, LCE_OUT_D_HIDDEN, V);
  const fast_dot_k dot = fast_dot_factors(V);
  for (int64_t i = 0; i < rows; i++) {
    const int64_t n = row[i];
    const double cond = w->cond[n], fl = w->floor[n], *hi = acc[i].hi, *lo = acc[i].lo, *t1 = acc[i].a, *E = acc[i].e;
    for (int64_t k = k0; k < k1; k++) {
      const int64_t t = k - k0;
      const double mag = t1[t] + fl * w->w1[k], emag = cond * t1[t] + fl * w->w1[k] + gf;
      if (w->col_zero[k]) { /* exactly 0, err 2^-1074 (lce_zero_d_hidden_columns) */
        fast_put(c, w->res, LCE_OUT_D_HIDDEN, n * H + k, 0.0, LCE_EXACT_ZERO_ERR, mag, emag);
        continue;
      }
      const double value = hi[t] + lo[t], t1u = lce_sum_bound(t1[t], V);
      const double prop = isnan(E[t]) ? INFINITY : lce_sum_bound(E[t], V);
      const double err = lce_add_up(prop, fast_dot_bound_k(value, lce_add_up(lce_mul_up(1.01, t1u), prop), dot));
      fast_put(c, w->res, LCE_OUT_D_HIDDEN, n * H + k, value, err, mag, emag);
    }
  }
}

int fast_hidden_block(fast_work *w, int64_t end) {
  const int64_t H = w->c->h, V = w->c->v, n0 = w->n0, per = 4 * HIDDEN_TOKENS * HIDDEN_COLS;
  const int64_t groups = (end - n0 + HIDDEN_TOKENS - 1) / HIDDEN_TOKENS, tiles = (H + HIDDEN_COLS - 1) / HIDDEN_COLS;
  double *scratch = malloc((size_t)(groups * tiles * per) * sizeof *scratch); /* ~32 bytes an element of the rows */
  if (scratch == NULL) return 0;
  LCE_PARALLEL_FOR_IF(groups * tiles > 1 && (end - n0) * H * V >= LCE_PARALLEL_MIN_MACS)
  for (int64_t task = 0; task < groups * tiles; task++) {
    const int64_t g = task / tiles, t = task % tiles, na = n0 + g * HIDDEN_TOKENS;
    hidden_tile(w, na, na + HIDDEN_TOKENS < end ? na + HIDDEN_TOKENS : end, t * HIDDEN_COLS,
                (t + 1) * HIDDEN_COLS < H ? (t + 1) * HIDDEN_COLS : H, scratch + task * per);
  }
  free(scratch);
  return 1;
}

/* d_weight is streamed: the result's own arrays of row j hold its running sums while the token
 * blocks pass (value: hi, err: lo, mag: A, emag: B, rounded: E), each element summed over the
 * tokens in ascending order whatever the block size or thread count, and weight_finish_row turns
 * them into the element. B = sum_n term_nj cond_n |h_nk| (emag's), A and E as below. */
static void weight_begin_row(fast_work *w, int64_t j) {
  const int64_t H = w->c->h;
  const float *prior = lce_output_weight_prior(w->c, w->in);
  lce_ref_output *r = &w->res->out[LCE_OUT_D_WEIGHT];
  for (int64_t i = j * H; i < (j + 1) * H; i++)
    r->value[i] = r->rnd[i] = prior[i], r->flip[i] = 0.0, r->err[i] = r->mag[i] = r->emag[i] = r->rounded[i] = 0.0;
}

void fast_weight_begin(fast_work *w) {
  const int64_t H = w->c->h, V = w->c->v;
  LCE_PARALLEL_FOR_IF(V > 1 && H * V >= LCE_PARALLEL_MIN_MACS)
  for (int64_t j = 0; j < V; j++) weight_begin_row(w, j);
}

/* The block's active tokens into the columns [k0, k1) of row j's running sums, and of its rnd and
 * flip. e_nj = a_n term_nj + b_n, or the label's own bound ey_n where j = y_n (row_slopes), rounded
 * upward. */
static void weight_accumulate(fast_work *w, int64_t j, int64_t end, int64_t k0, int64_t k1) {
  const int64_t H = w->c->h, V = w->c->v, at0 = j * H + k0;
  lce_ref_output *r = &w->res->out[LCE_OUT_D_WEIGHT];
  const fast_acc acc = {r->value + at0, r->err + at0, r->mag + at0, r->emag + at0, r->rounded + at0, r->rnd + at0,
                        r->flip + at0};
  fast_step s[FAST_TERMS];
  const double *x[FAST_TERMS];
  int count = 0;
  for (int64_t n = w->n0; n < end; n++) {
    if (w->active[n]) {
      const int64_t at = (n - w->n0) * V + j;
      const double d = w->ds[at], dh = top26(d), t = w->term[at];
      const double en = w->in->labels[n] == j ? w->ey[n] : lce_add_up(lce_mul_up(w->a[n], t), w->b[n]);
      s[count] = (fast_step){dh, d - dh, t, t * w->cond[n], en, w->dzr[at], w->dzq[at]};
      x[count++] = w->hidden + n * H + k0;
    }
    if (count == FAST_TERMS || (n == end - 1 && count > 0)) fast_grad_step(s, x, count, k1 - k0, &acc), count = 0;
  }
}

void fast_weight_block(fast_work *w, int64_t end) {
  const int64_t H = w->c->h, V = w->c->v, tasks = (V + WEIGHT_ROWS - 1) / WEIGHT_ROWS;
  LCE_PARALLEL_FOR_IF(tasks > 1 && (end - w->n0) * H * WEIGHT_ROWS >= LCE_PARALLEL_MIN_MACS)
  for (int64_t t = 0; t < tasks; t++)
    for (int64_t k0 = 0; k0 < H; k0 += HIDDEN_COLS)
      for (int64_t j = t * WEIGHT_ROWS; j < (t + 1) * WEIGHT_ROWS && j < V; j++)
        weight_accumulate(w, j, end, k0, k0 + HIDDEN_COLS < H ? k0 + HIDDEN_COLS : H);
}

/* Row j of d_weight from its running sums (a real vocab row). The propagated error is
 * sum_n e_nj |h_nk| (E); C = sum_n floor_n |h_nk| is the same for every row (w->cfl). The bound
 *     err = EU + (u |value| + g24 (|prior| + 1.01 AU + EU)) (1 + 2^-50) + tiny,
 * AU = (A + tiny_na) grow_na and EU likewise (lce_sum_bound, fast_dot_bound as real expressions), is
 * evaluated in round-to-nearest in a loop the compiler vectorizes, and then inflated: its 13
 * operations on non-negative operands each lose at most a relative u, so the exact expression is
 * below the computed one times (1 - u)^-13 < 1 + 2^-48, which the final multiplication by 1 + 2^-47
 * covers with its own rounding; 2^-1060 covers the subnormal range. */
static void weight_finish_row(fast_work *w, int64_t j, int poisoned) {
  const lce_case *c = w->c;
  const int64_t H = c->h, na = w->na;
  const float *prior = lce_output_weight_prior(c, w->in) + j * H;
  lce_ref_output *r = &w->res->out[LCE_OUT_D_WEIGHT];
  double *restrict value = r->value + j * H, *restrict lo = r->err + j * H, *restrict bound = r->rounded + j * H;
  const double *restrict A = r->mag + j * H, *restrict B = r->emag + j * H;
  const double gf = lce_gemm_floor(c, LCE_OUT_D_WEIGHT, na);
  const fast_dot_k dot = fast_dot_factors(na + 1); /* once per row: a division */
  const double tiny_na = lce_tiny_multiple(na), grow_na = 1.0 + (double)(na + 2) * 0x1p-52;
  for (int64_t k = 0; k < H; k++) { /* value = hi + lo; bound (over E): err */
    const double v = value[k] + lo[k], E = bound[k], p = fabs((double)prior[k]);
    const double au = (A[k] + tiny_na) * grow_na, eu = E != E ? INFINITY : (E + tiny_na) * grow_na;
    const double e = FAST_U * fabs(v) + dot.g24 * (p + 1.01 * au + eu);
    value[k] = v;
    bound[k] = (eu + (e * (1.0 + 0x1p-50) + dot.tiny)) * (1.0 + 0x1p-47) + 0x1p-1060;
  }
  for (int64_t k = 0; k < H; k++) {
    const int64_t i = j * H + k;
    const double p = prior[k], C = w->cfl[k];
    if (poisoned || !isfinite(p)) {
      fast_put_exact(c, w->res, LCE_OUT_D_WEIGHT, i, poisoned ? NAN : p);
      continue;
    }
    fast_put(c, w->res, LCE_OUT_D_WEIGHT, i, value[k], na == 0 ? 0.0 : bound[k], fabs(p) + A[k] + C,
             fabs(p) + B[k] + C + gf);
  }
}

void fast_weight_finish(fast_work *w, int poisoned) {
  const int64_t H = w->c->h, V = w->c->v;
  LCE_PARALLEL_FOR_IF(V > 1 && H * V >= LCE_PARALLEL_MIN_MACS)
  for (int64_t j = 0; j < V; j++) weight_finish_row(w, j, poisoned);
}
