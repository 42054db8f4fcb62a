/* test_production.c — the parts of `lcecheck production` that need no GPU (lce_production.h):
 *   the defaults, and shape lists parse, every malformed one refused with a message naming it;
 *   the plan's cases are valid, padded as Megatron pads (128 * tp), in shape x embedding x tp order;
 *   K per subject rule and output (unchunked: the shard's rows; chunked: the vocab chunk);
 *   rows from synthetic device comparisons through the one judge path (lce_metrics_from_comparison,
 *   lce_bounds_apply): relerr/bias arithmetic, neff, cond, the golden forms at K, a missing entry
 *   as an error, class failures;
 *   the exit status: production subjects must pass, mutants must fail at V >= 128k. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lce_production.h"
#include "lce_subject.h"
#include "lce_test.h"

/* The defaults, and the shape lists (the CLI's tests hold the other options' values to their rules:
 * cli_production_options and cli_production_bad_* in CMakeLists.txt). */
static void test_args(void) {
  lce_prod_config cfg;
  lce_status st;
  lce_prod_config_default(&cfg);
  EXPECT(cfg.nshapes == 4 && cfg.shapes[1].n == 8192 && cfg.shapes[1].v == 128256 && cfg.shapes[3].v == 262144,
         "default shapes are not the production shapes");
  EXPECT(cfg.nsubjects == 3 && strcmp(cfg.subjects[0], "fused-cuda") == 0 &&
             strcmp(cfg.subjects[1], "mutant-cuda/bf16-dhidden-accum") == 0 && strcmp(cfg.subjects[2], "unfused-cuda") == 0,
         "default subjects");
  EXPECT(cfg.ntps == 2 && cfg.tps[0] == 1 && cfg.tps[1] == 8 && cfg.ntied == 2 && !cfg.measure_only && !cfg.json,
         "default tp / embeddings / flags");
  EXPECT(lce_prod_parse_shapes("small", &cfg, &st) == LCE_OK && cfg.nshapes == 2 && strcmp(cfg.shape_set, "small") == 0,
         "small set");
  EXPECT(lce_prod_parse_shapes("4096x4096x32000,16x32x300", &cfg, &st) == LCE_OK && cfg.nshapes == 2 &&
             cfg.shapes[1].h == 32 && cfg.shapes[1].v == 300 && strcmp(cfg.shape_set, "custom") == 0,
         "custom shapes: %s", st.msg);
  static const struct { const char *shapes, *word; } bad[] = {
      {"4096x4096", "not NxHxV"}, {"0x4x4", "outside"}, {"4x4x4,", "trailing comma"}, {"4x4x4,,4x4x4", "empty"},
      {"4x4x4y", "not NxHxV"},    {"99999999x4x4", "outside"}, {"", "needs small, all or NxHxV"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    lce_status_clear(&st);
    EXPECT(lce_prod_parse_shapes(bad[i].shapes, &cfg, &st) != LCE_OK, "'%s' accepted", bad[i].shapes);
    EXPECT(strstr(st.msg, bad[i].word) != NULL, "'%s': message '%s' lacks '%s'", bad[i].shapes, st.msg, bad[i].word);
  }
}

static void test_cases(void) {
  lce_prod_config cfg;
  lce_status st;
  lce_prod_config_default(&cfg);
  EXPECT(lce_prod_case_count(&cfg) == 16, "%zu cases, want 4 shapes x 2 embeddings x 2 tp", lce_prod_case_count(&cfg));
  lce_case c;
  /* order: shape, then tied/untied, then tp */
  EXPECT(lce_prod_case_at(&cfg, 5, &c, &st) == LCE_OK, "case 5: %s", st.msg);
  EXPECT(c.n == 8192 && c.v == 128256 && c.tied == 1 && c.tp == 8, "case 5 is %lld/%lld tied %d tp %d", (long long)c.n,
         (long long)c.v, c.tied, c.tp);
  EXPECT(c.vp == 129024 && c.vp % (128 * 8) == 0, "tp 8 pads 128256 to %lld, want 129024", (long long)c.vp);
  EXPECT(c.dtype == LCE_BF16 && c.reduction == LCE_RED_MEAN && c.dist == LCE_DIST_NORMAL && !c.prior_grad &&
             c.vocab_chunk == LCE_PROD_DEFAULT_VOCAB_CHUNK, "case options");
  EXPECT(lce_prod_case_at(&cfg, 2, &c, &st) == LCE_OK && c.tied == 0 && c.tp == 1 && c.vp == 32000, "case 2");
  for (size_t i = 0; i < lce_prod_case_count(&cfg); i++) {
    EXPECT(lce_prod_case_at(&cfg, i, &c, &st) == LCE_OK, "case %zu invalid: %s", i, st.msg);
    char id[192], again[192];
    lce_case back;
    lce_case_format(&c, id, sizeof id);
    EXPECT(lce_case_parse(id, &back, &st) == LCE_OK && strcmp(lce_case_format(&back, again, sizeof again), id) == 0 &&
               back.vp == c.vp && back.ignore_pct == c.ignore_pct, "case id %s does not round-trip", id);
  }
  EXPECT(lce_prod_case_at(&cfg, 16, &c, &st) != LCE_OK, "case 16 of 16 accepted");
  lce_output_id outs[4];
  lce_prod_case_at(&cfg, 0, &c, &st);
  EXPECT(lce_prod_outputs(&c, outs) == 3 && outs[1] == LCE_OUT_D_HIDDEN, "tied outputs");
  lce_prod_case_at(&cfg, 2, &c, &st);
  EXPECT(lce_prod_outputs(&c, outs) == 4 && outs[3] == LCE_OUT_D_EMBEDDING, "untied outputs");
}

static void test_inner(void) {
  lce_prod_config cfg;
  lce_status st;
  lce_prod_config_default(&cfg);
  lce_case c;
  lce_prod_case_at(&cfg, 4, &c, &st); /* 8192 x 4096 x 128256, tied, tp 1 */
  EXPECT(lce_inner_unchunked(&c, LCE_OUT_D_HIDDEN) == 128256, "unchunked d_hidden K at tp 1");
  EXPECT(lce_inner_unchunked(&c, LCE_OUT_D_WEIGHT) == 8192, "unchunked d_weight K");
  EXPECT(lce_inner_chunked(&c, LCE_OUT_D_HIDDEN) == 4096, "chunked d_hidden K is the vocab chunk");
  EXPECT(lce_inner_chunked(&c, LCE_OUT_LOSS) == 8192, "loss K is lce_output_inner's N");
  lce_prod_case_at(&cfg, 5, &c, &st); /* tp 8: shard of 129024 / 8 = 16128 rows */
  EXPECT(lce_inner_unchunked(&c, LCE_OUT_D_HIDDEN) == 16128, "unchunked d_hidden K at tp 8 is the shard");
  c.vocab_chunk = 1 << 20;
  EXPECT(lce_inner_chunked(&c, LCE_OUT_D_HIDDEN) == 16128, "a chunk beyond the shard is the shard");
  c.token_chunk = 1000;
  EXPECT(lce_inner_chunked(&c, LCE_OUT_D_WEIGHT) == 1000, "chunked d_weight K is the token chunk");
}

/* The comparison of a synthetic subject x = (1 + s) r + noise over n elements of |r| = 1 (as a device
 * reduction gives it): relerr and bias known. */
static lce_comparison synthetic(double shrink, double noise, int64_t n) {
  lce_comparison cmp;
  memset(&cmp, 0, sizeof cmp);
  cmp.sum_r2 = (double)n, cmp.sum_r4 = (double)n;
  cmp.sum_dr = shrink * (double)n;
  cmp.sum_d2 = (shrink * shrink + noise * noise) * (double)n;
  cmp.sum_emag2 = 9.0 * (double)n; /* cond 3 */
  cmp.max_scaled = 0.01;
  cmp.judged = n, cmp.has_emag = 1, cmp.class_ok = 1;
  return cmp;
}

/* What the judge does with one device comparison: metrics, then the bounds (g NULL: measure only).
 * rc: lce_bounds_apply's. */
static lce_code judge_row(const lce_case *c, lce_output_id o, int64_t inner, const lce_comparison *cmp,
                          const lce_golden *g, lce_output_verdict *ov) {
  memset(ov, 0, sizeof *ov);
  ov->judged = ov->pass = 1;
  ov->class_ok = cmp->class_ok;
  if (!ov->class_ok) ov->pass = 0;
  snprintf(ov->class_msg, sizeof ov->class_msg, "%s", cmp->class_msg);
  for (int m = 0; m < LCE_METRIC_COUNT; m++) ov->metric_ok[m] = 1;
  lce_metrics_from_comparison(cmp, &ov->metrics);
  lce_status st;
  ov->inner = inner;
  return g ? lce_bounds_apply(g, "unfused-cuda", c, o, ov, &st) : LCE_OK;
}

static void test_verdict(void) {
  lce_prod_config cfg;
  lce_status st;
  lce_prod_config_default(&cfg);
  lce_case c;
  lce_prod_case_at(&cfg, 4, &c, &st);
  const char *text = "lcecheck-golden 1\n"
                     "unfused-cuda bf16 d_hidden relerr lineark 0x1p-12 2e-8\n" /* 2.44e-4 + 2e-8 K */
                     "unfused-cuda bf16 d_hidden bias lineark 0 1.5e-9\n"
                     "unfused-cuda bf16 d_hidden maxscaled const 0.5\n"
                     "unfused-cuda bf16 loss relerr cond 0 1e-6\n"
                     "unfused-cuda bf16 loss maxscaled const 1\n"
                     "unfused-cuda bf16 lse relerr model 1=1e-6 cond=0 ms*cond/sqrtn=1\n"
                     "unfused-cuda bf16 lse bias model 1=1e-6 cond=0x0.0p+0 k=1e-12\n"
                     "unfused-cuda bf16 loss_token bias model flip=1 rndu=1\n"
                     "unfused-cuda bf16 loss_token relerr model rndu=1\n";
  lce_golden g;
  EXPECT(lce_golden_parse(text, strlen(text), "test", &g, &st) == LCE_OK, "golden: %s", st.msg);
  lce_output_verdict r;
  const int64_t K = lce_inner_unchunked(&c, LCE_OUT_D_HIDDEN);

  lce_comparison cmp = synthetic(-1.2e-4, 1.6e-3, 1 << 20);
  EXPECT(judge_row(&c, LCE_OUT_D_HIDDEN, K, &cmp, &g, &r) == LCE_OK, "d_hidden judged");
  const double want_rel = sqrt(1.2e-4 * 1.2e-4 + 1.6e-3 * 1.6e-3), bound = 0x1p-12 + 2e-8 * 128256;
  EXPECT(fabs(r.metrics.v[LCE_METRIC_RELERR] - want_rel) < 1e-12 && fabs(r.metrics.v[LCE_METRIC_BIAS] + 1.2e-4) < 1e-15,
         "relerr %g bias %g", r.metrics.v[LCE_METRIC_RELERR], r.metrics.v[LCE_METRIC_BIAS]);
  EXPECT(fabs(r.bound[LCE_METRIC_RELERR] - bound) < 1e-15, "bound %g at K 128256", r.bound[LCE_METRIC_RELERR]);
  EXPECT(fabs(r.metrics.cond - 3.0) < 1e-12 && fabs(r.metrics.neff - (double)(1 << 20)) < 1e-3, "cond %g neff %g", r.metrics.cond, r.metrics.neff);
  EXPECT(r.pass && r.bound[LCE_METRIC_MAXSCALED] == 0.5 && r.metrics.undefined[LCE_METRIC_ULPFRAC],
         "a subject within budget must pass with maxscaled bounded and ulpfrac undefined");
  EXPECT(fabs(r.budget_pct[LCE_METRIC_BIAS] - 100.0 * 1.2e-4 / (1.5e-9 * 128256)) < 1e-9, "bias budget %g",
         r.budget_pct[LCE_METRIC_BIAS]);

  cmp = synthetic(-2.5e-4, 1.6e-3, 1 << 20); /* the shrink is over the bias bound 1.9e-4 */
  judge_row(&c, LCE_OUT_D_HIDDEN, K, &cmp, &g, &r);
  EXPECT(!r.pass && r.budget_pct[LCE_METRIC_BIAS] > 100.0, "a shrinking subject passed");
  cmp = synthetic(0.0, 6e-3, 1 << 20); /* noisy: relerr over 2.8e-3 */
  judge_row(&c, LCE_OUT_D_HIDDEN, K, &cmp, &g, &r);
  EXPECT(!r.pass && r.budget_pct[LCE_METRIC_RELERR] > 100.0, "a noisy subject passed");

  /* d_weight has no entry: an error, as for every verb; without a golden: measured */
  cmp = synthetic(0.0, 1e-3, 1 << 20);
  EXPECT(judge_row(&c, LCE_OUT_D_WEIGHT, 8192, &cmp, &g, &r) == LCE_EINVAL, "a missing entry is not an error");
  judge_row(&c, LCE_OUT_D_WEIGHT, 8192, &cmp, NULL, &r);
  EXPECT(r.pass && isfinite(r.metrics.v[LCE_METRIC_RELERR]) && r.bound[LCE_METRIC_RELERR] == 0,
         "measure only: metrics, no bound applied");

  /* the loss: one element, so bias is undefined and not required; its cond bound applies */
  cmp = synthetic(3e-7, 0.0, 1);
  EXPECT(judge_row(&c, LCE_OUT_LOSS, 8192, &cmp, &g, &r) == LCE_OK, "loss judged");
  EXPECT(r.metrics.undefined[LCE_METRIC_BIAS] && isnan(r.metrics.v[LCE_METRIC_BIAS]) && r.pass,
         "loss: bias must be undefined and the verdict pass");
  EXPECT(fabs(r.bound[LCE_METRIC_RELERR] - 3e-6) < 1e-18, "loss bound %g (cond 3)", r.bound[LCE_METRIC_RELERR]);

  /* without mags: cond 1, maxscaled undefined; the bounds that do not scale with cond still apply */
  cmp = synthetic(-1e-4, 1e-3, 1 << 20);
  cmp.has_emag = 0;
  judge_row(&c, LCE_OUT_D_HIDDEN, K, &cmp, &g, &r);
  EXPECT(r.metrics.cond == 1.0 && r.metrics.no_mags && r.metrics.undefined[LCE_METRIC_MAXSCALED] && r.pass &&
             !r.unbounded[LCE_METRIC_RELERR] && r.bound[LCE_METRIC_RELERR] == bound,
         "no mags: cond %g, d_hidden relerr bound %g", r.metrics.cond, r.bound[LCE_METRIC_RELERR]);
  cmp = synthetic(0.0, 6e-3, 1 << 20);
  cmp.has_emag = 0;
  judge_row(&c, LCE_OUT_D_HIDDEN, K, &cmp, &g, &r);
  EXPECT(!r.pass, "no mags: a noisy subject passed a bound that needs no magnitudes");
  /* the loss's bound scales with cond, which a reference without magnitudes cannot give: at cond 1 the
   * same loss error as above (within its bound at cond 3) would fail, so the bound is not evaluated */
  cmp = synthetic(2e-6, 0.0, 1);
  EXPECT(judge_row(&c, LCE_OUT_LOSS, 8192, &cmp, &g, &r) == LCE_OK && r.pass, "loss at cond 3");
  cmp.has_emag = 0;
  EXPECT(judge_row(&c, LCE_OUT_LOSS, 8192, &cmp, &g, &r) == LCE_OK, "loss judged without mags");
  EXPECT(r.pass && r.unbounded[LCE_METRIC_RELERR] && isnan(r.bound[LCE_METRIC_RELERR]) &&
             r.metrics.v[LCE_METRIC_RELERR] == 2e-6,
         "no mags: the loss's cond bound must be left unbounded (pass %d, bound %g)", r.pass, r.bound[LCE_METRIC_RELERR]);

  /* a model form needs the magnitudes through a cond term or ms*cond/sqrtn with a non-zero coefficient */
  const lce_golden_entry *lr = lce_golden_find(&g, "unfused-cuda", LCE_PREC_BF16, LCE_OUT_LSE, LCE_METRIC_RELERR),
                         *lb = lce_golden_find(&g, "unfused-cuda", LCE_PREC_BF16, LCE_OUT_LSE, LCE_METRIC_BIAS),
                         *dr = lce_golden_find(&g, "unfused-cuda", LCE_PREC_BF16, LCE_OUT_D_HIDDEN, LCE_METRIC_RELERR);
  const lce_golden_entry *tb = lce_golden_find(&g, "unfused-cuda", LCE_PREC_BF16, LCE_OUT_LOSS_TOKEN, LCE_METRIC_BIAS),
                         *tr = lce_golden_find(&g, "unfused-cuda", LCE_PREC_BF16, LCE_OUT_LOSS_TOKEN, LCE_METRIC_RELERR);
  EXPECT(lr && lb && dr && lce_golden_needs_mags(lr) && !lce_golden_needs_mags(lb) && !lce_golden_needs_mags(dr),
         "needs_mags: ms*cond/sqrtn 1 yes, cond 0 no, lineark no");
  EXPECT(tb && tr && lce_golden_needs_mags(tb) && !lce_golden_needs_mags(tr),
         "needs_mags: a term measured from rnd (flip) yes, rndu alone no");

  /* class checks come first, whatever the metrics */
  cmp = synthetic(0.0, 0.0, 1 << 20);
  cmp.class_ok = 0;
  snprintf(cmp.class_msg, sizeof cmp.class_msg, "3 elements with the wrong class (NaN/Inf), first at 17");
  judge_row(&c, LCE_OUT_D_HIDDEN, K, &cmp, &g, &r);
  EXPECT(!r.pass && !r.class_ok && strstr(r.class_msg, "first at 17"), "class: %s", r.class_msg);
  lce_golden_free(&g);
}

/* Subject j on a case: judged with a verdict that passes (or not), a class failure, or skipped. */
static void set_out(lce_case_result *r, int pass, int class_ok) {
  memset(&r->verdict, 0, sizeof r->verdict);
  r->skipped = r->error = 0;
  r->verdict.pass = pass && class_ok;
  r->verdict.out[LCE_OUT_D_HIDDEN].judged = 1;
  r->verdict.out[LCE_OUT_D_HIDDEN].class_ok = class_ok;
  snprintf(r->verdict.summary, sizeof r->verdict.summary, "%s", pass ? "pass" : "FAIL d_hidden relerr");
}

static void test_outcome(void) {
  lce_prod_config cfg;
  lce_status st;
  lce_prod_config_default(&cfg); /* fused-cuda, the mutant, unfused-cuda */
  lce_prod_case_result cases[2];
  memset(cases, 0, sizeof cases);
  lce_prod_case_at(&cfg, 0, &cases[0].c, &st); /* V = 32000 */
  lce_prod_case_at(&cfg, 4, &cases[1].c, &st); /* V = 128256 */
  lce_prod_report rep;
  memset(&rep, 0, sizeof rep);
  rep.cfg = &cfg, rep.cases = cases, rep.ncases = 2, rep.mutant[1] = 1;
  char why[512];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) set_out(&cases[i].subj[j], j != 1, 1);
  EXPECT(lce_prod_exit_status(&rep, why, sizeof why) == 0, "all well: %s", why);
  set_out(&cases[0].subj[1], 1, 1); /* the mutant survives below 128k: allowed */
  EXPECT(lce_prod_exit_status(&rep, why, sizeof why) == 0, "mutant survival below 128k: %s", why);
  set_out(&cases[1].subj[1], 1, 1); /* ... but not at 128k */
  EXPECT(lce_prod_exit_status(&rep, why, sizeof why) == 1 && strstr(why, "survived"), "mutant survives 128k: %s", why);
  EXPECT(lce_prod_mutant_killed(&rep, 1, 1) == 0, "a surviving mutant counted as killed");
  set_out(&cases[1].subj[1], 1, 0); /* a class failure kills it too */
  EXPECT(lce_prod_exit_status(&rep, why, sizeof why) == 0, "class-failing mutant: %s", why);
  set_out(&cases[0].subj[2], 0, 1);
  EXPECT(lce_prod_exit_status(&rep, why, sizeof why) == 1 && strstr(why, "unfused-cuda"), "a failing subject: %s", why);
  set_out(&cases[0].subj[2], 1, 1);
  cases[0].subj[0].skipped = 1; /* a skip is not a failure */
  EXPECT(lce_prod_exit_status(&rep, why, sizeof why) == 0, "skip: %s", why);
  cases[0].subj[0].skipped = 0, cases[0].subj[0].error = 1;
  snprintf(cases[0].subj[0].status.msg, sizeof cases[0].subj[0].status.msg, "boom");
  EXPECT(lce_prod_exit_status(&rep, why, sizeof why) == 1 && strstr(why, "boom"), "error: %s", why);
  cases[0].subj[0].error = 0;
  set_out(&cases[1].subj[1], 1, 1); /* a pass with bounds left out (no magnitudes): no verdict on the mutant */
  cases[1].subj[1].verdict.unbounded = 3;
  EXPECT(lce_prod_mutant_killed(&rep, 1, 1) == -1 && lce_prod_exit_status(&rep, why, sizeof why) == 1 &&
             strstr(why, "no verdict") && strstr(why, "magnitudes") && !strstr(why, "too loose"),
         "a mutant passing with unbounded metrics: %s", why);
  set_out(&cases[1].subj[1], 0, 1);
  cases[1].subj[1].verdict.unbounded = 3; /* failing a bound that was evaluated: killed all the same */
  EXPECT(lce_prod_mutant_killed(&rep, 1, 1) == 1 && lce_prod_exit_status(&rep, why, sizeof why) == 0,
         "a mutant failing with some metrics unbounded: %s", why);

  cfg.measure_only = 1; /* no bounds: only class checks count, the mutant is unjudged */
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) set_out(&cases[i].subj[j], 0, 1);
  EXPECT(lce_prod_exit_status(&rep, why, sizeof why) == 0 && lce_prod_mutant_killed(&rep, 1, 1) == -1,
         "measure only: %s", why);
  set_out(&cases[1].subj[2], 0, 0);
  EXPECT(lce_prod_exit_status(&rep, why, sizeof why) == 1, "a class failure while measuring passed");
}

int main(void) {
  test_args();
  test_cases();
  test_inner();
  test_verdict();
  test_outcome();
  return lce_test_finish("test_production");
}
