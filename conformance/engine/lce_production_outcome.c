/* lce_production_outcome.c — what a production run's results add up to: whether a mutant was killed,
 * and the exit status of the whole run (lce_production.h).
 * A mutant failing is the suite working, so mutants count the other way round: they must fail
 * wherever V >= LCE_PROD_MUTANT_MIN_V and may survive below it. No GPU needed. */
#include <stdio.h>
#include <string.h>

#include "lce_production.h"

/* A class failure in any judged output (with --measure-only the only way to fail). */
static int class_failed(const lce_case_result *r) {
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    if (r->verdict.out[o].judged && !r->verdict.out[o].class_ok) return 1;
  return 0;
}

int lce_prod_mutant_killed(const lce_prod_report *rep, size_t i, int j) {
  const lce_case_result *r = &rep->cases[i].subj[j];
  if (r->error || r->skipped) return -1;
  if (class_failed(r)) return 1;
  if (rep->cfg->measure_only) return -1;
  return !r->verdict.pass;
}

int lce_prod_exit_status(const lce_prod_report *rep, char *why, size_t size) {
  const lce_prod_config *cfg = rep->cfg;
  for (size_t i = 0; i < rep->ncases; i++) {
    const lce_prod_case_result *cr = &rep->cases[i];
    for (int j = 0; j < cfg->nsubjects; j++) {
      const lce_case_result *r = &cr->subj[j];
      if (r->error) {
        snprintf(why, size, "%s on %s: error: %s", cfg->subjects[j], cr->id, r->status.msg);
        return 1;
      }
      if (r->skipped) continue;
      if (rep->mutant[j]) {
        if (cr->c.v >= LCE_PROD_MUTANT_MIN_V && lce_prod_mutant_killed(rep, i, j) == 0) {
          snprintf(why, size, "mutant %s survived %s (V >= %d): the bounds are too loose", cfg->subjects[j], cr->id,
                   LCE_PROD_MUTANT_MIN_V);
          return 1;
        }
        continue;
      }
      if (class_failed(r) || (!cfg->measure_only && !r->verdict.pass)) {
        snprintf(why, size, "%s on %s: %s", cfg->subjects[j], cr->id, r->verdict.summary);
        return 1;
      }
    }
  }
  if (why && size) why[0] = '\0';
  return 0;
}
