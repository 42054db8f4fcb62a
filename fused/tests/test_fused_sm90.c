/* test_fused_sm90.c — fused-sm90 on the GPU (label gpu): the Hopper logits GEMM with the softmax in its
 * epilogue (fused/cuda/fused_sm90_gemm.cu), judged as fused-cuda is (test_fused_cuda.c):
 *   without CUTLASS's headers the subject is not built: the test says so and exits 77;
 *   without a GPU: run() returns LCE_ENODEV naming fused-sm90, the outputs stay poisoned, exit 77;
 *   refusals, not wrong answers: fp32 and tf32 cases are outside the subject's capabilities
 *     (lce_subject_supports says "no fp32 support") and run() returns LCE_ESKIP without writing;
 *   accuracy: fused-cuda's case list (bf16, fp16: every base semantic and option) plus shapes that
 *     reach the kernel's tiling — several 128-token tiles and 256-row vocab tiles, partial tiles at
 *     both ends, several CTA vocab ranges (the split partials), h not a multiple of 8 (the padded
 *     copies), one vocab chunk larger than a tile, backward token chunks — against the unfused double
 *     computation with the bounds of the fused-host tests (fused_test_accuracy.h);
 *   beside fused-host (non-finite classes, untied grad_embedding untouched, padded gradient rows at
 *     their prior, two runs the same bits) and beside fused-cuda on the same inputs (lse, d_hidden and
 *     the weight gradient differences printed; lse within 1e-3 of fused-cuda's: a gross error in the
 *     partials' merge or the label's logit shows here first);
 *   no 1/n_valid bias (fused_test_bias.h): d_hidden and weight-gradient bias within 1e-4 of tier 1.
 * Seed: $LCE_TEST_SEED (default 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_test_util.h"

#ifndef LCE_WITH_SM90
int main(void) {
  printf("fused-sm90 is not in this build (CUTLASS's headers were not found: bash scripts/setup.sh installs them "
         "into .deps/, or configure with -DCUTLASS_INCLUDE_DIR=...): skipped\n");
  return 77;
}
#else

#include "fused_cuda.h"
#include "fused_sm90.h"
#include "fused_test_accuracy.h"
#include "fused_test_bias.h"

static const char *const NAME = "test_fused_sm90";

/* test_fused_cuda.c's base case: bf16, untied, tp 2, padded vocab, odd vocab chunk, mean, 25%
 * ignored, prior gradients. */
static lce_case base_case(void) {
  lce_case c = lce_case_default();
  c.dtype = LCE_BF16, c.tied = 0, c.tp = 2, c.n = 24, c.h = 64, c.v = 300, c.vp = 384, c.vocab_chunk = 37;
  c.reduction = LCE_RED_MEAN, c.ignore_pct = 25, c.prior_grad = 1, c.dist = LCE_DIST_MIXED;
  c.seed = lce_test_seed();
  return c;
}

/* ---- without a GPU, and the refusals ----------------------------------------------------------- */

/* Runs fused-sm90 on c and EXPECTs code `want`, a message containing `say`, and no output written. */
static void expect_refusal(const lce_case *c, lce_code want, const char *say) {
  lce_tensors in;
  lce_outputs out;
  lce_status st = {0};
  if (lce_case_generate(c, &in, &st) != LCE_OK || lce_outputs_alloc(c, &in, &out, &st) != LCE_OK) {
    EXPECT(0, "setup: %s", st.msg);
    return;
  }
  lce_code rc = lce_fused_sm90_subject.run(c, &in, &out, &st);
  EXPECT(rc == want, "run returned %s, want %s (%s)", lce_code_name(rc), lce_code_name(want), st.msg);
  EXPECT(strstr(st.msg, "fused-sm90") && strstr(st.msg, say), "unclear message: %s", st.msg);
  EXPECT(isnan(out.loss[0]) && isnan(out.lse[0]) && isnan(out.loss_token[c->n - 1]), "outputs written");
  EXPECT(memcmp(out.grad_weight, in.grad_weight_prior, (size_t)(c->vp * c->h) * 4) == 0, "grad_weight written");
  printf("  %s: %s\n", lce_code_name(rc), st.msg);
  lce_outputs_free(&out);
  lce_tensors_free(&in);
}

static void test_refusals(void) {
  char why[256];
  for (int k = 0; k < 2; k++) {
    lce_case c = base_case();
    c.dtype = LCE_FP32, c.gemm = k ? LCE_GEMM_TF32 : c.gemm;
    lce_test_set_case(&c);
    EXPECT(!lce_subject_supports(&lce_fused_sm90_subject, &c, why, sizeof why) && strstr(why, "no fp32 support"),
           "fused-sm90 claims fp32 support: %s", why);
    expect_refusal(&c, LCE_ESKIP, "bf16 and fp16 only");
  }
  lce_test_set_case(NULL);
}

/* -1 when a device exists; otherwise the exit code: 77 (skipped) after the checks pass, else 1. */
static int test_no_device(void) {
  char why[256];
  if (lce_device_query(NULL, why, sizeof why)) return -1;
  printf("no CUDA device (%s): checking that fused-sm90 says so and refuses fp32, then skipping\n", why);
  lce_case c = base_case();
  lce_test_set_case(&c);
  expect_refusal(&c, LCE_ENODEV, "no CUDA device");
  lce_test_set_case(NULL);
  test_refusals();
  return lce_test_failures ? lce_test_finish(NAME) : 77;
}

/* ---- beside fused-host and fused-cuda --------------------------------------------------------- */

static int fclass(double x) { return isnan(x) ? 3 : (isinf(x) ? (x > 0 ? 1 : 2) : 0); }

static void expect_same_classes(const char *what, lce_dtype t, const void *gpu, const void *host, int64_t count) {
  for (int64_t i = 0; i < count; i++) {
    const double a = lce_load(t, gpu, (size_t)i), b = lce_load(t, host, (size_t)i);
    if (fclass(a) != fclass(b)) {
      EXPECT(0, "%s[%lld]: fused-sm90 %g, fused-host %g (non-finite class differs)", what, (long long)i, a, b);
      return;
    }
  }
}

/* ||a - b|| / ||b|| over the finite pairs of two arrays of type t. */
static double rel_diff(lce_dtype t, const void *a, const void *b, int64_t count) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < count; i++) {
    const double x = lce_load(t, a, (size_t)i), y = lce_load(t, b, (size_t)i);
    if (!isfinite(x) || !isfinite(y)) continue;
    num += (x - y) * (x - y), den += y * y;
  }
  return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

static void compare_with_twins(const lce_case *c) {
  fused_run h = {0};
  if (!fused_run_case(fused_test_subject("fused-host"), c, &h)) {
    fused_run_free(&h);
    return;
  }
  lce_outputs g1 = {0}, g2 = {0}, fc = {0};
  const int64_t nh = c->n * c->h, vh = c->vp * c->h;
  if (fused_run_on(&lce_fused_sm90_subject, c, &h.in, &g1) && fused_run_on(&lce_fused_sm90_subject, c, &h.in, &g2)) {
    expect_same_classes("loss", LCE_FP32, g1.loss, h.out.loss, 1);
    expect_same_classes("loss_token", LCE_FP32, g1.loss_token, h.out.loss_token, c->n);
    for (int64_t i = 0; i < c->n; i++) /* the lse of ignored tokens is unconstrained */
      if (h.in.labels[i] != c->ignore_index) expect_same_classes("lse", LCE_FP32, g1.lse + i, h.out.lse + i, 1);
    expect_same_classes("d_hidden", c->dtype, g1.d_hidden, h.out.d_hidden, nh);
    expect_same_classes("grad_embedding", LCE_FP32, g1.grad_embedding, h.out.grad_embedding, vh);
    if (!c->tied) {
      expect_same_classes("grad_weight", LCE_FP32, g1.grad_weight, h.out.grad_weight, vh);
      EXPECT(memcmp(g1.grad_embedding, h.in.grad_embedding_prior, (size_t)vh * 4) == 0, "untied: grad_embedding was written");
    }
    const float *buf = lce_output_weight_grad(c, &g1);
    const float *prior = lce_output_weight_prior(c, &h.in);
    const size_t off = (size_t)(c->v * c->h), pad = (size_t)((c->vp - c->v) * c->h);
    EXPECT(memcmp(buf + off, prior + off, pad * 4) == 0, "padded gradient rows were written");
    EXPECT(memcmp(g1.d_hidden, g2.d_hidden, (size_t)nh * lce_dtype_size(c->dtype)) == 0 &&
               memcmp(g1.loss_token, g2.loss_token, (size_t)c->n * 4) == 0 &&
               memcmp(buf, lce_output_weight_grad(c, &g2), (size_t)vh * 4) == 0,
           "two runs on the same inputs differ");
    if (fused_run_on(&lce_fused_cuda_subject, c, &h.in, &fc)) {
      double lse_max = 0.0;
      for (int64_t i = 0; i < c->n; i++) {
        if (h.in.labels[i] == c->ignore_index || !isfinite(fc.lse[i])) continue;
        const double d = fabs((double)g1.lse[i] - (double)fc.lse[i]);
        lse_max = d > lse_max || isnan(d) ? d : lse_max;
      }
      const double dh = rel_diff(c->dtype, g1.d_hidden, fc.d_hidden, nh);
      const double dw = rel_diff(LCE_FP32, buf, lce_output_weight_grad(c, &fc), vh);
      printf("  vs fused-cuda: lse maxdiff %.2e, d_hidden reldiff %.2e, weight-gradient reldiff %.2e\n", lse_max, dh, dw);
      EXPECT(!(lse_max > 1e-3), "lse differs from fused-cuda's by %.3e", lse_max);
    }
  }
  lce_outputs_free(&g1), lce_outputs_free(&g2), lce_outputs_free(&fc);
  fused_run_free(&h);
}

/* ---- the case list ---------------------------------------------------------------------------- */

typedef struct variant {
  const char *what;
  void (*apply)(lce_case *c);
  int finite; /* inputs finite: judged against the unfused computation too */
} variant;

static void v_base(lce_case *c) { (void)c; }
static void v_fp16(lce_case *c) { c->dtype = LCE_FP16; }
static void v_tied_tp4_sum(lce_case *c) { c->tied = 1, c->tp = 4, c->reduction = LCE_RED_SUM; }
static void v_none_fresh(lce_case *c) { c->reduction = LCE_RED_NONE, c->prior_grad = 0, c->tp = 1; }
static void v_none_token_chunks(lce_case *c) { c->reduction = LCE_RED_NONE, c->token_chunk = 7; }
static void v_one_chunk(lce_case *c) { c->vocab_chunk = c->vp, c->tp = 1, c->vp = c->v; }
static void v_all_ignored(lce_case *c) { c->ignore_pct = 100; }
static void v_hard(lce_case *c) { c->dist = LCE_DIST_HARD; }
static void v_negative(lce_case *c) { c->dist = LCE_DIST_NEGATIVE; }
static void v_ls(lce_case *c) { c->smoothing = LCE_SMOOTH_PYTORCH, c->smoothing_permille = 100; }
static void v_lsm(lce_case *c) { c->smoothing = LCE_SMOOTH_MEGATRON, c->smoothing_permille = 100; }
static void v_zl(lce_case *c) { c->z_loss_e5 = 100; }
static void v_sc(lce_case *c) { c->softcap = 30; }
static void v_cw(lce_case *c) { c->class_weights = 1; }
static void v_tc(lce_case *c) { c->token_chunk = 7; }
static void v_all_options(lce_case *c) { v_ls(c), v_zl(c), v_sc(c), v_cw(c), v_tc(c), c->dist = LCE_DIST_HARD; }
static void v_poison(lce_case *c) { c->dist = LCE_DIST_POISON, c->ignore_pct = 0; }
static void v_poison_ignored(lce_case *c) { c->dist = LCE_DIST_POISON, c->ignore_pct = 50; }
/* The kernel's tiling: 3 token tiles (the last partial), 9 vocab tiles per shard (the last partial),
 * one per CTA range, h = 136 (three k-tiles, the last partial: no padding), and a vocab chunk of 700
 * (3 tiles per backward GEMM, the last partial). */
static void v_tiles(lce_case *c) {
  c->n = 300, c->h = 136, c->v = 4500, c->vp = 4608, c->tp = 2, c->vocab_chunk = 700, c->ignore_pct = 10;
}
/* h = 61: the padded copies; token chunks of 130 (two token tiles per backward chunk, the last partial). */
static void v_odd_h(lce_case *c) { c->n = 260, c->h = 61, c->v = 1000, c->vp = 1000, c->tp = 1, c->token_chunk = 130; }
/* 66 vocab tiles in one shard: 22 CTA ranges of 3 tiles each (the loop over a range's tiles, the
 * running state across them), the last tile partial; fp16. */
static void v_many_ranges(lce_case *c) {
  c->n = 130, c->h = 64, c->v = 16700, c->vp = 16700, c->tp = 1, c->vocab_chunk = 4096, c->dtype = LCE_FP16;
}
/* Shards of 33 and 32 vocab tiles: 17 CTA ranges for the first, 32 for the second (the partials
 * buffer holds the larger count, not the larger shard's). */
static void v_uneven_shards(lce_case *c) {
  c->n = 40, c->h = 32, c->v = 16640, c->vp = 16896, c->tp = 2, c->vocab_chunk = 8448, c->ignore_pct = 0;
}
static void v_tiles_options(lce_case *c) { v_tiles(c), v_all_options(c), c->token_chunk = 129; }

static const variant VARIANTS[] = {
    {"base", v_base, 1},
    {"fp16", v_fp16, 1},
    {"tied tp4 sum", v_tied_tp4_sum, 1},
    {"none fresh", v_none_fresh, 1},
    {"none token chunks", v_none_token_chunks, 1},
    {"one chunk", v_one_chunk, 1},
    {"all ignored", v_all_ignored, 1},
    {"hard", v_hard, 1},
    {"negative", v_negative, 1},
    {"smoothing pytorch", v_ls, 1},
    {"smoothing megatron", v_lsm, 1},
    {"z-loss", v_zl, 1},
    {"softcap", v_sc, 1},
    {"class weights", v_cw, 1},
    {"token chunks", v_tc, 1},
    {"all options", v_all_options, 1},
    {"poison", v_poison, 0},
    {"poison ignored", v_poison_ignored, 0},
    {"tiles", v_tiles, 1},
    {"odd h", v_odd_h, 1},
    {"many ranges", v_many_ranges, 1},
    {"uneven shards", v_uneven_shards, 1},
    {"tiles all options", v_tiles_options, 1},
};

static void test_cases(void) {
  const lce_subject *registered = lce_subject_find("fused-sm90");
  EXPECT(registered == &lce_fused_sm90_subject,
         "fused-sm90 is not in the subject registry (lce_subject_registry.c needs the LCE_WITH_SM90 lines)");
  for (size_t k = 0; k < sizeof VARIANTS / sizeof VARIANTS[0]; k++) {
    lce_case c = base_case();
    VARIANTS[k].apply(&c);
    char id[192];
    printf("%s: %s\n", VARIANTS[k].what, lce_case_format(&c, id, sizeof id));
    if (VARIANTS[k].finite && registered) check_accuracy("fused-sm90", &c);
    compare_with_twins(&c);
  }
}

int main(void) {
  int rc = test_no_device();
  if (rc >= 0) return rc;
  test_refusals();
  test_cases();
  const lce_subject *const sm90[1] = {&lce_fused_sm90_subject};
  mean_bias_check(sm90, 1, NULL);
  return lce_test_finish(NAME);
}
#endif
