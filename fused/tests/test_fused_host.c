/* test_fused_host.c — the fused-host subject against the math of lce_case.h:
 *   1. accuracy: against the double-precision unfused computation, over dtypes, tied/untied, tp,
 *      reductions and value distributions, within a few units of the dtype's roundoff;
 *   2. chunking and tp change results only at fp32-rounding level (fp32 inputs);
 *   3. one chunk and tp 1 equals a direct fp32 program bit for bit (in fp32, and in bf16/fp16 with
 *      the d_logits and d_hidden roundings written out);
 *   4. gradient routing: untied leaves grad_embedding bit-identical, tied adds to the prior,
 *      padded rows are never written;
 *   5. all-ignored batches: loss 0 and zero gradients, not NaN.
 * The options (smoothing, z-loss, softcap, class weights, tf32, token chunks) and non-finite inputs
 * are tested in test_fused_options.c, invalid input in test_fused_invalid.c.
 * Seed: $LCE_TEST_SEED (default 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_test_accuracy.h"
#include "lce_gemm_model.h"

static const double U32 = 0x1p-24; /* unit roundoff of fp32 */

static lce_case base_case(lce_dtype dtype, int tied, int tp, lce_reduction red) {
  lce_case c = lce_case_default();
  c.dtype = dtype, c.tied = tied, c.tp = tp, c.reduction = red;
  c.n = 16, c.h = 32, c.v = 300, c.vp = 384, c.vocab_chunk = 8;
  c.ignore_pct = 25, c.prior_grad = 1, c.seed = lce_test_seed();
  return c;
}

/* ---- 1. accuracy against the unfused double computation ------------------------------------ */

static void test_accuracy(void) {
  printf("accuracy against the unfused double computation:\n");
  for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++)
    for (int tied = 0; tied <= 1; tied++)
      for (int tp = 1; tp <= 2; tp++)
        for (int red = LCE_RED_NONE; red <= LCE_RED_MEAN; red++) {
          lce_case c = base_case((lce_dtype)dt, tied, tp, (lce_reduction)red);
          c.prior_grad = 0; /* prior + increment rounds at the prior's scale: tested exactly below */
          check_accuracy("fused-host", &c);
        }
  for (int dist = 1; dist < LCE_DIST_COUNT; dist++) { /* each finite row kind alone, in bf16 */
    if (dist == LCE_DIST_POISON) continue;             /* non-finite: test_fused_options.c */
    lce_case c = base_case(LCE_BF16, 0, 2, LCE_RED_MEAN);
    c.dist = (lce_dist)dist, c.prior_grad = 0;
    check_accuracy("fused-host", &c);
  }
}

/* ---- 2. chunking and tp change results only at fp32-rounding level ------------------------ */

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
    lce_test_set_case(&cv);
    lce_outputs o = {0};
    if (fused_run_on(s, &cv, &base.in, &o)) {
      double d_tok = float_rel_diff(base.out.loss_token, o.loss_token, c.n);
      double d_lse = float_rel_diff(base.out.lse, o.lse, c.n);
      double d_dh = float_rel_diff(base.out.d_hidden, o.d_hidden, nh);
      double d_dw = float_rel_diff(base.out.grad_weight, o.grad_weight, vh);
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
  lce_test_set_case(&base.c);
  fused_run_free(&base);
}

/* ---- 3. one chunk, tp 1: bit-exact against a direct single-precision program ------------- */

/* The fused algorithm with a single chunk and a single shard, written as a plain fp32 program:
 * the online softmax degenerates to max-then-sum and every merge step is exact. For bf16 and fp16
 * the only dtype steps are the exact loads, d_logits rounded to the dtype, the scaled hidden rows
 * of reduction none and the final d_hidden store, so the same program pins those roundings down
 * too. The loss gradient g enters as lce_fused_plan.h splits it: under mean and sum the d_logits
 * are unscaled and g is both GEMMs' alpha in fp32 (rho = g here); under none the power of two of
 * g_i goes into d_logits and its remainder rho_i in [1, 2) scales the token's d_hidden row and
 * its hidden row (rounded to the dtype) in the weight gradient, unless that row would leave the
 * normal range (then g_i goes into d_logits whole). */
static void direct_single_chunk(const lce_case *c, const lce_tensors *in, float *loss, float *loss_token,
                                float *lse, void *d_hidden, float *grad_w, float *z, float *x, float *w, float *rho) {
  const int64_t n = c->n, h = c->h, v = c->v;
  for (int64_t e = 0; e < n * h; e++) x[e] = (float)lce_load(c->dtype, in->hidden, (size_t)e);
  for (int64_t e = 0; e < v * h; e++) w[e] = (float)lce_load(c->dtype, lce_output_weight(c, in), (size_t)e);
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
  float alpha = 1.0f;
  for (int64_t i = 0; i < n; i++) { /* z becomes d_logits, in the dtype */
    int64_t y = in->labels[i];
    float g = c->reduction == LCE_RED_NONE ? in->grad_output[i]
              : c->reduction == LCE_RED_SUM ? in->grad_output[0]
                                            : in->grad_output[0] / (float)n_valid;
    float dl = 1.0f;
    rho[i] = g;
    if (c->reduction == LCE_RED_NONE) {
      int e, normal = 1;
      rho[i] = 2.0f * frexpf(g, &e), dl = ldexpf(1.0f, e - 1);
      for (int64_t k = 0; k < h; k++) { /* a scaled value outside the normal range: g stays whole */
        double sx = fabs((double)rho[i] * x[i * h + k]);
        normal &= sx == 0.0 || (sx >= ldexp(1.0, lce_dtype_emin(c->dtype)) && sx <= lce_dtype_max(c->dtype));
      }
      if (!normal) rho[i] = 1.0f, dl = g;
      for (int64_t k = 0; k < h; k++) x[i * h + k] = (float)lce_round_to(c->dtype, rho[i] * x[i * h + k]);
    } else if (y != c->ignore_index) {
      alpha = g;
    }
    for (int64_t j = 0; j < v; j++) {
      float dz = dl * (expf(z[i * v + j] - lse[i]) - (j == y ? 1.0f : 0.0f));
      z[i * v + j] = y == c->ignore_index ? 0.0f : (float)lce_round_to(c->dtype, dz);
    }
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < h; k++) {
      float acc = 0.0f;
      for (int64_t j = 0; j < v; j++) acc = fmaf(z[i * v + j], w[j * h + k], acc);
      lce_store(c->dtype, d_hidden, (size_t)(i * h + k), in->labels[i] != c->ignore_index ? rho[i] * acc : 0.0f);
    }
  for (int64_t j = 0; j < v; j++) /* x holds the scaled rows under none: the weight gradient's operand */
    for (int64_t k = 0; k < h; k++) {
      float acc = 0.0f;
      for (int64_t i = 0; i < n; i++) acc = fmaf(z[i * v + j], x[i * h + k], acc);
      grad_w[j * h + k] = lce_gemm_epilogue(alpha, acc, grad_w[j * h + k]); /* cuBLAS's beta = 1 epilogue */
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
  float loss, *tok = calloc((size_t)n, 4), *lse = calloc((size_t)n, 4), *rho = calloc((size_t)n, 4), *gw = malloc((size_t)vh * 4);
  float *z = calloc((size_t)(n * c->v), 4), *x = calloc((size_t)nh, 4), *w = calloc((size_t)vh, 4);
  void *dh = calloc(dh_bytes, 1);
  const float *prior = lce_output_weight_prior(c, &r.in);
  const float *got_gw = lce_output_weight_grad(c, &r.out);
  if (tok && lse && rho && dh && gw && z && x && w) {
    memcpy(gw, prior, (size_t)vh * 4);
    direct_single_chunk(c, &r.in, &loss, tok, lse, dh, gw, z, x, w, rho);
    EXPECT(memcmp(&loss, r.out.loss, 4) == 0, "loss %a != direct %a", (double)r.out.loss[0], (double)loss);
    EXPECT(memcmp(tok, r.out.loss_token, (size_t)n * 4) == 0, "loss_token differs from the direct program");
    EXPECT(memcmp(lse, r.out.lse, (size_t)n * 4) == 0, "lse differs from the direct program");
    EXPECT(memcmp(dh, r.out.d_hidden, dh_bytes) == 0, "d_hidden differs from the direct program");
    EXPECT(memcmp(gw, got_gw, (size_t)vh * 4) == 0, "d_weight differs from the direct program");
  } else {
    EXPECT(0, "out of memory");
  }
  free(tok), free(lse), free(rho), free(dh), free(gw), free(z), free(x), free(w);
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

/* ---- 4. gradient routing ------------------------------------------------------------------ */

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
   * exactly what the first run left. grad_output = 1 makes the GEMM epilogue that one add (alpha = 1,
   * not an fmaf with alpha = g). */
  for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++) {
    lce_case c = base_case((lce_dtype)dt, 1, 2, LCE_RED_SUM);
    fused_run r = {0};
    lce_tensors zero_prior = {0};
    lce_outputs fresh = {0}, with_prior = {0};
    const int64_t vh = c.vp * c.h;
    float *zeros = calloc((size_t)vh, sizeof(float));
    int ok = 0;
    if (s && zeros && fused_run_case(s, &c, &r)) {
      r.in.grad_output[0] = 1.0f;
      zero_prior = r.in, zero_prior.grad_embedding_prior = zeros;
      ok = fused_run_on(s, &r.c, &r.in, &with_prior) && fused_run_on(s, &r.c, &zero_prior, &fresh);
    }
    if (ok) {
      int64_t mismatched = 0, nonzero_prior = 0;
      for (int64_t e = 0; e < vh; e++) {
        float expect = r.in.grad_embedding_prior[e] + fresh.grad_embedding[e];
        mismatched += memcmp(&expect, &with_prior.grad_embedding[e], sizeof(float)) != 0;
        nonzero_prior += r.in.grad_embedding_prior[e] != 0.0f;
      }
      EXPECT(nonzero_prior > vh / 2, "the prior gradient is mostly zero: the test would be vacuous");
      EXPECT(mismatched == 0, "tied: %lld elements are not prior + increment", (long long)mismatched);
      EXPECT(count_changed(with_prior.grad_embedding, r.in.grad_embedding_prior, c.v * c.h) > c.v * c.h / 2,
             "tied run left most of grad_embedding unchanged");
    }
    lce_outputs_free(&fresh), lce_outputs_free(&with_prior);
    free(zeros);
    fused_run_free(&r);
  }
}

/* ---- 5. all tokens ignored ---------------------------------------------------------------- */

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
        const float *gw = lce_output_weight_grad(&c, &r.out);
        const float *prior = lce_output_weight_prior(&c, &r.in);
        EXPECT(count_changed(gw, prior, c.vp * c.h) == 0, "all ignored: the weight gradient changed");
      }
      fused_run_free(&r);
    }
}

int main(void) {
  test_accuracy();
  test_chunking_invariance();
  test_bit_exact();
  test_gradient_routing();
  test_all_ignored();
  return lce_test_finish("test_fused_host");
}
