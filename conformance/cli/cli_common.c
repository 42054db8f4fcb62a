/* cli_common.c — the argument check and the one exit path of every verb, argument parsing, lookups
 * and result rendering shared by the verbs. */
#include "cli_common.h"
#include "lce_matrix.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- the verb being run: its name, --json, and whether its JSON object is out ---------------- */

static struct {
  const char *verb; /* NULL before cli_begin: messages say just "lcecheck" */
  int json;
  int json_out;     /* the verb's object (or cli_fail's) has been printed */
} run;

static const char *status_name(int code) {
  return code == CLI_USAGE ? "usage" : code == CLI_SKIP ? "skipped" : "error";
}

static int vfail(int code, const char *fmt, va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fprintf(stderr, "lcecheck%s%s: %s\n", run.verb ? " " : "", run.verb ? run.verb : "", msg);
  if (run.json && !run.json_out) {
    printf("{\"verb\":");
    cli_json_string(stdout, run.verb ? run.verb : "");
    printf(",\"status\":\"%s\",\"exit\":%d,\"message\":", status_name(code), code);
    cli_json_string(stdout, msg);
    printf("}\n");
    run.json_out = 1;
  }
  return code;
}

int cli_fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vfail(code, fmt, ap);
  va_end(ap);
  return code;
}

int cli_json_mode(void) { return run.json; }

void cli_json_begin(void) {
  printf("{\"verb\":");
  cli_json_string(stdout, run.verb ? run.verb : "");
  run.json_out = 1;
}

int cli_finish(int rc) {
  if (rc == CLI_USAGE && run.json && !run.json_out) cli_fail(rc, "bad usage (the message is on stderr)");
  fflush(stdout);
  return rc;
}

/* ---- the argument check ---------------------------------------------------------------------- */

static const cli_option *find_option(const cli_verb *v, const char *name) {
  for (const cli_option *o = v->options; o->name; o++)
    if (strcmp(o->name, name) == 0) return o;
  return NULL;
}

/* An option verb v does not take: say which verbs take it ("--shard is for check and measure only"),
 * or that no verb does, and list v's own options. */
static int refuse_option(const cli_verb *verbs, const cli_verb *v, const char *name) {
  size_t count = 0, k = 0;
  for (const cli_verb *w = verbs; w->name; w++) count += find_option(w, name) != NULL;
  char takers[256] = "", own[512] = "";
  for (const cli_verb *w = verbs; w->name; w++) {
    if (!find_option(w, name)) continue;
    const char *sep = k == 0 ? "" : k + 1 == count ? " and " : ", ";
    snprintf(takers + strlen(takers), sizeof takers - strlen(takers), "%s%s", sep, w->name);
    k++;
  }
  for (const cli_option *o = v->options; o->name; o++)
    snprintf(own + strlen(own), sizeof own - strlen(own), " %s", o->name);
  if (count)
    return cli_fail(CLI_USAGE, "%s is for %s only (%s takes:%s)", name, takers, v->name, own);
  return cli_fail(CLI_USAGE, "unknown option '%s' (%s takes:%s)", name, v->name, own);
}

void cli_start(const char *verb, int argc, char **argv) {
  run.verb = verb;
  for (int i = 2; i < argc; i++) run.json |= strcmp(argv[i], "--json") == 0;
}

int cli_begin(const cli_verb *verbs, const cli_verb *v, int argc, char **argv) {
  cli_start(v->name, argc, argv);
  const char *seen[64];
  int nseen = 0, positionals = 0;
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i];
    if (arg[0] != '-' || arg[1] == '\0') {
      if (v->positional == NULL) return cli_fail(CLI_USAGE, "unexpected argument '%s' (%s takes options only)", arg, v->name);
      if (positionals++) return cli_fail(CLI_USAGE, "unexpected argument '%s': one %s only", arg, v->positional);
      continue;
    }
    const cli_option *o = find_option(v, arg);
    if (o == NULL) return refuse_option(verbs, v, arg);
    for (int k = 0; k < nseen; k++)
      if (strcmp(seen[k], o->name) == 0) return cli_fail(CLI_USAGE, "%s given twice (each option at most once)", arg);
    if (nseen < (int)(sizeof seen / sizeof seen[0])) seen[nseen++] = o->name;
    if (o->value == NULL) continue;
    if (i + 1 >= argc) return cli_fail(CLI_USAGE, "%s needs a value (%s %s)", arg, arg, o->value);
    i++;
  }
  return CLI_PASS;
}

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
static int parse_shard(const char *text, cli_args *a) {
  const char *p = text;
  if (!parse_decimal(&p, &a->shard_index) || *p++ != '/' || !parse_decimal(&p, &a->shard_count) || *p != '\0')
    return cli_fail(CLI_USAGE, "--shard wants I/N, two unsigned integers (e.g. 0/4), not '%s'", text);
  if (a->shard_count == 0) return cli_fail(CLI_USAGE, "--shard %s: the shard count N must be at least 1", text);
  if (a->shard_index >= a->shard_count)
    return cli_fail(CLI_USAGE, "--shard %s: the shard index I must be below N (0 <= I < N)", text);
  return CLI_PASS;
}

/* "--outputs loss,d_hidden,d_weight": the outputs judged (the others are left unjudged, visibly). */
static int parse_outputs(const char *text, cli_args *a) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", text);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    lce_output_id o;
    if (!lce_output_parse(tok, &o)) return cli_fail(CLI_USAGE, "--outputs: unknown output '%s'", tok);
    a->outputs |= 1u << o;
  }
  if (a->outputs == 0) return cli_fail(CLI_USAGE, "--outputs needs at least one output name");
  return CLI_PASS;
}

int cli_parse_args(int argc, char **argv, int first, int positional_case, cli_args *a) {
  memset(a, 0, sizeof *a);
  const char *shard = NULL, *outputs = NULL;
  for (int i = first; i < argc; i++) {
    const char *arg = argv[i];
    const char **slot = NULL;
    if (strcmp(arg, "--json") == 0) { a->json = 1; continue; }
    if (strcmp(arg, "--quiet") == 0) { a->quiet = 1; continue; }
    if (strcmp(arg, "--on-device") == 0) { a->on_device = 1; continue; }
    if (strcmp(arg, "--subject") == 0) slot = &a->subject;
    else if (strcmp(arg, "--matrix") == 0) slot = &a->matrix;
    else if (strcmp(arg, "--case") == 0) slot = &a->case_id;
    else if (strcmp(arg, "--golden") == 0) slot = &a->golden;
    else if (strcmp(arg, "--oracle") == 0) slot = &a->oracle;
    else if (strcmp(arg, "--shard") == 0) slot = &shard;
    else if (strcmp(arg, "--dir") == 0) slot = &a->dir;
    else if (strcmp(arg, "--outputs") == 0) slot = &outputs;
    else if (strcmp(arg, "--subject-name") == 0) slot = &a->subject_name;
    else if (strcmp(arg, "--golden-class") == 0) slot = &a->golden_class;
    else if (positional_case && arg[0] != '-') { a->case_id = arg; continue; }
    else return cli_fail(CLI_USAGE, "unexpected argument '%s'", arg); /* cli_begin lets none through */
    *slot = argv[++i]; /* cli_begin has checked that the value exists */
  }
  if (a->oracle && lce_reference_tier_find(a->oracle) == NULL)
    return cli_fail(CLI_USAGE, "unknown oracle '%s' (mpfr or fp64-gpu)", a->oracle);
  if (a->matrix && a->case_id) return cli_fail(CLI_USAGE, "give --matrix or --case, not both");
  if (a->on_device && (a->oracle == NULL || lce_reference_tier_find(a->oracle)->compare == NULL))
    return cli_fail(CLI_USAGE, "--on-device needs a reference that can compare on the device (--oracle fp64-gpu)");
  if (shard && parse_shard(shard, a) != CLI_PASS) return CLI_USAGE;
  if (outputs && parse_outputs(outputs, a) != CLI_PASS) return CLI_USAGE;
  if (shard && a->case_id) return cli_fail(CLI_USAGE, "--shard splits a matrix, not a single case");
  return CLI_PASS;
}

const lce_subject *cli_subject(const cli_args *a) {
  lce_status st;
  lce_status_clear(&st);
  const lce_subject *s = lce_subject_resolve(a->subject ? a->subject : "fused-host", &st);
  if (s == NULL) cli_fail(CLI_USAGE, "%s", st.msg);
  return s;
}

int cli_load_golden(const cli_args *a, const lce_subject *s, lce_golden *g, char *path_used, size_t size) {
  if (a->golden) snprintf(path_used, size, "%s", a->golden);
  else lce_subject_golden_path(s, path_used, size);
  lce_status st;
  lce_status_clear(&st);
  if (lce_golden_load(path_used, g, &st) != LCE_OK) return cli_fail(CLI_USAGE, "cannot use golden file: %s", st.msg);
  return CLI_PASS;
}

int cli_cases(const cli_args *a, lce_case **cases, size_t *count) {
  lce_status st;
  lce_status_clear(&st);
  if (a->case_id) {
    *cases = malloc(sizeof **cases);
    if (*cases == NULL) return cli_fail(CLI_FAIL, "out of memory");
    if (lce_case_parse(a->case_id, *cases, &st) != LCE_OK) {
      free(*cases);
      *cases = NULL;
      return cli_fail(CLI_USAGE, "bad case id: %s", st.msg);
    }
    *count = 1;
    return CLI_PASS;
  }
  if (lce_matrix_cases(a->matrix ? a->matrix : "default", cases, count, &st) != LCE_OK)
    return cli_fail(CLI_USAGE, "%s", st.msg);
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

const lce_reference_tier *cli_tier(const cli_args *a) {
  const lce_reference_tier *t = a->oracle ? lce_reference_tier_find(a->oracle) : NULL;
  return t ? t : lce_reference_tier_default(); /* cli_parse_args has refused unknown names */
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
          lce_case_result_status(r));
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
  if (v->not_provided) { /* outputs the subject does not produce: not judged */
    fputs(",\"not_provided\":[", f);
    for (int o = 0, k = 0; o < LCE_OUT_COUNT; o++)
      if (v->not_provided >> o & 1u) fprintf(f, "%s\"%s\"", k++ ? "," : "", lce_output_name((lce_output_id)o));
    fputc(']', f);
  }
  fputs(",\"outputs\":{", f);
  int first = 1;
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_output_verdict *ov = &v->out[o];
    if (!ov->judged) continue;
    fprintf(f, "%s\"%s\":{\"inner\":%lld,\"judged\":%lld,\"inconclusive\":%lld,\"class_ok\":%s,\"class_msg\":",
            first ? "" : ",", lce_output_name((lce_output_id)o), (long long)ov->inner,
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
