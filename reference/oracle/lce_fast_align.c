/* lce_fast_align.c — tier 1's tensor-core alignment excess (lce_ref_output.tcex).
 *
 * A Hopper MMA step adds its products after aligning each at the sum of its operands' exponents, a
 * subnormal operand's exponent clamped to its format's emin (reference/device/lce_gemm_model.c), and
 * truncates every product at that alignment: a product x y with a subnormal x is truncated against
 * a(x) |y|, a(x) = 2^emin > |x|, so it loses up to 2^emin / |x| times more of itself than the
 * tensor-core terms (measured on normal data, golden/sm_90/policy.txt) allow for. Those terms scale
 * with an element's magnitude mag (its sum of |terms|); with every input operand taken at
 * a(x) = max(|x|, 2^emin) (x != 0; a zero stays 0: its product is 0, and the model aligns it at
 * 2^-126 times the other operand, which is below every other product in fp16 and in bf16 and tf32
 * costs at most 2^-149 of the other operand, left out so that zeros move no case) a product's
 * magnitude grows by
 *     a(x) a(y) - |x y| = d(x) a(y) + |x| d(y),   d(x) = a(x) - |x|,
 * non-zero only where an operand is subnormal. Per output:
 *   the logits z_nv = h_n . W_v: X_n = max_v sum_k d(h_nk) a(W_vk) + |h_nk| d(W_vk) bounds every
 *     logit's excess (a softcap factor f <= 1 only shrinks it);
 *   lse_n: X_n (its mag counts the largest logit term once);
 *   loss_token_n: 2 kmag_n X_n (sum_v |d loss / d z_v| <= 2 (|cy| + e/V sum w + 2 lambda |lse|));
 *   d_hidden[n, k] = sum_v ds_nv W_vk: sum_v term_nv d(W_vk);
 *   d_weight[v, k] = sum_n ds_nv h_nk: sum_n term_nv d(h_nk) over the active rows (term: the d_logit's
 *     magnitude, lce_fast_row.c).
 * The d_logits are left at their own magnitude: one stored below its format's normal range has lost
 * up to half its subnormal step, 2^(emin - p) (which the dz floor, lce_dz_floor_of, and rnd carry),
 * and aligning its product at emin truncates below 2^(emin - 23), at most 2^(p - 23) of that (p = 8
 * for bf16, 11 for fp16 and tf32). Only where the case's GEMMs run on tensor cores (bf16, fp16, fp32
 * with tf32) and an input operand is subnormal; elsewhere tcex stays NULL (no excess). Plain double
 * sums of non-negative terms: a scale, as mag is. */
#include <stdlib.h>
#include <string.h>

#include "lce_dtype.h"
#include "lce_fast_internal.h"
#include "lce_parallel.h"

/* x is subnormal in the GEMMs' format (2^emin = amin): non-zero and below amin; NaN and Inf are not. */
static inline int subnormal(double x, double amin) { return x != 0.0 && fabs(x) < amin; }

/* The subnormal entries of rows rows x H of x (as the GEMMs read them) into a CSR list: row r's are
 * k[at[r] .. at[r + 1]), each with its d(x) = 2^emin - |x|. Returns how many there are, -1 when out
 * of memory. */
static int64_t list_subnormals(const double *x, int64_t rows, int64_t H, double amin, fast_subnormals *s) {
  int64_t count = 0;
  for (int64_t i = 0; i < rows * H; i++) count += subnormal(x[i], amin);
  s->at = calloc((size_t)rows + 1, sizeof *s->at);
  s->k = malloc((size_t)(count + 1) * sizeof *s->k);
  s->d = malloc((size_t)(count + 1) * sizeof *s->d);
  if (s->at == NULL || s->k == NULL || s->d == NULL) return -1;
  int64_t j = 0;
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t k = 0; k < H; k++) {
      if (!subnormal(x[r * H + k], amin)) continue;
      s->k[j] = k, s->d[j] = amin - fabs(x[r * H + k]);
      j++;
    }
    s->at[r + 1] = j;
  }
  return count;
}

void fast_subnormals_free(fast_subnormals *s) {
  free(s->at), free(s->k), free(s->d);
  memset(s, 0, sizeof *s);
}

lce_code fast_align_begin(fast_work *w, lce_status *st) {
  const lce_case *c = w->c;
  w->align = 0;
  if (lce_case_precision(c) == LCE_PREC_FP32) return LCE_OK; /* IEEE fp32 GEMMs: no tensor cores */
  /* tf32 keeps fp32's exponent range: emin of the input dtype in every case. */
  w->amin = ldexp(1.0, lce_dtype_emin(c->dtype));
  const int64_t nh = list_subnormals(w->hidden, c->n, c->h, w->amin, &w->sub_h);
  const int64_t nw = list_subnormals(w->w, c->v, c->h, w->amin, &w->sub_w);
  LCE_CHECK(st, nh >= 0 && nw >= 0, LCE_ENOMEM, "out of memory for tier 1's list of subnormal operands");
  if (nh + nw == 0) return LCE_OK;
  static const lce_output_id outs[] = {LCE_OUT_LSE, LCE_OUT_LOSS_TOKEN, LCE_OUT_D_HIDDEN, LCE_OUT_D_WEIGHT};
  for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
    lce_ref_output *r = &w->res->out[outs[i]];
    if (r->count > 0) LCE_ALLOC_CHECK(st, r->tcex = calloc((size_t)r->count, sizeof *r->tcex));
  }
  w->align = 1;
  return LCE_OK;
}

/* a(x) for an input operand: |x|, or 2^emin for a subnormal. */
static inline double aligned(double x, double amin) { return subnormal(x, amin) ? amin : fabs(x); }

void fast_align_row(fast_work *w, int64_t n, int valid, double kmag) {
  if (!w->align) return;
  const int64_t H = w->c->h, V = w->c->v;
  const double *h = w->hidden + n * H;
  const fast_subnormals *sh = &w->sub_h, *sw = &w->sub_w;
  double x = 0.0;
  for (int64_t v = 0; v < V; v++) {
    const double *wv = w->w + v * H;
    double e = 0.0;
    for (int64_t j = sh->at[n]; j < sh->at[n + 1]; j++) e += sh->d[j] * aligned(wv[sh->k[j]], w->amin);
    for (int64_t j = sw->at[v]; j < sw->at[v + 1]; j++) e += fabs(h[sw->k[j]]) * sw->d[j];
    if (e > x) x = e;
  }
  w->res->out[LCE_OUT_LSE].tcex[n] = x;
  w->res->out[LCE_OUT_LOSS_TOKEN].tcex[n] = valid ? 2.0 * kmag * x : 0.0;
}

void fast_align_block(fast_work *w, int64_t end) {
  if (!w->align) return;
  const int64_t H = w->c->h, V = w->c->v, n0 = w->n0;
  const fast_subnormals *sh = &w->sub_h, *sw = &w->sub_w;
  /* d_hidden: each active row against W's subnormal entries. */
  double *dh = w->res->out[LCE_OUT_D_HIDDEN].tcex;
  if (sw->at[V] > 0) {
    LCE_PARALLEL_FOR_IF(end - n0 > 1 && (end - n0) * sw->at[V] >= LCE_PARALLEL_MIN_MACS)
    for (int64_t n = n0; n < end; n++) {
      if (!w->active[n]) continue;
      const double *term = w->term + (n - n0) * V;
      for (int64_t v = 0; v < V; v++)
        for (int64_t j = sw->at[v]; j < sw->at[v + 1]; j++) dh[n * H + sw->k[j]] += term[v] * sw->d[j];
    }
  }
  /* d_weight: each vocab row against the block's subnormal hidden entries, the tokens in order. */
  if (sh->at[end] == sh->at[n0]) return;
  double *dw = w->res->out[LCE_OUT_D_WEIGHT].tcex;
  LCE_PARALLEL_FOR_IF(V > 1 && V * (sh->at[end] - sh->at[n0]) >= LCE_PARALLEL_MIN_MACS)
  for (int64_t v = 0; v < V; v++)
    for (int64_t n = n0; n < end; n++) {
      if (!w->active[n]) continue;
      const double t = w->term[(n - n0) * V + v];
      for (int64_t j = sh->at[n]; j < sh->at[n + 1]; j++) dw[v * H + sh->k[j]] += t * sh->d[j];
    }
}
