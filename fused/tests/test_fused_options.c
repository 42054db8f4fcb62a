/* test_fused_options.c — fused-host with every option of lce_case.h:
 *   1. accuracy against the unfused double computation for label smoothing (pytorch, megatron),
 *      z-loss, softcap, class weights, tf32 GEMMs and token chunks, alone and combined, over dtypes,
 *      reductions, tied/untied and tp;
 *   2. the loss does not depend on tp (beyond fp32 rounding) under every smoothing mode, while the
 *      smoothing term itself is far above that rounding (the check is not vacuous);
 *   3. token chunks change nothing per token (loss, lse, d_hidden bit-identical) and d_weight only at
 *      fp32-rounding level;
 *   4. non-finite inputs: a NaN or Inf hidden value of a valid token makes its lse, loss and d_hidden
 *      row NaN and every real d_weight element NaN; the same values in ignored tokens leave their
 *      loss and d_hidden exactly 0 and d_weight finite;
 *   5. an all-ignored batch under class weights, smoothing and z-loss: mean loss 0, zero gradients.
 * Seed: $LCE_TEST_SEED (default 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_test_accuracy.h"

static const double U32 = 0x1p-24;

/* One option set: fields of lce_case that are not at their default. */
typedef struct option_set {
  const char *name;
  lce_smoothing smoothing;
  int32_t permille, z_loss_e5, softcap, class_weights, tf32;
  int64_t token_chunk;
} option_set;

static const option_set OPTION_SETS[] = {
    {"smoothing pytorch", LCE_SMOOTH_PYTORCH, 100, 0, 0, 0, 0, 0},
    {"smoothing megatron", LCE_SMOOTH_MEGATRON, 250, 0, 0, 0, 0, 0},
    {"z-loss 1e-3", LCE_SMOOTH_NONE, 0, 100, 0, 0, 0, 0},
    {"z-loss 0.1", LCE_SMOOTH_NONE, 0, 10000, 0, 0, 0, 0},
    {"softcap 30", LCE_SMOOTH_NONE, 0, 0, 30, 0, 0, 0},
    {"softcap 5", LCE_SMOOTH_NONE, 0, 0, 5, 0, 0, 0},
    {"class weights", LCE_SMOOTH_NONE, 0, 0, 0, 1, 0, 0},
    {"tf32", LCE_SMOOTH_NONE, 0, 0, 0, 0, 1, 0},
    {"token chunks 5", LCE_SMOOTH_NONE, 0, 0, 0, 0, 0, 5},
    {"smoothing + class weights", LCE_SMOOTH_PYTORCH, 100, 0, 0, 1, 0, 0},
    {"softcap + z-loss + tc 3", LCE_SMOOTH_NONE, 0, 1000, 20, 0, 0, 3},
    {"everything", LCE_SMOOTH_MEGATRON, 100, 1000, 30, 1, 1, 7},
};

static lce_case option_case(const option_set *o, lce_dtype dtype, int variant) {
  lce_case c = lce_case_default();
  c.n = 16, c.h = 32, c.v = 300, c.vp = 384, c.vocab_chunk = 8 + 13 * (variant % 3);
  c.dtype = dtype, c.reduction = (lce_reduction)(variant % 3), c.tied = variant % 2, c.tp = 1 << (variant % 3);
  c.ignore_pct = 25, c.prior_grad = 0, c.seed = lce_test_seed() + (uint64_t)variant;
  c.dist = variant % 4 == 3 ? LCE_DIST_HARD : LCE_DIST_MIXED;
  c.smoothing = o->smoothing, c.smoothing_permille = o->permille, c.z_loss_e5 = o->z_loss_e5;
  c.softcap = o->softcap, c.class_weights = o->class_weights, c.token_chunk = o->token_chunk;
  c.gemm = o->tf32 ? LCE_GEMM_TF32 : LCE_GEMM_IEEE;
  return c;
}

/* ---- 1. accuracy ----------------------------------------------------------------------------- */

static void test_option_accuracy(void) {
  printf("options, accuracy against the unfused double computation:\n");
  for (size_t k = 0; k < sizeof OPTION_SETS / sizeof OPTION_SETS[0]; k++) {
    printf(" %s\n", OPTION_SETS[k].name);
    for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++) {
      if (OPTION_SETS[k].tf32 && dt != LCE_FP32) continue; /* tf32 GEMMs read fp32 inputs only */
      for (int variant = 0; variant < 4; variant++) {
        lce_case c = option_case(&OPTION_SETS[k], (lce_dtype)dt, variant);
        check_accuracy("fused-host", &c);
      }
    }
  }
}

/* ---- 2. tp invariance under smoothing ---------------------------------------------------------- */

static void test_tp_invariance(void) {
  printf("loss under tp, fp32 inputs, normwise difference from tp 1:\n");
  const lce_subject *s = fused_test_subject("fused-host");
  static const lce_smoothing modes[] = {LCE_SMOOTH_NONE, LCE_SMOOTH_PYTORCH, LCE_SMOOTH_MEGATRON};
  for (size_t m = 0; s && m < 3; m++) {
    for (int cw = 0; cw <= 1; cw++) {
      lce_case c = lce_case_default();
      c.n = 16, c.h = 32, c.v = 300, c.vp = 384, c.vocab_chunk = 16, c.dtype = LCE_FP32, c.tp = 1;
      c.reduction = LCE_RED_MEAN, c.ignore_pct = 10, c.seed = lce_test_seed();
      c.smoothing = modes[m], c.smoothing_permille = modes[m] == LCE_SMOOTH_NONE ? 0 : 200, c.class_weights = cw;
      fused_run base = {0}, plain = {0};
      lce_case cp = c;
      cp.smoothing = LCE_SMOOTH_NONE, cp.smoothing_permille = 0;
      if (!fused_run_case(s, &c, &base) || !fused_run_case(s, &cp, &plain)) {
        fused_run_free(&base), fused_run_free(&plain);
        continue;
      }
      const double bound = 4.0 * U32 * (double)(c.h + 8);
      double effect = float_rel_diff(base.out.loss_token, plain.out.loss_token, c.n);
      EXPECT(modes[m] == LCE_SMOOTH_NONE || effect > 1000 * bound,
             "smoothing changes loss_token by only %.1e: the invariance check would be vacuous", effect);
      static const int tps[] = {2, 3, 4};
      for (int t = 0; t < 3; t++) {
        lce_case ct = c;
        ct.tp = tps[t], ct.vp = tps[t] == 3 ? 384 : c.vp, ct.vocab_chunk = 7 + t;
        lce_test_set_case(&ct);
        lce_outputs o = {0};
        if (fused_run_on(s, &ct, &base.in, &o)) {
          double d_loss = fabs((double)o.loss[0] - base.out.loss[0]) / fabs((double)base.out.loss[0]);
          double d_tok = float_rel_diff(base.out.loss_token, o.loss_token, c.n);
          printf("  smoothing %d cw %d tp %d: loss %.1e loss_token %.1e (smoothing effect %.1e)\n", (int)modes[m], cw,
                 ct.tp, d_loss, d_tok, effect);
          EXPECT(d_loss <= bound && d_tok <= bound, "tp %d changes the loss beyond fp32 rounding (%.1e, %.1e > %.1e)",
                 ct.tp, d_loss, d_tok, bound);
        }
        lce_outputs_free(&o);
      }
      lce_test_set_case(NULL);
      fused_run_free(&base), fused_run_free(&plain);
    }
  }
}

/* ---- 3. token chunks --------------------------------------------------------------------------- */

static void test_token_chunks(void) {
  printf("token chunks (bf16, smoothing + z-loss + class weights):\n");
  const lce_subject *s = fused_test_subject("fused-host");
  lce_case c = option_case(&OPTION_SETS[9], LCE_BF16, 1);
  c.z_loss_e5 = 100, c.prior_grad = 1, c.n = 24, c.tied = 0;
  fused_run base = {0};
  if (!s || !fused_run_case(s, &c, &base)) {
    fused_run_free(&base);
    return;
  }
  const int64_t nh = c.n * c.h, vh = c.vp * c.h;
  static const int64_t chunks[] = {1, 5, 23, 24, 100};
  for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
    lce_case ct = c;
    ct.token_chunk = chunks[k];
    lce_test_set_case(&ct);
    lce_outputs o = {0};
    if (fused_run_on(s, &ct, &base.in, &o)) {
      EXPECT(memcmp(o.loss, base.out.loss, 4) == 0 && memcmp(o.loss_token, base.out.loss_token, (size_t)c.n * 4) == 0 &&
                 memcmp(o.lse, base.out.lse, (size_t)c.n * 4) == 0,
             "token chunk %lld changed a forward output", (long long)chunks[k]);
      EXPECT(memcmp(o.d_hidden, base.out.d_hidden, (size_t)nh * 2) == 0, "token chunk %lld changed d_hidden",
             (long long)chunks[k]);
      double d_dw = float_rel_diff(base.out.grad_weight, o.grad_weight, vh);
      printf("  tc %3lld: d_weight buffer differs by %.1e\n", (long long)chunks[k], d_dw);
      EXPECT(d_dw <= 4.0 * U32 * (double)(c.n + 8), "token chunk %lld: d_weight beyond fp32 rounding (%.1e)",
             (long long)chunks[k], d_dw);
      if (chunks[k] >= c.n) EXPECT(d_dw == 0.0, "one token chunk must equal no token chunking");
    }
    lce_outputs_free(&o);
  }
  fused_run_free(&base);
}

/* ---- 4. non-finite inputs ---------------------------------------------------------------------- */

static int64_t count_nan(const lce_case *c, const void *buf, lce_dtype t, int64_t from, int64_t to) {
  int64_t k = 0;
  for (int64_t e = from; e < to; e++) k += isnan(lce_load(t, buf, (size_t)e));
  (void)c;
  return k;
}

/* Poison dist: token 0 has a NaN hidden value, token 1 a +Inf (every real logit +Inf, so
 * exp(inf - inf) = NaN). `valid` selects which of the two keeps a label; the other is ignored. */
static void check_poison(lce_case c, int valid_token) {
  const lce_subject *s = fused_test_subject("fused-host");
  fused_run r = {0};
  lce_status st = {0};
  r.c = c;
  lce_test_set_case(&r.c);
  if (!s || lce_case_generate(&r.c, &r.in, &st) != LCE_OK) {
    EXPECT(0, "generate: %s", st.msg);
    fused_run_free(&r);
    return;
  }
  const int ignored_token = 1 - valid_token;
  r.in.labels[valid_token] = 5, r.in.labels[ignored_token] = c.ignore_index;
  for (int64_t i = 2; i < c.n; i++) r.in.labels[i] = (i * 37) % c.v; /* the rest valid, on every shard */
  if (fused_run_on(s, &r.c, &r.in, &r.out)) {
    const int64_t h = c.h, real = c.v * h, vh = c.vp * h;
    const float *gw = lce_output_weight_grad(&c, &r.out);
    const float *prior = lce_output_weight_prior(&c, &r.in);
    EXPECT(isnan(r.out.lse[valid_token]) && isnan(r.out.loss_token[valid_token]) && isnan(r.out.loss[0]),
           "valid poisoned token %d: lse %g loss_token %g loss %g, want NaN", valid_token,
           (double)r.out.lse[valid_token], (double)r.out.loss_token[valid_token], (double)r.out.loss[0]);
    EXPECT(count_nan(&c, r.out.d_hidden, c.dtype, valid_token * h, (valid_token + 1) * h) == h,
           "valid poisoned token: d_hidden row not all NaN");
    EXPECT(r.out.loss_token[ignored_token] == 0.0f, "ignored poisoned token: loss_token %g, want 0",
           (double)r.out.loss_token[ignored_token]);
    int64_t nonzero = 0, nan_rest = 0, nan_w = 0, pad_changed = 0;
    for (int64_t k = 0; k < h; k++) nonzero += lce_load(c.dtype, r.out.d_hidden, (size_t)(ignored_token * h + k)) != 0.0;
    EXPECT(nonzero == 0, "ignored poisoned token: %lld non-zero d_hidden elements", (long long)nonzero);
    nan_rest = count_nan(&c, r.out.d_hidden, c.dtype, 2 * h, c.n * h);
    for (int64_t i = 2; i < c.n; i++) nan_rest += isnan(r.out.lse[i]) + isnan(r.out.loss_token[i]);
    EXPECT(nan_rest == 0, "clean tokens got %lld NaN values", (long long)nan_rest);
    for (int64_t e = 0; e < real; e++) nan_w += isnan(gw[e]);
    for (int64_t e = real; e < vh; e++) pad_changed += memcmp(&gw[e], &prior[e], 4) != 0;
    EXPECT(nan_w == real, "%lld of %lld real d_weight elements NaN, want all", (long long)nan_w, (long long)real);
    EXPECT(pad_changed == 0, "padded gradient rows changed");
    printf("  %s valid token %d: lse NaN, d_weight %lld/%lld NaN, ignored token clean\n", c.softcap ? "softcap" : "plain",
           valid_token, (long long)nan_w, (long long)real);
  }
  fused_run_free(&r);
}

/* Both poisoned tokens ignored: nothing non-finite may leak into any output a judge looks at. */
static void check_poison_ignored(lce_case c) {
  const lce_subject *s = fused_test_subject("fused-host");
  fused_run r = {0};
  lce_status st = {0};
  r.c = c;
  lce_test_set_case(&r.c);
  if (s && lce_case_generate(&r.c, &r.in, &st) == LCE_OK) {
    r.in.labels[0] = r.in.labels[1] = c.ignore_index;
    if (fused_run_on(s, &r.c, &r.in, &r.out)) {
      int64_t bad = !isfinite(r.out.loss[0]);
      const float *gw = lce_output_weight_grad(&c, &r.out);
      for (int64_t e = 0; e < c.vp * c.h; e++) bad += !isfinite(gw[e]);
      for (int64_t e = 0; e < c.n * c.h; e++) bad += !isfinite(lce_load(c.dtype, r.out.d_hidden, (size_t)e));
      for (int64_t i = 0; i < c.n; i++) bad += !isfinite(r.out.loss_token[i]);
      EXPECT(bad == 0, "poisoned tokens ignored: %lld non-finite output values", (long long)bad);
    }
  }
  fused_run_free(&r);
}

static void test_non_finite(void) {
  printf("non-finite inputs:\n");
  for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++)
    for (int tp = 1; tp <= 4; tp *= 2) {
      lce_case c = option_case(&OPTION_SETS[9], (lce_dtype)dt, tp);
      c.tp = tp, c.dist = LCE_DIST_POISON, c.prior_grad = 1, c.z_loss_e5 = 100, c.token_chunk = 5;
      check_poison(c, 0);
      check_poison(c, 1);
      check_poison_ignored(c);
      c.softcap = 20; /* a non-finite logit is NaN before the cap: both tokens still poison */
      check_poison(c, 0);
      check_poison(c, 1);
    }
}

/* ---- 5. all tokens ignored under every option ---------------------------------------------- */

static void test_all_ignored_options(void) {
  const lce_subject *s = fused_test_subject("fused-host");
  for (int red = LCE_RED_NONE; red <= LCE_RED_MEAN; red++) {
    lce_case c = option_case(&OPTION_SETS[11], LCE_FP32, red);
    c.ignore_pct = 100, c.prior_grad = 1;
    fused_run r = {0};
    if (s && fused_run_case(s, &c, &r)) {
      EXPECT(r.out.loss[0] == 0.0f, "all ignored (%s): loss %g, want 0", lce_reduction_name(c.reduction),
             (double)r.out.loss[0]);
      int64_t bad = 0;
      const float *gw = lce_output_weight_grad(&c, &r.out);
      const float *prior = lce_output_weight_prior(&c, &r.in);
      for (int64_t i = 0; i < c.n; i++) bad += r.out.loss_token[i] != 0.0f;
      for (int64_t e = 0; e < c.n * c.h; e++) bad += lce_load(c.dtype, r.out.d_hidden, (size_t)e) != 0.0;
      for (int64_t e = 0; e < c.vp * c.h; e++) bad += memcmp(&gw[e], &prior[e], 4) != 0;
      EXPECT(bad == 0, "all ignored: %lld non-zero losses or gradient changes", (long long)bad);
    }
    fused_run_free(&r);
  }
}

int main(void) {
  test_option_accuracy();
  test_tp_invariance();
  test_token_chunks();
  test_non_finite();
  test_all_ignored_options();
  return lce_test_finish("test_fused_options");
}
