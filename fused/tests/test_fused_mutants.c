/* test_fused_mutants.c — the mutants differ from fused-host exactly where their upstream bug does:
 *   the catalogue table: for every mutant of fused/mutants.txt, a case id that exposes it and the
 *     outputs that must differ from fused-host there, plus (where one exists) a control case id on
 *     which the bug cannot show and the mutant must equal fused-host bit for bit; every catalogued
 *     mutant must have a row. This is a unit-level check; the conformance kill test
 *     (conformance/tests/test_mutants.c) judges the mutants against the oracle and the goldens;
 *   mutant/bf16-dhidden-accum: d_hidden's error against the double unfused computation grows with
 *     the number of vocab chunks (1, 8, 32, 64) while fused-host's stays flat; with one chunk and
 *     one shard it is bit-identical to fused-host; the shard reduction also rounds; fp32 inputs
 *     leave it identical (rounding to fp32 is a no-op);
 *   mutant/tied-weight-when-untied: an untied run leaves grad_weight equal to its prior and writes
 *     grad_embedding; a tied run is bit-identical to fused-host.
 * Built only with LCE_BUILD_MUTANTS. Seed: $LCE_TEST_SEED (default 1) for the generated cases; the
 * table's case ids carry their own seeds. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "fused_test_util.h"
#include "lce_output.h"

/* ---- mutant/bf16-dhidden-accum ------------------------------------------------------------- */

static void test_bf16_dhidden_accum(void) {
  const lce_subject *host = fused_test_subject("fused-host");
  const lce_subject *mut = fused_test_subject("mutant/bf16-dhidden-accum");
  if (!host || !mut) return;
  lce_case c = lce_case_default();
  c.dtype = LCE_BF16, c.tied = 0, c.tp = 1, c.n = 32, c.h = 64, c.v = 1024, c.vp = 1024;
  c.vocab_chunk = c.v, c.reduction = LCE_RED_MEAN, c.dist = LCE_DIST_NORMAL, c.seed = lce_test_seed();
  fused_run r = {0};
  unfused_ref ref = {0};
  if (!fused_run_case(host, &c, &r) || !unfused_reference(&r.c, &r.in, &ref)) {
    EXPECT(0, "could not run the base case");
    unfused_ref_free(&ref);
    fused_run_free(&r);
    return;
  }
  static const int64_t chunks[] = {1, 8, 32, 64};
  double e_host[4], e_mut[4];
  printf("d_hidden normwise error vs chunk count (bf16, n %lld h %lld v %lld):\n", (long long)c.n,
         (long long)c.h, (long long)c.v);
  printf("  chunks  fused-host  mutant/bf16-dhidden-accum\n");
  for (int k = 0; k < 4; k++) {
    lce_case ck = c; /* the same tensors, cut into more chunks */
    ck.vocab_chunk = c.v / chunks[k];
    lce_test_set_case(&ck);
    lce_outputs oh = {0}, om = {0};
    e_host[k] = e_mut[k] = -1.0;
    if (fused_run_on(host, &ck, &r.in, &oh) && fused_run_on(mut, &ck, &r.in, &om)) {
      e_host[k] = d_hidden_err(&ck, &oh, &ref);
      e_mut[k] = d_hidden_err(&ck, &om, &ref);
      printf("  %6lld  %10.3e  %10.3e\n", (long long)chunks[k], e_host[k], e_mut[k]);
      if (chunks[k] == 1)
        EXPECT(lce_outputs_identical(&ck, &oh, &om, NULL, 0), "one chunk, one shard: the mutant must equal fused-host");
      else
        EXPECT(e_mut[k] > e_host[k], "%lld chunks: mutant error %.3e not above fused-host's %.3e",
               (long long)chunks[k], e_mut[k], e_host[k]);
    }
    lce_outputs_free(&oh), lce_outputs_free(&om);
  }
  lce_test_set_case(&r.c);
  for (int k = 1; k < 4; k++)
    EXPECT(e_mut[k] > e_mut[k - 1], "mutant error does not grow from %lld to %lld chunks (%.3e -> %.3e)",
           (long long)chunks[k - 1], (long long)chunks[k], e_mut[k - 1], e_mut[k]);
  EXPECT(e_mut[3] >= 2.0 * e_mut[0], "64 chunks: mutant error %.3e is not twice the 1-chunk error %.3e", e_mut[3],
         e_mut[0]);
  EXPECT(e_host[3] <= 1.25 * e_host[0], "fused-host error grows with chunks (%.3e -> %.3e): fp32 buffer?",
         e_host[0], e_host[3]);

  /* Vocab-parallel: one chunk per shard, so only the shard buffers and the reduction round. */
  lce_case ct = c;
  ct.tp = 4, ct.vocab_chunk = c.vp / 4;
  lce_test_set_case(&ct);
  lce_outputs oh = {0}, om = {0};
  if (fused_run_on(host, &ct, &r.in, &oh) && fused_run_on(mut, &ct, &r.in, &om)) {
    double eh = d_hidden_err(&ct, &oh, &ref), em = d_hidden_err(&ct, &om, &ref);
    printf("  tp 4, one chunk per shard: fused-host %.3e, mutant %.3e\n", eh, em);
    EXPECT(em > eh, "tp 4: the mutant's shard reduction does not round (error %.3e vs %.3e)", em, eh);
  }
  lce_outputs_free(&oh), lce_outputs_free(&om);
  unfused_ref_free(&ref);
  fused_run_free(&r);

  /* fp32 inputs: holding d_hidden "in the input dtype" is the fp32 buffer itself. */
  c.dtype = LCE_FP32, c.vocab_chunk = 16;
  fused_run rh = {0}, rm = {0};
  if (fused_run_case(host, &c, &rh) && fused_run_case(mut, &c, &rm))
    EXPECT(lce_outputs_identical(&c, &rh.out, &rm.out, NULL, 0), "fp32: the mutant must equal fused-host");
  fused_run_free(&rh), fused_run_free(&rm);
}

/* ---- mutant/tied-weight-when-untied -------------------------------------------------------- */

static void test_tied_weight_when_untied(void) {
  const lce_subject *host = fused_test_subject("fused-host");
  const lce_subject *mut = fused_test_subject("mutant/tied-weight-when-untied");
  if (!host || !mut) return;
  lce_case c = lce_case_default();
  c.n = 16, c.h = 32, c.v = 300, c.vp = 384, c.tp = 2, c.vocab_chunk = 32, c.prior_grad = 1;
  c.ignore_pct = 25, c.seed = lce_test_seed();
  for (int tied = 0; tied <= 1; tied++) {
    c.tied = tied;
    fused_run rh = {0}, rm = {0};
    if (fused_run_case(host, &c, &rh) && fused_run_case(mut, &c, &rm)) {
      const int64_t vh = c.vp * c.h;
      if (tied) {
        EXPECT(lce_outputs_identical(&c, &rh.out, &rm.out, NULL, 0), "tied: the mutant must equal fused-host");
      } else {
        int64_t emb_changed = 0;
        for (int64_t e = 0; e < vh; e++) emb_changed += rm.out.grad_embedding[e] != rm.in.grad_embedding_prior[e];
        EXPECT(memcmp(rm.out.grad_weight, rm.in.grad_weight_prior, (size_t)vh * 4) == 0,
               "untied: the mutant gave grad_weight a gradient");
        EXPECT(emb_changed > c.v * c.h / 2, "untied: the mutant left grad_embedding unchanged (%lld elements)",
               (long long)emb_changed);
        EXPECT(rm.out.loss[0] != rh.out.loss[0], "untied: the mutant's loss equals fused-host's (%g)",
               (double)rh.out.loss[0]);
        printf("untied: fused-host loss %.6f, mutant loss %.6f, mutant changed %lld grad_embedding elements\n",
               (double)rh.out.loss[0], (double)rm.out.loss[0], (long long)emb_changed);
      }
    }
    fused_run_free(&rh), fused_run_free(&rm);
  }
}

/* ---- the catalogue table ------------------------------------------------------------------- */

typedef struct mutant_row {
  const char *mutant;  /* subject name */
  const char *expose;  /* case id on which the bug shows */
  lce_output_id differs[3];
  int n_differs;
  const char *control; /* case id on which the bug cannot show (NULL: none is bit-exact) */
} mutant_row;

static const mutant_row MUTANT_TABLE[] = {
    {"mutant/bf16-dhidden-accum", "bf16.untied.tp2.n16.h32.v300.vp384.vc8.mean.ign25.prior.mixed.s1",
     {LCE_OUT_D_HIDDEN}, 1, "fp32.untied.tp2.n16.h32.v300.vp384.vc8.mean.ign25.prior.mixed.s1"},
    {"mutant/tied-weight-when-untied", "bf16.untied.tp2.n16.h32.v300.vp384.vc32.mean.ign25.prior.mixed.s1",
     {LCE_OUT_D_WEIGHT, LCE_OUT_D_EMBEDDING, LCE_OUT_LOSS}, 3,
     "bf16.tied.tp2.n16.h32.v300.vp384.vc32.mean.ign25.prior.mixed.s1"},
    {"mutant/running-max-zero-init", "bf16.untied.tp1.n16.h32.v300.vp300.vc50.sum.ign0.fresh.negative.s1",
     {LCE_OUT_LSE, LCE_OUT_LOSS_TOKEN, LCE_OUT_D_HIDDEN}, 3, NULL},
    {"mutant/mean-empty-nan", "bf16.untied.tp2.n16.h32.v300.vp384.vc20.mean.ign100.prior.mixed.s1",
     {LCE_OUT_LOSS}, 1, "bf16.untied.tp2.n16.h32.v300.vp384.vc20.mean.ign25.prior.mixed.s1"},
    {"mutant/mean-counts-ignored", "bf16.untied.tp2.n16.h32.v300.vp384.vc20.mean.ign25.prior.mixed.s1",
     {LCE_OUT_LOSS, LCE_OUT_D_HIDDEN, LCE_OUT_D_WEIGHT}, 3,
     "bf16.untied.tp2.n16.h32.v300.vp384.vc20.mean.ign0.prior.mixed.s1"},
    {"mutant/grad-output-after-sum", "bf16.untied.tp2.n16.h32.v300.vp384.vc20.none.ign25.prior.mixed.s1",
     {LCE_OUT_D_HIDDEN, LCE_OUT_D_WEIGHT}, 2, "bf16.untied.tp2.n16.h32.v300.vp384.vc20.sum.ign25.prior.mixed.s1"},
    {"mutant/padded-rows-in-softmax", "fp16.tied.tp2.n16.h32.v300.vp384.vc20.mean.ign10.prior.normal.s1",
     {LCE_OUT_LSE, LCE_OUT_D_HIDDEN, LCE_OUT_D_WEIGHT}, 3,
     "fp16.tied.tp2.n16.h32.v300.vp300.vc20.mean.ign10.prior.normal.s1"},
    {"mutant/no-rescale-online", "fp32.untied.tp1.n16.h32.v300.vp300.vc8.sum.ign0.fresh.mixed.s1",
     {LCE_OUT_LSE, LCE_OUT_LOSS_TOKEN, LCE_OUT_D_HIDDEN}, 3,
     "fp32.untied.tp1.n16.h32.v300.vp300.vc300.sum.ign0.fresh.mixed.s1"},
    {"mutant/shard-merge-no-rescale", "bf16.untied.tp4.n16.h32.v300.vp384.vc96.sum.ign0.fresh.mixed.s1",
     {LCE_OUT_LSE, LCE_OUT_LOSS_TOKEN, LCE_OUT_D_HIDDEN}, 3,
     "bf16.untied.tp1.n16.h32.v300.vp384.vc96.sum.ign0.fresh.mixed.s1"},
    {"mutant/last-chunk-skipped", "bf16.untied.tp1.n16.h32.v300.vp300.vc32.sum.ign0.prior.mixed.s1",
     {LCE_OUT_LSE, LCE_OUT_D_HIDDEN, LCE_OUT_D_WEIGHT}, 3,
     "bf16.untied.tp1.n16.h32.v300.vp300.vc30.sum.ign0.prior.mixed.s1"},
    {"mutant/tied-grad-overwritten", "bf16.tied.tp2.n16.h32.v300.vp384.vc20.sum.ign10.prior.mixed.s1",
     {LCE_OUT_D_WEIGHT}, 1, "bf16.untied.tp2.n16.h32.v300.vp384.vc20.sum.ign10.prior.mixed.s1"},
    {"mutant/smoothing-per-shard-vocab", "bf16.untied.tp2.n16.h32.v300.vp384.vc20.mean.ign10.ls100.prior.mixed.s1",
     {LCE_OUT_LOSS_TOKEN, LCE_OUT_D_HIDDEN, LCE_OUT_D_WEIGHT}, 3,
     "bf16.untied.tp1.n16.h32.v300.vp300.vc20.mean.ign10.ls100.prior.mixed.s1"},
    {"mutant/target-wrong-shard-offset", "bf16.untied.tp2.n16.h32.v300.vp384.vc20.mean.ign10.prior.mixed.s1",
     {LCE_OUT_LOSS_TOKEN, LCE_OUT_D_HIDDEN, LCE_OUT_D_WEIGHT}, 3,
     "bf16.untied.tp1.n16.h32.v300.vp384.vc20.mean.ign10.prior.mixed.s1"},
    {"mutant/dweight-dtype-across-token-chunks", "bf16.untied.tp2.n16.h32.v300.vp384.vc20.sum.ign10.tc4.prior.mixed.s1",
     {LCE_OUT_D_WEIGHT}, 1, "fp32.untied.tp2.n16.h32.v300.vp384.vc20.sum.ign10.fresh.mixed.s1"},
    {"mutant/softcap-no-derivative", "bf16.untied.tp2.n16.h32.v300.vp384.vc20.sum.ign10.sc10.prior.mixed.s1",
     {LCE_OUT_D_HIDDEN, LCE_OUT_D_WEIGHT}, 2, "bf16.untied.tp2.n16.h32.v300.vp384.vc20.sum.ign10.prior.mixed.s1"},
    /* No case id has a power-of-two g (grad_output is drawn in [0.25, 1.75)): test_fused_mean_bias
     * shows the bit-exact control with grad_output set to 2^-k. */
    {"mutant/mean-factor-in-dlogits", "bf16.untied.tp2.n16.h32.v300.vp384.vc20.mean.ign10.prior.mixed.s1",
     {LCE_OUT_D_HIDDEN, LCE_OUT_D_WEIGHT}, 2, NULL},
};

/* Elements of output o where a and b differ (bitwise as doubles; two NaNs are equal). */
static int64_t output_differences(const lce_case *c, const lce_outputs *a, const lce_outputs *b, lce_output_id o) {
  int64_t k = 0;
  for (int64_t i = 0; i < lce_output_count(c, o); i++) {
    double x = lce_output_get(c, a, o, i), y = lce_output_get(c, b, o, i);
    k += !(isnan(x) && isnan(y)) && memcmp(&x, &y, sizeof x) != 0;
  }
  return k;
}

/* Runs fused-host and mutant m on the case of `id` (same tensors); 1 when both ran. */
static int run_pair(const lce_subject *host, const lce_subject *m, const char *id, fused_run *rh, lce_outputs *om) {
  lce_case c;
  lce_status st = {0};
  memset(om, 0, sizeof *om);
  if (lce_case_parse(id, &c, &st) != LCE_OK) {
    EXPECT(0, "%s: bad case id %s: %s", m->name, id, st.msg);
    return 0;
  }
  return fused_run_case(host, &c, rh) && fused_run_on(m, &rh->c, &rh->in, om);
}

static void test_mutant_table(void) {
  const lce_subject *host = fused_test_subject("fused-host");
  const size_t rows = sizeof MUTANT_TABLE / sizeof MUTANT_TABLE[0];
  printf("catalogue table: mutant, exposing case, differing elements per output\n");
  for (size_t i = 0; host && i < lce_subject_count(); i++) { /* every catalogued mutant has a row */
    const lce_subject *s = lce_subject_at(i);
    size_t k = 0;
    while (k < rows && strcmp(MUTANT_TABLE[k].mutant, s->name) != 0) k++;
    EXPECT(!(s->caps & LCE_CAP_MUTANT) || (s->caps & LCE_CAP_NEEDS_GPU) || k < rows,
           "%s has no row in the mutant table", s->name);
  }
  for (size_t k = 0; host && k < rows; k++) {
    const mutant_row *row = &MUTANT_TABLE[k];
    const lce_subject *m = fused_test_subject(row->mutant);
    if (!m) continue;
    fused_run rh = {0};
    lce_outputs om;
    if (run_pair(host, m, row->expose, &rh, &om)) {
      printf("  %-40s %s:", row->mutant, row->expose);
      for (int d = 0; d < row->n_differs; d++) {
        int64_t diff = output_differences(&rh.c, &rh.out, &om, row->differs[d]);
        printf(" %s %lld", lce_output_name(row->differs[d]), (long long)diff);
        EXPECT(diff > 0, "%s: %s identical to fused-host on %s", row->mutant, lce_output_name(row->differs[d]),
               row->expose);
      }
      printf("\n");
    }
    lce_outputs_free(&om);
    fused_run_free(&rh);
    if (row->control == NULL) continue;
    if (run_pair(host, m, row->control, &rh, &om))
      EXPECT(lce_outputs_identical(&rh.c, &rh.out, &om, NULL, 0), "%s differs from fused-host on the control case %s",
             row->mutant, row->control);
    lce_outputs_free(&om);
    fused_run_free(&rh);
  }
}

int main(void) {
  test_mutant_table();
  test_bf16_dhidden_accum();
  test_tied_weight_when_untied();
  return lce_test_finish("test_fused_mutants");
}
