/* lce_output.c — names, shapes, formats and element access of the judged outputs (lce_output.h). */
#include "lce_output.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lce_parallel.h"

static const char *const OUTPUT_NAMES[LCE_OUT_COUNT] = {"loss", "loss_token", "lse",
                                                        "d_hidden", "d_weight", "d_embedding"};

const char *lce_output_name(lce_output_id o) { return (unsigned)o < LCE_OUT_COUNT ? OUTPUT_NAMES[o] : "?"; }

int lce_output_parse(const char *s, lce_output_id *out) {
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    if (strcmp(s, OUTPUT_NAMES[o]) == 0) return *out = (lce_output_id)o, 1;
  return 0;
}

int lce_output_applies(const lce_case *c, lce_output_id o) { return o != LCE_OUT_D_EMBEDDING || !c->tied; }

int64_t lce_output_count(const lce_case *c, lce_output_id o) {
  if (!lce_output_applies(c, o)) return 0;
  switch (o) {
    case LCE_OUT_LOSS: return 1;
    case LCE_OUT_LOSS_TOKEN:
    case LCE_OUT_LSE: return c->n;
    case LCE_OUT_D_HIDDEN: return c->n * c->h;
    default: return c->vp * c->h;
  }
}

int64_t lce_output_reference_count(const lce_case *c, lce_output_id o) {
  return o == LCE_OUT_D_EMBEDDING ? 0 : lce_output_count(c, o);
}

double lce_accumulation_length(const lce_case *c, lce_output_id o) {
  if (o == LCE_OUT_D_HIDDEN) {
    const int64_t vs = (c->v + c->tp - 1) / c->tp, vc = c->vocab_chunk > 0 ? c->vocab_chunk : vs;
    return (double)(c->v + c->tp * ((vs + vc - 1) / vc) + c->tp + 1);
  }
  const int64_t tc = c->token_chunk > 0 ? c->token_chunk : c->n;
  return (double)(c->n + (c->n + tc - 1) / tc + 1);
}

void lce_kernel_reach(const lce_case *c, lce_output_id o, double *per_mag, double *per_m) {
  *per_mag = c->reduction == LCE_RED_NONE ? 2.0 * lce_dlogit_unit_roundoff(c) : 0.0;
  *per_m = 4.0 * 0x1p-24 * sqrt(lce_accumulation_length(c, o) / 3.0);
}

lce_dtype lce_output_format(const lce_case *c, lce_output_id o) {
  return o == LCE_OUT_D_HIDDEN ? c->dtype : LCE_FP32;
}

int64_t lce_output_inner(const lce_case *c, lce_output_id o) {
  switch (o) {
    case LCE_OUT_LOSS_TOKEN:
    case LCE_OUT_LSE:
    case LCE_OUT_D_HIDDEN: return c->v;
    default: return c->n;
  }
}

void *lce_output_buffer(const lce_case *c, const lce_outputs *out, lce_output_id o) {
  switch (o) {
    case LCE_OUT_LOSS: return out->loss;
    case LCE_OUT_LOSS_TOKEN: return out->loss_token;
    case LCE_OUT_LSE: return out->lse;
    case LCE_OUT_D_HIDDEN: return out->d_hidden;
    case LCE_OUT_D_WEIGHT: return lce_output_weight_grad(c, out);
    default: return out->grad_embedding;
  }
}

double lce_output_get(const lce_case *c, const lce_outputs *out, lce_output_id o, int64_t i) {
  return lce_load(lce_output_format(c, o), lce_output_buffer(c, out, o), (size_t)i);
}

void lce_output_load(const lce_case *c, const lce_outputs *out, lce_output_id o, int64_t i0, int64_t i1, double *x) {
  const lce_dtype t = lce_output_format(c, o);
  const void *buf = lce_output_buffer(c, out, o);
  if (t == LCE_FP32) { /* every output but a bf16/fp16 d_hidden */
    const float *f = (const float *)buf + i0;
    for (int64_t i = 0; i < i1 - i0; i++) x[i] = f[i];
    return;
  }
  for (int64_t i = i0; i < i1; i++) x[i - i0] = lce_load(t, buf, (size_t)i);
}

double lce_plain_logit(const lce_case *c, const lce_tensors *in, int64_t n, int64_t j) {
  const void *w = lce_output_weight(c, in);
  double s = 0.0;
  for (int64_t k = 0; k < c->h; k++)
    s += lce_load(c->dtype, in->hidden, (size_t)(n * c->h + k)) * lce_load(c->dtype, w, (size_t)(j * c->h + k));
  return c->softcap > 0 ? c->softcap * tanh(s / c->softcap) : s;
}

double lce_softmax_sum_replay(const lce_case *c, const double *z) {
  double worst = 0.0;
  for (int r = 0; r < c->tp; r++) {
    int64_t lo, hi;
    lce_shard_range(c, r, &lo, &hi);
    if (hi > c->v) hi = c->v;
    double m = -INFINITY;
    for (int64_t j = lo; j < hi; j++) m = fmax(m, z[j]);
    if (!(hi > lo) || !isfinite(m)) continue;
    float s32 = 0.0f;
    long double exact = 0.0L;
    for (int64_t j = lo; j < hi; j++) {
      const double t = exp(z[j] - m);
      s32 += (float)t;
      exact += t;
    }
    const double rel = fabs((double)((long double)s32 - exact) / (double)exact);
    if (isfinite(rel) && rel > worst) worst = rel;
  }
  return worst;
}

/* One token's logits z[0..v), each as lce_plain_logit makes it (the same sequential sum over k of the
 * same products, softcap applied): h its hidden row, wd the weight, both in double; four vocab rows at
 * a time only give the four sums their own chains. */
static void plain_logits(const lce_case *c, const double *h, const double *wd, double *z) {
  const int64_t H = c->h, V = c->v;
  int64_t j = 0;
  for (; j + 4 <= V; j += 4) {
    const double *w0 = wd + j * H, *w1 = w0 + H, *w2 = w1 + H, *w3 = w2 + H;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    for (int64_t k = 0; k < H; k++) {
      s0 += h[k] * w0[k];
      s1 += h[k] * w1[k];
      s2 += h[k] * w2[k];
      s3 += h[k] * w3[k];
    }
    z[j] = s0, z[j + 1] = s1, z[j + 2] = s2, z[j + 3] = s3;
  }
  for (; j < V; j++) {
    double s = 0.0;
    for (int64_t k = 0; k < H; k++) s += h[k] * wd[j * H + k];
    z[j] = s;
  }
  if (c->softcap > 0)
    for (j = 0; j < V; j++) z[j] = c->softcap * tanh(z[j] / c->softcap);
}

double lce_softmax_sum_replay_case(const lce_case *c, const lce_tensors *in) {
  const void *w = lce_output_weight(c, in);
  const int64_t N = c->n, H = c->h, V = c->v;
  double *wd = malloc((size_t)(V * H) * sizeof *wd), *rel = calloc((size_t)N + 1, sizeof *rel), worst = 0.0;
  if (wd == NULL || rel == NULL) {
    free(wd);
    free(rel);
    return 0.0;
  }
  LCE_PARALLEL_FOR_IF(V * H >= LCE_PARALLEL_MIN_MACS)
  for (int64_t j = 0; j < V; j++)
    for (int64_t k = 0; k < H; k++) wd[j * H + k] = lce_load(c->dtype, w, (size_t)(j * H + k));
  LCE_PARALLEL_FOR_IF(N > 1 && N * V * H >= LCE_PARALLEL_MIN_MACS)
  for (int64_t n = 0; n < N; n++) {
    double *buf = in->labels[n] == c->ignore_index ? NULL : malloc((size_t)(V + H) * sizeof *buf);
    if (buf == NULL) continue;
    double *h = buf + V;
    for (int64_t k = 0; k < H; k++) h[k] = lce_load(c->dtype, in->hidden, (size_t)(n * H + k));
    plain_logits(c, h, wd, buf);
    rel[n] = lce_softmax_sum_replay(c, buf);
    free(buf);
  }
  for (int64_t n = 0; n < N; n++) worst = fmax(worst, rel[n]);
  free(wd);
  free(rel);
  return worst;
}
