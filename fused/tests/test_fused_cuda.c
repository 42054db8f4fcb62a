/* test_fused_cuda.c — fused-cuda on the GPU (label gpu):
 *   without a GPU: run() returns LCE_ENODEV with a message and leaves every output as it was (still
 *     poisoned), then the test exits 77 (skipped);
 *   accuracy: every base semantic (dtypes, tied/untied, tp, padding, reductions with per-token
 *     grad_output, the latter also in token chunks of 7 (the scaled hidden rows of each chunk),
 *     ignore_index, prior gradients) and every option (smoothing pytorch/megatron,
 *     z-loss, softcap, class weights, token chunks, tf32) against the unfused double computation
 *     with the bounds of the fused-host tests (fused_test_accuracy.h), through the registry;
 *   the CPU twin (expect_like_host, fused_test_gpu.h): non-finite classes (NaN/Inf positions and
 *     signs) equal fused-host's on the same inputs, non-finite inputs included; untied runs leave
 *     grad_embedding bit for bit as it was and padded gradient rows hold their prior; two runs give
 *     the same bits;
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
#include "fused_test_gpu.h"
#include "lce_fused_plan.h"

/* ---- fused-cuda against fused-host: classes, untouched buffers, determinism ---------------- */

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
  lce_outputs g = {0};
  if (expect_like_host(&lce_fused_cuda_subject, c, &h, &g) && c->reduction == LCE_RED_NONE)
    expect_scaled_rows(c, &h.in);
  lce_outputs_free(&g);
  fused_run_free(&h);
}

/* ---- the case list -------------------------------------------------------------------------- */

static void test_cases(void) {
  const lce_subject *registered = lce_subject_find("fused-cuda");
  EXPECT(registered == &lce_fused_cuda_subject,
         "fused-cuda is not in the subject registry (lce_subject_registry.c needs the LCE_WITH_CUDA lines)");
  for (size_t k = 0; k < GPU_TEST_VARIANT_COUNT; k++) {
    const gpu_test_variant *v = &GPU_TEST_VARIANTS[k];
    lce_case c = gpu_test_base_case();
    v->apply(&c);
    char id[192];
    printf("%s: %s\n", v->what, lce_case_format(&c, id, sizeof id));
    if (v->finite && registered) check_accuracy("fused-cuda", &c);
    compare_with_host(&c);
  }
}

/* ---- the GPU mutants ------------------------------------------------------------------------- */
#ifdef LCE_WITH_MUTANTS
static void test_mutant_tied_weight_when_untied(void) {
  lce_case c = gpu_test_base_case();
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
  int rc = gpu_test_no_device(&lce_fused_cuda_subject, NULL, "test_fused_cuda");
  if (rc >= 0) return rc;
  test_cases();
  const lce_subject *const cuda[1] = {&lce_fused_cuda_subject};
#ifdef LCE_WITH_MUTANTS
  mean_bias_check(cuda, 1, &lce_mutant_cuda_mean_factor_in_dlogits_subject);
#else
  mean_bias_check(cuda, 1, NULL);
#endif
#ifdef LCE_WITH_MUTANTS
  gpu_test_dhidden_accum_mutant(&lce_fused_cuda_subject, &lce_mutant_cuda_bf16_dhidden_accum_subject);
  test_mutant_tied_weight_when_untied();
#endif
  return lce_test_finish("test_fused_cuda");
}
