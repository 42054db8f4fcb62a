/* test_fused_mean_bias.c — fused-host and fused-host-sm90 carry no 1/n_valid bias: on a bf16 mean
 * case with a non-power-of-two n_valid and a g that bf16 rounds by -3.1e-3, the bias of d_hidden
 * and of the weight gradient against tier 1 stays within 1e-4, while mutant/mean-factor-in-dlogits
 * (g folded into the bf16 d_logits, the old arithmetic) shows most of the predicted -3.1e-3 and
 * equals fused-host bit for bit once g is a power of two (fused_test_bias.h). The mutant runs only
 * in builds with mutants (LCE_WITH_MUTANTS). Seed: $LCE_TEST_SEED (default 1). */
#include <stddef.h>

#include "fused_test_bias.h"

int main(void) {
  const lce_subject *good[2] = {fused_test_subject("fused-host"), fused_test_subject("fused-host-sm90")};
  const lce_subject *mutant = NULL;
#ifdef LCE_WITH_MUTANTS
  mutant = fused_test_subject("mutant/mean-factor-in-dlogits");
#endif
  if (good[0] && good[1]) mean_bias_check(good, 2, mutant);
  return lce_test_finish("test_fused_mean_bias");
}
