/* lce_production_outcome.c — what a production run's results add up to: the status of one subject on
 * one case, whether a mutant was killed, and the exit status of the whole run (lce_production.h).
 * A mutant failing is the suite working, so mutants count the other way round: they must fail
 * wherever V >= LCE_PROD_MUTANT_MIN_V and may survive below it. No GPU needed. */
#include <stdio.h>
#include <string.h>

#include "lce_production.h"

static int any_verdict(const lce_prod_subject_result *s, lce_prod_verdict v) {
  for (int k = 0; k < s->nout; k++)
    if (s->out[k].verdict == v) return 1;
  return 0;
}

const char *lce_prod_subject_status(const lce_prod_subject_result *s) {
  if (s->error) return "error";
  if (s->skipped) return "skip";
  if (any_verdict(s, LCE_PROD_CLASS_FAIL) || any_verdict(s, LCE_PROD_FAIL) || any_verdict(s, LCE_PROD_NO_BOUND))
    return "fail";
  return "pass";
}

int lce_prod_mutant_killed(const lce_prod_report *rep, size_t i, int j) {
  const lce_prod_subject_result *s = &rep->cases[i].subj[j];
  if (rep->cases[i].error || s->error || s->skipped) return -1;
  if (any_verdict(s, LCE_PROD_FAIL) || any_verdict(s, LCE_PROD_CLASS_FAIL)) return 1;
  if (rep->cfg->measure_only || any_verdict(s, LCE_PROD_NO_BOUND)) return -1;
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
