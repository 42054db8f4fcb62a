/* fused_test_bias.c — see fused_test_bias.h. */
#include "fused_test_bias.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lce_fast.h"
#include "lce_output.h"

enum { BIAS_TOKENS = 272, BIAS_IGNORE_EVERY = 20, BIAS_N_VALID = 259 };

static lce_case bias_case(void) {
  lce_case c = lce_case_default();
  c.dtype = LCE_BF16, c.tied = 0, c.tp = 1, c.n = BIAS_TOKENS, c.h = 32, c.v = 40000, c.vp = c.v;
  c.vocab_chunk = 4096, c.reduction = LCE_RED_MEAN, c.ignore_pct = 0, c.prior_grad = 0;
  c.dist = LCE_DIST_FLAT, c.seed = lce_test_seed();
  return c;
}

/* Every BIAS_IGNORE_EVERY-th token ignored (13 of 272: n_valid 259 = 7·37, not a power of two),
 * and grad_output = 259·g for the chosen g. */
static void set_tokens(const lce_case *c, lce_tensors *in, double g) {
  for (int64_t i = 0; i < c->n; i++)
    if (i % BIAS_IGNORE_EVERY == BIAS_IGNORE_EVERY - 1) in->labels[i] = c->ignore_index;
  in->grad_output[0] = (float)(BIAS_N_VALID * g);
}

/* <x - r, r> / <r, r> of output o over the elements the reference certified; EXPECTs <r, r> > 0. */
static double output_bias(const lce_case *c, const lce_outputs *out, const lce_ref_output *ref, lce_output_id o) {
  double dr = 0.0, rr = 0.0;
  for (int64_t i = 0; i < ref->count; i++) {
    if (!ref->decisive[i] || !isfinite(ref->value[i])) continue;
    const double r = ref->value[i];
    dr += (lce_output_get(c, out, o, i) - r) * r, rr += r * r;
  }
  EXPECT(rr > 0.0, "%s: the reference is zero: the bias would be vacuous", lce_output_name(o));
  return rr > 0.0 ? dr / rr : 0.0;
}

/* Runs s on (c, in) and measures the bias of d_hidden [0] and of the weight gradient [1]. */
static int run_bias(const lce_subject *s, const lce_case *c, const lce_tensors *in, const lce_oracle_result *ref,
                    double bias[2], lce_outputs *out) {
  if (!fused_run_on(s, c, in, out)) return 0;
  bias[0] = output_bias(c, out, &ref->out[LCE_OUT_D_HIDDEN], LCE_OUT_D_HIDDEN);
  bias[1] = output_bias(c, out, &ref->out[LCE_OUT_D_WEIGHT], LCE_OUT_D_WEIGHT);
  return 1;
}

void mean_bias_check(const lce_subject *const *good, int ngood, const lce_subject *mutant) {
  lce_case c = bias_case();
  lce_tensors in = {0};
  lce_oracle_result ref = {0};
  lce_status st = {0};
  lce_test_set_case(&c);
  /* g 0.4 of a bf16 unit (2^-7 relative) above 2^-9: bf16 rounds it down to 2^-9. */
  const double g = 0x1p-9 * (1.0 + 0.4 * 0x1p-7);
  if (lce_case_generate(&c, &in, &st) != LCE_OK) {
    EXPECT(0, "generate: %s", st.msg);
    return;
  }
  set_tokens(&c, &in, g);
  /* Without escalation: the few elements tier 1 cannot certify stay out of the sums instead of
   * costing a tier-0 forward of every token. */
  const lce_fast_options fast = {.escalate = 0};
  if (lce_fast_run_opts(&c, &in, &fast, &ref, NULL, &st) != LCE_OK) {
    EXPECT(0, "tier 1: %s", st.msg);
    lce_oracle_free(&ref), lce_tensors_free(&in);
    return;
  }
  const float g32 = in.grad_output[0] / (float)BIAS_N_VALID; /* the subjects' fp32 g */
  const double predicted = lce_round_to(LCE_BF16, g32) / (double)g32 - 1.0;
  printf("1/n_valid bias (bf16 mean, n %lld, n_valid %d, v %lld, g %a, bf16(g)/g - 1 = %+.3e, bound %.0e):\n",
         (long long)c.n, BIAS_N_VALID, (long long)c.v, (double)g32, predicted, MEAN_BIAS_BOUND);
  lce_outputs og = {0}, om = {0};
  double bg[2], bm[2];
  for (int s = 0; s < ngood; s++) {
    if (run_bias(good[s], &c, &in, &ref, bg, &og)) {
      printf("  %-36s d_hidden %+.3e  d_weight %+.3e\n", good[s]->name, bg[0], bg[1]);
      EXPECT(fabs(bg[0]) <= MEAN_BIAS_BOUND && fabs(bg[1]) <= MEAN_BIAS_BOUND,
             "%s: d_hidden bias %+.3e, d_weight bias %+.3e beyond %.0e (g folded into the bf16 d_logits?)",
             good[s]->name, bg[0], bg[1], MEAN_BIAS_BOUND);
    }
    lce_outputs_free(&og);
  }
  if (mutant && run_bias(mutant, &c, &in, &ref, bm, &om)) {
    printf("  %-36s d_hidden %+.3e  d_weight %+.3e\n", mutant->name, bm[0], bm[1]);
    for (int k = 0; k < 2; k++) {
      EXPECT(fabs(bm[k]) > 10.0 * MEAN_BIAS_BOUND, "%s: %s bias %+.3e is not 10x beyond the bound %.0e: the test "
             "cannot tell the bias", mutant->name, k ? "d_weight" : "d_hidden", bm[k], MEAN_BIAS_BOUND);
      /* Only the label terms -g(1 - p_y) ~ -g share the rounding of g: the bias is that share of it. */
      EXPECT(bm[k] / predicted >= 0.5 && bm[k] / predicted <= 1.1,
             "%s: %s bias %+.3e is not (most of) the rounding of g, %+.3e", mutant->name, k ? "d_weight" : "d_hidden",
             bm[k], predicted);
    }
  }
  lce_outputs_free(&om);
  lce_oracle_free(&ref);
  /* The control: g = 2^-9 is exact in bf16, so folding it changes nothing. */
  set_tokens(&c, &in, 0x1p-9);
  if (mutant && ngood > 0 && fused_run_on(good[0], &c, &in, &og) && fused_run_on(mutant, &c, &in, &om))
    EXPECT(lce_outputs_identical(&c, &og, &om, NULL, 0), "g = 2^-9: %s differs from %s", mutant->name,
           good[0]->name);
  lce_outputs_free(&og), lce_outputs_free(&om);
  lce_tensors_free(&in);
  lce_test_set_case(NULL);
}
