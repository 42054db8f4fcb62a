/* test_fused_host.c — the fused-host subject against the math of lce_case.h:
 *   1. accuracy: against the double-precision unfused computation, over dtypes, tied/untied, tp,
 *      reductions and value distributions, within a few units of the dtype's roundoff;
 *   2. chunking and tp change results only at fp32-rounding level (fp32 inputs);
 *   3. one chunk and tp 1 equals a direct fp32 program bit for bit (in fp32, and in bf16/fp16 with
 *      the d_logits and d_hidden roundings written out);
 *   4. bad cases and labels give LCE_EINVAL with every output buffer untouched;
 *   5. gradient routing: untied leaves grad_embedding bit-identical, tied adds to the prior,
 *      padded rows are never written;
 *   6. all-ignored batches: loss 0 and zero gradients, not NaN.
 * Seed: $LCE_TEST_SEED (default 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_test_util.h"

static const double U32 = 0x1p-24; /* unit roundoff of fp32 */

static lce_case base_case(lce_dtype dtype, int tied, int tp, lce_reduction red) {
  lce_case c = lce_case_default();
  c.dtype = dtype, c.tied = tied, c.tp = tp, c.reduction = red;
  c.n = 16, c.h = 32, c.v = 300, c.vp = 384, c.vocab_chunk = 8;
  c.ignore_pct = 25, c.prior_grad = 1, c.seed = fused_test_seed();
  return c;
}

/* Rows >= v of the output weight's gradient are padding: they must hold their prior bit for bit. */
static void check_padding_untouched(const fused_run *r) {
  const lce_case *c = &r->c;
  const float *buf = c->tied ? r->out.grad_embedding : r->out.grad_weight;
  const float *prior = c->tied ? r->in.grad_embedding_prior : r->in.grad_weight_prior;
  size_t off = (size_t)(c->v * c->h), count = (size_t)((c->vp - c->v) * c->h);
  EXPECT(memcmp(buf + off, prior + off, count * sizeof(float)) == 0, "padded gradient rows were written");
}

/* ---- 1. accuracy against the unfused double computation ------------------------------------ */

/* Forward outputs are fp32 computations from exact inputs: each logit is off by at most ~h·u32 of
 * sum_k |h_k w_k|, and lse, loss_token = lse - z_y and the loss inherit that absolute error. A
 * confident token's loss is a cancellation (lse and z_y both ~30, the loss ~1e-6), so forward
 * errors are measured against the logit scale: max(||loss||, ||lse||) over the same tokens. */
static double forward_bound(const lce_case *c) { return 8.0 * U32 * sqrt((double)c->h); }

/* Gradients carry the rounding of d_logits and of d_hidden to the dtype (u each), plus the fp32
 * logit error carried through exp, which the reference's condition scale measures (it is what
 * makes p_y - 1 of a confident row inexact in any fp32 algorithm), times sqrt(h) for the
 * random-walk growth of an h-term fp32 dot product. Relative to ||ref||. */
static double gradient_bound(const lce_case *c, const double *ref, const double *cond, int64_t count) {
  return 3.0 * lce_dtype_unit_roundoff(c->dtype) + sqrt((double)c->h) * U32 * norm2(cond, count) / norm2(ref, count);
}

/* ||x - ref|| / max(||ref||, ||scale||) over count elements. */
static double scaled_err(const double *x, const double *ref, const double *scale, int64_t count) {
  double num = 0.0, den = 0.0, den_scale = 0.0;
  for (int64_t i = 0; i < count; i++) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
    den_scale += scale[i] * scale[i];
  }
  if (den_scale > den) den = den_scale;
  EXPECT(den > 0.0, "all-zero forward outputs: the comparison would be vacuous");
  return sqrt(num / den);
}

/* The reduced loss's scale: the same reduction applied to |lse| of the valid tokens. */
static double loss_scale(const lce_case *c, const lce_tensors *in, const unfused_ref *ref) {
  double s = 0.0;
  for (int64_t i = 0; i < c->n; i++) s += in->labels[i] != c->ignore_index ? fabs(ref->lse[i]) : 0.0;
  int64_t n_valid = lce_count_valid(c, in);
  return c->reduction == LCE_RED_MEAN && n_valid ? s / (double)n_valid : s;
}

static void check_accuracy(const lce_case *c) {
  const lce_subject *s = fused_test_subject("fused-host");
  fused_run r = {0};
  unfused_ref ref;
  if (!s || !fused_run_case(s, c, &r)) {
    fused_run_free(&r);
    return;
  }
  if (!unfused_reference(&r.c, &r.in, &ref)) {
    EXPECT(0, "out of memory in the unfused reference");
    fused_run_free(&r);
    return;
  }
  const int64_t n = c->n;
  double *loss_token = floats_to_doubles(r.out.loss_token, n);
  double *lse = floats_to_doubles(r.out.lse, n);
  double *dh = outputs_d_hidden(c, &r.out);
  double *dw = outputs_d_weight_increment(c, &r.in, &r.out);
  if (loss_token && lse && dh && dw) {
    double e_loss = fabs(r.out.loss[0] - ref.loss) / fmax(fabs(ref.loss), loss_scale(c, &r.in, &ref));
    double e_tok = scaled_err(loss_token, ref.loss_token, ref.lse, n);
    double e_lse = normwise_rel_err(lse, ref.lse, n, "lse");
    double e_dh = normwise_rel_err(dh, ref.d_hidden, n * c->h, "d_hidden");
    double e_dw = normwise_rel_err(dw, ref.d_weight, c->vp * c->h, "d_weight");
    char id[192];
    printf("  %-62s loss %.1e tok %.1e lse %.1e dh %.1e dw %.1e\n", lce_case_format(c, id, sizeof id), e_loss,
           e_tok, e_lse, e_dh, e_dw);
    double fb = forward_bound(c);
    double gb_dh = gradient_bound(c, ref.d_hidden, ref.d_hidden_cond, n * c->h);
    double gb_dw = gradient_bound(c, ref.d_weight, ref.d_weight_cond, c->vp * c->h);
    printf("  %62s bound dh %.1e (%3.0f%%) dw %.1e (%3.0f%%)\n", "", gb_dh, 100 * e_dh / gb_dh, gb_dw,
           100 * e_dw / gb_dw);
    EXPECT(e_loss <= fb, "loss relative error %.3e > %.3e", e_loss, fb);
    EXPECT(e_tok <= fb, "loss_token normwise error %.3e > %.3e", e_tok, fb);
    EXPECT(e_lse <= fb, "lse normwise error %.3e > %.3e", e_lse, fb);
    EXPECT(e_dh <= gb_dh, "d_hidden normwise error %.3e > %.3e", e_dh, gb_dh);
    EXPECT(e_dw <= gb_dw, "d_weight normwise error %.3e > %.3e", e_dw, gb_dw);
    check_padding_untouched(&r);
  }
  free(loss_token), free(lse), free(dh), free(dw);
  unfused_ref_free(&ref);
  fused_run_free(&r);
}

static void test_accuracy(void) {
  printf("accuracy against the unfused double computation:\n");
  for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++)
    for (int tied = 0; tied <= 1; tied++)
      for (int tp = 1; tp <= 2; tp++)
        for (int red = LCE_RED_NONE; red <= LCE_RED_MEAN; red++) {
          lce_case c = base_case((lce_dtype)dt, tied, tp, (lce_reduction)red);
          c.prior_grad = 0; /* prior + increment rounds at the prior's scale: tested exactly below */
          check_accuracy(&c);
        }
  for (int dist = 1; dist < LCE_DIST_COUNT; dist++) { /* each row kind alone, in bf16 */
    lce_case c = base_case(LCE_BF16, 0, 2, LCE_RED_MEAN);
    c.dist = (lce_dist)dist, c.prior_grad = 0;
    check_accuracy(&c);
  }
}

/* ---- 2. chunking and tp change results only at fp32-rounding level ------------------------ */

/* Normwise difference between two fp32 arrays, relative to the first. */
static double float_diff(const float *a, const float *b, int64_t count) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < count; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)a[i] * a[i];
  }
  EXPECT(den > 0.0, "all-zero output: the comparison would be vacuous");
  return sqrt(num / den);
}

static void test_chunking_invariance(void) {
  printf("chunking and tp (fp32 inputs), normwise difference from 1 chunk, tp 1:\n");
  const lce_subject *s = fused_test_subject("fused-host");
  lce_case c = base_case(LCE_FP32, 0, 1, LCE_RED_SUM);
  c.vocab_chunk = c.v;
  fused_run base = {0};
  if (!s || !fused_run_case(s, &c, &base)) {
    fused_run_free(&base);
    return;
  }
  static const struct { int tp; int64_t vc; } variants[] = {{1, 1}, {1, 7}, {1, 64}, {2, 7}, {2, 300}, {4, 1}, {4, 33}};
  const int64_t nh = c.n * c.h, vh = c.vp * c.h;
  for (size_t k = 0; k < sizeof variants / sizeof variants[0]; k++) {
    lce_case cv = c; /* the same tensors, cut into other shards and chunks */
    cv.tp = variants[k].tp, cv.vocab_chunk = variants[k].vc;
    fused_test_set_case(&cv);
    lce_outputs o = {0};
    if (fused_run_on(s, &cv, &base.in, &o)) {
      double d_tok = float_diff(base.out.loss_token, o.loss_token, c.n);
      double d_lse = float_diff(base.out.lse, o.lse, c.n);
      double d_dh = float_diff(base.out.d_hidden, o.d_hidden, nh);
      double d_dw = float_diff(base.out.grad_weight, o.grad_weight, vh);
      printf("  tp %d vc %3lld: loss_token %.1e lse %.1e d_hidden %.1e d_weight %.1e\n", cv.tp,
             (long long)cv.vocab_chunk, d_tok, d_lse, d_dh, d_dw);
      /* Reordering sums moves each by a few u32 of its terms' magnitude; exp and the d_logits
       * subtraction pass a logit change on at most in proportion to the logit. */
      double bound = 4.0 * U32 * (double)(c.h + 8);
      EXPECT(d_tok <= bound && d_lse <= bound && d_dh <= bound && d_dw <= bound,
             "tp %d vc %lld: difference beyond fp32 rounding (bound %.1e)", cv.tp, (long long)cv.vocab_chunk, bound);
      EXPECT(memcmp(o.grad_embedding, base.in.grad_embedding_prior, (size_t)vh * sizeof(float)) == 0,
             "untied run wrote grad_embedding");
    }
    lce_outputs_free(&o);
  }
  fused_test_set_case(&base.c);
  fused_run_free(&base);
}

/* ---- 3. one chunk, tp 1: bit-exact against a direct single-precision program ------------- */

/* The fused algorithm with a single chunk and a single shard, written as a plain fp32 program:
 * the online softmax degenerates to max-then-sum and every merge step is exact. For bf16 and fp16
 * the only dtype steps are the exact loads, d_logits rounded to the dtype and the final d_hidden
 * store, so the same program pins those roundings down too. */
static void direct_single_chunk(const lce_case *c, const lce_tensors *in, float *loss, float *loss_token,
                                float *lse, void *d_hidden, float *grad_w, float *z, float *x, float *w) {
  const int64_t n = c->n, h = c->h, v = c->v;
  for (int64_t e = 0; e < n * h; e++) x[e] = (float)lce_load(c->dtype, in->hidden, (size_t)e);
  for (int64_t e = 0; e < v * h; e++) w[e] = (float)lce_load(c->dtype, c->tied ? in->embedding : in->weight, (size_t)e);
  int64_t n_valid = lce_count_valid(c, in);
  float total = 0.0f;
  for (int64_t i = 0; i < n; i++) {
    float m = -INFINITY, s = 0.0f;
    for (int64_t j = 0; j < v; j++) {
      float acc = 0.0f;
      for (int64_t k = 0; k < h; k++) acc = fmaf(x[i * h + k], w[j * h + k], acc);
      z[i * v + j] = acc;
      m = fmaxf(m, acc);
    }
    for (int64_t j = 0; j < v; j++) s += expf(z[i * v + j] - m);
    lse[i] = m + logf(s);
    int64_t y = in->labels[i];
    loss_token[i] = y != c->ignore_index ? lse[i] - z[i * v + y] : 0.0f;
    total += loss_token[i];
  }
  *loss = c->reduction == LCE_RED_MEAN ? (n_valid ? total / (float)n_valid : 0.0f) : total;
  for (int64_t i = 0; i < n; i++) { /* z becomes d_logits, in the dtype */
    int64_t y = in->labels[i];
    float g = c->reduction == LCE_RED_NONE ? in->grad_output[i]
              : c->reduction == LCE_RED_SUM ? in->grad_output[0]
                                            : in->grad_output[0] / (float)n_valid;
    for (int64_t j = 0; j < v; j++) {
      float dz = g * (expf(z[i * v + j] - lse[i]) - (j == y ? 1.0f : 0.0f));
      z[i * v + j] = y == c->ignore_index ? 0.0f : (float)lce_round_to(c->dtype, dz);
    }
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < h; k++) {
      float acc = 0.0f;
      for (int64_t j = 0; j < v; j++) acc = fmaf(z[i * v + j], w[j * h + k], acc);
      lce_store(c->dtype, d_hidden, (size_t)(i * h + k), acc);
    }
  for (int64_t j = 0; j < v; j++)
    for (int64_t k = 0; k < h; k++) {
      float acc = 0.0f;
      for (int64_t i = 0; i < n; i++) acc = fmaf(z[i * v + j], x[i * h + k], acc);
      grad_w[j * h + k] += acc;
    }
}

static void check_bit_exact(const lce_case *c) {
  const lce_subject *s = fused_test_subject("fused-host");
  fused_run r = {0};
  if (!s || !fused_run_case(s, c, &r)) {
    fused_run_free(&r);
    return;
  }
  const int64_t n = c->n, nh = c->n * c->h, vh = c->vp * c->h;
  const size_t dh_bytes = (size_t)nh * lce_dtype_size(c->dtype);
  float loss, *tok = calloc((size_t)n, 4), *lse = calloc((size_t)n, 4), *gw = malloc((size_t)vh * 4);
  float *z = calloc((size_t)(n * c->v), 4), *x = calloc((size_t)nh, 4), *w = calloc((size_t)vh, 4);
  void *dh = calloc(dh_bytes, 1);
  const float *prior = c->tied ? r.in.grad_embedding_prior : r.in.grad_weight_prior;
  const float *got_gw = c->tied ? r.out.grad_embedding : r.out.grad_weight;
  if (tok && lse && dh && gw && z && x && w) {
    memcpy(gw, prior, (size_t)vh * 4);
    direct_single_chunk(c, &r.in, &loss, tok, lse, dh, gw, z, x, w);
    EXPECT(memcmp(&loss, r.out.loss, 4) == 0, "loss %a != direct %a", (double)r.out.loss[0], (double)loss);
    EXPECT(memcmp(tok, r.out.loss_token, (size_t)n * 4) == 0, "loss_token differs from the direct program");
    EXPECT(memcmp(lse, r.out.lse, (size_t)n * 4) == 0, "lse differs from the direct program");
    EXPECT(memcmp(dh, r.out.d_hidden, dh_bytes) == 0, "d_hidden differs from the direct program");
    EXPECT(memcmp(gw, got_gw, (size_t)vh * 4) == 0, "d_weight differs from the direct program");
  } else {
    EXPECT(0, "out of memory");
  }
  free(tok), free(lse), free(dh), free(gw), free(z), free(x), free(w);
  fused_run_free(&r);
}

static void test_bit_exact(void) {
  for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++)
    for (int tied = 0; tied <= 1; tied++)
      for (int red = LCE_RED_NONE; red <= LCE_RED_MEAN; red++) {
        lce_case c = base_case((lce_dtype)dt, tied, 1, (lce_reduction)red);
        c.vocab_chunk = tied ? c.v : c.vp; /* one chunk, whether or not it reaches into the padding */
        check_bit_exact(&c);
      }
}

/* ---- 4. invalid input: LCE_EINVAL, outputs untouched -------------------------------------- */

/* Copies of every output buffer's bytes, to prove a rejected run wrote nothing. */
typedef struct snapshot {
  unsigned char *bytes;
  size_t size;
} snapshot;

static void snapshot_parts(const lce_case *c, const lce_outputs *o, const void *part[6], size_t len[6]) {
  part[0] = o->loss, len[0] = 4;
  part[1] = o->loss_token, len[1] = (size_t)c->n * 4;
  part[2] = o->lse, len[2] = (size_t)c->n * 4;
  part[3] = o->d_hidden, len[3] = (size_t)(c->n * c->h) * lce_dtype_size(c->dtype);
  part[4] = o->grad_embedding, len[4] = (size_t)(c->vp * c->h) * 4;
  part[5] = o->grad_weight, len[5] = o->grad_weight ? (size_t)(c->vp * c->h) * 4 : 0;
}

static snapshot snapshot_take(const lce_case *c, const lce_outputs *o) {
  const void *part[6];
  size_t len[6];
  snapshot_parts(c, o, part, len);
  snapshot s = {NULL, 0};
  for (int b = 0; b < 6; b++) s.size += len[b];
  s.bytes = malloc(s.size);
  EXPECT(s.bytes != NULL, "out of memory");
  for (int b = 0, off = 0; s.bytes && b < 6; off += (int)len[b], b++) memcpy(s.bytes + off, part[b], len[b]);
  return s;
}

static int snapshot_same(const snapshot *s, const lce_case *c, const lce_outputs *o) {
  snapshot now = snapshot_take(c, o);
  int same = now.bytes && s->bytes && now.size == s->size && memcmp(now.bytes, s->bytes, s->size) == 0;
  free(now.bytes);
  return same;
}

static void expect_rejected(const lce_case *bad, const lce_tensors *in, lce_outputs *out, const lce_case *real,
                            const char *what) {
  const lce_subject *s = fused_test_subject("fused-host");
  if (!s) return;
  snapshot before = snapshot_take(real, out);
  lce_status st = {0};
  lce_code rc = s->run(bad, in, out, &st);
  EXPECT(rc == LCE_EINVAL, "%s: got %s, want EINVAL", what, lce_code_name(rc));
  EXPECT(st.msg[0] != '\0', "%s: no message", what);
  EXPECT(snapshot_same(&before, real, out), "%s: a rejected run wrote an output buffer", what);
  free(before.bytes);
}

static void test_invalid_input(void) {
  lce_case c = base_case(LCE_BF16, 0, 2, LCE_RED_NONE);
  fused_run r = {0};
  if (!fused_run_case(fused_test_subject("fused-host"), &c, &r)) {
    fused_run_free(&r);
    return;
  }
  lce_outputs *o = &r.out; /* already written once: a second, rejected run must leave it as it is */
  lce_case bad = c;
  bad.tp = 5, expect_rejected(&bad, &r.in, o, &c, "tp not dividing vp");
  bad = c, bad.vocab_chunk = 0, expect_rejected(&bad, &r.in, o, &c, "vocab chunk 0");
  bad = c, bad.vp = c.v - 1, expect_rejected(&bad, &r.in, o, &c, "vp < v");
  bad = c, bad.ignore_index = 3, expect_rejected(&bad, &r.in, o, &c, "ignore_index inside the vocab");
  bad = c, bad.dtype = (lce_dtype)7, expect_rejected(&bad, &r.in, o, &c, "unknown dtype");
  int64_t saved = r.in.labels[3];
  static const int64_t bad_labels[] = {300, 301, -1, -101, INT64_MAX};
  for (size_t k = 0; k < sizeof bad_labels / sizeof bad_labels[0]; k++) {
    char what[64];
    snprintf(what, sizeof what, "label %lld", (long long)bad_labels[k]);
    r.in.labels[3] = bad_labels[k];
    expect_rejected(&c, &r.in, o, &c, what);
  }
  r.in.labels[3] = saved;
  void *w = r.in.weight;
  r.in.weight = NULL, expect_rejected(&c, &r.in, o, &c, "untied case without a weight");
  r.in.weight = w;
  float *gw = o->grad_weight;
  o->grad_weight = NULL;
  lce_status st = {0};
  const lce_subject *s = fused_test_subject("fused-host");
  EXPECT(s && s->run(&c, &r.in, o, &st) == LCE_EINVAL, "untied case without a grad_weight output accepted");
  o->grad_weight = gw;
  fused_run_free(&r);
}

/* ---- 5. gradient routing ------------------------------------------------------------------ */

static int64_t count_changed(const float *a, const float *b, int64_t count) {
  int64_t k = 0;
  for (int64_t i = 0; i < count; i++) k += memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return k;
}

static void test_gradient_routing(void) {
  const lce_subject *s = fused_test_subject("fused-host");
  for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++) {
    lce_case c = base_case((lce_dtype)dt, 0, 2, LCE_RED_MEAN);
    fused_run r = {0};
    if (s && fused_run_case(s, &c, &r)) {
      const int64_t vh = c.vp * c.h, real = c.v * c.h;
      EXPECT(count_changed(r.out.grad_embedding, r.in.grad_embedding_prior, vh) == 0,
             "untied run changed grad_embedding");
      EXPECT(count_changed(r.out.grad_weight, r.in.grad_weight_prior, real) > real / 2,
             "untied run left most of grad_weight unchanged");
    }
    fused_run_free(&r);
  }
  /* Tied: the embedding's gradient buffer holds the lookup's gradient; the run adds to it. Running
   * again into a zeroed buffer gives the increment, and prior + increment (one fp32 add) must be
   * exactly what the first run left. */
  for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++) {
    lce_case c = base_case((lce_dtype)dt, 1, 2, LCE_RED_SUM);
    fused_run r = {0};
    lce_tensors zero_prior = {0};
    lce_outputs fresh = {0};
    const int64_t vh = c.vp * c.h;
    float *zeros = calloc((size_t)vh, sizeof(float));
    int ok = 0;
    if (s && zeros && fused_run_case(s, &c, &r)) {
      zero_prior = r.in, zero_prior.grad_embedding_prior = zeros;
      ok = fused_run_on(s, &r.c, &zero_prior, &fresh);
    }
    if (ok) {
      int64_t mismatched = 0, nonzero_prior = 0;
      for (int64_t e = 0; e < vh; e++) {
        float expect = r.in.grad_embedding_prior[e] + fresh.grad_embedding[e];
        mismatched += memcmp(&expect, &r.out.grad_embedding[e], sizeof(float)) != 0;
        nonzero_prior += r.in.grad_embedding_prior[e] != 0.0f;
      }
      EXPECT(nonzero_prior > vh / 2, "the prior gradient is mostly zero: the test would be vacuous");
      EXPECT(mismatched == 0, "tied: %lld elements are not prior + increment", (long long)mismatched);
      EXPECT(count_changed(r.out.grad_embedding, r.in.grad_embedding_prior, c.v * c.h) > c.v * c.h / 2,
             "tied run left most of grad_embedding unchanged");
    }
    lce_outputs_free(&fresh);
    free(zeros);
    fused_run_free(&r);
  }
}

/* ---- 6. all tokens ignored ---------------------------------------------------------------- */

static void test_all_ignored(void) {
  const lce_subject *s = fused_test_subject("fused-host");
  for (int red = LCE_RED_NONE; red <= LCE_RED_MEAN; red++)
    for (int tied = 0; tied <= 1; tied++) {
      lce_case c = base_case(LCE_BF16, tied, 2, (lce_reduction)red);
      c.ignore_pct = 100;
      fused_run r = {0};
      if (s && fused_run_case(s, &c, &r)) {
        EXPECT(r.out.loss[0] == 0.0f, "all ignored: loss %g, want 0", (double)r.out.loss[0]);
        int64_t bad_tok = 0, bad_dh = 0, bad_lse = 0;
        for (int64_t i = 0; i < c.n; i++) bad_tok += r.out.loss_token[i] != 0.0f, bad_lse += !isfinite(r.out.lse[i]);
        for (int64_t e = 0; e < c.n * c.h; e++) bad_dh += lce_load(c.dtype, r.out.d_hidden, (size_t)e) != 0.0;
        EXPECT(bad_tok == 0, "all ignored: %lld non-zero loss_token", (long long)bad_tok);
        EXPECT(bad_lse == 0, "all ignored: %lld lse values not computed", (long long)bad_lse);
        EXPECT(bad_dh == 0, "all ignored: %lld non-zero d_hidden elements", (long long)bad_dh);
        const float *gw = c.tied ? r.out.grad_embedding : r.out.grad_weight;
        const float *prior = c.tied ? r.in.grad_embedding_prior : r.in.grad_weight_prior;
        EXPECT(count_changed(gw, prior, c.vp * c.h) == 0, "all ignored: the weight gradient changed");
      }
      fused_run_free(&r);
    }
}

int main(void) {
  test_accuracy();
  test_chunking_invariance();
  test_bit_exact();
  test_invalid_input();
  test_gradient_routing();
  test_all_ignored();
  return fused_test_finish("test_fused_host");
}
