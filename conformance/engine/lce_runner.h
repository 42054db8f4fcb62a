/* lce_runner.h — one conformance step, the data path in one call:
 *   case → tensors → subject run → oracle → judge → verdict.
 * Used by the CLI, the mutant test and the fuzz harnesses alike. */
#ifndef LCE_RUNNER_H
#define LCE_RUNNER_H

#include "lce_judge.h"
#include "lce_oracle.h"
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

/* Which oracle produces the reference: tier 0 (MPFR on the CPU, the truth) or tier 2 (fp64 on the
 * GPU, reference/gpu/, certified against tier 0 at medium shapes; for shapes tier 0 cannot reach). */
typedef enum lce_oracle_tier { LCE_ORACLE_MPFR = 0, LCE_ORACLE_FP64_GPU = 2 } lce_oracle_tier;
const char *lce_oracle_tier_name(lce_oracle_tier t); /* "mpfr", "fp64-gpu" */
int lce_oracle_tier_parse(const char *s, lce_oracle_tier *t); /* 1 when s names a tier */
/* The reference for (c, in) from tier t. fp64-gpu returns LCE_ENODEV where no GPU exists or the
 * build has no CUDA. */
lce_code lce_oracle_run_tier(lce_oracle_tier t, const lce_case *c, const lce_tensors *in, lce_oracle_result *res,
                             lce_status *st);
/* lce_run_case judged against tier t's reference (lce_run_case: tier 0). */
lce_code lce_run_case_tier(const lce_subject *s, const lce_case *c, const lce_golden *g, lce_oracle_tier t,
                           lce_case_result *r, lce_status *st);

/* Default golden file for a golden class: $LCE_GOLDEN_DIR/<class>.golden, else the source tree's
 * golden/<class>.golden (path compiled in). lce_golden_path.c. */
void lce_default_golden_path(const char *golden_class, char *buf, size_t size);
/* The golden file that judges subject s by default: lce_default_golden_path of its class for CPU
 * subjects; <golden dir>/<arch>/<class>.golden for GPU subjects (LCE_CAP_NEEDS_GPU), arch from
 * lce_device_arch. */
void lce_subject_golden_path(const lce_subject *s, char *buf, size_t size);
/* The golden of subject s at production shapes (lcecheck production): <golden dir>/production/<arch>/
 * <class>.golden. */
void lce_production_golden_path(const lce_subject *s, char *buf, size_t size);

#endif
