/* test_judge.c — the judge on a hand-built oracle result and hand-written subject outputs.
 *
 * The fixture is a tiny real case (n 4, h 3, v 5 padded to 8, bf16, prior gradients, token 1
 * ignored) whose tensors come from lce_case_generate and whose outputs come from
 * lce_outputs_alloc (poisoned, guarded, priors copied). The "oracle" is written by hand with
 * dyadic values, and a perfect subject copies it: that must pass at 0% of budget. Each test then
 * breaks one thing the way a real kernel bug would and checks the verdict names it. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_judge.h"
#include "lce_oracle.h"

#include "lce_test.h"

#define CLASS "test-class"
#define GOLDEN_NAME "judge-test.golden"
#define IGNORED_TOKEN 1

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

typedef struct fixture {
  lce_case c;
  lce_tensors in;
  lce_outputs out;
  lce_oracle_result ref;
  lce_golden g;
  lce_verdict v;
  lce_status st;
} fixture;

static void die(const char *what, const lce_status *st) {
  fprintf(stderr, "test setup failed: %s: %s\n", what, st ? st->msg : "");
  exit(1);
}

static const float *weight_prior(const fixture *f) {
  return lce_output_weight_prior(&f->c, &f->in);
}

/* The exact answer the hand-made oracle reports, chosen representable in every output format
 * (d_hidden values are k/16 with k <= 9, so k*15/16 and k*17/16 are bf16 values too). */
static double oracle_value(const fixture *f, lce_output_id o, int64_t i) {
  const lce_case *c = &f->c;
  switch (o) {
    case LCE_OUT_LOSS: return 1.5;
    case LCE_OUT_LOSS_TOKEN: return i == IGNORED_TOKEN ? 0.0 : (double)(i + 1) * 0.75;
    case LCE_OUT_LSE: return (double)(i + 2) * 1.25;
    case LCE_OUT_D_HIDDEN:
      if (i / c->h == IGNORED_TOKEN) return 0.0;
      return (double)((i % 9) + 1) * (i % 2 ? -1 : 1) * 0x1p-4;
    case LCE_OUT_D_WEIGHT: {
      float prior = weight_prior(f)[i];
      if (i >= c->v * c->h) return prior; /* padded rows keep their prior */
      return (double)(prior + (float)((i % 5) + 1) * 0.125f);
    }
    default: return NAN;
  }
}

static void build_oracle(fixture *f) {
  memset(&f->ref, 0, sizeof f->ref);
  for (int oi = 0; oi < LCE_OUT_COUNT; oi++) {
    lce_output_id o = (lce_output_id)oi;
    if (o == LCE_OUT_D_EMBEDDING || !lce_output_applies(&f->c, o)) continue;
    lce_ref_output *r = &f->ref.out[o];
    int64_t n = lce_output_count(&f->c, o);
    r->count = n;
    r->value = calloc((size_t)n, sizeof(double));
    r->err = calloc((size_t)n, sizeof(double));
    r->mag = calloc((size_t)n, sizeof(double));
    r->rounded = calloc((size_t)n, sizeof(double));
    r->decisive = calloc((size_t)n, 1);
    if (!r->value || !r->err || !r->mag || !r->rounded || !r->decisive) die("oracle arrays", NULL);
    for (int64_t i = 0; i < n; i++) {
      double x = oracle_value(f, o, i);
      r->value[i] = r->rounded[i] = x;
      r->err[i] = x == 0 ? 0 : fabs(x) * 0x1p-150; /* exact zeros are certified exact */
      r->mag[i] = fabs(x) + 1;
      r->decisive[i] = 1;
    }
    f->ref.total += n;
  }
  f->ref.decisive = f->ref.total;
  f->ref.precision_bits = LCE_ORACLE_PREC;
}

/* The subject that gets everything right, except that it leaves the lse of the ignored token
 * unwritten (allowed: it is unconstrained). */
static void write_perfect(fixture *f) {
  const lce_case *c = &f->c;
  f->out.loss[0] = (float)oracle_value(f, LCE_OUT_LOSS, 0);
  for (int64_t i = 0; i < c->n; i++) {
    f->out.loss_token[i] = (float)oracle_value(f, LCE_OUT_LOSS_TOKEN, i);
    if (i != IGNORED_TOKEN) f->out.lse[i] = (float)oracle_value(f, LCE_OUT_LSE, i);
  }
  for (int64_t i = 0; i < c->n * c->h; i++)
    lce_store(c->dtype, f->out.d_hidden, (size_t)i, oracle_value(f, LCE_OUT_D_HIDDEN, i));
  float *w = lce_output_weight_grad(c, &f->out);
  for (int64_t i = 0; i < c->v * c->h; i++) w[i] = (float)oracle_value(f, LCE_OUT_D_WEIGHT, i);
}

/* Bounds for every (output, metric) of class CLASS in bf16, except skip_o/skip_m when >= 0. */
/* loss_relerr, when given, replaces the bound of loss relerr (a scalar: its bias is undefined). */
static void build_golden(fixture *f, int skip_o, int skip_m, const char *loss_relerr) {
  char text[8192];
  size_t len = (size_t)snprintf(text, sizeof text, "lcecheck-golden 1\n# test_judge bounds\n");
  static const char *const BOUNDS[LCE_METRIC_COUNT] = {"const 0x1p-8", "const 0x1p-12", "const 0x1p-1",
                                                       "const 0x1p-8"};
  for (int o = 0; o < LCE_OUT_D_EMBEDDING; o++) {
    for (int m = 0; m < LCE_METRIC_COUNT; m++) {
      if (o == skip_o && m == skip_m) continue;
      const char *bound = BOUNDS[m];
      if (o == LCE_OUT_D_HIDDEN && m == LCE_METRIC_RELERR) bound = "sqrtk 0 0x1p-12"; /* K = v = 5 */
      if (o == LCE_OUT_LOSS && m == LCE_METRIC_RELERR && loss_relerr) bound = loss_relerr;
      len += (size_t)snprintf(text + len, sizeof text - len, "%s bf16 %s %s %s\n", CLASS,
                              lce_output_name((lce_output_id)o), lce_metric_name((lce_metric)m), bound);
    }
  }
  if (lce_golden_parse(text, len, GOLDEN_NAME, &f->g, &f->st) != LCE_OK) die("golden", &f->st);
}

static void setup_h(fixture *f, int tied, lce_reduction red, int64_t h) {
  memset(f, 0, sizeof *f);
  f->c = lce_case_default();
  f->c.n = 4, f->c.h = h, f->c.v = 5, f->c.vp = 8, f->c.tp = 1, f->c.vocab_chunk = 2;
  f->c.dtype = LCE_BF16, f->c.tied = tied, f->c.prior_grad = 1, f->c.reduction = red, f->c.seed = 7;
  if (lce_case_generate(&f->c, &f->in, &f->st) != LCE_OK) die("generate", &f->st);
  f->in.labels[IGNORED_TOKEN] = f->c.ignore_index;
  if (lce_outputs_alloc(&f->c, &f->in, &f->out, &f->st) != LCE_OK) die("outputs", &f->st);
  build_oracle(f);
  build_golden(f, -1, -1, NULL);
  write_perfect(f);
}

/* The small fixture most tests use: 4 tokens x 3 hidden units. Too few elements for bias and
 * ulpfrac, which are then undefined (LCE_STAT_MIN_ELEMS) and not bounded. */
static void setup(fixture *f, int tied, lce_reduction red) { setup_h(f, tied, red, 3); }

static void teardown(fixture *f) {
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    lce_ref_output *r = &f->ref.out[o];
    free(r->value), free(r->err), free(r->mag), free(r->rounded), free(r->decisive);
  }
  lce_outputs_free(&f->out);
  lce_tensors_free(&f->in);
  lce_golden_free(&f->g);
}

/* lce_judge against the fixture's per-element values (a host reference), K from lce_output_inner. */
static lce_code judge(fixture *f, const lce_golden *g) {
  lce_status_clear(&f->st);
  lce_reference ref;
  memset(&ref, 0, sizeof ref);
  ref.c = f->c, ref.mode = LCE_REF_HOST, ref.host = f->ref; /* borrowed: not released here */
  return lce_judge(&f->c, &f->in, &ref, &f->out, g, CLASS, NULL, 0, &f->v, &f->st);
}

/* Judges with the fixture's golden and expects a failure whose summary starts with prefix. */
static void expect_fail(fixture *f, const char *what, const char *prefix) {
  lce_code rc = judge(f, &f->g);
  EXPECT(rc == LCE_OK, "%s: judge returned %s: %s", what, lce_code_name(rc), f->st.msg);
  EXPECT(!f->v.pass, "%s: passed (%s)", what, f->v.summary);
  EXPECT(starts_with(f->v.summary, prefix), "%s: summary '%s', expected it to start with '%s'", what, f->v.summary,
         prefix);
}

static void test_perfect(int tied) {
  fixture f;
  setup(&f, tied, LCE_RED_MEAN);
  lce_code rc = judge(&f, &f.g);
  EXPECT(rc == LCE_OK, "perfect (tied %d): %s", tied, f.st.msg);
  EXPECT(f.v.pass && f.v.worst_pct == 0, "perfect (tied %d): %s", tied, f.v.summary);
  EXPECT(starts_with(f.v.summary, "pass (max 0% "), "perfect: summary '%s'", f.v.summary);
  EXPECT(f.v.inconclusive == 0, "perfect: %lld inconclusive", (long long)f.v.inconclusive);
  EXPECT(isnan(f.out.lse[IGNORED_TOKEN]), "the ignored token's lse must stay unwritten in this test");
  EXPECT(f.v.out[LCE_OUT_D_EMBEDDING].judged == !tied, "d_embedding judged only when untied");
  /* The metrics saw real data: the valid tokens' lse, the real rows of d_weight. */
  EXPECT(f.v.out[LCE_OUT_LSE].metrics.judged == 3, "lse judged %lld, expected 3 valid tokens",
         (long long)f.v.out[LCE_OUT_LSE].metrics.judged);
  EXPECT(f.v.out[LCE_OUT_D_WEIGHT].metrics.judged == 15, "d_weight judged %lld, expected 15 (real rows)",
         (long long)f.v.out[LCE_OUT_D_WEIGHT].metrics.judged);
  EXPECT(f.v.out[LCE_OUT_D_HIDDEN].metrics.ref_norm > 0, "d_hidden reference norm must be non-zero");
  rc = judge(&f, NULL);
  EXPECT(rc == LCE_OK && f.v.pass && strcmp(f.v.summary, "pass (class checks only; no golden bounds)") == 0,
         "without golden: %s", f.v.summary);
  teardown(&f);
}

/* The summary's notes stay whole: a long class message is shortened, not "(lse not provided)". */
static void test_summary_notes(void) {
  fixture f;
  setup(&f, 0, LCE_RED_MEAN);
  f.out.unusable |= 1u << LCE_OUT_D_HIDDEN;
  memset(f.out.unusable_msg[LCE_OUT_D_HIDDEN], 'x', sizeof f.out.unusable_msg[0] - 1);
  f.out.unusable_msg[LCE_OUT_D_HIDDEN][sizeof f.out.unusable_msg[0] - 1] = '\0';
  f.out.not_provided |= 1u << LCE_OUT_LSE;
  expect_fail(&f, "unusable d_hidden, lse not provided", "FAIL d_hidden class: xxx");
  const size_t len = strlen(f.v.summary), tail = strlen(" (lse not provided)");
  EXPECT(len > tail && strcmp(f.v.summary + len - tail, " (lse not provided)") == 0 && len > 200,
         "summary '%s' (%zu characters)", f.v.summary, len);
  teardown(&f);
}

static void test_class_failures(void) {
  fixture f;
  setup(&f, 0, LCE_RED_MEAN);
  lce_store(f.c.dtype, f.out.d_hidden, 7, -NAN); /* a computed NaN, not the poison */
  expect_fail(&f, "NaN where finite", "FAIL d_hidden class: element 7: NaN (expected finite ");
  EXPECT(f.v.worst_output == LCE_OUT_D_HIDDEN && isinf(f.v.worst_pct), "class failure is the worst");
  EXPECT(judge(&f, NULL) == LCE_OK && !f.v.pass, "a class failure fails without a golden too");
  teardown(&f);

  setup(&f, 0, LCE_RED_MEAN);
  f.out.loss_token[2] = NAN; /* as lce_outputs_alloc left it */
  expect_fail(&f, "unwritten", "FAIL loss_token class: element 2 not written (poison NaN left)");
  teardown(&f);

  setup(&f, 0, LCE_RED_MEAN);
  f.out.grad_embedding[17] += 0.125f; /* the seed bug: the untied embedding got a gradient */
  expect_fail(&f, "d_embedding touched", "FAIL d_embedding class: element 17 changed (was ");
  teardown(&f);

  setup(&f, 0, LCE_RED_MEAN);
  f.out.grad_weight[16] = 0; /* row 5 is padding */
  expect_fail(&f, "padded row", "FAIL d_weight class: element 16 (padded row 5) changed (was ");
  teardown(&f);

  setup(&f, 1, LCE_RED_MEAN);
  f.out.grad_embedding[23] *= 2; /* tied: the padding lives in the embedding's buffer */
  expect_fail(&f, "tied padded row", "FAIL d_weight class: element 23 (padded row 7) changed");
  teardown(&f);

  setup(&f, 0, LCE_RED_MEAN);
  ((uint16_t *)f.out.d_hidden)[f.c.n * f.c.h] = 0; /* one past the end */
  expect_fail(&f, "guard", "FAIL d_hidden class: d_hidden: guard region after");
  teardown(&f);

  setup(&f, 0, LCE_RED_MEAN);
  lce_store(f.c.dtype, f.out.d_hidden, 4, 0x1p-20); /* token 1 is ignored: its row is exactly 0 */
  expect_fail(&f, "exact zero", "FAIL d_hidden class: element 4: 0x1p-20 (expected exactly 0)");
  teardown(&f);

  setup(&f, 0, LCE_RED_MEAN);
  f.ref.out[LCE_OUT_LOSS].value[0] = f.ref.out[LCE_OUT_LOSS].rounded[0] = INFINITY;
  f.out.loss[0] = -INFINITY;
  expect_fail(&f, "Inf sign", "FAIL loss class: element 0: -Inf (expected +Inf)");
  f.out.loss[0] = INFINITY;
  EXPECT(judge(&f, &f.g) == LCE_OK && f.v.pass, "matching +Inf must pass: %s", f.v.summary);
  teardown(&f);
}

/* d_hidden scaled by (1 + s): relerr |s| and bias s exactly, both far beyond their bounds. */
static void test_scaled_d_hidden(double s) {
  fixture f;
  setup_h(&f, 0, LCE_RED_MEAN, 40); /* 120 non-zero d_hidden elements: bias is a defined statistic */
  for (int64_t i = 0; i < f.c.n * f.c.h; i++)
    lce_store(f.c.dtype, f.out.d_hidden, (size_t)i, oracle_value(&f, LCE_OUT_D_HIDDEN, i) * (1 + s));
  expect_fail(&f, "scaled d_hidden", "FAIL d_hidden bias ");
  const lce_output_verdict *ov = &f.v.out[LCE_OUT_D_HIDDEN];
  EXPECT(ov->class_ok, "scaling is not a class failure: %s", ov->class_msg);
  EXPECT(ov->metrics.v[LCE_METRIC_RELERR] == fabs(s), "relerr %a, expected %a", ov->metrics.v[LCE_METRIC_RELERR],
         fabs(s));
  EXPECT(ov->metrics.v[LCE_METRIC_BIAS] == s, "bias %a, expected %a (sign matters)", ov->metrics.v[LCE_METRIC_BIAS], s);
  EXPECT(!ov->metric_ok[LCE_METRIC_RELERR] && !ov->metric_ok[LCE_METRIC_BIAS], "relerr and bias must both fail");
  double relerr_bound = 0x1p-12 * sqrt(5.0); /* sqrtk with K = lce_output_inner = v */
  EXPECT(ov->bound[LCE_METRIC_RELERR] == relerr_bound, "relerr bound %a, expected %a", ov->bound[LCE_METRIC_RELERR],
         relerr_bound);
  EXPECT(fabs(ov->budget_pct[LCE_METRIC_RELERR] - 100 * fabs(s) / relerr_bound) < 1e-9,
         "relerr budget %g%%", ov->budget_pct[LCE_METRIC_RELERR]);
  EXPECT(ov->budget_pct[LCE_METRIC_BIAS] == 100 * fabs(s) / 0x1p-12, "bias budget %g%%",
         ov->budget_pct[LCE_METRIC_BIAS]);
  EXPECT(f.v.worst_output == LCE_OUT_D_HIDDEN && f.v.worst_metric == LCE_METRIC_BIAS, "worst is d_hidden bias");
  EXPECT(f.v.out[LCE_OUT_D_WEIGHT].pass && f.v.out[LCE_OUT_LOSS].pass, "other outputs still pass");
  teardown(&f);
}

static void test_bounds_and_errors(void) {
  fixture f;
  setup(&f, 0, LCE_RED_MEAN);
  lce_golden_free(&f.g);
  build_golden(&f, LCE_OUT_D_WEIGHT, LCE_METRIC_MAXSCALED, NULL);
  lce_code rc = judge(&f, &f.g);
  EXPECT(rc == LCE_EINVAL, "missing golden entry: judge returned %s", lce_code_name(rc));
  EXPECT(strstr(f.st.msg, "class '" CLASS "' dtype bf16 output d_weight metric maxscaled") &&
             strstr(f.st.msg, GOLDEN_NAME),
         "missing entry message: %s", f.st.msg);
  EXPECT(!f.v.pass, "an error is never a pass");
  teardown(&f);

  /* An oracle result that does not match the case is an error, not a verdict. */
  setup(&f, 0, LCE_RED_MEAN);
  f.ref.out[LCE_OUT_LSE].count = f.c.n - 1;
  rc = judge(&f, &f.g);
  EXPECT(rc == LCE_EINVAL && strstr(f.st.msg, "oracle result for lse") && starts_with(f.v.summary, "error: "),
         "oracle shape mismatch: %s / %s", lce_code_name(rc), f.v.summary);
  teardown(&f);

  /* A zero bound: 0% while the metric is 0, an infinite budget use once it is not. */
  setup(&f, 0, LCE_RED_MEAN);
  lce_golden_free(&f.g);
  build_golden(&f, -1, -1, "const 0");
  EXPECT(judge(&f, &f.g) == LCE_OK && f.v.pass, "bound 0, metric 0: %s", f.v.summary);
  f.out.loss[0] = (float)(1.5 * (1 + 0x1p-10));
  expect_fail(&f, "bound 0", "FAIL loss relerr inf% of budget"); /* a scalar has no bias statistic */
  teardown(&f);

  /* An element whose bound the oracle cannot make small is counted, not judged. */
  setup(&f, 0, LCE_RED_MEAN);
  f.ref.out[LCE_OUT_D_HIDDEN].decisive[7] = 0, f.ref.out[LCE_OUT_D_HIDDEN].err[7] = INFINITY;
  lce_store(f.c.dtype, f.out.d_hidden, 7, 100.0);
  EXPECT(judge(&f, &f.g) == LCE_OK && f.v.pass && f.v.inconclusive == 1, "inconclusive: %s, %lld inconclusive",
         f.v.summary, (long long)f.v.inconclusive);
  teardown(&f);

  /* Reduction none: loss is a logging sum, class-checked only; no golden entry needed for it. */
  setup(&f, 0, LCE_RED_NONE);
  lce_golden_free(&f.g);
  build_golden(&f, LCE_OUT_LOSS, LCE_METRIC_RELERR, NULL);
  f.out.loss[0] = 1234.0f;
  EXPECT(judge(&f, &f.g) == LCE_OK && f.v.pass, "reduction none: %s %s", f.v.summary, f.st.msg);
  f.out.loss[0] = NAN;
  expect_fail(&f, "reduction none loss unwritten", "FAIL loss class: element 0 not written");
  teardown(&f);
}

/* lce_verdict_explain: every judged output's scales, each metric with its bound and budget, and a
 * model-form bound's terms (coefficient * scale = contribution) that sum to that bound. */
static void test_explain(void) {
  fixture f;
  setup_h(&f, 0, LCE_RED_MEAN, 40);
  for (int64_t i = 0; i < f.c.n * f.c.h; i++)
    lce_store(f.c.dtype, f.out.d_hidden, (size_t)i, oracle_value(&f, LCE_OUT_D_HIDDEN, i) * (1 - 0x1p-4));
  lce_golden_entry *e = (lce_golden_entry *)lce_golden_find(&f.g, CLASS, LCE_PREC_BF16, LCE_OUT_D_HIDDEN, LCE_METRIC_RELERR);
  EXPECT(e != NULL, "the fixture's golden has d_hidden relerr");
  if (e == NULL) return;
  e->form = LCE_FORM_MODEL, e->a = e->b = 0.0;
  e->terms = 1u << LCE_TERM_COND | 1u << LCE_TERM_RND;
  e->coef[LCE_TERM_COND] = 0x1p-8, e->coef[LCE_TERM_RND] = 1.0;
  expect_fail(&f, "explain", "FAIL d_hidden bias ");
  char *text = NULL;
  size_t size = 0;
  FILE *mem = open_memstream(&text, &size);
  lce_verdict_explain(mem, "detail: ", &f.g, CLASS, &f.c, &f.v);
  fclose(mem);
  const lce_output_verdict *ov = &f.v.out[LCE_OUT_D_HIDDEN];
  char want[256];
  snprintf(want, sizeof want, "detail: d_hidden bias -0.0625, bound 0.000244141 (25600%% of budget)\n");
  EXPECT(strstr(text, want) != NULL, "explain lacks '%s':\n%s", want, text);
  snprintf(want, sizeof want, "detail: d_hidden relerr 0.0625, bound %.6g (%.0f%% of budget) = cond 0.003906*%.4g=%.4g + rnd 1*0=0\n",
           ov->bound[LCE_METRIC_RELERR], ov->budget_pct[LCE_METRIC_RELERR], ov->metrics.cond, 0x1p-8 * ov->metrics.cond);
  EXPECT(strstr(text, want) != NULL, "explain lacks '%s':\n%s", want, text);
  EXPECT(ov->bound[LCE_METRIC_RELERR] == 0x1p-8 * ov->metrics.cond, "the model bound is the sum of its terms");
  snprintf(want, sizeof want, "detail: d_hidden judged %lld inner ", (long long)ov->metrics.judged);
  EXPECT(strstr(text, want) != NULL && strstr(text, "detail: d_weight scales: coh 0.003906 ") != NULL,
         "explain lacks the scales lines:\n%s", text);
  EXPECT(strstr(text, "detail: loss bias nan (undefined: too few elements, not bounded)\n") != NULL,
         "an undefined metric is named, not bounded:\n%s", text);
  free(text);
  teardown(&f);
}

/* A judged output of inner size 16 with cond c, 100 effective elements, ||r|| 1 and distinct tokens: the
 * scale tests below set the sums they are about. */
static lce_output_verdict scales_fixture(double cond) {
  lce_output_verdict ov;
  memset(&ov, 0, sizeof ov);
  ov.inner = 16;
  ov.metrics.cond = cond, ov.metrics.neff = 100.0, ov.metrics.ref_norm = 1.0, ov.metrics.token_share = 1.0;
  return ov;
}

/* rndu stands for rnd where the reference does not measure it (tier 2, rnd_bias NaN): u/2 of the format
 * the GEMMs read, for the gradients only, and not where r is 0 everywhere; 0 wherever rnd is measured. */
static void test_rndu_scale(void) {
  lce_case c = lce_case_default();
  c.dtype = LCE_BF16;
  lce_output_verdict ov = scales_fixture(2.0);
  ov.metrics.rnd_bias = ov.metrics.flip_bias = ov.metrics.outr_bias = ov.metrics.acc_bias = NAN;
  ov.metrics.rnd_norm = NAN;
  lce_bound_scales s;
  lce_bound_scales_of(&c, LCE_OUT_D_WEIGHT, &ov, &s);
  EXPECT(s.rndu == 0x1p-9 && s.rnd == 0.0 && s.rndn == 0.0, "bf16 d_weight without rnd: rndu %a rnd %a rndn %a", s.rndu,
         s.rnd, s.rndn);
  lce_bound_scales_of(&c, LCE_OUT_D_HIDDEN, &ov, &s);
  EXPECT(s.rndu == 0x1p-9, "bf16 d_hidden without rnd: rndu %a", s.rndu);
  lce_bound_scales_of(&c, LCE_OUT_LSE, &ov, &s);
  EXPECT(s.rndu == 0.0, "lse has no d_logit rounding: rndu %a", s.rndu);
  c.dtype = LCE_FP32, c.gemm = LCE_GEMM_TF32;
  lce_bound_scales_of(&c, LCE_OUT_D_WEIGHT, &ov, &s);
  EXPECT(s.rndu == 0x1p-12, "tf32 d_weight without rnd: rndu %a", s.rndu);
  c.gemm = LCE_GEMM_IEEE;
  lce_bound_scales_of(&c, LCE_OUT_D_WEIGHT, &ov, &s);
  EXPECT(s.rndu == 0x1p-25, "fp32 d_weight without rnd: rndu %a", s.rndu);
  ov.metrics.ref_norm = 0.0;
  lce_bound_scales_of(&c, LCE_OUT_D_WEIGHT, &ov, &s);
  EXPECT(s.rndu == 0.0, "r == 0 everywhere: rndu %a", s.rndu);
  ov.metrics.ref_norm = 1.0, ov.metrics.rnd_bias = -0x1p-20, ov.metrics.rnd_norm = 0x1p-19;
  lce_bound_scales_of(&c, LCE_OUT_D_WEIGHT, &ov, &s);
  EXPECT(s.rndu == 0.0 && s.rnd == 0x1p-20 && s.rndn == 0x1p-19, "rnd measured: rndu %a rnd %a rndn %a", s.rndu, s.rnd,
         s.rndn);
  lce_bound_scales_of(&c, LCE_OUT_LSE, &ov, &s);
  EXPECT(s.rndn == 0.0, "lse has no d_logit rounding: rndn %a", s.rndn);
  EXPECT(lce_bound_term_scale(LCE_TERM_RNDN, &(lce_bound_scales){.rndn = 0x1p-9}) == 0x1p-9 &&
             strcmp(lce_bound_term_name(LCE_TERM_RNDN), "rndn") == 0,
         "term rndn: name %s", lce_bound_term_name(LCE_TERM_RNDN));
  EXPECT(lce_bound_term_scale(LCE_TERM_RNDU, &(lce_bound_scales){.rndu = 0x1p-9}) == 0x1p-9 &&
             strcmp(lce_bound_term_name(LCE_TERM_RNDU), "rndu") == 0,
         "term rndu: name %s", lce_bound_term_name(LCE_TERM_RNDU));
}

/* rnds, the gradients' bias reference: max(|rnd_bias + outs_rnd|, |outs_r|), the bias of a result at R(rnd) or at
 * R(r); rnd + outr (no less) from a comparison that does not sum the signed roundings (tier 2's device path);
 * 0 for the forward outputs. outv: outv_bias, 0 where not summed. */
static void test_rnds_scale(void) {
  lce_case c = lce_case_default();
  c.dtype = LCE_BF16;
  lce_output_verdict ov = scales_fixture(1.0);
  ov.metrics.rnd_bias = 0x1p-10, ov.metrics.outr_bias = 0x1p-9, ov.metrics.rnd_norm = 0x1p-10;
  ov.metrics.outs_rnd = -0x1p-10 - 0x1p-14, ov.metrics.outs_r = 0x1p-13, ov.metrics.outv_bias = 0x1p-16;
  lce_bound_scales s;
  lce_bound_scales_of(&c, LCE_OUT_D_HIDDEN, &ov, &s);
  EXPECT(s.rnds == 0x1p-13 && s.outv == 0x1p-16, "at r the larger: rnds %a outv %a, expected 0x1p-13 and 0x1p-16", s.rnds,
         s.outv);
  ov.metrics.outs_r = -0x1p-15;
  lce_bound_scales_of(&c, LCE_OUT_D_WEIGHT, &ov, &s);
  EXPECT(s.rnds == 0x1p-14, "at rnd the larger (rnd_bias + outs_rnd = -2^-14): rnds %a", s.rnds);
  ov.metrics.outs_r = ov.metrics.outs_rnd = ov.metrics.outv_bias = NAN;
  lce_bound_scales_of(&c, LCE_OUT_D_WEIGHT, &ov, &s);
  EXPECT(s.rnds == 0x1p-10 + 0x1p-9 && s.outv == 0.0, "not summed: rnds %a (rnd + outr) outv %a", s.rnds, s.outv);
  lce_bound_scales_of(&c, LCE_OUT_LSE, &ov, &s);
  EXPECT(s.rnds == 0.0 && s.outv == 0.0, "lse: rnds %a outv %a", s.rnds, s.outv);
  EXPECT(lce_bound_term_scale(LCE_TERM_RNDS, &(lce_bound_scales){.rnds = 0x1p-9}) == 0x1p-9 &&
             strcmp(lce_bound_term_name(LCE_TERM_RNDS), "rnds") == 0 &&
             lce_bound_term_scale(LCE_TERM_OUTV, &(lce_bound_scales){.outv = 0x1p-8}) == 0x1p-8 &&
             strcmp(lce_bound_term_name(LCE_TERM_OUTV), "outv") == 0,
         "terms rnds, outv: names %s %s", lce_bound_term_name(LCE_TERM_RNDS), lce_bound_term_name(LCE_TERM_OUTV));
}

/* pertokn, pertok's normwise twin in the gradients' relerr: u of the format the GEMMs read under reduction
 * none, times max(1, ||m|| / ||r||) (acc_norm; u itself where the reference has no such sum), 0 under sum
 * and mean and for the forward outputs (golden/policy.txt, pertokn). */
static void test_pertokn_scale(void) {
  lce_case c = lce_case_default();
  c.dtype = LCE_BF16, c.reduction = LCE_RED_NONE;
  lce_output_verdict ov = scales_fixture(2.0);
  ov.metrics.rnd_bias = 0x1p-12, ov.metrics.acc_norm = 1.5, ov.metrics.mag_bias = 1.25;
  lce_bound_scales s;
  lce_bound_scales_of(&c, LCE_OUT_D_WEIGHT, &ov, &s);
  EXPECT(s.pertokn == 1.5 * 0x1p-8 && s.pertok == 1.25 * 0x1p-8, "bf16 none d_weight: pertokn %a pertok %a", s.pertokn,
         s.pertok);
  lce_bound_scales_of(&c, LCE_OUT_D_HIDDEN, &ov, &s);
  EXPECT(s.pertokn == 1.5 * 0x1p-8, "bf16 none d_hidden: pertokn %a", s.pertokn);
  lce_bound_scales_of(&c, LCE_OUT_LSE, &ov, &s);
  EXPECT(s.pertokn == 0.0, "lse: pertokn %a", s.pertokn);
  ov.metrics.acc_norm = 0.0; /* a reference without the sum: u itself */
  lce_bound_scales_of(&c, LCE_OUT_D_WEIGHT, &ov, &s);
  EXPECT(s.pertokn == 0x1p-8, "no sum: pertokn %a", s.pertokn);
  c.dtype = LCE_FP32, c.gemm = LCE_GEMM_TF32, ov.metrics.acc_norm = 2.0;
  lce_bound_scales_of(&c, LCE_OUT_D_WEIGHT, &ov, &s);
  EXPECT(s.pertokn == 2.0 * 0x1p-11, "tf32 none: pertokn %a", s.pertokn);
  c.reduction = LCE_RED_MEAN;
  lce_bound_scales_of(&c, LCE_OUT_D_WEIGHT, &ov, &s);
  EXPECT(s.pertokn == 0.0, "mean: pertokn %a", s.pertokn);
  EXPECT(lce_bound_term_scale(LCE_TERM_PERTOKN, &(lce_bound_scales){.pertokn = 0x1p-9}) == 0x1p-9 &&
             strcmp(lce_bound_term_name(LCE_TERM_PERTOKN), "pertokn") == 0,
         "term pertokn: name %s", lce_bound_term_name(LCE_TERM_PERTOKN));
}

int main(void) {
  test_rndu_scale();
  test_rnds_scale();
  test_pertokn_scale();
  test_perfect(0);
  test_perfect(1);
  test_class_failures();
  test_summary_notes();
  test_scaled_d_hidden(-0x1p-4);
  test_scaled_d_hidden(0x1p-4);
  test_bounds_and_errors();
  test_explain();
  return lce_test_finish("test_judge");
}
