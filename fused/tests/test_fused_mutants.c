/* test_fused_mutants.c — the mutants differ from fused-host exactly where their upstream bug does:
 *   mutant/bf16-dhidden-accum: d_hidden's error against the double unfused computation grows with
 *     the number of vocab chunks (1, 8, 32, 64) while fused-host's stays flat; with one chunk and
 *     one shard it is bit-identical to fused-host; the shard reduction also rounds; fp32 inputs
 *     leave it identical (rounding to fp32 is a no-op);
 *   mutant/tied-weight-when-untied: an untied run leaves grad_weight equal to its prior and writes
 *     grad_embedding; a tied run is bit-identical to fused-host.
 * Built only with LCE_BUILD_MUTANTS. Seed: $LCE_TEST_SEED (default 1). */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

#include "fused_test_util.h"

/* 1 when every output buffer of a and b holds the same bytes. */
static int outputs_identical(const lce_case *c, const lce_outputs *a, const lce_outputs *b) {
  size_t nh = (size_t)(c->n * c->h), vh = (size_t)(c->vp * c->h);
  return memcmp(a->loss, b->loss, 4) == 0 && memcmp(a->loss_token, b->loss_token, (size_t)c->n * 4) == 0 &&
         memcmp(a->lse, b->lse, (size_t)c->n * 4) == 0 &&
         memcmp(a->d_hidden, b->d_hidden, nh * lce_dtype_size(c->dtype)) == 0 &&
         memcmp(a->grad_embedding, b->grad_embedding, vh * 4) == 0 &&
         (c->tied || memcmp(a->grad_weight, b->grad_weight, vh * 4) == 0);
}

static double d_hidden_err(const lce_case *c, const lce_outputs *out, const unfused_ref *ref) {
  double *dh = outputs_d_hidden(c, out);
  double e = dh ? normwise_rel_err(dh, ref->d_hidden, c->n * c->h, "d_hidden") : 1.0;
  free(dh);
  return e;
}

/* ---- mutant/bf16-dhidden-accum ------------------------------------------------------------- */

static void test_bf16_dhidden_accum(void) {
  const lce_subject *host = fused_test_subject("fused-host");
  const lce_subject *mut = fused_test_subject("mutant/bf16-dhidden-accum");
  if (!host || !mut) return;
  lce_case c = lce_case_default();
  c.dtype = LCE_BF16, c.tied = 0, c.tp = 1, c.n = 32, c.h = 64, c.v = 1024, c.vp = 1024;
  c.vocab_chunk = c.v, c.reduction = LCE_RED_MEAN, c.dist = LCE_DIST_NORMAL, c.seed = fused_test_seed();
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
    fused_test_set_case(&ck);
    lce_outputs oh = {0}, om = {0};
    e_host[k] = e_mut[k] = -1.0;
    if (fused_run_on(host, &ck, &r.in, &oh) && fused_run_on(mut, &ck, &r.in, &om)) {
      e_host[k] = d_hidden_err(&ck, &oh, &ref);
      e_mut[k] = d_hidden_err(&ck, &om, &ref);
      printf("  %6lld  %10.3e  %10.3e\n", (long long)chunks[k], e_host[k], e_mut[k]);
      if (chunks[k] == 1)
        EXPECT(outputs_identical(&ck, &oh, &om), "one chunk, one shard: the mutant must equal fused-host");
      else
        EXPECT(e_mut[k] > e_host[k], "%lld chunks: mutant error %.3e not above fused-host's %.3e",
               (long long)chunks[k], e_mut[k], e_host[k]);
    }
    lce_outputs_free(&oh), lce_outputs_free(&om);
  }
  fused_test_set_case(&r.c);
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
  fused_test_set_case(&ct);
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
    EXPECT(outputs_identical(&c, &rh.out, &rm.out), "fp32: the mutant must equal fused-host");
  fused_run_free(&rh), fused_run_free(&rm);
}

/* ---- mutant/tied-weight-when-untied -------------------------------------------------------- */

static void test_tied_weight_when_untied(void) {
  const lce_subject *host = fused_test_subject("fused-host");
  const lce_subject *mut = fused_test_subject("mutant/tied-weight-when-untied");
  if (!host || !mut) return;
  lce_case c = lce_case_default();
  c.n = 16, c.h = 32, c.v = 300, c.vp = 384, c.tp = 2, c.vocab_chunk = 32, c.prior_grad = 1;
  c.ignore_pct = 25, c.seed = fused_test_seed();
  for (int tied = 0; tied <= 1; tied++) {
    c.tied = tied;
    fused_run rh = {0}, rm = {0};
    if (fused_run_case(host, &c, &rh) && fused_run_case(mut, &c, &rm)) {
      const int64_t vh = c.vp * c.h;
      if (tied) {
        EXPECT(outputs_identical(&c, &rh.out, &rm.out), "tied: the mutant must equal fused-host");
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

int main(void) {
  test_bf16_dhidden_accum();
  test_tied_weight_when_untied();
  return fused_test_finish("test_fused_mutants");
}
