/* test_tiers.c — tier 1 (fast, the default oracle) against tier 0 (mpfr, the truth) over whole
 * matrices, through the engine that check, measure and repro use: for every case,
 *   - identical decisive and total counts, and element by element the same decisive flag, the same
 *     rounded value where decisive, and |value_1 - value_0| <= err_1 + err_0 (each tier's stated
 *     bound); non-finite elements of the same class;
 *   - identical verdicts of every subject judged against either reference with its committed golden:
 *     pass/fail, and per output judged, the class check, each metric's pass and the inconclusive
 *     count. Subjects: fused-host, fused-host-sm90 and two CPU mutants (the seed bugs) where built,
 *     so that failing verdicts are compared too; the test requires both kinds to occur.
 * A negative control per matrix: one decisive d_hidden value of tier 1 moved by 4x the sum of the
 * bounds must be caught by the same comparison. Prints the cases, elements compared, the worst
 * |value_1 - value_0| / (err_1 + err_0), the verdicts compared and each tier's seconds.
 * Usage: test_tiers MATRIX[,MATRIX...] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_engine.h"
#include "lce_matrix.h"
#include "lce_parallel.h"

#define MAX_SUBJECTS 4

typedef struct tier_stats {
  const lce_golden *const *goldens;
  const lce_subject *const *subjects;
  size_t nsubjects;
  int64_t cases, elements, verdicts, passes, fails, failures;
  double worst, seconds0, seconds1;
  char worst_at[400]; /* the case and element of the worst ratio */
  int control_done;
} tier_stats;

/* One element of both tiers, for a message. */
static void describe(char *buf, size_t size, const char *id, const lce_oracle_result *f, const lce_oracle_result *m,
                     int o, int64_t i) {
  const lce_ref_output *a = &f->out[o], *b = &m->out[o];
  if (i >= a->count || i >= b->count) {
    snprintf(buf, size, "%s %s: %lld elements in tier 1, %lld in tier 0", id, lce_output_name((lce_output_id)o),
             (long long)a->count, (long long)b->count);
    return;
  }
  snprintf(buf, size, "%s %s[%lld]: tier 1 %a (err %.3g, decisive %d, rounded %a), tier 0 %a (err %.3g, decisive %d, "
           "rounded %a)", id, lce_output_name((lce_output_id)o), (long long)i, a->value[i], a->err[i], a->decisive[i],
           a->rounded[i], b->value[i], b->err[i], b->decisive[i], b->rounded[i]);
}

/* The two references element by element (lce_tiers_differ, decisive flags equal); returns the
 * elements that disagree, printing the first when report is set. */
static int64_t compare_refs(const char *id, const lce_oracle_result *f, const lce_oracle_result *m, int report,
                            tier_stats *ts) {
  lce_tier_diff d;
  const int64_t bad = lce_tiers_differ(f, m, 1, &d);
  if (!report) return bad;
  for (int o = 0; o < LCE_OUT_COUNT; o++) ts->elements += f->out[o].count;
  if (d.worst > ts->worst) ts->worst = d.worst, describe(ts->worst_at, sizeof ts->worst_at, id, f, m, d.worst_output, d.worst_index);
  if (bad) {
    char what[400];
    describe(what, sizeof what, id, f, m, d.output, d.index);
    fprintf(stderr, "FAIL %s (%lld elements disagree)\n", what, (long long)bad);
  }
  return bad;
}

static int same_verdict(const lce_verdict *a, const lce_verdict *b) {
  if (a->pass != b->pass || a->inconclusive != b->inconclusive) return 0;
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_output_verdict *x = &a->out[o], *y = &b->out[o];
    if (x->judged != y->judged || x->class_ok != y->class_ok || x->pass != y->pass) return 0;
    for (int k = 0; k < LCE_METRIC_COUNT; k++)
      if (x->metric_ok[k] != y->metric_ok[k]) return 0;
  }
  return 1;
}

static void sink(void *ctx, const lce_engine_case *ec) {
  tier_stats *ts = ctx;
  if (ec->ref == NULL || ec->in == NULL) return; /* no subject ran: nothing to compare */
  ts->cases++;
  ts->seconds1 += ec->ref->seconds;
  lce_reference r0;
  lce_status st = {0};
  if (lce_reference_prepare(lce_reference_tier_find("mpfr"), ec->c, ec->in, LCE_REF_HOST, &r0, &st) != LCE_OK) {
    fprintf(stderr, "FAIL %s: tier 0: %s\n", ec->id, st.msg);
    ts->failures++;
    return;
  }
  ts->seconds0 += r0.seconds;
  if (ec->ref->decisive != r0.decisive || ec->ref->total != r0.total) {
    fprintf(stderr, "FAIL %s: decisive %lld of %lld in tier 1, %lld of %lld in tier 0\n", ec->id,
            (long long)ec->ref->decisive, (long long)ec->ref->total, (long long)r0.decisive, (long long)r0.total);
    ts->failures++;
  }
  ts->failures += compare_refs(ec->id, &ec->ref->host, &r0.host, 1, ts);
  if (!ts->control_done && ec->ref->host.out[LCE_OUT_D_HIDDEN].count > 0) {
    /* Negative control: a decisive value moved by 4x both bounds (at least its own magnitude's
     * 2^-40) must be caught. */
    lce_oracle_result *h = (lce_oracle_result *)&ec->ref->host;
    lce_ref_output *dh = &h->out[LCE_OUT_D_HIDDEN];
    for (int64_t i = 0; i < dh->count && !ts->control_done; i++) {
      if (!dh->decisive[i] || !isfinite(dh->value[i])) continue;
      const double saved = dh->value[i], e0 = r0.host.out[LCE_OUT_D_HIDDEN].err[i];
      dh->value[i] += fmax(4.0 * (dh->err[i] + e0), 0x1p-40 * fmax(fabs(saved), dh->mag[i]));
      if (compare_refs(ec->id, h, &r0.host, 0, ts) == 0) {
        fprintf(stderr, "FAIL %s: negative control: d_hidden[%lld] moved from %a to %a was not caught\n", ec->id,
                (long long)i, saved, dh->value[i]);
        ts->failures++;
      }
      dh->value[i] = saved;
      ts->control_done = 1;
    }
  }
  for (size_t k = 0; k < ts->nsubjects; k++) {
    const lce_case_result *res = &ec->res[k];
    if (res->skipped || res->error) continue;
    const lce_subject *s = ts->subjects[k];
    int64_t inner[LCE_OUT_COUNT];
    for (int o = 0; o < LCE_OUT_COUNT; o++) inner[o] = lce_subject_inner(s, ec->c, (lce_output_id)o);
    lce_verdict v0;
    if (lce_judge(ec->c, ec->in, &r0, &ec->out[k], ts->goldens[k], s->golden_class, inner, 0, &v0, &st) !=
        LCE_OK) {
      fprintf(stderr, "FAIL %s: %s judged against tier 0: %s\n", ec->id, s->name, st.msg);
      ts->failures++;
      continue;
    }
    ts->verdicts++;
    res->verdict.pass ? ts->passes++ : ts->fails++;
    if (!same_verdict(&res->verdict, &v0)) {
      fprintf(stderr, "FAIL %s: %s: tier 1 verdict '%s', tier 0 verdict '%s'\n", ec->id, s->name,
              res->verdict.summary, v0.summary);
      ts->failures++;
    }
  }
  lce_reference_release(&r0);
}

int main(int argc, char **argv) {
  lce_parallel_prefer_passive(argv); /* no spinning OpenMP threads (lce_parallel.h) */
  if (argc != 2) {
    fprintf(stderr, "usage: test_tiers MATRIX[,MATRIX...]\n");
    return 2;
  }
  const char *names[MAX_SUBJECTS] = {"fused-host", "fused-host-sm90", "mutant/bf16-dhidden-accum",
                                     "mutant/tied-weight-when-untied"};
  const lce_subject *subjects[MAX_SUBJECTS];
  lce_golden goldens[MAX_SUBJECTS];
  const lce_golden *gp[MAX_SUBJECTS];
  size_t ns = 0;
  lce_status st = {0};
  for (int k = 0; k < MAX_SUBJECTS; k++) {
    const lce_subject *s = lce_subject_find(names[k]);
    if (s == NULL) continue; /* a mutant in a build without mutants */
    char path[512];
    lce_subject_golden_path(s, path, sizeof path);
    if (lce_golden_load(path, &goldens[ns], &st) != LCE_OK) {
      fprintf(stderr, "FAIL: %s\n", st.msg);
      return 1;
    }
    subjects[ns] = s, gp[ns] = &goldens[ns], ns++;
  }
  const lce_reference_tier *fast = lce_reference_tier_find("fast");
  tier_stats total = {0};
  char list[256];
  snprintf(list, sizeof list, "%s", argv[1]);
  for (char *m = strtok(list, ","); m; m = strtok(NULL, ",")) {
    lce_case *cases;
    size_t n;
    if (lce_matrix_cases(m, &cases, &n, &st) != LCE_OK) {
      fprintf(stderr, "FAIL: %s\n", st.msg);
      return 1;
    }
    tier_stats ts = {.goldens = gp, .subjects = subjects, .nsubjects = ns};
    const lce_engine_config cfg = {.cases = cases, .ncases = n, .subjects = subjects, .goldens = gp, .nsubjects = ns,
                                   .tier = fast, .keep_outputs = 1, .outputs = 0};
    if (lce_engine_run(&cfg, sink, &ts, &st) != LCE_OK) {
      fprintf(stderr, "FAIL: %s\n", st.msg);
      return 1;
    }
    if (!ts.control_done) fprintf(stderr, "FAIL %s: no decisive d_hidden element for the negative control\n", m), ts.failures++;
    printf("test_tiers %s: %lld cases, %lld elements compared, worst |fast - mpfr| / (err_fast + err_mpfr) = %.3g; "
           "%lld verdicts identical (%lld pass, %lld fail); tier 1 %.2f s, tier 0 %.2f s\n", m, (long long)ts.cases,
           (long long)ts.elements, ts.worst, (long long)ts.verdicts, (long long)ts.passes, (long long)ts.fails,
           ts.seconds1, ts.seconds0);
    printf("  worst at %s\n", ts.worst_at);
    total.failures += ts.failures, total.cases += ts.cases, total.passes += ts.passes, total.fails += ts.fails;
    free(cases);
  }
  for (size_t k = 0; k < ns; k++) lce_golden_free(&goldens[k]);
  if (total.cases == 0) fprintf(stderr, "FAIL: no case ran\n"), total.failures++;
  if (total.passes == 0) fprintf(stderr, "FAIL: no passing verdict compared\n"), total.failures++;
  if (ns == MAX_SUBJECTS && total.fails == 0) fprintf(stderr, "FAIL: no failing verdict compared\n"), total.failures++;
  printf("test_tiers: %s (%lld failures)\n", total.failures ? "FAILED" : "passed", (long long)total.failures);
  return total.failures ? 1 : 0;
}
