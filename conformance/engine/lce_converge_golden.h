/* lce_converge_golden.h — bounds on what a subject's gradients do to training (lcecheck converge,
 * conformance/engine/lce_converge.h), in golden/converge.bounds.
 *
 * Format (every line is one of these; anything else is an error naming file:line):
 *   lcecheck-converge 1                                      first line, exactly
 *   # free text                                              provenance (kept verbatim)
 *   config <dtype> n <N> h <H> v <V> chunk <C> steps <T> every <E> lr <LR> seed <S>
 *                                                            the run the bounds were measured on, once
 *   <class> <dtype> <tied|untied> <metric> <bound>            a finite bound >= 0 (hex float or decimal)
 * Metrics: gap, |loss gap| at the last evaluation; drift, parameter drift at the last evaluation; relerr,
 * relerr_hidden, relerr_head, the largest over the run of the whole gradient's relerr, d_hidden's and the
 * head weight's (lce_converge.h). Every metric needs a bound: a judged run with one missing fails. The bounds judge only runs of the recorded configuration (other
 * seeds included: the seed changes the data and the start, not the model); any other configuration is
 * measured, not judged. Duplicate keys are errors. */
#ifndef LCE_CONVERGE_GOLDEN_H
#define LCE_CONVERGE_GOLDEN_H

#include "lce_converge.h"

typedef enum lce_converge_metric {
  LCE_CONV_GAP = 0,
  LCE_CONV_DRIFT = 1,
  LCE_CONV_RELERR = 2,
  LCE_CONV_RELERR_HIDDEN = 3,
  LCE_CONV_RELERR_HEAD = 4,
  LCE_CONV_METRICS = 5
} lce_converge_metric;

typedef struct lce_converge_bound {
  char subject_class[64];
  lce_dtype dtype;
  int tied;
  lce_converge_metric metric;
  double bound;
} lce_converge_bound;

typedef struct lce_converge_golden {
  lce_converge_config config; /* the recorded run (subject, tier, progress unset) */
  lce_converge_bound *bounds;
  size_t count;
  char path[512];
} lce_converge_golden;

const char *lce_converge_metric_name(lce_converge_metric m);
lce_code lce_converge_golden_load(const char *path, lce_converge_golden *g, lce_status *st);
lce_code lce_converge_golden_parse(const char *text, size_t len, const char *name, lce_converge_golden *g,
                                   lce_status *st);
void lce_converge_golden_free(lce_converge_golden *g);
/* 1 when cfg is the golden's recorded configuration apart from the seed. */
int lce_converge_golden_applies(const lce_converge_golden *g, const lce_converge_config *cfg);
/* The bound for (class, dtype, tied, metric), or NULL. */
const lce_converge_bound *lce_converge_golden_find(const lce_converge_golden *g, const char *subject_class,
                                                   lce_dtype dtype, int tied, lce_converge_metric m);
/* The value of metric m in a finished run. */
double lce_converge_metric_value(const lce_converge_result *r, lce_converge_metric m);

#endif
