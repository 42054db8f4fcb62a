/* fused_test_gpu.c — the GPU subjects' shared test parts (fused_test_gpu.h). */
#include "fused_test_gpu.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lce_device.h"

lce_case gpu_test_base_case(void) {
  lce_case c = lce_case_default();
  c.dtype = LCE_BF16, c.tied = 0, c.tp = 2, c.n = 24, c.h = 64, c.v = 300, c.vp = 384, c.vocab_chunk = 37;
  c.reduction = LCE_RED_MEAN, c.ignore_pct = 25, c.prior_grad = 1, c.dist = LCE_DIST_MIXED;
  c.seed = lce_test_seed();
  return c;
}

/* ---- the case list ---------------------------------------------------------------------------- */

static void v_base(lce_case *c) { (void)c; }
static void v_fp16(lce_case *c) { c->dtype = LCE_FP16; }
static void v_fp32(lce_case *c) { c->dtype = LCE_FP32; }
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
static void v_tf32(lce_case *c) { c->dtype = LCE_FP32, c->gemm = LCE_GEMM_TF32; }
void gpu_test_all_options(lce_case *c) { v_ls(c), v_zl(c), v_sc(c), v_cw(c), v_tc(c), c->dist = LCE_DIST_HARD; }
static void v_poison(lce_case *c) { c->dist = LCE_DIST_POISON, c->ignore_pct = 0; }
static void v_poison_ignored(lce_case *c) { c->dist = LCE_DIST_POISON, c->ignore_pct = 50; }

const gpu_test_variant GPU_TEST_VARIANTS[] = {
    {"base", v_base, 1, 0},
    {"fp16", v_fp16, 1, 0},
    {"fp32", v_fp32, 1, 1},
    {"tied tp4 sum", v_tied_tp4_sum, 1, 0},
    {"none fresh", v_none_fresh, 1, 0},
    {"none token chunks", v_none_token_chunks, 1, 0},
    {"one chunk", v_one_chunk, 1, 0},
    {"all ignored", v_all_ignored, 1, 0},
    {"hard", v_hard, 1, 0},
    {"negative", v_negative, 1, 0},
    {"smoothing pytorch", v_ls, 1, 0},
    {"smoothing megatron", v_lsm, 1, 0},
    {"z-loss", v_zl, 1, 0},
    {"softcap", v_sc, 1, 0},
    {"class weights", v_cw, 1, 0},
    {"token chunks", v_tc, 1, 0},
    {"tf32", v_tf32, 1, 1},
    {"all options", gpu_test_all_options, 1, 0},
    {"poison", v_poison, 0, 0},
    {"poison ignored", v_poison_ignored, 0, 0},
};
const size_t GPU_TEST_VARIANT_COUNT = sizeof GPU_TEST_VARIANTS / sizeof GPU_TEST_VARIANTS[0];

/* ---- refusals --------------------------------------------------------------------------------- */

void expect_refusal(const lce_subject *s, const lce_case *c, lce_code want, const char *say) {
  lce_tensors in;
  lce_outputs out;
  lce_status st = {0};
  if (lce_case_generate(c, &in, &st) != LCE_OK || lce_outputs_alloc(c, &in, &out, &st) != LCE_OK) {
    EXPECT(0, "setup: %s", st.msg);
    return;
  }
  lce_code rc = s->run(c, &in, &out, &st);
  EXPECT(rc == want, "run returned %s, want %s (%s)", lce_code_name(rc), lce_code_name(want), st.msg);
  EXPECT(strstr(st.msg, s->name) && strstr(st.msg, say), "unclear message: %s", st.msg);
  EXPECT(isnan(out.loss[0]) && isnan(out.lse[0]) && isnan(out.loss_token[c->n - 1]), "outputs written");
  EXPECT(memcmp(out.grad_weight, in.grad_weight_prior, (size_t)(c->vp * c->h) * 4) == 0, "grad_weight written");
  printf("  %s: %s\n", lce_code_name(rc), st.msg);
  lce_outputs_free(&out);
  lce_tensors_free(&in);
}

int gpu_test_no_device(const lce_subject *s, void (*more)(void), const char *test_name) {
  char why[256];
  if (lce_device_query(NULL, why, sizeof why)) return -1;
  printf("no CUDA device (%s): checking that %s says so%s, then skipping\n", why, s->name,
         more ? " and refuses what it cannot run" : "");
  lce_case c = gpu_test_base_case();
  lce_test_set_case(&c);
  expect_refusal(s, &c, LCE_ENODEV, "no CUDA device");
  lce_test_set_case(NULL);
  if (more) more();
  return lce_test_failures ? lce_test_finish(test_name) : 77;
}

/* ---- beside fused-host ------------------------------------------------------------------------ */

static int fclass(double x) { return isnan(x) ? 3 : (isinf(x) ? (x > 0 ? 1 : 2) : 0); }

static void expect_same_classes(const char *subject, const char *what, lce_dtype t, const void *gpu,
                                const void *host, int64_t count) {
  for (int64_t i = 0; i < count; i++) {
    const double a = lce_load(t, gpu, (size_t)i), b = lce_load(t, host, (size_t)i);
    if (fclass(a) != fclass(b)) {
      EXPECT(0, "%s[%lld]: %s %g, fused-host %g (non-finite class differs)", what, (long long)i, subject, a, b);
      return;
    }
  }
}

int expect_like_host(const lce_subject *s, const lce_case *c, fused_run *host, lce_outputs *out) {
  if (!fused_run_case(fused_test_subject("fused-host"), c, host)) return 0;
  lce_outputs g2 = {0};
  const int64_t nh = c->n * c->h, vh = c->vp * c->h;
  if (!fused_run_on(s, c, &host->in, out) || !fused_run_on(s, c, &host->in, &g2)) {
    lce_outputs_free(&g2);
    return 0;
  }
  const lce_outputs *h = &host->out;
  expect_same_classes(s->name, "loss", LCE_FP32, out->loss, h->loss, 1);
  expect_same_classes(s->name, "loss_token", LCE_FP32, out->loss_token, h->loss_token, c->n);
  for (int64_t i = 0; i < c->n; i++) /* the lse of ignored tokens is unconstrained */
    if (host->in.labels[i] != c->ignore_index)
      expect_same_classes(s->name, "lse", LCE_FP32, out->lse + i, h->lse + i, 1);
  expect_same_classes(s->name, "d_hidden", c->dtype, out->d_hidden, h->d_hidden, nh);
  expect_same_classes(s->name, "grad_embedding", LCE_FP32, out->grad_embedding, h->grad_embedding, vh);
  if (!c->tied) {
    expect_same_classes(s->name, "grad_weight", LCE_FP32, out->grad_weight, h->grad_weight, vh);
    EXPECT(memcmp(out->grad_embedding, host->in.grad_embedding_prior, (size_t)vh * 4) == 0,
           "untied: grad_embedding was written");
  }
  const float *buf = lce_output_weight_grad(c, out);
  const float *prior = lce_output_weight_prior(c, &host->in);
  const size_t off = (size_t)(c->v * c->h), pad = (size_t)((c->vp - c->v) * c->h);
  EXPECT(memcmp(buf + off, prior + off, pad * 4) == 0, "padded gradient rows were written");
  EXPECT(memcmp(out->d_hidden, g2.d_hidden, (size_t)nh * lce_dtype_size(c->dtype)) == 0 &&
             memcmp(out->loss_token, g2.loss_token, (size_t)c->n * 4) == 0 &&
             memcmp(buf, lce_output_weight_grad(c, &g2), (size_t)vh * 4) == 0,
         "two runs on the same inputs differ");
  lce_outputs_free(&g2);
  return 1;
}

/* ---- the seed bug 2 mutants ------------------------------------------------------------------- */

void gpu_test_dhidden_accum_mutant(const lce_subject *good, const lce_subject *mut) {
  lce_case c = lce_case_default();
  c.dtype = LCE_BF16, c.tied = 0, c.tp = 1, c.n = 32, c.h = 64, c.v = 1024, c.vp = 1024, c.vocab_chunk = c.v;
  c.reduction = LCE_RED_MEAN, c.dist = LCE_DIST_NORMAL, c.seed = lce_test_seed();
  fused_run r = {0};
  unfused_ref ref = {0};
  if (!fused_run_case(good, &c, &r) || !unfused_reference(&r.c, &r.in, &ref)) {
    EXPECT(0, "could not run the base case");
    unfused_ref_free(&ref), fused_run_free(&r);
    return;
  }
  static const int64_t chunks[] = {1, 32, 64};
  printf("d_hidden normwise error vs chunk count (bf16, n 32 h 64 v 1024):\n  chunks  %-12s %s\n", good->name,
         mut->name);
  for (int k = 0; k < 3; k++) {
    lce_case ck = c;
    ck.vocab_chunk = c.v / chunks[k];
    lce_test_set_case(&ck);
    lce_outputs og = {0}, om = {0};
    if (fused_run_on(good, &ck, &r.in, &og) && fused_run_on(mut, &ck, &r.in, &om)) {
      double eg = d_hidden_err(&ck, &og, &ref), em = d_hidden_err(&ck, &om, &ref);
      printf("  %6lld  %12.3e %10.3e\n", (long long)chunks[k], eg, em);
      if (chunks[k] > 1)
        EXPECT(em > eg, "%lld chunks: %s's error %.3e not above %s's %.3e", (long long)chunks[k], mut->name, em,
               good->name, eg);
    }
    lce_outputs_free(&og), lce_outputs_free(&om);
  }
  lce_test_set_case(NULL);
  unfused_ref_free(&ref);
  fused_run_free(&r);
}
