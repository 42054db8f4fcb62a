/* test_fused_sm90.c — fused-sm90 on the GPU (label gpu): the Hopper logits GEMM with the softmax in its
 * epilogue (fused/cuda/fused_sm90_gemm.cu), judged as fused-cuda is (test_fused_cuda.c):
 *   without CUTLASS's headers the subject is not built: the test says so and exits 77;
 *   without a GPU: run() returns LCE_ENODEV naming fused-sm90, the outputs stay poisoned, exit 77;
 *   capabilities and refusals: every dtype is supported (tf32 GEMMs through the tf32 wgmma, IEEE fp32
 *     through fused-cuda's passes); a malformed $LCE_FUSED_SM90_TOKEN_CHUNK is LCE_EINVAL, without
 *     writing, and so is a malformed $LCE_CUBLAS_WORKSPACE_MIB (for fused-cuda too), while a 1 MiB one
 *     gives results beside fused-host's and fused-cuda's (on the GPU);
 *   accuracy: the GPU subjects' case list (fused_test_gpu.h; bf16, fp16, fp32 and tf32: every base
 *     semantic and option) plus shapes that reach the kernel's tiling — several 128-token tiles and
 *     256-row vocab tiles, partial tiles at both ends, several CTA vocab ranges (the split partials), h
 *     not a multiple of 8 (the padded copies, 2- and 4-byte), one vocab chunk larger than a tile,
 *     backward token chunks, in bf16/fp16 and in tf32 —
 *     against the unfused double computation with the bounds of the fused-host tests
 *     (fused_test_accuracy.h);
 *   beside fused-host (expect_like_host: non-finite classes, untied grad_embedding untouched, padded
 *     gradient rows at their prior, two runs the same bits) and beside fused-cuda on the same inputs
 *     (lse, d_hidden and the weight gradient differences printed; lse within 1e-3 of fused-cuda's: a
 *     gross error in the partials' merge or the label's logit shows here first);
 *   no 1/n_valid bias (fused_test_bias.h): d_hidden and weight-gradient bias within 1e-4 of tier 1;
 *     (with LCE_WITH_MUTANTS) mutant-sm90/mean-factor-in-dlogits shows most of the -3.1e-3 and equals
 *     fused-sm90 bit for bit when g = 2^-9;
 *   fused-sm90's own mutants (with LCE_WITH_MUTANTS): mutant-sm90/bf16-dhidden-accum's d_hidden error
 *     grows with the chunk count above fused-sm90's; mutant-sm90/running-max-zero-init loses the lse of
 *     rows whose logits are all below -100, where fused-sm90's stays finite.
 * Seed: $LCE_TEST_SEED (default 1). */
#define _POSIX_C_SOURCE 200809L /* setenv */

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
#include "fused_test_gpu.h"

static const char *const NAME = "test_fused_sm90";

/* An environment variable set for a test, and put back as it was (unset when it was). */
typedef struct saved_env {
  const char *name;
  int was_set;
  char value[256];
} saved_env;

static saved_env env_set(const char *name, const char *value) {
  saved_env e = {name, getenv(name) != NULL, ""};
  if (e.was_set) snprintf(e.value, sizeof e.value, "%s", getenv(name));
  setenv(name, value, 1);
  return e;
}

static void env_restore(const saved_env *e) {
  if (e->was_set) setenv(e->name, e->value, 1);
  else unsetenv(e->name);
}

/* ---- without a GPU, and the refusals ----------------------------------------------------------- */

static void test_refusals(void) {
  char why[256];
  for (int k = 0; k < 2; k++) {
    lce_case c = gpu_test_base_case();
    c.dtype = LCE_FP32, c.gemm = k ? LCE_GEMM_TF32 : c.gemm;
    EXPECT(lce_subject_supports(&lce_fused_sm90_subject, &c, why, sizeof why), "fused-sm90 refuses fp32%s: %s",
           k ? " with tf32 GEMMs" : "", why);
  }
  /* A malformed token-chunk override is an error, not the default chunk. */
  lce_case c = gpu_test_base_case();
  lce_test_set_case(&c);
  saved_env e = env_set("LCE_FUSED_SM90_TOKEN_CHUNK", "64k");
  expect_refusal(&lce_fused_sm90_subject, &c, LCE_EINVAL, "LCE_FUSED_SM90_TOKEN_CHUNK=64k is not a positive");
  env_restore(&e);
  /* A malformed cuBLAS workspace size (fused_cuda_driver.cuh, shared with fused-cuda) is an error naming it. */
  const char *const bad[] = {"0", "1025", "8x", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char say[96];
    snprintf(say, sizeof say, "LCE_CUBLAS_WORKSPACE_MIB=%s is not a number of MiB in [1, 1024]", bad[i]);
    e = env_set("LCE_CUBLAS_WORKSPACE_MIB", bad[i]);
    expect_refusal(&lce_fused_sm90_subject, &c, LCE_EINVAL, say);
    expect_refusal(&lce_fused_cuda_subject, &c, LCE_EINVAL, say);
    env_restore(&e);
  }
  lce_test_set_case(NULL);
}

/* ---- beside fused-host and fused-cuda --------------------------------------------------------- */

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
  lce_outputs g = {0}, fc = {0};
  const int64_t nh = c->n * c->h, vh = c->vp * c->h;
  if (expect_like_host(&lce_fused_sm90_subject, c, &h, &g) && fused_run_on(&lce_fused_cuda_subject, c, &h.in, &fc)) {
    double lse_max = 0.0;
    for (int64_t i = 0; i < c->n; i++) {
      if (h.in.labels[i] == c->ignore_index || !isfinite(fc.lse[i])) continue;
      const double d = fabs((double)g.lse[i] - (double)fc.lse[i]);
      lse_max = d > lse_max || isnan(d) ? d : lse_max;
    }
    const double dh = rel_diff(c->dtype, g.d_hidden, fc.d_hidden, nh);
    const double dw = rel_diff(LCE_FP32, lce_output_weight_grad(c, &g), lce_output_weight_grad(c, &fc), vh);
    printf("  vs fused-cuda: lse maxdiff %.2e, d_hidden reldiff %.2e, weight-gradient reldiff %.2e\n", lse_max, dh, dw);
    EXPECT(!(lse_max > 1e-3), "lse differs from fused-cuda's by %.3e", lse_max);
  }
  lce_outputs_free(&g), lce_outputs_free(&fc);
  fused_run_free(&h);
}

/* $LCE_CUBLAS_WORKSPACE_MIB = 1 (the smallest): fused-sm90 and fused-cuda still give their results beside
 * fused-host's (the variable only narrows cuBLAS's choice of kernels). */
static void test_workspace_env(void) {
  lce_case c = gpu_test_base_case();
  lce_test_set_case(&c);
  const saved_env e = env_set("LCE_CUBLAS_WORKSPACE_MIB", "1");
  printf("cuBLAS workspace 1 MiB:\n");
  compare_with_twins(&c);
  env_restore(&e);
  lce_test_set_case(NULL);
}

/* ---- the case list ---------------------------------------------------------------------------- */

/* Beyond the GPU subjects' shared list (fused_test_gpu.h), shapes that reach the kernel's tiling.
 * "tiles": 3 token tiles (the last partial), 9 vocab tiles per shard (the last partial),
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
static void v_tiles_options(lce_case *c) { v_tiles(c), gpu_test_all_options(c), c->token_chunk = 129; }
/* The same through the tf32 wgmma (k-tiles of 32 fp32 elements; h = 136 ends in a partial one) and the
 * 4-byte padded copies (h = 61). */
static void v_tf32(lce_case *c) { c->dtype = LCE_FP32, c->gemm = LCE_GEMM_TF32; }
static void v_tiles_tf32(lce_case *c) { v_tiles(c), v_tf32(c); }
static void v_odd_h_tf32(lce_case *c) { v_odd_h(c), v_tf32(c); }
static void v_tiles_options_tf32(lce_case *c) { v_tiles_options(c), v_tf32(c); }

static const gpu_test_variant TILING_VARIANTS[] = {
    {"tiles", v_tiles, 1, 0},
    {"odd h", v_odd_h, 1, 0},
    {"many ranges", v_many_ranges, 1, 0},
    {"uneven shards", v_uneven_shards, 1, 0},
    {"tiles all options", v_tiles_options, 1, 0},
    {"tiles tf32", v_tiles_tf32, 1, 1},
    {"odd h tf32", v_odd_h_tf32, 1, 1},
    {"tiles all options tf32", v_tiles_options_tf32, 1, 1},
};

static void run_variant(const lce_subject *registered, const gpu_test_variant *v) {
  lce_case c = gpu_test_base_case();
  v->apply(&c);
  char id[192];
  printf("%s: %s\n", v->what, lce_case_format(&c, id, sizeof id));
  if (v->finite && registered) check_accuracy("fused-sm90", &c);
  compare_with_twins(&c);
}

static void test_cases(void) {
  const lce_subject *registered = lce_subject_find("fused-sm90");
  EXPECT(registered == &lce_fused_sm90_subject,
         "fused-sm90 is not in the subject registry (lce_subject_registry.c needs the LCE_WITH_SM90 lines)");
  for (size_t k = 0; k < GPU_TEST_VARIANT_COUNT; k++) run_variant(registered, &GPU_TEST_VARIANTS[k]);
  for (size_t k = 0; k < sizeof TILING_VARIANTS / sizeof TILING_VARIANTS[0]; k++)
    run_variant(registered, &TILING_VARIANTS[k]);
}

/* ---- fused-sm90's own mutants ------------------------------------------------------------------ */
#ifdef LCE_WITH_MUTANTS
/* The running max from 0 in the FS_STATS epilogue: on the negative distribution (every logit below
 * -100) every exp underflows or loses its digits, so some valid token's lse must differ from fused-sm90's
 * by more than 1e-3 (or be non-finite), while fused-sm90's lse are finite. */
static void test_mutant_running_max_zero_init(void) {
  const lce_subject *mut = &lce_mutant_sm90_running_max_zero_init_subject;
  lce_case c = gpu_test_base_case();
  c.dist = LCE_DIST_NEGATIVE;
  lce_test_set_case(&c);
  fused_run r = {0};
  lce_outputs om = {0};
  if (fused_run_case(&lce_fused_sm90_subject, &c, &r) && fused_run_on(mut, &c, &r.in, &om)) {
    int64_t valid = 0, finite = 0, lost = 0;
    for (int64_t i = 0; i < c.n; i++) {
      if (r.in.labels[i] == c.ignore_index) continue;
      valid++, finite += isfinite(r.out.lse[i]) != 0;
      lost += !(fabs((double)om.lse[i] - (double)r.out.lse[i]) <= 1e-3);
    }
    printf("%s: negative rows: %lld of %lld valid tokens' lse lost (fused-sm90: %lld finite)\n", mut->name,
           (long long)lost, (long long)valid, (long long)finite);
    EXPECT(valid > 0 && finite == valid, "fused-sm90: %lld of %lld valid lse finite on the negative rows",
           (long long)finite, (long long)valid);
    EXPECT(lost > 0, "%s: every lse within 1e-3 of fused-sm90's on the negative rows: the mutant is not killed",
           mut->name);
  }
  lce_outputs_free(&om);
  fused_run_free(&r);
  lce_test_set_case(NULL);
}
#endif

int main(void) {
  int rc = gpu_test_no_device(&lce_fused_sm90_subject, test_refusals, NAME);
  if (rc >= 0) return rc;
  test_refusals();
  test_workspace_env();
  test_cases();
  const lce_subject *const sm90[1] = {&lce_fused_sm90_subject};
#ifdef LCE_WITH_MUTANTS
  mean_bias_check(sm90, 1, &lce_mutant_sm90_mean_factor_in_dlogits_subject);
  gpu_test_dhidden_accum_mutant(&lce_fused_sm90_subject, &lce_mutant_sm90_bf16_dhidden_accum_subject);
  test_mutant_running_max_zero_init();
#else
  mean_bias_check(sm90, 1, NULL);
#endif
  return lce_test_finish(NAME);
}
#endif
