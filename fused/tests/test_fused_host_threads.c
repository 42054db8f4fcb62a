/* test_fused_host_threads.c — fused-host gives the same bits with any thread count.
 *
 * fused_host.c runs its tile loops over tokens and vocab rows in parallel where the build has
 * OpenMP (reference/case/lce_parallel.h): every element is computed by one thread in a fixed order, so
 * the outputs must not depend on how many threads run. Each case below is large enough for every
 * tile loop to go parallel on its full chunks (LCE_PARALLEL_MIN_MACS; a short last chunk may stay
 * serial), and is run with 1, 2, 3 and 4 threads by
 * fused-host, fused-host-sm90 and, where built, the mutants whose tile code differs (the weight
 * gradient's variants); the outputs must be byte-identical to the 1-thread run. Without OpenMP
 * there is nothing to test: exit 77 (skipped). */
#include <stdio.h>

#include "fused_test_util.h"

#ifdef _OPENMP
#include <omp.h>

static const char *const CASES[] = {
    "bf16.untied.tp2.n24.h128.v2000.vp2048.vc512.mean.ign10.prior.mixed.s5",
    "fp32.tied.tp1.n32.h128.v1024.vp1024.vc1024.sum.ign25.tc16.ls100.zl100.sc30.cw.fresh.hard.s6",
    "fp16.untied.tp4.n24.h128.v3000.vp3072.vc512.none.ign0.prior.normal.s7",
};
static const char *const SUBJECTS[] = {
    "fused-host", "fused-host-sm90",
#ifdef LCE_WITH_MUTANTS
    "mutant/dweight-dtype-across-token-chunks", "mutant/tied-grad-overwritten",
#endif
};

static void check_case(const char *subject, const char *id) {
  lce_case c;
  lce_status st = {0};
  EXPECT(lce_case_parse(id, &c, &st) == LCE_OK, "%s: %s", id, st.msg);
  fused_run one = {0};
  lce_test_set_case(&c);
  omp_set_num_threads(1);
  if (fused_run_case(fused_test_subject(subject), &c, &one)) {
    for (int threads = 2; threads <= 4; threads++) {
      lce_outputs out = {0};
      omp_set_num_threads(threads);
      if (fused_run_on(fused_test_subject(subject), &c, &one.in, &out))
        EXPECT(lce_outputs_identical(&c, &one.out, &out, NULL, 0), "%s, %d threads: outputs differ from 1 thread", subject,
               threads);
      lce_outputs_free(&out);
    }
  }
  fused_run_free(&one);
}

int main(void) {
  for (size_t s = 0; s < sizeof SUBJECTS / sizeof SUBJECTS[0]; s++)
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) check_case(SUBJECTS[s], CASES[i]);
  return lce_test_finish("test_fused_host_threads");
}
#else
int main(void) {
  printf("test_fused_host_threads: built without OpenMP, fused-host runs on one thread: skipped\n");
  return 77;
}
#endif
