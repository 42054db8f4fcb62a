/* lce_runner.c — case → tensors → subject → oracle → judge, in one call (see lce_runner.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "lce_runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lce_oracle.h"

#ifndef LCE_SOURCE_DIR
#error "LCE_SOURCE_DIR must be defined by the build (the repository root)"
#endif

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Records an error from a stage into the result and passes the code on. */
static lce_code record_error(lce_case_result *r, lce_code rc, const lce_status *from, lce_status *st) {
  r->error = 1;
  r->status = *from;
  if (st && st != from) *st = *from;
  return rc;
}

lce_code lce_run_case(const lce_subject *s, const lce_case *c, const lce_golden *g, lce_case_result *r,
                      lce_status *st) {
  memset(r, 0, sizeof *r);
  r->c = *c;
  lce_case_format(c, r->id, sizeof r->id);
  lce_status local;
  lce_status_clear(&local);
  lce_code rc = lce_case_validate(c, &local);
  if (rc != LCE_OK) return record_error(r, rc, &local, st);
  char why[128];
  if (!lce_subject_supports(s, c, why, sizeof why)) {
    r->skipped = 1;
    snprintf(r->status.msg, sizeof r->status.msg, "%s", why);
    return LCE_OK;
  }

  lce_tensors in;
  lce_outputs out;
  lce_oracle_result ref;
  memset(&out, 0, sizeof out);
  memset(&ref, 0, sizeof ref);
  rc = lce_case_generate(c, &in, &local);
  if (rc != LCE_OK) return record_error(r, rc, &local, st);
  rc = lce_outputs_alloc(c, &in, &out, &local);
  if (rc == LCE_OK) {
    double t0 = now_seconds();
    rc = s->run(c, &in, &out, &local);
    r->subject_seconds = now_seconds() - t0;
    if (rc == LCE_ENODEV) { /* a GPU subject on a machine without one: skipped, visibly */
      r->skipped = 1;
      r->status = local;
      lce_outputs_free(&out);
      lce_tensors_free(&in);
      return LCE_OK;
    }
  }
  if (rc == LCE_OK) {
    double t0 = now_seconds();
    rc = lce_oracle_run(c, &in, &ref, &local);
    r->oracle_seconds = now_seconds() - t0;
    r->n_valid = ref.n_valid;
    r->oracle_decisive = ref.decisive;
    r->oracle_total = ref.total;
    r->oracle_worst_rel_err = ref.worst_rel_err;
  }
  if (rc == LCE_OK) rc = lce_judge(c, &in, &ref, &out, g, s->name, s->golden_class, &r->verdict, &local);
  lce_oracle_free(&ref);
  lce_outputs_free(&out);
  lce_tensors_free(&in);
  if (rc != LCE_OK) return record_error(r, rc, &local, st);
  return LCE_OK;
}
