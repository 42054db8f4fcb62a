/* lce_golden.h — golden bound files: strict text, one bound per (subject class, dtype, output,
 * metric), in the spirit of glibc's libm-test-ulps.
 *
 * Format (every line is one of these; anything else is an error naming file:line):
 *   lcecheck-golden 1                                   first line, exactly
 *   # free text                                         provenance and comments (kept verbatim)
 * (<dtype> is bf16, fp16, fp32, or tf32 for fp32 inputs with tf32 GEMMs)
 *   <class> <dtype> <output> <metric> const <a>          bound = a
 *   <class> <dtype> <output> <metric> sqrtk <a> <b>      bound = a + b*sqrt(K)
 *   <class> <dtype> <output> <metric> lineark <a> <b>    bound = a + b*K
 *   <class> <dtype> <output> <metric> cond <a> <b>       bound = a + b*kappa
 *   <class> <dtype> <output> <metric> condk <a> <b> <c>  bound = a + b*kappa + c*K
 * with K = lce_output_inner() of the judged case (condk: the tensor-core term of GPU goldens, whose
 * accumulation error grows linearly in the reduction length; DESIGN.md "Device arithmetic"), kappa = the output's normwise condition
 * ||mag||/||r|| on that case (lce_metric_values.cond, >= 1), a and b finite, >= 0, written as hex floats (%a;
 * decimal is accepted on input). For bias the bound applies to |bias|. Duplicate keys are errors.
 * Blank lines are allowed. */
#ifndef LCE_GOLDEN_H
#define LCE_GOLDEN_H

#include "lce_metrics.h"

typedef enum lce_bound_form {
  LCE_FORM_CONST = 0,
  LCE_FORM_SQRTK = 1,
  LCE_FORM_LINEARK = 2,
  LCE_FORM_COND = 3,
  LCE_FORM_CONDK = 4
} lce_bound_form;

typedef struct lce_golden_entry {
  char subject_class[64];
  lce_precision dtype; /* the input dtype, or tf32 (lce_case_precision) */
  lce_output_id output;
  lce_metric metric;
  lce_bound_form form;
  double a, b, c; /* c: condk only */
} lce_golden_entry;

typedef struct lce_golden {
  lce_golden_entry *entries;
  size_t count;
  char **comments; /* '#' lines, verbatim without the newline, in file order */
  size_t ncomments;
  char path[512];
} lce_golden;

const char *lce_bound_form_name(lce_bound_form f);
lce_code lce_golden_load(const char *path, lce_golden *g, lce_status *st);
/* Parses text held in memory; name is used in messages ("name:line: ..."). */
lce_code lce_golden_parse(const char *text, size_t len, const char *name, lce_golden *g, lce_status *st);
/* Writes atomically (temp file in the same directory, then rename): an error leaves the old file. */
lce_code lce_golden_write(const char *path, const lce_golden *g, lce_status *st);
const lce_golden_entry *lce_golden_find(const lce_golden *g, const char *subject_class, lce_precision t,
                                        lce_output_id o, lce_metric m);
/* The bound of entry e for a case with inner size k and output condition cond (kappa). */
double lce_golden_bound(const lce_golden_entry *e, int64_t k, double cond);
void lce_golden_free(lce_golden *g);

#endif
