/* lce_production_outcome.c — what a production run's results add up to: the status of one subject on
 * one case, whether a mutant was killed, and the exit status of the whole run (lce_production.h).
 * A mutant failing is the suite working, so mutants count the other way round: they must fail
 * wherever V >= LCE_PROD_MUTANT_MIN_V and may survive below it. No GPU needed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lce_production.h"

const char *lce_prod_verdict_name(lce_prod_verdict v) {
  static const char *const NAMES[] = {"measured", "pass", "FAIL", "CLASS FAIL"};
  return (unsigned)v < sizeof NAMES / sizeof NAMES[0] ? NAMES[v] : "?";
}

void lce_prod_row(lce_output_id o, int64_t inner, const lce_output_verdict *ov, int bounded, lce_prod_output_result *r) {
  memset(r, 0, sizeof *r);
  r->output = o;
  r->inner = inner;
  r->exact_only = o == LCE_OUT_D_EMBEDDING;
  r->class_ok = ov->class_ok;
  snprintf(r->class_msg, sizeof r->class_msg, "%s", ov->class_msg);
  r->cond = ov->metrics.cond, r->neff = ov->metrics.neff, r->compared = ov->metrics.judged;
  int fail = 0;
  for (int m = 0; m < LCE_METRIC_COUNT; m++) {
    r->defined[m] = !r->exact_only && !ov->metrics.undefined[m];
    r->v[m] = r->defined[m] ? ov->metrics.v[m] : NAN;
    r->bounded[m] = bounded && r->defined[m];
    r->bound[m] = r->bounded[m] ? ov->bound[m] : NAN;
    r->budget_pct[m] = r->bounded[m] ? ov->budget_pct[m] : NAN;
    fail |= r->bounded[m] && !ov->metric_ok[m];
  }
  r->verdict = !r->class_ok ? LCE_PROD_CLASS_FAIL : fail ? LCE_PROD_FAIL : bounded ? LCE_PROD_PASS : LCE_PROD_MEASURED;
}

static int any_verdict(const lce_prod_subject_result *s, lce_prod_verdict v) {
  for (int k = 0; k < s->nout; k++)
    if (s->out[k].verdict == v) return 1;
  return 0;
}

const char *lce_prod_subject_status(const lce_prod_subject_result *s) {
  if (s->error) return "error";
  if (s->skipped) return "skip";
  if (any_verdict(s, LCE_PROD_CLASS_FAIL) || any_verdict(s, LCE_PROD_FAIL))
    return "fail";
  return "pass";
}

int lce_prod_mutant_killed(const lce_prod_report *rep, size_t i, int j) {
  const lce_prod_subject_result *s = &rep->cases[i].subj[j];
  if (rep->cases[i].error || s->error || s->skipped) return -1;
  if (any_verdict(s, LCE_PROD_FAIL) || any_verdict(s, LCE_PROD_CLASS_FAIL)) return 1;
  if (rep->cfg->measure_only) return -1;
  return 0;
}

int lce_prod_exit_status(const lce_prod_report *rep, char *why, size_t size) {
  const lce_prod_config *cfg = rep->cfg;
  for (size_t i = 0; i < rep->ncases; i++) {
    const lce_prod_case_result *cr = &rep->cases[i];
    if (cr->error) {
      snprintf(why, size, "%s: %s", cr->id, cr->msg);
      return 1;
    }
    for (int j = 0; j < cfg->nsubjects; j++) {
      const lce_prod_subject_result *s = &cr->subj[j];
      if (s->error) {
        snprintf(why, size, "%s on %s: error: %s", cfg->subjects[j], cr->id, s->msg);
        return 1;
      }
      if (s->skipped) continue;
      if (rep->mutant[j]) {
        const int killed = lce_prod_mutant_killed(rep, i, j);
        if (cr->c.v >= LCE_PROD_MUTANT_MIN_V && killed == 0) {
          snprintf(why, size, "mutant %s survived %s (V >= %d): the bounds are too loose", cfg->subjects[j], cr->id,
                   LCE_PROD_MUTANT_MIN_V);
          return 1;
        }
        if (cr->c.v >= LCE_PROD_MUTANT_MIN_V && killed < 0 && !cfg->measure_only) {
          snprintf(why, size, "mutant %s on %s: no verdict (no bound)", cfg->subjects[j], cr->id);
          return 1;
        }
        continue;
      }
      for (int k = 0; k < s->nout; k++) {
        const lce_prod_output_result *o = &s->out[k];
        if (o->verdict == LCE_PROD_PASS || o->verdict == LCE_PROD_MEASURED) continue;
        snprintf(why, size, "%s on %s: %s %s%s%s", cfg->subjects[j], cr->id, lce_output_name(o->output),
                 lce_prod_verdict_name(o->verdict), o->class_ok ? "" : ": ", o->class_ok ? "" : o->class_msg);
        return 1;
      }
    }
  }
  if (why && size) why[0] = '\0';
  return 0;
}
