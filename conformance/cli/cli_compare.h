/* cli_compare.h — what the two halves of `lcecheck compare` share (cli_compare.c: arguments, the
 * runs and the pairwise checks; cli_compare_report.c: the per-case and final reports, text and
 * JSON). The verb's contract is in cli_compare.c's header comment. */
#ifndef LCE_CLI_COMPARE_H
#define LCE_CLI_COMPARE_H

#include "cli_common.h"

#define COMPARE_MAX_SUBJECTS 8
/* The triangle inequality holds exactly for the exact sums; the metric sums (long double, then
 * rounded to double) move each side by far less than this relative amount. */
#define COMPARE_TRIANGLE_SLACK 1e-9
#define COMPARE_RELERR_FLOOR_ULPS 0.125
#define COMPARE_BIAS_SIGMAS 4.0

typedef struct compare_args {
  const lce_subject *subj[COMPARE_MAX_SUBJECTS];
  int count;
  cli_args sel; /* --case, --matrix, --oracle, --json, --quiet */
  const lce_reference_tier *tier;
  double predict_factor; /* 0: no prediction check */
  unsigned predict_outputs;    /* bit per lce_output_id the prediction is checked on */
  unsigned predict_precisions; /* bit per lce_precision (lce_case_precision) it is checked on */
} compare_args;

/* One output of one pair on one case. */
typedef struct pair_output {
  int measured;      /* both subjects ran, the output applies and ||r|| > 0 */
  int64_t elements;
  double distance, bias;
  int triangle_ok;
  int predict_checked, predict_ok; /* only for the pair (subject 0, subject 1) with --predict-factor */
  char predict_msg[160];
} pair_output;

/* Totals per (pair, output) over all cases, for the final table. */
typedef struct pair_tally {
  int measured, triangle_fail, predict_checked, predict_fail;
  double worst_distance, worst_abs_bias, worst_triangle_use; /* distance / (relerr_A + relerr_B) */
} pair_tally;

typedef struct compare_tally {
  cli_counts subj[COMPARE_MAX_SUBJECTS];
  pair_tally pair[COMPARE_MAX_SUBJECTS][COMPARE_MAX_SUBJECTS][LCE_OUT_COUNT];
  size_t device_skips, pairs_measured, cases;
  int failed;
} compare_tally;

/* One case: every subject's result and outputs, and every pair's checks. */
typedef struct case_run {
  lce_case_result res[COMPARE_MAX_SUBJECTS];
  int ran[COMPARE_MAX_SUBJECTS]; /* outputs valid */
  int device_skip;               /* something needed a device the machine lacks */
  pair_output pair[COMPARE_MAX_SUBJECTS][COMPARE_MAX_SUBJECTS][LCE_OUT_COUNT];
} case_run;

/* 1 when the case fails: a subject failed its golden or errored, or a pair check failed. */
int compare_case_failed(const compare_args *a, const case_run *run);
/* Adds the case to the totals (and marks t->failed). */
void compare_tally_case(const compare_args *a, const case_run *run, compare_tally *t);
/* The case as text (index of total), or as one JSON object of the "cases" array (first: no comma). */
void compare_print_case_text(const compare_args *a, const case_run *run, size_t index, size_t total);
void compare_print_case_json(const compare_args *a, const case_run *run, int first);
/* The table of totals per pair and output that ends the text report. */
void compare_print_final_table(const compare_args *a, const compare_tally *t);

#endif
