/* lce_fused_plan.c — see lce_fused_plan.h. */
#include "lce_fused_plan.h"

#include <math.h>

void lce_fused_plan_make(lce_fused_plan *p, const lce_case *c) {
  const int64_t shard_rows = c->vp / c->tp;
  p->rows_max = c->vocab_chunk < shard_rows ? c->vocab_chunk : shard_rows;
  p->tok_max = c->token_chunk > 0 && c->token_chunk < c->n ? c->token_chunk : c->n;
  const double e = lce_case_smoothing(c);
  p->one_minus_e = (float)(1.0 - e);
  p->ev = (float)(e / (double)c->v);
  p->lambda = (float)lce_case_z_loss(c);
  p->cap = (float)c->softcap;
  p->tf32 = c->gemm == LCE_GEMM_TF32;
}

void lce_fused_shard_rows(const lce_case *c, int r, int64_t *lo, int64_t *hi) {
  lce_shard_range(c, r, lo, hi);
  if (*hi > c->v) *hi = c->v;
  if (*lo > *hi) *lo = *hi;
}

float lce_fused_weight_sum(const lce_case *c, const lce_tensors *in) {
  float sum = 0.0f;
  for (int64_t i = 0; i < c->n; i++)
    if (in->labels[i] != c->ignore_index) sum += lce_fused_class_weight(c, in, in->labels[i]);
  return sum;
}

float lce_fused_mean_divide(float x, float weight_sum) { return weight_sum > 0.0f ? x / weight_sum : 0.0f; }

void lce_fused_loss_gradient(const lce_case *c, const lce_tensors *in, float weight_sum, float *g) {
  const float go0 = in->grad_output[0];
  const float scale = c->reduction == LCE_RED_MEAN ? lce_fused_mean_divide(go0, weight_sum) : go0;
  for (int64_t i = 0; i < c->n; i++)
    g[i] = in->labels[i] == c->ignore_index ? 0.0f : (c->reduction == LCE_RED_NONE ? in->grad_output[i] : scale);
}

/* g = dl·r: the exact power-of-two part dl (1 for a whole split) and the fp32 remainder r. */
static void split_one(float g, int whole, float *dl, float *r) {
  if (g == 0.0f || !isfinite(g)) {
    *dl = g, *r = 1.0f;
  } else if (whole) {
    *dl = 1.0f, *r = g;
  } else {
    int e;
    const float m = frexpf(g, &e); /* g = m 2^e, |m| in [0.5, 1); e - 1 >= -149 for every fp32 g */
    *dl = ldexpf(1.0f, e - 1), *r = 2.0f * m;
  }
}

/* 1 when scaling token i's hidden row by r keeps every finite non-zero value in the dtype's normal
 * range, so that its rounding is relative (at most u) and never an overflow. */
static int row_scales_normally(const lce_case *c, const lce_tensors *in, int64_t i, float r) {
  const double lo = ldexp(1.0, lce_dtype_emin(c->dtype)), hi = lce_dtype_max(c->dtype);
  for (int64_t k = 0; k < c->h; k++) {
    const double x = fabs((double)r * lce_load(c->dtype, in->hidden, (size_t)(i * c->h + k)));
    if (x != 0.0 && isfinite(x) && (x < lo || x > hi)) return 0;
  }
  return 1;
}

int lce_fused_grad_split(const lce_case *c, const lce_tensors *in, const float *g, float *dl, float *rho,
                         float *alpha) {
  const int whole = c->reduction != LCE_RED_NONE;
  int scaled_rows = 0;
  *alpha = 1.0f;
  for (int64_t i = 0; i < c->n; i++) {
    float r;
    split_one(g[i], whole, &dl[i], &r);
    if (!whole && r != 1.0f && !row_scales_normally(c, in, i, r)) dl[i] = g[i], r = 1.0f;
    rho[i] = whole ? 1.0f : r;
    scaled_rows |= rho[i] != 1.0f;
    if (whole && r != 1.0f) *alpha = r; /* the one g of every valid token */
  }
  return scaled_rows;
}

float lce_fused_loss_total(const lce_case *c, const float *loss_token) {
  float total = 0.0f;
  for (int64_t i = 0; i < c->n; i++) total += loss_token[i];
  return total;
}

float lce_fused_loss(const lce_case *c, const float *loss_token, float weight_sum) {
  const float total = lce_fused_loss_total(c, loss_token);
  return c->reduction == LCE_RED_MEAN ? lce_fused_mean_divide(total, weight_sum) : total;
}

lce_code lce_fused_check_outputs(const lce_case *c, const lce_outputs *out, const char *subject, lce_status *st) {
  LCE_CHECK(st, out != NULL && out->loss && out->loss_token && out->lse && out->d_hidden && out->grad_embedding,
            LCE_EINVAL, "%s: missing output buffer", subject);
  LCE_CHECK(st, c->tied || out->grad_weight != NULL, LCE_EINVAL, "%s: untied case needs the grad_weight output buffer",
            subject);
  return LCE_OK;
}
