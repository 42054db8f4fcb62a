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
 *   and the hard row kinds (dist "hard" cycles through them):
 *     big        9·normal: |logits| up to ~300, most beyond 80
 *     ties       peaked toward row a, whose copy b = (a + V/2) mod V shares the maximum
 *     tmax, tmin normal/3 ± 20·W[y]/|W[y]|²: the label at the maximum, at the minimum
 *     zero       all zero: every logit 0
 *     subnormal  N(0,1) times the dtype's smallest normal / 4: subnormal hidden values
 *   poison     normal rows, then NaN in hidden[0, H/2] and +Inf in hidden[1, 0] (when n > 1)
 *   labels     ignore_pct% of tokens (exactly rounded count, seeded positions) get ignore_index;
 *              the first valid tokens get one label in each shard's real rows, the rest uniform.
 *   class weights (cw) uniform in [0.5, 2), rounded to fp32. */
#include "lce_case.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lce_parallel.h"
#include "lce_prng.h"

enum { STREAM_W = 1, STREAM_E, STREAM_H, STREAM_KIND, STREAM_PEAK, STREAM_LABEL, STREAM_IGNORE,
       STREAM_GOUT, STREAM_PRIOR_E, STREAM_PRIOR_W, STREAM_CLASS_W, STREAM_TIE };

static const char *const REDUCTION_NAMES[] = {"none", "sum", "mean"};
static const char *const DIST_NAMES[] = {"mixed", "normal", "peaked", "flat", "confident", "negative", "hard",
                                         "poison", "big", "ties", "tmax", "tmin", "zero", "subnormal"};

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

const char *lce_precision_name(lce_precision p) {
  return p == LCE_PREC_TF32 ? "tf32" : (unsigned)p < LCE_PREC_TF32 ? lce_dtype_name((lce_dtype)p) : "?";
}

int lce_precision_parse(const char *s, lce_precision *out) {
  lce_dtype t;
  if (strcmp(s, "tf32") == 0) return *out = LCE_PREC_TF32, 1;
  if (lce_dtype_parse(s, &t)) return *out = (lce_precision)t, 1;
  return 0;
}

lce_precision lce_case_precision(const lce_case *c) {
  return c->gemm == LCE_GEMM_TF32 ? LCE_PREC_TF32 : (lce_precision)c->dtype;
}

double lce_dlogit_unit_roundoff(const lce_case *c) {
  return lce_case_precision(c) == LCE_PREC_TF32 ? 0x1p-11 : lce_dtype_unit_roundoff(c->dtype);
}

double lce_case_smoothing(const lce_case *c) {
  double eps = c->smoothing_permille / 1000.0;
  switch (c->smoothing) {
    case LCE_SMOOTH_PYTORCH: return eps;
    case LCE_SMOOTH_MEGATRON: return eps * (double)c->v / (double)(c->v - 1);
    default: return 0.0;
  }
}

double lce_case_z_loss(const lce_case *c) { return c->z_loss_e5 * 1e-5; }

double lce_round_tf32(double x) {
  /* Ties away from zero (cvt.rna), 11 significant bits, fp32's exponent range: the inputs are fp32
   * values, so no overflow beyond fp32's either. */
  return lce_round_format(x, 11, -126, 127, 1);
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
  LCE_CHECK(st, c->token_chunk >= 0, LCE_EINVAL, "token chunk = %lld must be >= 0 (0: one chunk)",
            (long long)c->token_chunk);
  LCE_CHECK(st, (unsigned)c->smoothing <= LCE_SMOOTH_MEGATRON, LCE_EINVAL, "unknown label smoothing %d",
            (int)c->smoothing);
  LCE_CHECK(st, c->smoothing_permille >= 0 && c->smoothing_permille < 1000, LCE_EINVAL,
            "label smoothing %d/1000 outside [0, 1)", c->smoothing_permille);
  LCE_CHECK(st, c->smoothing != LCE_SMOOTH_MEGATRON || c->v >= 2, LCE_EINVAL,
            "megatron label smoothing (eps * V / (V - 1)) needs v >= 2, got v = %lld", (long long)c->v);
  LCE_CHECK(st, c->z_loss_e5 >= 0, LCE_EINVAL, "z-loss weight %d e-5 must be >= 0", c->z_loss_e5);
  LCE_CHECK(st, c->softcap >= 0, LCE_EINVAL, "softcap %d must be >= 0 (0: none)", c->softcap);
  LCE_CHECK(st, (unsigned)c->gemm <= LCE_GEMM_TF32, LCE_EINVAL, "unknown GEMM mode %d", (int)c->gemm);
  LCE_CHECK(st, c->gemm != LCE_GEMM_TF32 || c->dtype == LCE_FP32, LCE_EINVAL,
            "tf32 GEMMs apply to fp32 inputs only, not %s", lce_dtype_name(c->dtype));
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
  LCE_CHECK(st, in->n == c->n && in->h == c->h && in->v == c->v && in->vp == c->vp, LCE_EINVAL,
            "tensors have shape n=%lld h=%lld v=%lld vp=%lld but the case says n=%lld h=%lld v=%lld vp=%lld",
            (long long)in->n, (long long)in->h, (long long)in->v, (long long)in->vp, (long long)c->n,
            (long long)c->h, (long long)c->v, (long long)c->vp);
  LCE_CHECK(st, !c->class_weights || in->class_weight, LCE_EINVAL, "case asks for class weights but none are given");
  for (int64_t v = 0; c->class_weights && v < c->v; v++)
    LCE_CHECK(st, isfinite(in->class_weight[v]) && in->class_weight[v] >= 0, LCE_EINVAL,
              "class_weight[%lld] = %g must be finite and >= 0", (long long)v, (double)in->class_weight[v]);
  for (int64_t i = 0; i < (c->reduction == LCE_RED_NONE ? c->n : 1); i++)
    LCE_CHECK(st, isfinite(in->grad_output[i]), LCE_EINVAL, "grad_output[%lld] = %g is not finite", (long long)i,
              (double)in->grad_output[i]);
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

const void *lce_output_weight(const lce_case *c, const lce_tensors *in) { return c->tied ? in->embedding : in->weight; }

const float *lce_output_weight_prior(const lce_case *c, const lce_tensors *in) {
  return c->tied ? in->grad_embedding_prior : in->grad_weight_prior;
}

float *lce_output_weight_grad(const lce_case *c, const lce_outputs *out) {
  return c->tied ? out->grad_embedding : out->grad_weight;
}

/* ---- generation ---------------------------------------------------------------------------- */

/* The pair of real rows that "ties" rows share the maximum of: row b is a copy of row a. */
static int tie_rows(const lce_case *c, int64_t *a, int64_t *b) {
  if ((c->dist != LCE_DIST_HARD && c->dist != LCE_DIST_TIES) || c->v < 2) return 0;
  *a = (int64_t)lce_rand_below(c->seed, STREAM_TIE, 0, (uint64_t)c->v);
  *b = (*a + c->v / 2) % c->v;
  if (*b == *a) *b = (*a + 1) % c->v;
  return 1;
}

/* The fills below are loops over rows whose every element is a pure function of (seed, stream,
 * index) (lce_prng is counter-based), so they run in parallel where the build has OpenMP and give
 * the same bits in any order: production shapes have 1e9 weights (~60 ns each serially). */

static void fill_weight(const lce_case *c, void *w, uint64_t stream) {
  LCE_PARALLEL_FOR
  for (int64_t j = 0; j < c->vp; j++) {
    for (int64_t k = 0; k < c->h; k++) {
      double x = lce_rand_normal(c->seed, stream, (uint64_t)(j * c->h + k));
      if (j >= c->v) x *= 4.0;
      else if (k == 0 && c->h > 1) x = 1.0;
      lce_store(c->dtype, w, (size_t)(j * c->h + k), x);
    }
  }
  int64_t a, b;
  if (tie_rows(c, &a, &b)) {
    size_t es = lce_dtype_size(c->dtype);
    memcpy((char *)w + (size_t)(b * c->h) * es, (char *)w + (size_t)(a * c->h) * es, (size_t)c->h * es);
  }
}

static int fill_labels(const lce_case *c, int64_t *labels) {
  int64_t n_ignored = (c->n * c->ignore_pct + 50) / 100;
  int64_t *order = malloc((size_t)c->n * sizeof *order);
  if (order == NULL) return 0;
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
  return 1;
}

static double row_norm2(const lce_case *c, const void *w, int64_t j) {
  double s = 0.0;
  for (int64_t k = 0; k < c->h; k++) {
    double x = lce_load(c->dtype, w, (size_t)(j * c->h + k));
    s += x * x;
  }
  return s;
}

/* The row kind of token i: mixed cycles through normal..negative (the five first kinds, so that
 * ids made before the hard kinds existed keep their tensors), hard through big..subnormal, poison
 * is normal rows with two non-finite values added afterwards. */
static lce_dist row_kind(const lce_case *c, int64_t i) {
  enum { MIXED_KINDS = 5, HARD_KINDS = LCE_DIST_COUNT - LCE_DIST_BIG };
  if (c->dist == LCE_DIST_MIXED) {
    uint64_t off = lce_rand_below(c->seed, STREAM_KIND, 0, MIXED_KINDS);
    return (lce_dist)(LCE_DIST_NORMAL + (uint64_t)(i + (int64_t)off) % MIXED_KINDS);
  }
  if (c->dist == LCE_DIST_HARD) {
    uint64_t off = lce_rand_below(c->seed, STREAM_KIND, 0, HARD_KINDS);
    return (lce_dist)(LCE_DIST_BIG + (uint64_t)(i + (int64_t)off) % HARD_KINDS);
  }
  return c->dist == LCE_DIST_POISON ? LCE_DIST_NORMAL : c->dist;
}

static void fill_hidden(const lce_case *c, const void *w, const int64_t *labels, void *hidden) {
  double scale = 3.0 / sqrt((double)c->h);
  LCE_PARALLEL_FOR
  for (int64_t i = 0; i < c->n; i++) {
    lce_dist kind = row_kind(c, i);
    int64_t target = -1;
    double amp = 0.0, noise = scale;
    if (kind == LCE_DIST_FLAT) noise = 1e-3 / sqrt((double)c->h);
    if (kind == LCE_DIST_PEAKED || kind == LCE_DIST_NEGATIVE) noise = scale / 3.0;
    int64_t label = labels[i] == c->ignore_index ? 0 : labels[i], tie_a, tie_b;
    if (kind == LCE_DIST_PEAKED) {
      target = (int64_t)lce_rand_below(c->seed, STREAM_PEAK, (uint64_t)i, (uint64_t)c->v);
      amp = 20.0;
    } else if (kind == LCE_DIST_CONFIDENT) {
      target = label;
      amp = 30.0;
      noise = 1e-3 / sqrt((double)c->h);
    } else if (kind == LCE_DIST_BIG) {
      noise = 9.0 * scale;
    } else if (kind == LCE_DIST_TIES && tie_rows(c, &tie_a, &tie_b)) {
      target = tie_a, amp = 20.0, noise = scale / 3.0;
    } else if (kind == LCE_DIST_TARGET_MAX || kind == LCE_DIST_TARGET_MIN) {
      target = label, amp = kind == LCE_DIST_TARGET_MAX ? 20.0 : -20.0, noise = scale / 3.0;
    } else if (kind == LCE_DIST_ZERO) {
      noise = 0.0;
    } else if (kind == LCE_DIST_SUBNORMAL) {
      noise = ldexp(0.25, lce_dtype_emin(c->dtype));
    }
    double tn2 = target >= 0 ? row_norm2(c, w, target) : 1.0;
    for (int64_t k = 0; k < c->h; k++) {
      double x = noise * lce_rand_normal(c->seed, STREAM_H, (uint64_t)(i * c->h + k));
      if (target >= 0 && tn2 > 0.0) x += amp * lce_load(c->dtype, w, (size_t)(target * c->h + k)) / tn2;
      if (kind == LCE_DIST_NEGATIVE && k == 0 && c->h > 1) x = -120.0;
      lce_store(c->dtype, hidden, (size_t)(i * c->h + k), x);
    }
  }
  if (c->dist == LCE_DIST_POISON) {
    lce_store(c->dtype, hidden, (size_t)(c->h / 2), NAN);
    if (c->n > 1) lce_store(c->dtype, hidden, (size_t)c->h, INFINITY);
  }
}

static void fill_prior(const lce_case *c, float *g, uint64_t stream) {
  LCE_PARALLEL_FOR
  for (int64_t e = 0; e < c->vp * c->h; e++)
    g[e] = c->prior_grad ? (float)(0.05 * lce_rand_normal(c->seed, stream, (uint64_t)e)) : 0.0f;
}

lce_code lce_tensors_alloc(const lce_case *c, lce_tensors *out, lce_status *st) {
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
  out->class_weight = c->class_weights ? malloc((size_t)c->v * sizeof(float)) : NULL;
  out->n = c->n, out->h = c->h, out->v = c->v, out->vp = c->vp;
  if (!out->hidden || !out->embedding || (!c->tied && (!out->weight || !out->grad_weight_prior)) ||
      !out->labels || !out->grad_output || !out->grad_embedding_prior || (c->class_weights && !out->class_weight)) {
    lce_tensors_free(out);
    return lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory for the case tensors");
  }
  return LCE_OK;
}

lce_code lce_case_generate(const lce_case *c, lce_tensors *out, lce_status *st) {
  LCE_TRY(lce_tensors_alloc(c, out, st));
  if (!fill_labels(c, out->labels)) { /* labels first: the hidden rows are built against them */
    lce_tensors_free(out);
    return lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory placing the ignored labels");
  }
  fill_weight(c, out->embedding, STREAM_E);
  if (!c->tied) fill_weight(c, out->weight, STREAM_W);
  fill_hidden(c, lce_output_weight(c, out), out->labels, out->hidden);
  int64_t ng = c->reduction == LCE_RED_NONE ? c->n : 1;
  for (int64_t i = 0; i < ng; i++) /* positive, not 1: a kernel that ignores grad_output fails */
    out->grad_output[i] = (float)(0.25 + 1.5 * lce_rand_uniform(c->seed, STREAM_GOUT, (uint64_t)i));
  for (int64_t v = 0; c->class_weights && v < c->v; v++)
    out->class_weight[v] = (float)(0.5 + 1.5 * lce_rand_uniform(c->seed, STREAM_CLASS_W, (uint64_t)v));
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
  free(t->class_weight);
  memset(t, 0, sizeof *t);
}
