/* test_fused_cuda.c — fused-cuda on the GPU (label gpu):
 *   without a GPU: run() returns LCE_ENODEV with a message and leaves every output as it was (still
 *     poisoned), then the test exits 77 (skipped);
 *   accuracy: every base semantic (dtypes, tied/untied, tp, padding, reductions with per-token
 *     grad_output, the latter also in token chunks of 7 (the scaled hidden rows of each chunk),
 *     ignore_index, prior gradients) and every option (smoothing pytorch/megatron,
 *     z-loss, softcap, class weights, token chunks, tf32) against the unfused double computation
 *     with the bounds of the fused-host tests (fused_test_accuracy.h), through the registry;
 *   the CPU twin: non-finite classes (NaN/Inf positions and signs) equal fused-host's on the same
 *     inputs, non-finite inputs included; untied runs leave grad_embedding bit for bit as it was and
 *     padded gradient rows hold their prior; two runs give the same bits;
 *   no 1/n_valid bias (fused_test_bias.h): on a bf16 mean case whose g bf16 rounds by -3.1e-3,
 *     fused-cuda's d_hidden and weight-gradient biases against tier 1 stay within 1e-4, and (with
 *     LCE_WITH_MUTANTS) mutant-cuda/mean-factor-in-dlogits shows most of the -3.1e-3 and equals
 *     fused-cuda bit for bit when g = 2^-9;
 *   the GPU mutants (with LCE_WITH_MUTANTS): mutant-cuda/bf16-dhidden-accum's d_hidden error grows
 *     with the chunk count above fused-cuda's; mutant-cuda/tied-weight-when-untied leaves grad_weight
 *     at its prior.
 * Seed: $LCE_TEST_SEED (default 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_cuda.h"
#include "fused_test_accuracy.h"
#include "fused_test_bias.h"
#include "fused_test_util.h"
#include "lce_fused_plan.h"

/* A small case: bf16, untied, tp 2, padded vocab, odd vocab chunk, mean, 25% ignored, prior. */
static lce_case base_case(void) {
  lce_case c = lce_case_default();
  c.dtype = LCE_BF16, c.tied = 0, c.tp = 2, c.n = 24, c.h = 64, c.v = 300, c.vp = 384, c.vocab_chunk = 37;
  c.reduction = LCE_RED_MEAN, c.ignore_pct = 25, c.prior_grad = 1, c.dist = LCE_DIST_MIXED;
  c.seed = lce_test_seed();
  return c;
}

/* ---- without a GPU ------------------------------------------------------------------------- */

/* -1 when a device exists; otherwise the exit code: 77 (skipped) after the checks pass, else 1. */
static int test_no_device(void) {
  char why[256];
  if (lce_device_query(NULL, why, sizeof why)) return -1;
  printf("no CUDA device (%s): checking that fused-cuda says so, then skipping\n", why);
  lce_case c = base_case();
  lce_test_set_case(&c);
  lce_tensors in;
  lce_outputs out;
  lce_status st = {0};
  if (lce_case_generate(&c, &in, &st) != LCE_OK || lce_outputs_alloc(&c, &in, &out, &st) != LCE_OK) {
    EXPECT(0, "setup: %s", st.msg);
    return lce_test_finish("test_fused_cuda");
  }
  lce_code rc = lce_fused_cuda_subject.run(&c, &in, &out, &st);
  EXPECT(rc == LCE_ENODEV, "run returned %s, want ENODEV", lce_code_name(rc));
  EXPECT(strstr(st.msg, "fused-cuda") && strstr(st.msg, "no CUDA device"), "unclear message: %s", st.msg);
  EXPECT(isnan(out.loss[0]) && isnan(out.lse[0]) && isnan(out.loss_token[c.n - 1]), "outputs written without a device");
  EXPECT(memcmp(out.grad_weight, in.grad_weight_prior, (size_t)(c.vp * c.h) * 4) == 0, "grad_weight written");
  printf("  %s: %s\n", lce_code_name(rc), st.msg);
  lce_outputs_free(&out);
  lce_tensors_free(&in);
  lce_test_set_case(NULL);
  return lce_test_failures ? lce_test_finish("test_fused_cuda") : 77;
}

/* ---- fused-cuda against fused-host: classes, untouched buffers, determinism ---------------- */

static int fclass(double x) { return isnan(x) ? 3 : (isinf(x) ? (x > 0 ? 1 : 2) : 0); }

/* Index of the first element whose non-finite class differs (count when none). */
static int64_t class_mismatch(lce_dtype t, const void *a, const void *b, int64_t count) {
  for (int64_t i = 0; i < count; i++)
    if (fclass(lce_load(t, a, (size_t)i)) != fclass(lce_load(t, b, (size_t)i))) return i;
  return count;
}

static void expect_same_classes(const char *what, lce_dtype t, const void *gpu, const void *host, int64_t count) {
  int64_t at = class_mismatch(t, gpu, host, count);
  EXPECT(at == count, "%s[%lld]: fused-cuda %g, fused-host %g (non-finite class differs)", what, (long long)at,
         at < count ? lce_load(t, gpu, (size_t)at) : 0.0, at < count ? lce_load(t, host, (size_t)at) : 0.0);
}

/* Reduction none must reach the hidden-row scaling (lce_fused_grad_split scales some row), so that
 * this test, and the compute-sanitizer runs over it (scripts/gpu_run.sh, stage sanitizers), cover
 * fc_scale_rows_kernel and its rho offsets in every token chunk. */
static void expect_scaled_rows(const lce_case *c, const lce_tensors *in) {
  const size_t n = (size_t)c->n;
  float *g = malloc(3 * n * sizeof *g), alpha = 0.0f;
  if (g == NULL) {
    EXPECT(0, "out of memory");
    return;
  }
  lce_fused_loss_gradient(c, in, lce_fused_weight_sum(c, in), g);
  EXPECT(lce_fused_grad_split(c, in, g, g + n, g + 2 * n, &alpha) == 1 && alpha == 1.0f,
         "reduction none scales no hidden row: fc_scale_rows_kernel would go untested");
  free(g);
}

static void compare_with_host(const lce_case *c) {
  fused_run h = {0};
  if (!fused_run_case(fused_test_subject("fused-host"), c, &h)) {
    fused_run_free(&h);
    return;
  }
  if (c->reduction == LCE_RED_NONE) expect_scaled_rows(c, &h.in);
  lce_outputs g1 = {0}, g2 = {0};
  const int64_t nh = c->n * c->h, vh = c->vp * c->h;
  if (fused_run_on(&lce_fused_cuda_subject, c, &h.in, &g1) && fused_run_on(&lce_fused_cuda_subject, c, &h.in, &g2)) {
    expect_same_classes("loss", LCE_FP32, g1.loss, h.out.loss, 1);
    expect_same_classes("loss_token", LCE_FP32, g1.loss_token, h.out.loss_token, c->n);
    for (int64_t i = 0; i < c->n; i++) /* the lse of ignored tokens is unconstrained */
      if (h.in.labels[i] != c->ignore_index) expect_same_classes("lse", LCE_FP32, g1.lse + i, h.out.lse + i, 1);
    expect_same_classes("d_hidden", c->dtype, g1.d_hidden, h.out.d_hidden, nh);
    expect_same_classes("grad_embedding", LCE_FP32, g1.grad_embedding, h.out.grad_embedding, vh);
    if (!c->tied) {
      expect_same_classes("grad_weight", LCE_FP32, g1.grad_weight, h.out.grad_weight, vh);
      EXPECT(memcmp(g1.grad_embedding, h.in.grad_embedding_prior, (size_t)vh * 4) == 0,
             "untied: grad_embedding was written");
    }
    const float *buf = lce_output_weight_grad(c, &g1);
    const float *prior = lce_output_weight_prior(c, &h.in);
    const size_t off = (size_t)(c->v * c->h), pad = (size_t)((c->vp - c->v) * c->h);
    EXPECT(memcmp(buf + off, prior + off, pad * 4) == 0, "padded gradient rows were written");
    EXPECT(memcmp(g1.d_hidden, g2.d_hidden, (size_t)nh * lce_dtype_size(c->dtype)) == 0 &&
               memcmp(g1.loss_token, g2.loss_token, (size_t)c->n * 4) == 0 &&
               memcmp(buf, lce_output_weight_grad(c, &g2), (size_t)vh * 4) == 0,
           "two runs on the same inputs differ");
  }
  lce_outputs_free(&g1), lce_outputs_free(&g2);
  fused_run_free(&h);
}

/* ---- the case list -------------------------------------------------------------------------- */

typedef struct variant {
  const char *what;
  void (*apply)(lce_case *c);
  int finite; /* inputs finite: judged against the unfused computation too */
} variant;

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
static void v_all_options(lce_case *c) { v_ls(c), v_zl(c), v_sc(c), v_cw(c), v_tc(c), c->dist = LCE_DIST_HARD; }
static void v_poison(lce_case *c) { c->dist = LCE_DIST_POISON, c->ignore_pct = 0; }
static void v_poison_ignored(lce_case *c) { c->dist = LCE_DIST_POISON, c->ignore_pct = 50; }

static const variant VARIANTS[] = {
    {"base", v_base, 1},           {"fp16", v_fp16, 1},
    {"fp32", v_fp32, 1},           {"tied tp4 sum", v_tied_tp4_sum, 1},
    {"none fresh", v_none_fresh, 1}, {"none token chunks", v_none_token_chunks, 1},
    {"one chunk", v_one_chunk, 1},
    {"all ignored", v_all_ignored, 1}, {"hard", v_hard, 1},
    {"negative", v_negative, 1},   {"smoothing pytorch", v_ls, 1},
    {"smoothing megatron", v_lsm, 1}, {"z-loss", v_zl, 1},
    {"softcap", v_sc, 1},          {"class weights", v_cw, 1},
    {"token chunks", v_tc, 1},     {"tf32", v_tf32, 1},
    {"all options", v_all_options, 1}, {"poison", v_poison, 0},
    {"poison ignored", v_poison_ignored, 0},
};

static void test_cases(void) {
  const lce_subject *registered = lce_subject_find("fused-cuda");
  EXPECT(registered == &lce_fused_cuda_subject,
         "fused-cuda is not in the subject registry (lce_subject_registry.c needs the LCE_WITH_CUDA lines)");
  for (size_t k = 0; k < sizeof VARIANTS / sizeof VARIANTS[0]; k++) {
    lce_case c = base_case();
    VARIANTS[k].apply(&c);
    char id[192];
    printf("%s: %s\n", VARIANTS[k].what, lce_case_format(&c, id, sizeof id));
    if (VARIANTS[k].finite && registered) check_accuracy("fused-cuda", &c);
    compare_with_host(&c);
  }
}

/* ---- the GPU mutants ------------------------------------------------------------------------- */
#ifdef LCE_WITH_MUTANTS
static void test_mutant_bf16_dhidden_accum(void) {
  const lce_subject *mut = &lce_mutant_cuda_bf16_dhidden_accum_subject;
  lce_case c = lce_case_default();
  c.dtype = LCE_BF16, c.tied = 0, c.tp = 1, c.n = 32, c.h = 64, c.v = 1024, c.vp = 1024, c.vocab_chunk = c.v;
  c.reduction = LCE_RED_MEAN, c.dist = LCE_DIST_NORMAL, c.seed = lce_test_seed();
  fused_run r = {0};
  unfused_ref ref = {0};
  if (!fused_run_case(&lce_fused_cuda_subject, &c, &r) || !unfused_reference(&r.c, &r.in, &ref)) {
    EXPECT(0, "could not run the base case");
    unfused_ref_free(&ref), fused_run_free(&r);
    return;
  }
  static const int64_t chunks[] = {1, 32, 64};
  printf("d_hidden normwise error vs chunk count (bf16, n 32 h 64 v 1024):\n  chunks  fused-cuda  %s\n", mut->name);
  for (int k = 0; k < 3; k++) {
    lce_case ck = c;
    ck.vocab_chunk = c.v / chunks[k];
    lce_test_set_case(&ck);
    lce_outputs og = {0}, om = {0};
    if (fused_run_on(&lce_fused_cuda_subject, &ck, &r.in, &og) && fused_run_on(mut, &ck, &r.in, &om)) {
      double eg = d_hidden_err(&ck, &og, &ref), em = d_hidden_err(&ck, &om, &ref);
      printf("  %6lld  %10.3e  %10.3e\n", (long long)chunks[k], eg, em);
      if (chunks[k] > 1) EXPECT(em > eg, "%lld chunks: mutant error %.3e not above fused-cuda's %.3e", (long long)chunks[k], em, eg);
    }
    lce_outputs_free(&og), lce_outputs_free(&om);
  }
  unfused_ref_free(&ref);
  fused_run_free(&r);
}

static void test_mutant_tied_weight_when_untied(void) {
  lce_case c = base_case();
  fused_run r = {0};
  if (fused_run_case(&lce_mutant_cuda_tied_weight_when_untied_subject, &c, &r)) {
    const size_t vh = (size_t)(c.vp * c.h) * 4;
    EXPECT(memcmp(r.out.grad_weight, r.in.grad_weight_prior, vh) == 0, "the mutant wrote grad_weight");
    EXPECT(memcmp(r.out.grad_embedding, r.in.grad_embedding_prior, vh) != 0, "the mutant left grad_embedding alone");
  }
  fused_run_free(&r);
}
#endif

int main(void) {
  int rc = test_no_device();
  if (rc >= 0) return rc;
  test_cases();
  const lce_subject *const cuda[1] = {&lce_fused_cuda_subject};
#ifdef LCE_WITH_MUTANTS
  mean_bias_check(cuda, 1, &lce_mutant_cuda_mean_factor_in_dlogits_subject);
#else
  mean_bias_check(cuda, 1, NULL);
#endif
#ifdef LCE_WITH_MUTANTS
  test_mutant_bf16_dhidden_accum();
  test_mutant_tied_weight_when_untied();
#endif
  return lce_test_finish("test_fused_cuda");
}
