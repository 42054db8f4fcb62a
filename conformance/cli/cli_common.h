/* cli_common.h — what every lcecheck verb shares: argument parsing, subject and golden lookup,
 * and the JSON / text rendering of one case result. */
#ifndef LCE_CLI_COMMON_H
#define LCE_CLI_COMMON_H

#include <stdio.h>

#include "lce_runner.h"

/* Exit codes of every verb. */
enum { CLI_PASS = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

typedef struct cli_args {
  const char *subject;  /* --subject S */
  const char *matrix;   /* --matrix NAME */
  const char *case_id;  /* --case ID, or repro's positional ID */
  const char *golden;   /* --golden PATH */
  int json;             /* --json */
  int quiet;            /* --quiet: no per-case progress lines */
  const char *oracle;   /* --oracle mpfr|fp64-gpu (lce_oracle_tier_parse); NULL: mpfr */
  /* --shard I/N: only the matrix cases whose index i has i % N == I, so that N processes (one per
   * core: the MPFR oracle is single-threaded) share a matrix. shard_count 0: none. */
  unsigned long shard_index, shard_count;
} cli_args;

/* Parses argv[first..] into a; prints the problem and returns CLI_USAGE on anything unknown.
 * positional_case: a bare argument is taken as the case id (repro). argv[1] is the verb: --shard is
 * refused unless it is check or measure. */
int cli_parse_args(int argc, char **argv, int first, int positional_case, cli_args *a);

/* Finds subject a->subject (default "fused-host"); prints the known names when unknown. */
const lce_subject *cli_subject(const cli_args *a);

/* Loads a->golden or the default golden of the subject's class into g; path_used receives the path.
 * Prints the parse error (file:line) and returns CLI_USAGE on failure. */
int cli_load_golden(const cli_args *a, const lce_subject *s, lce_golden *g, char *path_used, size_t size);

/* Cases selected by --case or --matrix (default "default"), only shard --shard's among them; free()
 * *cases. CLI_USAGE on error. */
int cli_cases(const cli_args *a, lce_case **cases, size_t *count);

void cli_json_string(FILE *f, const char *s);
/* A number as JSON: %.9g, or null for NaN and Inf (JSON has neither). */
void cli_json_number(FILE *f, double x);
/* One case result as a JSON object (with bounds and budgets when with_bounds). */
void cli_json_case(FILE *f, const lce_case_result *r, int with_bounds);
/* "pass" | "fail" | "skip" | "error" */
const char *cli_case_status(const lce_case_result *r);

int cli_list(int argc, char **argv);
int cli_check(int argc, char **argv, int measure_only);
int cli_repro(int argc, char **argv);
int cli_bench(int argc, char **argv); /* cli_bench.c: exits 77 where no GPU exists */
int cli_probe(int argc, char **argv);      /* cli_probe.c: tensor-core MMA probe (77 without GPU, except --replay) */
int cli_compare(int argc, char **argv);    /* cli_compare.c: several subjects on the same case, one oracle */
int cli_production(int argc, char **argv); /* cli_production.c: production shapes vs the fp64 GPU tier (77 without GPU) */

#endif
