/* lce_production_run.c — `lcecheck production` as a sink of the engine (lce_production.h): the plan's
 * cases, the subjects, the fp64 tier kept on the device, tensors generated ahead on cfg->jobs host
 * threads; each case's results become table rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_production.h"

static void progress(const lce_prod_report *rep, size_t i) {
  const lce_prod_case_result *cr = &rep->cases[i];
  fprintf(stderr, "[%zu/%zu] %s  gen %.1f s  fp64 %.1f s%s", i + 1, rep->ncases, cr->id, cr->gen_seconds,
          cr->ref_seconds, cr->ref_has_mags ? "" : " (no mags)");
  for (int j = 0; j < rep->cfg->nsubjects; j++)
    fprintf(stderr, "  %s %s %.1f s", rep->cfg->subjects[j], lce_case_result_status(&cr->subj[j]),
            cr->subj[j].subject_seconds);
  fputc('\n', stderr);
}

static void prod_case_done(void *ctx, const lce_engine_case *ec) {
  lce_prod_report *rep = (lce_prod_report *)ctx;
  lce_prod_case_result *cr = &rep->cases[ec->index];
  cr->c = *ec->c;
  snprintf(cr->id, sizeof cr->id, "%s", ec->id);
  cr->gen_seconds = ec->gen_seconds;
  cr->ref_seconds = ec->ref ? ec->ref->seconds : 0.0;
  cr->ref_has_mags = ec->ref ? ec->ref->has_mags : 0;
  for (int j = 0; j < rep->cfg->nsubjects; j++) cr->subj[j] = ec->res[j];
  if (!rep->cfg->quiet) progress(rep, ec->index);
}

lce_code lce_prod_run(lce_prod_report *rep, const lce_subject *const *subjects, const lce_golden *const *goldens,
                      lce_status *st) {
  const lce_prod_config *cfg = rep->cfg;
  lce_case *cases = calloc(rep->ncases ? rep->ncases : 1, sizeof *cases);
  LCE_ALLOC_CHECK(st, cases);
  lce_code rc = LCE_OK;
  for (size_t i = 0; i < rep->ncases && rc == LCE_OK; i++) rc = lce_prod_case_at(cfg, i, &cases[i], st);
  unsigned outputs = 0;
  const lce_output_id judged[] = {LCE_OUT_LOSS, LCE_OUT_D_HIDDEN, LCE_OUT_D_WEIGHT, LCE_OUT_D_EMBEDDING};
  for (size_t k = 0; k < sizeof judged / sizeof judged[0]; k++) outputs |= 1u << judged[k];
  const lce_engine_config ecfg = {.cases = cases, .ncases = rep->ncases, .subjects = subjects, .goldens = goldens,
                                  .nsubjects = (size_t)cfg->nsubjects, .tier = &lce_tier_fp64_gpu,
                                  .device_compare = 1, .prefetch = cfg->jobs, .outputs = outputs};
  if (rc == LCE_OK) rc = lce_engine_run(&ecfg, prod_case_done, rep, st);
  free(cases);
  return rc;
}
