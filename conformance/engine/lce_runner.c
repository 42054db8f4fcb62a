/* lce_runner.c — case → tensors → subject → oracle → judge, in one call (see lce_runner.h), with
 * the reference from the oracle tier asked for: tier 0 (MPFR) always, tier 2 (fp64 on the GPU,
 * reference/gpu/lce_ref64.h) where the build has it (LCE_WITH_REF64: CUDA enabled), else ENODEV. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "lce_runner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lce_device.h"
#include "lce_oracle.h"
#ifdef LCE_WITH_REF64
#include "lce_ref64.h"
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

const char *lce_oracle_tier_name(lce_oracle_tier t) {
  return t == LCE_ORACLE_FP64_GPU ? "fp64-gpu" : (t == LCE_ORACLE_MPFR ? "mpfr" : "?");
}

int lce_oracle_tier_parse(const char *s, lce_oracle_tier *t) {
  if (s == NULL) return 0;
  if (strcmp(s, "mpfr") == 0) *t = LCE_ORACLE_MPFR;
  else if (strcmp(s, "fp64-gpu") == 0) *t = LCE_ORACLE_FP64_GPU;
  else return 0;
  return 1;
}

/* LCE_OK when tier t can run here; LCE_ENODEV (with why) when it needs a device this machine or
 * build lacks. */
static lce_code tier_available(lce_oracle_tier t, lce_status *st) {
  if (t != LCE_ORACLE_FP64_GPU) return LCE_OK;
#ifdef LCE_WITH_REF64
  char why[160];
  LCE_CHECK(st, lce_device_query(NULL, why, sizeof why), LCE_ENODEV, "oracle fp64-gpu: %s", why);
  return LCE_OK;
#else
  return lce_fail(st, LCE_ENODEV, __FILE__, __LINE__,
                  "oracle fp64-gpu: this build has no CUDA (sanitizer, fuzzer or CPU-only build)");
#endif
}

lce_code lce_oracle_run_tier(lce_oracle_tier t, const lce_case *c, const lce_tensors *in, lce_oracle_result *res,
                             lce_status *st) {
  if (res != NULL) memset(res, 0, sizeof *res);
  if (t == LCE_ORACLE_MPFR) return lce_oracle_run(c, in, res, st);
  LCE_CHECK(st, t == LCE_ORACLE_FP64_GPU, LCE_EINVAL, "unknown oracle tier %d", (int)t);
  LCE_TRY(tier_available(t, st));
#ifdef LCE_WITH_REF64
  return lce_ref64_oracle(c, in, res, st);
#else
  return LCE_ENODEV; /* unreachable: tier_available failed */
#endif
}

lce_code lce_run_case(const lce_subject *s, const lce_case *c, const lce_golden *g, lce_case_result *r,
                      lce_status *st) {
  return lce_run_case_tier(s, c, g, LCE_ORACLE_MPFR, r, st);
}

lce_code lce_run_case_tier(const lce_subject *s, const lce_case *c, const lce_golden *g, lce_oracle_tier t,
                           lce_case_result *r, lce_status *st) {
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
  if (tier_available(t, &local) != LCE_OK) { /* skip before the subject spends its time */
    r->skipped = 1;
    r->status = local;
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
    rc = lce_oracle_run_tier(t, c, &in, &ref, &local);
    r->oracle_seconds = now_seconds() - t0;
    if (rc == LCE_ENODEV) { /* the fp64-gpu oracle without a GPU: skipped, visibly, as a GPU subject */
      r->skipped = 1;
      r->status = local;
      lce_outputs_free(&out);
      lce_tensors_free(&in);
      return LCE_OK;
    }
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
