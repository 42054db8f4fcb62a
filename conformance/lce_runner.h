/* lce_runner.h — one conformance step, the data path in one call:
 *   case → tensors → subject run → oracle → judge → verdict.
 * Used by the CLI, the mutant test and the fuzz harnesses alike. */
#ifndef LCE_RUNNER_H
#define LCE_RUNNER_H

#include "lce_judge.h"
#include "lce_subject.h"

typedef struct lce_case_result {
  lce_case c;
  char id[192];
  int skipped;            /* the subject cannot run this case (capability); why says so */
  int error;              /* the subject or oracle returned an error; status says which */
  lce_status status;
  lce_verdict verdict;    /* valid when !skipped && !error */
  double subject_seconds, oracle_seconds;
  int64_t n_valid;                   /* tokens not labelled ignore_index */
  int64_t oracle_decisive, oracle_total;
  double oracle_worst_rel_err;       /* the oracle's certified accuracy on this case */
} lce_case_result;

/* Runs subject s on case c and judges it against g (NULL: metrics only, no bounds).
 * Returns LCE_OK when a verdict (pass or fail) or a skip was produced; an error code when the case,
 * the subject or the oracle failed (also recorded in r->status). */
lce_code lce_run_case(const lce_subject *s, const lce_case *c, const lce_golden *g, lce_case_result *r,
                      lce_status *st);

/* Default golden file for a golden class: $LCE_GOLDEN_DIR/<class>.golden, else the source tree's
 * golden/<class>.golden (path compiled in). */
void lce_default_golden_path(const char *golden_class, char *buf, size_t size);

#endif
