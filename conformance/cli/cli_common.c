/* cli_common.c — argument parsing, lookups and result rendering shared by the verbs. */
#include "cli_common.h"
#include "lce_matrix.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A decimal number of digits only (no sign, no blank: strtoul would take both) at *p; advances *p. */
static int parse_decimal(const char **p, unsigned long *out) {
  if (!isdigit((unsigned char)**p)) return 0;
  char *end;
  errno = 0;
  *out = strtoul(*p, &end, 10);
  *p = end;
  return errno == 0;
}

/* "--shard I/N" with integers 0 <= I < N. */
static int parse_shard(const char *verb, const char *text, cli_args *a) {
  const char *p = text;
  if (!parse_decimal(&p, &a->shard_index) || *p++ != '/' || !parse_decimal(&p, &a->shard_count) || *p != '\0') {
    fprintf(stderr, "lcecheck %s: --shard wants I/N, two unsigned integers (e.g. 0/4), not '%s'\n", verb, text);
    return CLI_USAGE;
  }
  if (a->shard_count == 0) {
    fprintf(stderr, "lcecheck %s: --shard %s: the shard count N must be at least 1\n", verb, text);
    return CLI_USAGE;
  }
  if (a->shard_index >= a->shard_count) {
    fprintf(stderr, "lcecheck %s: --shard %s: the shard index I must be below N (0 <= I < N)\n", verb, text);
    return CLI_USAGE;
  }
  return CLI_PASS;
}

int cli_parse_args(int argc, char **argv, int first, int positional_case, cli_args *a) {
  memset(a, 0, sizeof *a);
  const char *shard = NULL;
  for (int i = first; i < argc; i++) {
    const char *arg = argv[i];
    const char **slot = NULL;
    if (strcmp(arg, "--json") == 0) { a->json = 1; continue; }
    if (strcmp(arg, "--quiet") == 0) { a->quiet = 1; continue; }
    if (strcmp(arg, "--subject") == 0) slot = &a->subject;
    else if (strcmp(arg, "--matrix") == 0) slot = &a->matrix;
    else if (strcmp(arg, "--case") == 0) slot = &a->case_id;
    else if (strcmp(arg, "--golden") == 0) slot = &a->golden;
    else if (strcmp(arg, "--oracle") == 0) slot = &a->oracle;
    else if (strcmp(arg, "--shard") == 0) slot = &shard;
    else if (positional_case && arg[0] != '-' && a->case_id == NULL) { a->case_id = arg; continue; }
    else {
      fprintf(stderr, "lcecheck %s: unknown argument '%s' (see lcecheck --help)\n", argv[1], arg);
      return CLI_USAGE;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "lcecheck %s: %s needs a value\n", argv[1], arg);
      return CLI_USAGE;
    }
    *slot = argv[++i];
  }
  lce_oracle_tier tier;
  if (a->oracle && !lce_oracle_tier_parse(a->oracle, &tier)) {
    fprintf(stderr, "lcecheck %s: unknown oracle '%s' (mpfr or fp64-gpu)\n", argv[1], a->oracle);
    return CLI_USAGE;
  }
  if (a->matrix && a->case_id) {
    fprintf(stderr, "lcecheck %s: give --matrix or --case, not both\n", argv[1]);
    return CLI_USAGE;
  }
  if (shard && parse_shard(argv[1], shard, a) != CLI_PASS) return CLI_USAGE;
  if (shard && a->case_id) {
    fprintf(stderr, "lcecheck %s: --shard splits a matrix, not a single case\n", argv[1]);
    return CLI_USAGE;
  }
  if (shard && strcmp(argv[1], "check") != 0 && strcmp(argv[1], "measure") != 0) {
    fprintf(stderr, "lcecheck %s: --shard is for check and measure only\n", argv[1]);
    return CLI_USAGE;
  }
  return CLI_PASS;
}

const lce_subject *cli_subject(const cli_args *a) {
  const char *name = a->subject ? a->subject : "fused-host";
  const lce_subject *s = lce_subject_find(name);
  if (s == NULL) {
    fprintf(stderr, "lcecheck: unknown subject '%s'; known subjects:", name);
    for (size_t i = 0; i < lce_subject_count(); i++) fprintf(stderr, " %s", lce_subject_at(i)->name);
    fprintf(stderr, "\n");
  }
  return s;
}

int cli_load_golden(const cli_args *a, const lce_subject *s, lce_golden *g, char *path_used, size_t size) {
  if (a->golden) snprintf(path_used, size, "%s", a->golden);
  else lce_subject_golden_path(s, path_used, size);
  lce_status st;
  lce_status_clear(&st);
  if (lce_golden_load(path_used, g, &st) != LCE_OK) {
    fprintf(stderr, "lcecheck: cannot use golden file: %s\n", st.msg);
    return CLI_USAGE;
  }
  return CLI_PASS;
}

int cli_cases(const cli_args *a, lce_case **cases, size_t *count) {
  lce_status st;
  lce_status_clear(&st);
  if (a->case_id) {
    *cases = malloc(sizeof **cases);
    if (*cases == NULL) return CLI_USAGE;
    if (lce_case_parse(a->case_id, *cases, &st) != LCE_OK) {
      fprintf(stderr, "lcecheck: bad case id: %s\n", st.msg);
      free(*cases);
      *cases = NULL;
      return CLI_USAGE;
    }
    *count = 1;
    return CLI_PASS;
  }
  if (lce_matrix_cases(a->matrix ? a->matrix : "default", cases, count, &st) != LCE_OK) {
    fprintf(stderr, "lcecheck: %s\n", st.msg);
    return CLI_USAGE;
  }
  if (a->shard_count == 0) return CLI_PASS;
  size_t kept = 0;
  for (size_t i = 0; i < *count; i++)
    if (i % a->shard_count == a->shard_index) (*cases)[kept++] = (*cases)[i];
  *count = kept;
  return CLI_PASS;
}

void cli_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
    else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
    else fputc(ch, f);
  }
  fputc('"', f);
}

/* JSON has no NaN or Inf: those become null (and a metric is only NaN when it was not computed). */
void cli_json_number(FILE *f, double x) {
  if (isfinite(x)) fprintf(f, "%.9g", x);
  else fputs("null", f);
}

const char *cli_case_status(const lce_case_result *r) {
  if (r->error) return "error";
  if (r->skipped) return "skip";
  return r->verdict.pass ? "pass" : "fail";
}

static void json_metric_map(FILE *f, const char *key, const double *v) {
  fprintf(f, ",\"%s\":{", key);
  for (int m = 0; m < LCE_METRIC_COUNT; m++) {
    fprintf(f, "%s\"%s\":", m ? "," : "", lce_metric_name((lce_metric)m));
    cli_json_number(f, v[m]);
  }
  fputc('}', f);
}

void cli_json_case(FILE *f, const lce_case_result *r, int with_bounds) {
  fputs("{\"id\":", f);
  cli_json_string(f, r->id);
  /* "dtype" is the golden precision key: the input dtype, or tf32 for fp32 inputs with tf32 GEMMs. */
  fprintf(f, ",\"dtype\":\"%s\",\"status\":\"%s\"", lce_precision_name(lce_case_precision(&r->c)),
          cli_case_status(r));
  if (r->error || r->skipped) {
    fputs(",\"message\":", f);
    cli_json_string(f, r->status.msg);
    fputc('}', f);
    return;
  }
  const lce_verdict *v = &r->verdict;
  fprintf(f, ",\"n_valid\":%lld,\"inconclusive\":%lld,\"subject_seconds\":%.6f,\"oracle_seconds\":%.6f",
          (long long)r->n_valid, (long long)v->inconclusive, r->subject_seconds, r->oracle_seconds);
  fputs(",\"summary\":", f);
  cli_json_string(f, v->summary);
  fputs(",\"repro\":", f);
  cli_json_string(f, v->repro);
  fputs(",\"outputs\":{", f);
  int first = 1;
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_output_verdict *ov = &v->out[o];
    if (!ov->judged) continue;
    fprintf(f, "%s\"%s\":{\"inner\":%lld,\"judged\":%lld,\"inconclusive\":%lld,\"class_ok\":%s,\"class_msg\":",
            first ? "" : ",", lce_output_name((lce_output_id)o), (long long)lce_output_inner(&r->c, (lce_output_id)o),
            (long long)ov->metrics.judged, (long long)ov->metrics.inconclusive, ov->class_ok ? "true" : "false");
    cli_json_string(f, ov->class_msg);
    fputs(",\"cond\":", f);
    cli_json_number(f, ov->metrics.cond);
    for (int m = 0; m < LCE_METRIC_COUNT; m++) {
      fprintf(f, ",\"%s\":", lce_metric_name((lce_metric)m));
      cli_json_number(f, ov->metrics.v[m]);
    }
    if (with_bounds) {
      json_metric_map(f, "bound", ov->bound);
      json_metric_map(f, "budget_pct", ov->budget_pct);
      fprintf(f, ",\"pass\":%s", ov->pass ? "true" : "false");
    }
    fputc('}', f);
    first = 0;
  }
  fputs("}}", f);
}
