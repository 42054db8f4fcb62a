/* lce_case.c — case validation, tensor generation and output buffers (see lce_case.h).
 *
 * Generation. Every tensor element is a pure function of (seed, stream, index) through the
 * counter-based PRNG, rounded once to the case dtype, so a case id regenerates bit-identical
 * tensors on any machine. The shapes of the value distribution:
 *   W[j,k]     = N(0,1) for real rows; column 0 is the constant 1 (a "bias feature") so that a
 *                token can shift all its logits at once; padded rows hold 4·N(0,1), so a kernel
 *                that lets them into the softmax is visibly wrong;
 *   hidden row = one of the row kinds of lce_dist, built against W:
 *     normal     3/sqrt(H)·N(0,1)                          logits ~ N(0, 9)
 *     peaked     normal/3 + 20·W[j*]/|W[j*]|²               one logit ~20, the rest ~N(0, 1)
 *     flat       1e-3/sqrt(H)·N(0,1)                       logits within ~1e-3 (fp16: subnormals)
 *     confident  30·W[y]/|W[y]|² + tiny noise              p_y → 1 (1 − p_y ~ V·e^-30)
 *     negative   normal/3 with column 0 at −120            every logit < −100
 *   labels     ignore_pct% of tokens (exactly rounded count, seeded positions) get ignore_index;
 *              the first valid tokens get one label in each shard's real rows, the rest uniform. */
#include "lce_case.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lce_prng.h"

enum { STREAM_W = 1, STREAM_E, STREAM_H, STREAM_KIND, STREAM_PEAK, STREAM_LABEL, STREAM_IGNORE,
       STREAM_GOUT, STREAM_PRIOR_E, STREAM_PRIOR_W };

static const char *const REDUCTION_NAMES[] = {"none", "sum", "mean"};
static const char *const DIST_NAMES[] = {"mixed", "normal", "peaked", "flat", "confident", "negative"};

const char *lce_reduction_name(lce_reduction r) { return (unsigned)r < 3 ? REDUCTION_NAMES[r] : "?"; }
const char *lce_dist_name(lce_dist d) { return (unsigned)d < LCE_DIST_COUNT ? DIST_NAMES[d] : "?"; }

int lce_reduction_parse(const char *s, lce_reduction *out) {
  for (int i = 0; i < 3; i++)
    if (strcmp(s, REDUCTION_NAMES[i]) == 0) return *out = (lce_reduction)i, 1;
  return 0;
}

int lce_dist_parse(const char *s, lce_dist *out) {
  for (int i = 0; i < LCE_DIST_COUNT; i++)
    if (strcmp(s, DIST_NAMES[i]) == 0) return *out = (lce_dist)i, 1;
  return 0;
}

lce_case lce_case_default(void) {
  lce_case c = {.n = 8, .h = 16, .v = 64, .vp = 64, .tp = 1, .vocab_chunk = 16, .dtype = LCE_BF16,
                .tied = 0, .prior_grad = 0, .reduction = LCE_RED_MEAN,
                .ignore_index = LCE_DEFAULT_IGNORE_INDEX, .ignore_pct = 0, .dist = LCE_DIST_MIXED,
                .seed = 1};
  return c;
}

lce_code lce_case_validate(const lce_case *c, lce_status *st) {
  LCE_CHECK(st, c != NULL, LCE_EINVAL, "case is NULL");
  LCE_CHECK(st, c->n >= 1 && c->n <= LCE_MAX_DIM, LCE_EINVAL, "n (tokens) = %lld outside [1, %lld]",
            (long long)c->n, (long long)LCE_MAX_DIM);
  LCE_CHECK(st, c->h >= 1 && c->h <= LCE_MAX_DIM, LCE_EINVAL, "h (hidden) = %lld outside [1, %lld]",
            (long long)c->h, (long long)LCE_MAX_DIM);
  LCE_CHECK(st, c->v >= 1 && c->v <= LCE_MAX_DIM, LCE_EINVAL, "v (vocab) = %lld outside [1, %lld]",
            (long long)c->v, (long long)LCE_MAX_DIM);
  LCE_CHECK(st, c->vp >= c->v && c->vp <= LCE_MAX_DIM, LCE_EINVAL,
            "padded vocab vp = %lld must be >= v = %lld (and <= %lld)", (long long)c->vp, (long long)c->v,
            (long long)LCE_MAX_DIM);
  LCE_CHECK(st, c->tp >= 1 && c->tp <= 1024, LCE_EINVAL, "tp = %d outside [1, 1024]", c->tp);
  LCE_CHECK(st, c->vp % c->tp == 0, LCE_EINVAL, "tp = %d does not divide padded vocab vp = %lld", c->tp,
            (long long)c->vp);
  LCE_CHECK(st, c->vocab_chunk >= 1, LCE_EINVAL, "vocab chunk = %lld must be >= 1", (long long)c->vocab_chunk);
  LCE_CHECK(st, (unsigned)c->dtype < LCE_DTYPE_COUNT, LCE_EINVAL, "unknown dtype %d", (int)c->dtype);
  LCE_CHECK(st, (unsigned)c->reduction <= LCE_RED_MEAN, LCE_EINVAL, "unknown reduction %d", (int)c->reduction);
  LCE_CHECK(st, (unsigned)c->dist < LCE_DIST_COUNT, LCE_EINVAL, "unknown value distribution %d", (int)c->dist);
  LCE_CHECK(st, c->ignore_pct >= 0 && c->ignore_pct <= 100, LCE_EINVAL, "ignored percentage %d outside [0, 100]",
            c->ignore_pct);
  LCE_CHECK(st, c->ignore_index < 0 || c->ignore_index >= c->v, LCE_EINVAL,
            "ignore_index %lld is a real label in [0, v = %lld)", (long long)c->ignore_index, (long long)c->v);
  LCE_CHECK(st, c->n * c->h <= ((int64_t)1 << 31) && c->vp * c->h <= ((int64_t)1 << 31), LCE_EINVAL,
            "tensor too large: n*h = %lld, vp*h = %lld (limit 2^31 elements)", (long long)(c->n * c->h),
            (long long)(c->vp * c->h));
  return LCE_OK;
}

lce_code lce_tensors_validate(const lce_case *c, const lce_tensors *in, lce_status *st) {
  LCE_TRY(lce_case_validate(c, st));
  LCE_CHECK(st, in != NULL && in->hidden && in->embedding && in->labels && in->grad_output &&
                    in->grad_embedding_prior, LCE_EINVAL, "missing input tensor");
  LCE_CHECK(st, c->tied || (in->weight && in->grad_weight_prior), LCE_EINVAL,
            "untied case needs a separate output weight and its gradient prior");
  for (int64_t i = 0; i < c->n; i++) {
    int64_t y = in->labels[i];
    LCE_CHECK(st, y == c->ignore_index || (y >= 0 && y < c->v), LCE_EINVAL,
              "label[%lld] = %lld is out of range: must be in [0, %lld) or ignore_index %lld", (long long)i,
              (long long)y, (long long)c->v, (long long)c->ignore_index);
  }
  return LCE_OK;
}

int64_t lce_count_valid(const lce_case *c, const lce_tensors *in) {
  int64_t k = 0;
  for (int64_t i = 0; i < c->n; i++) k += in->labels[i] != c->ignore_index;
  return k;
}

void lce_shard_range(const lce_case *c, int r, int64_t *lo, int64_t *hi) {
  int64_t per = c->vp / c->tp;
  *lo = (int64_t)r * per;
  *hi = *lo + per;
}

/* ---- generation ---------------------------------------------------------------------------- */

static void fill_weight(const lce_case *c, void *w, uint64_t stream) {
  for (int64_t j = 0; j < c->vp; j++) {
    for (int64_t k = 0; k < c->h; k++) {
      double x = lce_rand_normal(c->seed, stream, (uint64_t)(j * c->h + k));
      if (j >= c->v) x *= 4.0;
      else if (k == 0 && c->h > 1) x = 1.0;
      lce_store(c->dtype, w, (size_t)(j * c->h + k), x);
    }
  }
}

static void fill_labels(const lce_case *c, int64_t *labels) {
  int64_t n_ignored = (c->n * c->ignore_pct + 50) / 100;
  int64_t *order = malloc((size_t)c->n * sizeof *order);
  for (int64_t i = 0; i < c->n; i++) order[i] = i;
  for (int64_t i = c->n - 1; i > 0; i--) { /* seeded Fisher–Yates: positions of ignored tokens */
    int64_t j = (int64_t)lce_rand_below(c->seed, STREAM_IGNORE, (uint64_t)i, (uint64_t)i + 1);
    int64_t t = order[i]; order[i] = order[j]; order[j] = t;
  }
  for (int64_t i = 0; i < c->n; i++) labels[i] = 0;
  for (int64_t i = 0; i < n_ignored; i++) labels[order[i]] = c->ignore_index;
  free(order);
  int shard = 0;
  for (int64_t i = 0; i < c->n; i++) {
    if (labels[i] == c->ignore_index) continue;
    int64_t lo = 0, hi = c->v;
    while (shard < c->tp) { /* one label in every shard that owns real rows, then uniform */
      int64_t slo, shi;
      lce_shard_range(c, shard++, &slo, &shi);
      if (slo < c->v) { lo = slo; hi = shi < c->v ? shi : c->v; break; }
    }
    labels[i] = lo + (int64_t)lce_rand_below(c->seed, STREAM_LABEL, (uint64_t)i, (uint64_t)(hi - lo));
  }
}

static double row_norm2(const lce_case *c, const void *w, int64_t j) {
  double s = 0.0;
  for (int64_t k = 0; k < c->h; k++) {
    double x = lce_load(c->dtype, w, (size_t)(j * c->h + k));
    s += x * x;
  }
  return s;
}

static lce_dist row_kind(const lce_case *c, int64_t i) {
  if (c->dist != LCE_DIST_MIXED) return c->dist;
  uint64_t off = lce_rand_below(c->seed, STREAM_KIND, 0, LCE_DIST_COUNT - 1);
  return (lce_dist)(1 + (uint64_t)(i + (int64_t)off) % (LCE_DIST_COUNT - 1));
}

static void fill_hidden(const lce_case *c, const void *w, const int64_t *labels, void *hidden) {
  double scale = 3.0 / sqrt((double)c->h);
  for (int64_t i = 0; i < c->n; i++) {
    lce_dist kind = row_kind(c, i);
    int64_t target = -1;
    double amp = 0.0, noise = scale;
    if (kind == LCE_DIST_FLAT) noise = 1e-3 / sqrt((double)c->h);
    if (kind == LCE_DIST_PEAKED || kind == LCE_DIST_NEGATIVE) noise = scale / 3.0;
    if (kind == LCE_DIST_PEAKED) {
      target = (int64_t)lce_rand_below(c->seed, STREAM_PEAK, (uint64_t)i, (uint64_t)c->v);
      amp = 20.0;
    } else if (kind == LCE_DIST_CONFIDENT) {
      target = labels[i] == c->ignore_index ? 0 : labels[i];
      amp = 30.0;
      noise = 1e-3 / sqrt((double)c->h);
    }
    double tn2 = target >= 0 ? row_norm2(c, w, target) : 1.0;
    for (int64_t k = 0; k < c->h; k++) {
      double x = noise * lce_rand_normal(c->seed, STREAM_H, (uint64_t)(i * c->h + k));
      if (target >= 0 && tn2 > 0.0) x += amp * lce_load(c->dtype, w, (size_t)(target * c->h + k)) / tn2;
      if (kind == LCE_DIST_NEGATIVE && k == 0 && c->h > 1) x = -120.0;
      lce_store(c->dtype, hidden, (size_t)(i * c->h + k), x);
    }
  }
}

static void fill_prior(const lce_case *c, float *g, uint64_t stream) {
  for (int64_t e = 0; e < c->vp * c->h; e++)
    g[e] = c->prior_grad ? (float)(0.05 * lce_rand_normal(c->seed, stream, (uint64_t)e)) : 0.0f;
}

lce_code lce_case_generate(const lce_case *c, lce_tensors *out, lce_status *st) {
  memset(out, 0, sizeof *out);
  LCE_TRY(lce_case_validate(c, st));
  size_t es = lce_dtype_size(c->dtype);
  size_t wn = (size_t)(c->vp * c->h);
  out->hidden = malloc((size_t)(c->n * c->h) * es);
  out->embedding = malloc(wn * es);
  out->weight = c->tied ? NULL : malloc(wn * es);
  out->labels = malloc((size_t)c->n * sizeof *out->labels);
  out->grad_output = malloc((size_t)(c->reduction == LCE_RED_NONE ? c->n : 1) * sizeof(float));
  out->grad_embedding_prior = malloc(wn * sizeof(float));
  out->grad_weight_prior = c->tied ? NULL : malloc(wn * sizeof(float));
  if (!out->hidden || !out->embedding || (!c->tied && (!out->weight || !out->grad_weight_prior)) ||
      !out->labels || !out->grad_output || !out->grad_embedding_prior) {
    lce_tensors_free(out);
    return lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory generating case tensors");
  }
  fill_weight(c, out->embedding, STREAM_E);
  if (!c->tied) fill_weight(c, out->weight, STREAM_W);
  fill_labels(c, out->labels);
  fill_hidden(c, c->tied ? out->embedding : out->weight, out->labels, out->hidden);
  int64_t ng = c->reduction == LCE_RED_NONE ? c->n : 1;
  for (int64_t i = 0; i < ng; i++) /* positive, not 1: a kernel that ignores grad_output fails */
    out->grad_output[i] = (float)(0.25 + 1.5 * lce_rand_uniform(c->seed, STREAM_GOUT, (uint64_t)i));
  fill_prior(c, out->grad_embedding_prior, STREAM_PRIOR_E);
  if (!c->tied) fill_prior(c, out->grad_weight_prior, STREAM_PRIOR_W);
  return LCE_OK;
}

void lce_tensors_free(lce_tensors *t) {
  if (t == NULL) return;
  free(t->hidden);
  free(t->embedding);
  free(t->weight);
  free(t->labels);
  free(t->grad_output);
  free(t->grad_embedding_prior);
  free(t->grad_weight_prior);
  memset(t, 0, sizeof *t);
}
