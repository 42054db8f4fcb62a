/* fused_test_bias.h — the 1/n_valid bias, shown gone: shared by the fused-host test
 * (test_fused_mean_bias.c) and the fused-cuda test (test_fused_cuda.c).
 *
 * The case: bf16, reduction mean, 272 tokens of which 13 are ignored (n_valid = 259 = 7·37),
 * V = 40000, flat rows (p_y ~ 1/V, so the label term -g(1 - p_y) ~ -g carries the gradients);
 * grad_output is set so that g = grad_output / 259 lies 0.4 of a bf16 unit above 2^-9, where
 * rounding g to bf16 moves it by -3.1e-3. A subject that folds g into its bf16 d_logits scales every
 * token's label term by bf16(g)/g, so its d_hidden and weight gradient carry that bias; one that
 * keeps g out of them carries only random roundings and the d_logits' own rounding of 1 - p_y to 1
 * (+1/V = +2.5e-5). Measured with fused-host over seeds 1-4: d_hidden -2.4e-5 .. +6.1e-5 (the
 * per-token roundings of 259 tokens), d_weight +2.5e-5; the mutant -3.08e-3 .. -3.13e-3. Biases
 * are measured against tier 1 (reference/oracle/lce_fast.h) as the judge defines them,
 * <x - r, r> / <r, r>. */
#ifndef FUSED_TEST_BIAS_H
#define FUSED_TEST_BIAS_H

#include "fused_test_util.h"

/* |bias| of d_hidden and of the weight gradient a subject free of the 1/n_valid bias stays
 * within on the case above (the suite's target for the reference kernel). */
#define MEAN_BIAS_BOUND 1e-4

/* Runs the ngood subjects `good` and, when not NULL, `mutant` (good[0]'s arithmetic with g folded
 * into d_logits) on the case above, against one tier-1 reference, and EXPECTs: each good |bias|
 * <= MEAN_BIAS_BOUND on both gradients; the mutant's |bias| > 10·MEAN_BIAS_BOUND on both, with
 * 50% to 110% of the predicted bf16(g)/g - 1 (the label terms' share of it); with g set to 2^-9
 * (exact in bf16) the mutant equals good[0] bit for bit. Prints the biases. */
void mean_bias_check(const lce_subject *const *good, int ngood, const lce_subject *mutant);

#endif
