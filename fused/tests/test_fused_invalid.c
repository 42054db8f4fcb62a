/* test_fused_invalid.c — fused-host rejects bad input before touching any output:
 * every error of lce_case_validate and lce_tensors_validate that a caller can provoke (labels out of
 * range, tensors made for another shape, vp < v, tp not dividing vp, vocab chunk 0, smoothing >= 1,
 * tf32 with bf16 inputs, non-finite or negative class weights, non-finite grad_output, ...) gives
 * LCE_EINVAL with a message naming the problem, and leaves every output buffer -- guard regions
 * included -- byte-identical. The outputs hold a previous run's results, so "untouched" is not
 * "still poisoned": a partial write of any value shows. Seed: $LCE_TEST_SEED (default 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_test_util.h"

enum { BUFFERS = 6 };

/* Buffer b of o with its guard regions: [start, start + size). */
static void buffer_span(const lce_case *c, const lce_outputs *o, int b, const unsigned char **start, size_t *size) {
  const void *base[BUFFERS] = {o->loss, o->loss_token, o->lse, o->d_hidden, o->grad_embedding, o->grad_weight};
  const size_t count[BUFFERS] = {1, (size_t)c->n, (size_t)c->n, (size_t)(c->n * c->h), (size_t)(c->vp * c->h),
                                 (size_t)(c->vp * c->h)};
  const size_t elem = b == 3 ? lce_dtype_size(c->dtype) : sizeof(float);
  *start = base[b] ? (const unsigned char *)base[b] - LCE_GUARD_ELEMS * elem : NULL;
  *size = base[b] ? (count[b] + 2 * LCE_GUARD_ELEMS) * elem : 0;
}

/* Copies of every output buffer's bytes, guards included. */
typedef struct snapshot {
  unsigned char *bytes;
  size_t size;
} snapshot;

static snapshot snapshot_take(const lce_case *c, const lce_outputs *o) {
  snapshot s = {NULL, 0};
  for (int b = 0; b < BUFFERS; b++) {
    const unsigned char *p;
    size_t len;
    buffer_span(c, o, b, &p, &len);
    s.size += len;
  }
  s.bytes = malloc(s.size);
  EXPECT(s.bytes != NULL, "out of memory");
  size_t off = 0;
  for (int b = 0; s.bytes && b < BUFFERS; b++) {
    const unsigned char *p;
    size_t len;
    buffer_span(c, o, b, &p, &len);
    if (len) memcpy(s.bytes + off, p, len);
    off += len;
  }
  return s;
}

static int snapshot_same(const snapshot *s, const lce_case *c, const lce_outputs *o) {
  snapshot now = snapshot_take(c, o);
  int same = now.bytes && s->bytes && now.size == s->size && memcmp(now.bytes, s->bytes, s->size) == 0;
  free(now.bytes);
  return same;
}

/* Runs fused-host on a bad case or bad tensors into out (allocated for the real case) and expects
 * LCE_EINVAL, a message containing `word`, and not one byte of out changed. */
static void expect_rejected(const lce_case *bad, const lce_tensors *in, lce_outputs *out, const lce_case *real,
                            const char *what, const char *word) {
  const lce_subject *s = fused_test_subject("fused-host");
  if (!s) return;
  snapshot before = snapshot_take(real, out);
  lce_status st = {0};
  lce_code rc = lce_subject_run(s, bad, in, out, &st);
  EXPECT(rc == LCE_EINVAL, "%s: got %s, want EINVAL", what, lce_code_name(rc));
  EXPECT(strstr(st.msg, word) != NULL, "%s: message \"%s\" does not name the problem (%s)", what, st.msg, word);
  EXPECT(snapshot_same(&before, real, out), "%s: a rejected run wrote an output buffer or its guards", what);
  free(before.bytes);
}

/* The case every bad input is a variation of: untied, tp 2, padding, reduction none (per-token
 * grad_output), class weights, ignored tokens. */
static lce_case good_case(void) {
  lce_case c = lce_case_default();
  c.n = 16, c.h = 32, c.v = 300, c.vp = 384, c.tp = 2, c.vocab_chunk = 8, c.reduction = LCE_RED_NONE;
  c.tied = 0, c.ignore_pct = 25, c.prior_grad = 1, c.class_weights = 1, c.seed = lce_test_seed();
  return c;
}

static void test_bad_case(const lce_case *c, const lce_tensors *in, lce_outputs *o) {
  lce_case bad = *c;
  bad.vp = c->v - 1, expect_rejected(&bad, in, o, c, "vp < v", "padded vocab");
  bad = *c, bad.tp = 5, expect_rejected(&bad, in, o, c, "tp not dividing vp", "does not divide");
  bad = *c, bad.vocab_chunk = 0, expect_rejected(&bad, in, o, c, "vocab chunk 0", "vocab chunk");
  bad = *c, bad.smoothing = LCE_SMOOTH_PYTORCH, bad.smoothing_permille = 1000;
  expect_rejected(&bad, in, o, c, "label smoothing 1", "smoothing");
  bad.smoothing = LCE_SMOOTH_MEGATRON, expect_rejected(&bad, in, o, c, "megatron smoothing 1", "smoothing");
  bad = *c, bad.gemm = LCE_GEMM_TF32, expect_rejected(&bad, in, o, c, "tf32 with bf16 inputs", "tf32");
  bad.dtype = LCE_FP16, expect_rejected(&bad, in, o, c, "tf32 with fp16 inputs", "tf32");
  bad = *c, bad.ignore_index = 3, expect_rejected(&bad, in, o, c, "ignore_index inside the vocab", "ignore_index");
  bad = *c, bad.dtype = (lce_dtype)7, expect_rejected(&bad, in, o, c, "unknown dtype", "dtype");
  bad = *c, bad.token_chunk = -1, expect_rejected(&bad, in, o, c, "negative token chunk", "token chunk");
  bad = *c, bad.softcap = -1, expect_rejected(&bad, in, o, c, "negative softcap", "softcap");
  bad = *c, bad.z_loss_e5 = -1, expect_rejected(&bad, in, o, c, "negative z-loss", "z-loss");
}

static void test_bad_tensors(const lce_case *c, lce_tensors *in, lce_outputs *o) {
  const int64_t saved = in->labels[3];
  static const int64_t bad_labels[] = {300, 301, 383, INT64_MAX, -1, -99, -101, INT64_MIN};
  for (size_t k = 0; k < sizeof bad_labels / sizeof bad_labels[0]; k++) {
    char what[64];
    snprintf(what, sizeof what, "label %lld", (long long)bad_labels[k]);
    in->labels[3] = bad_labels[k];
    expect_rejected(c, in, o, c, what, "label[3]");
  }
  in->labels[3] = saved;

  lce_tensors t = *in; /* tensors made for another shape */
  t.n = c->n + 1, expect_rejected(c, &t, o, c, "tensors with another n", "shape");
  t = *in, t.h = c->h - 1, expect_rejected(c, &t, o, c, "tensors with another h", "shape");
  t = *in, t.v = c->v + 1, expect_rejected(c, &t, o, c, "tensors with another v", "shape");
  t = *in, t.vp = c->vp - 128, expect_rejected(c, &t, o, c, "tensors with another vp", "shape");
  t = *in, t.weight = NULL, expect_rejected(c, &t, o, c, "untied case without a weight", "weight");
  t = *in, t.class_weight = NULL, expect_rejected(c, &t, o, c, "class weights missing", "class weights");

  static const float bad_weights[] = {NAN, INFINITY, -INFINITY, -0.5f};
  for (size_t k = 0; k < sizeof bad_weights / sizeof bad_weights[0]; k++) {
    char what[64];
    snprintf(what, sizeof what, "class weight %g", (double)bad_weights[k]);
    float keep = in->class_weight[c->v - 1];
    in->class_weight[c->v - 1] = bad_weights[k];
    expect_rejected(c, in, o, c, what, "class_weight[299]");
    in->class_weight[c->v - 1] = keep;
  }
  static const float bad_grads[] = {NAN, INFINITY, -INFINITY};
  for (size_t k = 0; k < sizeof bad_grads / sizeof bad_grads[0]; k++) {
    char what[64];
    snprintf(what, sizeof what, "grad_output[5] = %g", (double)bad_grads[k]);
    float keep = in->grad_output[5];
    in->grad_output[5] = bad_grads[k];
    expect_rejected(c, in, o, c, what, "grad_output[5]");
    in->grad_output[5] = keep;
  }
}

/* A scalar grad_output (sum, mean) is checked too, and an untied run needs its grad_weight buffer. */
static void test_bad_scalar_and_outputs(void) {
  lce_case c = good_case();
  c.reduction = LCE_RED_MEAN;
  fused_run r = {0};
  if (fused_run_case(fused_test_subject("fused-host"), &c, &r)) {
    float keep = r.in.grad_output[0];
    r.in.grad_output[0] = NAN;
    expect_rejected(&c, &r.in, &r.out, &c, "mean with grad_output NaN", "grad_output[0]");
    r.in.grad_output[0] = keep;
    float *gw = r.out.grad_weight;
    r.out.grad_weight = NULL;
    lce_status st = {0};
    const lce_subject *s = fused_test_subject("fused-host");
    EXPECT(s && lce_subject_run(s, &c, &r.in, &r.out, &st) == LCE_EINVAL, "untied case without a grad_weight output accepted");
    EXPECT(strstr(st.msg, "grad_weight") != NULL, "missing grad_weight: message \"%s\"", st.msg);
    r.out.grad_weight = gw;
  }
  fused_run_free(&r);
}

int main(void) {
  lce_case c = good_case();
  fused_run r = {0};
  if (fused_run_case(fused_test_subject("fused-host"), &c, &r)) {
    /* r.out already holds one run's results: a rejected second run must leave them as they are. */
    test_bad_case(&r.c, &r.in, &r.out);
    test_bad_tensors(&r.c, &r.in, &r.out);
  }
  fused_run_free(&r);
  test_bad_scalar_and_outputs();
  return lce_test_finish("test_fused_invalid");
}
