/* fused_test_gpu.h — what the tests of the GPU subjects (test_fused_cuda.c, test_fused_sm90.c) share:
 * their small base case, the case list every GPU subject runs, the check of a run that must be
 * refused without writing, the comparison with fused-host on the same inputs, and the check of each
 * subject's seed bug 2 mutant. */
#ifndef FUSED_TEST_GPU_H
#define FUSED_TEST_GPU_H

#include <stddef.h>

#include "fused_test_util.h"

/* The small case: bf16, untied, tp 2, padded vocab, odd vocab chunk, mean, 25% ignored, prior
 * gradients, mixed rows; the seed from $LCE_TEST_SEED. */
lce_case gpu_test_base_case(void);

/* One entry of a case list: a change to the base case. */
typedef struct gpu_test_variant {
  const char *what;
  void (*apply)(lce_case *c);
  int finite; /* inputs finite: judged against the unfused computation too */
  int fp32;   /* fp32 inputs (IEEE or tf32 GEMMs): only for subjects with LCE_CAP_FP32 */
} gpu_test_variant;

/* Every base semantic (dtypes, tied/untied, tp, padding, reductions, ignore_index, prior gradients)
 * and every option (smoothing pytorch/megatron, z-loss, softcap, class weights, token chunks, tf32),
 * and non-finite inputs. */
extern const gpu_test_variant GPU_TEST_VARIANTS[];
extern const size_t GPU_TEST_VARIANT_COUNT;
/* All of the options above at once, on the hard distribution (for lists that combine it with a shape). */
void gpu_test_all_options(lce_case *c);

/* Runs subject s on c and EXPECTs code `want`, a message naming s and containing `say`, and no
 * output written (still poisoned; the weight gradient still its prior). */
void expect_refusal(const lce_subject *s, const lce_case *c, lce_code want, const char *say);

/* Without a CUDA device: EXPECTs that s refuses the base case with LCE_ENODEV, a message naming it
 * and no output written, runs `more` (NULL: nothing) for the checks that need no device, and returns
 * the exit code: 77 (skipped) when they pass, else lce_test_finish's. With a device: -1. */
int gpu_test_no_device(const lce_subject *s, void (*more)(void), const char *test_name);

/* Runs fused-host on c and subject s twice on the same inputs, and EXPECTs: non-finite classes
 * (NaN/Inf positions and signs) equal fused-host's in every output (the lse of ignored tokens is
 * unconstrained); untied runs leave grad_embedding bit for bit as it was; padded gradient rows hold
 * their prior; the two runs give the same bits. Returns 1 with fused-host's run in *host and s's
 * first outputs in *out, for further comparisons; the caller frees both either way
 * (fused_run_free, lce_outputs_free). */
int expect_like_host(const lce_subject *s, const lce_case *c, fused_run *host, lce_outputs *out);

/* Seed bug 2 on the GPU: on a bf16 case (n 32, h 64, v 1024) in 1, 32 and 64 vocab chunks, EXPECTs the
 * d_hidden error of `mut` (good's algorithm with d_hidden accumulated in bf16 across the chunks) against
 * the unfused computation above good's at 32 and 64 chunks. Prints both errors per chunk count. */
void gpu_test_dhidden_accum_mutant(const lce_subject *good, const lce_subject *mut);

#endif
