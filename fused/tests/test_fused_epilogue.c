/* test_fused_epilogue.c — the CPU half of the epilogue question (fused_test_epilogue.h), so that the
 * GPU test's verdict rests on checked logic:
 *   the two candidates of lce_gemm_model.h against an independent evaluation in double (exact sums,
 *   one rounding each) on the inputs the GPU test uses, and on a hand-worked case where they differ;
 *   those inputs decide: the candidates differ on at least a tenth of the elements;
 *   the tally: results made with either candidate get that verdict, a mix, one element off by an ulp,
 *   too few deciding elements or alpha = 1 (no element decides) get none;
 *   the host twin's epilogue is the candidate LCE_GEMM_EPILOGUE names.
 * Seed: $LCE_TEST_SEED (default 1). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fused_test_epilogue.h"
#include "lce_prng.h"
#include "lce_test.h"

enum { COUNT = 1 << 16, MIN_DIFFER = COUNT / 10 };

/* Integer accumulators as integer bf16 operands give them: |acc| < 2^17, about a tenth of them 0. */
static float pick_acc(uint64_t seed, int64_t i) {
  const int64_t r = (int64_t)lce_rand_below(seed, 0x31, (uint64_t)i, 1u << 18) - (1 << 17);
  return i % 10 == 0 ? 0.0f : (float)(r / ((int64_t)1 << lce_rand_below(seed, 0x32, (uint64_t)i, 12)));
}

static void test_candidates(uint64_t seed) {
  static const float alphas[] = {(float)(1.0 / 7782.0) /* a mean factor */, 0.7301f, 3.3f};
  for (size_t a = 0; a < sizeof alphas / sizeof alphas[0]; a++) {
    const float alpha = alphas[a];
    int64_t differ = 0, bad = 0, not_exact = 0;
    for (int64_t i = 0; i < COUNT; i++) {
      const float acc = pick_acc(seed, i), c = epilogue_pick_c(alpha, acc, seed, (uint64_t)i);
      const double p = (double)alpha * (double)acc, s = p + (double)c;
      not_exact += epilogue_double_error(alpha, acc, c) != 0.0; /* the references need an exact s */
      const float fma_ref = (float)s, two_ref = (float)((double)(float)p + (double)c);
      const float f = lce_gemm_epilogue_as(LCE_EPILOGUE_FMA, alpha, acc, c);
      const float w = lce_gemm_epilogue_as(LCE_EPILOGUE_TWO_ROUNDINGS, alpha, acc, c);
      bad += f != fma_ref || w != two_ref;
      differ += f != w;
    }
    printf("alpha %a: %lld of %d elements decide between the candidates\n", (double)alpha, (long long)differ, COUNT);
    EXPECT(not_exact == 0, "alpha %a: %lld double sums inexact: the reference does not hold", (double)alpha,
           (long long)not_exact);
    EXPECT(bad == 0, "alpha %a: %lld candidates differ from their double evaluation", (double)alpha, (long long)bad);
    EXPECT(differ >= MIN_DIFFER, "alpha %a: only %lld deciding elements", (double)alpha, (long long)differ);
  }
  /* (1 + 2^-23)^2 = 1 + 2^-22 + 2^-46; minus (1 + 2^-22): fma keeps 2^-46, the rounded product loses it. */
  const float x = 0x1.000002p0f, c = -0x1.000004p0f;
  EXPECT(lce_gemm_epilogue_as(LCE_EPILOGUE_FMA, x, x, c) == 0x1p-46f, "fma candidate: %a",
         (double)lce_gemm_epilogue_as(LCE_EPILOGUE_FMA, x, x, c));
  EXPECT(lce_gemm_epilogue_as(LCE_EPILOGUE_TWO_ROUNDINGS, x, x, c) == 0.0f, "two-roundings candidate: %a",
         (double)lce_gemm_epilogue_as(LCE_EPILOGUE_TWO_ROUNDINGS, x, x, c));
  EXPECT(lce_gemm_epilogue(x, x, c) == lce_gemm_epilogue_as(LCE_GEMM_EPILOGUE, x, x, c),
         "the twin's epilogue is not LCE_GEMM_EPILOGUE's candidate");
}

/* Results of n elements made by candidate r (or, with r < 0, alternating), one element moved by an
 * ulp when nudge; then the tally of them. */
static epilogue_tally tally_of(float alpha, int r, int nudge, uint64_t seed) {
  float *acc = malloc(COUNT * sizeof *acc), *c = malloc(COUNT * sizeof *c), *got = malloc(COUNT * sizeof *got);
  epilogue_tally t = {0};
  if (!acc || !c || !got) {
    EXPECT(0, "out of memory");
  } else {
    for (int64_t i = 0; i < COUNT; i++) {
      acc[i] = pick_acc(seed, i), c[i] = epilogue_pick_c(alpha, acc[i], seed, (uint64_t)i);
      const int which = r >= 0 ? r : (int)(i & 1);
      got[i] = lce_gemm_epilogue_as((lce_epilogue_rounding)which, alpha, acc[i], c[i]);
    }
    if (nudge) got[COUNT / 2] = nextafterf(got[COUNT / 2], INFINITY);
    epilogue_tally_add(&t, alpha, acc, c, got, COUNT);
  }
  free(acc), free(c), free(got);
  return t;
}

static void test_tally(uint64_t seed) {
  const float alpha = (float)(1.0 / 7782.0);
  epilogue_tally t = tally_of(alpha, LCE_EPILOGUE_FMA, 0, seed);
  epilogue_tally_print("fma results", alpha, &t, MIN_DIFFER);
  EXPECT(epilogue_tally_verdict(&t, MIN_DIFFER) == LCE_EPILOGUE_FMA, "fma results not classified as fma");
  EXPECT(t.count == COUNT && t.fma == COUNT && t.two == COUNT - t.differ && t.neither == 0, "fma results: bad counts");
  EXPECT(epilogue_tally_verdict(&t, t.differ + 1) == -1, "a verdict with too few deciding elements");
  t = tally_of(alpha, LCE_EPILOGUE_TWO_ROUNDINGS, 0, seed);
  epilogue_tally_print("two-roundings results", alpha, &t, MIN_DIFFER);
  EXPECT(epilogue_tally_verdict(&t, MIN_DIFFER) == LCE_EPILOGUE_TWO_ROUNDINGS, "two-roundings results misclassified");
  t = tally_of(alpha, -1, 0, seed);
  epilogue_tally_print("mixed results", alpha, &t, MIN_DIFFER);
  EXPECT(epilogue_tally_verdict(&t, MIN_DIFFER) == -1 && t.neither == 0, "mixed results given a verdict");
  t = tally_of(alpha, LCE_EPILOGUE_FMA, 1, seed);
  epilogue_tally_print("fma results, one ulp off", alpha, &t, MIN_DIFFER);
  EXPECT(epilogue_tally_verdict(&t, MIN_DIFFER) == -1 && t.neither == 1, "an element off by an ulp went unseen");
  t = tally_of(1.0f, LCE_EPILOGUE_FMA, 0, seed);
  epilogue_tally_print("alpha 1", 1.0f, &t, MIN_DIFFER);
  EXPECT(t.differ == 0 && t.fma == COUNT && t.inexact >= MIN_DIFFER,
         "alpha 1: the candidates must agree (both are acc + c) and the sums mostly need rounding");
  EXPECT(epilogue_tally_verdict(&t, MIN_DIFFER) == -1, "alpha 1 cannot decide between the candidates");
}

int main(void) {
  const uint64_t seed = lce_test_seed();
  test_candidates(seed);
  test_tally(seed);
  return lce_test_finish("test_fused_epilogue");
}
