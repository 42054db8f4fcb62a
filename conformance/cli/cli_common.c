/* cli_common.c — the argument check and the one exit path of every verb, the options' values (the
 * only place that reads argv), lookups and result rendering shared by the verbs. */
#include "cli_common.h"
#include "lce_device.h"
#include "lce_progress.h"
#include "lce_matrix.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the verb being run: its name, --json, whether its JSON object is out, its arguments ------ */

/* An option cli_begin accepted and its value (a flag's value is its name). */
typedef struct given_option {
  const char *name, *value;
} given_option;

static struct {
  const char *verb; /* NULL before cli_begin: messages say just "lcecheck" */
  int json;
  int json_out;     /* the verb's object (or cli_fail's) has been printed */
  given_option given[64];
  int ngiven;
  const char *positional;
} run;

int cli_fail(int code, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "lcecheck%s%s: %s\n", run.verb ? " " : "", run.verb ? run.verb : "", msg);
  if (run.json && !run.json_out) {
    cli_json_begin();
    const char *status = code == CLI_USAGE ? "usage" : code == CLI_SKIP ? "skipped" : "error";
    printf(",\"status\":\"%s\",\"exit\":%d", status, code);
    cli_json_member(stdout, "message", msg);
    printf("}\n");
  }
  return code;
}

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

/* Progress of long work inside the library (a reference tier on a large case), on stderr. */
static void print_progress(void *ctx, const char *what, double done, double total, double seconds) {
  (void)ctx;
  const double left = done > 0 ? seconds * (total - done) / done : -1;
  fprintf(stderr, "lcecheck %s: %s %.0f/%.0f, %.0f s%s", run.verb ? run.verb : "", what, done, total, seconds,
          left >= 0 ? "" : "\n");
  if (left >= 0) fprintf(stderr, ", ~%.0f s left\n", left);
}

int cli_begin(const cli_verb *verbs, const cli_verb *v, int argc, char **argv) {
  cli_start(v->name, argc, argv);
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i];
    if (arg[0] != '-' || arg[1] == '\0') {
      if (v->positional == NULL) return cli_fail(CLI_USAGE, "unexpected argument '%s' (%s takes options only)", arg, v->name);
      if (run.positional) return cli_fail(CLI_USAGE, "unexpected argument '%s': one %s only", arg, v->positional);
      run.positional = arg;
      continue;
    }
    const cli_option *o = find_option(v, arg);
    if (o == NULL) return refuse_option(verbs, v, arg);
    if (cli_opt(o->name)) return cli_fail(CLI_USAGE, "%s given twice (each option at most once)", arg);
    if (o->value && i + 1 >= argc) return cli_fail(CLI_USAGE, "%s needs a value (%s %s)", arg, arg, o->value);
    if (run.ngiven == (int)(sizeof run.given / sizeof run.given[0])) /* more than any verb has */
      return cli_fail(CLI_USAGE, "too many options");
    run.given[run.ngiven++] = (given_option){o->name, o->value ? argv[++i] : o->name};
  }
  if (!cli_opt("--quiet")) lce_progress_set(print_progress, NULL);
  return CLI_PASS;
}

const char *cli_opt(const char *name) {
  for (int k = 0; k < run.ngiven; k++)
    if (strcmp(run.given[k].name, name) == 0) return run.given[k].value;
  return NULL;
}

const char *cli_positional(void) { return run.positional; }

/* ---- values ---------------------------------------------------------------------------------- */

/* A number of digits only (no sign, no blank: strtoull would take both) at *p, decimal or, where hex
 * allows it, hexadecimal after 0x; advances *p. */
static int parse_unsigned(const char **p, int hex, uint64_t *out) {
  int base = 10;
  if (hex && (*p)[0] == '0' && ((*p)[1] == 'x' || (*p)[1] == 'X')) *p += 2, base = 16;
  if (!isxdigit((unsigned char)**p) || (base == 10 && !isdigit((unsigned char)**p))) return 0;
  char *end;
  errno = 0;
  *out = strtoull(*p, &end, base);
  *p = end;
  return errno == 0;
}

int cli_uint(const char *option, const char *text, uint64_t lo, uint64_t hi, uint64_t *out) {
  const char *p = text;
  uint64_t x;
  if (!parse_unsigned(&p, 1, &x) || *p != '\0' || x < lo || x > hi)
    return cli_fail(CLI_USAGE, "%s: '%s' is not an integer in [%llu, %llu]", option, text, (unsigned long long)lo,
                    (unsigned long long)hi);
  *out = x;
  return CLI_PASS;
}

int cli_opt_uint(const char *option, uint64_t lo, uint64_t hi, uint64_t *out) {
  const char *text = cli_opt(option);
  return text ? cli_uint(option, text, lo, hi, out) : CLI_PASS;
}

int cli_split(const char *option, const char *list, char *buf, size_t size, char **items, int max, int *count) {
  if (strlen(list) >= size) return cli_fail(CLI_USAGE, "%s: '%.80s...' is too long", option, list);
  snprintf(buf, size, "%s", list);
  *count = 0;
  for (char *p = buf, *next; p; p = next) {
    next = strchr(p, ',');
    if (next) *next++ = '\0';
    if (*p == '\0') return cli_fail(CLI_USAGE, "%s: empty item in '%s'", option, list);
    if (*count == max) return cli_fail(CLI_USAGE, "%s: more than %d items in '%s'", option, max, list);
    items[(*count)++] = p;
  }
  return CLI_PASS;
}

int cli_name_mask(const char *option, const char *list, const char *what, int (*index)(const char *name),
                  unsigned *mask) {
  char buf[256], *items[32];
  int n;
  if (cli_split(option, list, buf, sizeof buf, items, 32, &n) != CLI_PASS) return CLI_USAGE;
  *mask = 0;
  for (int k = 0; k < n; k++) {
    const int bit = index(items[k]);
    if (bit < 0) return cli_fail(CLI_USAGE, "%s: unknown %s '%s'", option, what, items[k]);
    *mask |= 1u << bit;
  }
  return CLI_PASS;
}

/* "--shard I/N" with integers 0 <= I < N. */
static int parse_shard(const char *text, cli_args *a) {
  const char *p = text;
  uint64_t index, count;
  if (!parse_unsigned(&p, 0, &index) || *p++ != '/' || !parse_unsigned(&p, 0, &count) || *p != '\0')
    return cli_fail(CLI_USAGE, "--shard wants I/N, two unsigned integers (e.g. 0/4), not '%s'", text);
  if (count == 0) return cli_fail(CLI_USAGE, "--shard %s: the shard count N must be at least 1", text);
  if (index >= count) return cli_fail(CLI_USAGE, "--shard %s: the shard index I must be below N (0 <= I < N)", text);
  a->shard_index = (unsigned long)index, a->shard_count = (unsigned long)count;
  return CLI_PASS;
}

static int output_index(const char *name) {
  lce_output_id o;
  return lce_output_parse(name, &o) ? (int)o : -1;
}

int cli_embeddings(const char *text, unsigned *mask) {
  *mask = strcmp(text, "tied") == 0     ? CLI_TIED
          : strcmp(text, "untied") == 0 ? CLI_UNTIED
          : strcmp(text, "tied,untied") == 0 || strcmp(text, "untied,tied") == 0 ? CLI_TIED | CLI_UNTIED
                                                                                  : 0;
  return *mask ? CLI_PASS : cli_fail(CLI_USAGE, "--embeddings wants tied, untied or tied,untied, got '%s'", text);
}

int cli_opt_real(const char *option, double lo, int inclusive, double *out) {
  const char *text = cli_opt(option);
  if (text == NULL) return CLI_PASS;
  char *end;
  const double x = strtod(text, &end);
  if (*text == '\0' || *end != '\0' || !isfinite(x) || !(inclusive ? x >= lo : x > lo))
    return cli_fail(CLI_USAGE, "%s needs a finite number %s %g, not '%s'", option, inclusive ? ">=" : ">", lo, text);
  *out = x;
  return CLI_PASS;
}

int cli_outputs(const char *option, const char *list, unsigned *mask) {
  return cli_name_mask(option, list, "output", output_index, mask);
}

int cli_parse_args(cli_args *a) {
  memset(a, 0, sizeof *a);
  a->json = cli_opt("--json") != NULL;
  a->quiet = cli_opt("--quiet") != NULL;
  a->on_device = cli_opt("--on-device") != NULL;
  a->subject = cli_opt("--subject");
  a->matrix = cli_opt("--matrix");
  a->case_id = cli_opt("--case") ? cli_opt("--case") : cli_positional();
  a->golden = cli_opt("--golden");
  a->oracle = cli_opt("--oracle");
  a->dir = cli_opt("--dir");
  a->subject_name = cli_opt("--subject-name");
  a->golden_class = cli_opt("--golden-class");
  const char *shard = cli_opt("--shard"), *outputs = cli_opt("--outputs");
  if (a->oracle && lce_reference_tier_find(a->oracle) == NULL) {
    char names[256] = "";
    for (size_t t = 0; t < lce_reference_tier_count(); t++)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", t ? ", " : "", lce_reference_tier_at(t)->name);
    return cli_fail(CLI_USAGE, "unknown oracle '%s' (the tiers: %s)", a->oracle, names);
  }
  if (a->matrix && a->case_id) return cli_fail(CLI_USAGE, "give --matrix or --case, not both");
  if (a->on_device && (a->oracle == NULL || lce_reference_tier_find(a->oracle)->compare == NULL))
    return cli_fail(CLI_USAGE, "--on-device needs a reference that can compare on the device (--oracle fp64-gpu)");
  if (shard && parse_shard(shard, a) != CLI_PASS) return CLI_USAGE;
  if (outputs && cli_outputs("--outputs", outputs, &a->outputs) != CLI_PASS) return CLI_USAGE;
  if (shard && a->case_id) return cli_fail(CLI_USAGE, "--shard splits a matrix, not a single case");
  return CLI_PASS;
}

const lce_subject *cli_subject(const cli_args *a) {
  lce_status st;
  lce_status_clear(&st);
  if (a->dir || a->subject_name || a->golden_class) { /* the exchange door: judge, repro */
    if (a->subject) {
      cli_fail(CLI_USAGE, "give --subject S or --dir D --subject-name NAME --golden-class C, not both");
      return NULL;
    }
    if (a->dir == NULL || a->subject_name == NULL || a->golden_class == NULL) {
      cli_fail(CLI_USAGE, CLI_EXCHANGE_REQUIRED);
      return NULL;
    }
    const lce_subject *s = lce_subject_resolve_exchange(a->dir, a->subject_name, a->golden_class, &st);
    if (s == NULL) cli_fail(CLI_USAGE, "%s", st.msg); /* a malformed manifest.json or case.json */
    return s;
  }
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

void cli_counts_add(cli_counts *c, const lce_case_result *r) {
  if (r->error) c->error++;
  else if (r->skipped) c->skip++, c->skip_nodev += r->status.code == LCE_ENODEV;
  else if (r->verdict.pass) c->pass++;
  else c->fail++;
}

void cli_cell(char *buf, size_t size, double x, const char *fmt) {
  if (isfinite(x)) snprintf(buf, size, fmt, x);
  else snprintf(buf, size, "-");
}

void cli_json_device(FILE *f, const lce_device_info *dev) {
  fputs(",\"device\":{\"name\":", f);
  cli_json_string(f, dev->name);
  fprintf(f, ",\"arch\":\"%s\",\"driver\":%d,\"runtime\":%d,\"total_bytes\":%.0f}", dev->arch, dev->driver,
          dev->runtime, dev->total_bytes);
}

void cli_json_member(FILE *f, const char *key, const char *s) {
  fprintf(f, ",\"%s\":", key);
  cli_json_string(f, s);
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
    cli_json_member(f, "message", r->status.msg);
    fputc('}', f);
    return;
  }
  const lce_verdict *v = &r->verdict;
  fprintf(f, ",\"n_valid\":%lld,\"inconclusive\":%lld,\"subject_seconds\":%.6f,\"oracle_seconds\":%.6f",
          (long long)r->n_valid, (long long)v->inconclusive, r->subject_seconds, r->oracle_seconds);
  cli_json_member(f, "summary", v->summary);
  cli_json_member(f, "repro", r->repro);
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
    fputs(",\"neff\":", f);
    cli_json_number(f, ov->metrics.neff);
    fputs(",\"neff_emag\":", f);
    cli_json_number(f, ov->metrics.neff_emag);
    if (lce_output_per_token((lce_output_id)o)) { /* the few-element term's share of distinct tokens */
      fputs(",\"token_share\":", f);
      cli_json_number(f, ov->metrics.token_share);
    }
    if (lce_output_has_rsum((lce_output_id)o)) { /* the derived terms' scales, which the goldens use */
      lce_bound_scales scales;
      lce_bound_scales_of(&r->c, (lce_output_id)o, ov, &scales);
      for (int t = LCE_TERM_RND; t < LCE_TERM_COUNT; t++) {
        if (t == LCE_TERM_UO) continue; /* the output format's unit roundoff, not a measurement */
        fprintf(f, ",\"%s\":", lce_bound_term_name((lce_bound_term)t));
        cli_json_number(f, lce_bound_term_scale((lce_bound_term)t, &scales));
      }
    }
    for (int m = 0; m < LCE_METRIC_COUNT; m++) {
      fprintf(f, ",\"%s\":", lce_metric_name((lce_metric)m));
      cli_json_number(f, ov->metrics.v[m]);
    }
    if (ov->metrics.judged > 0) json_metric_map(f, "tcx", ov->metrics.tcx); /* the tensor-core terms' scale per metric */
    fprintf(f, ",\"no_mags\":%s", ov->metrics.no_mags ? "true" : "false"); /* true: the reference kept no magnitudes */
    if (with_bounds) {
      json_metric_map(f, "bound", ov->bound);
      double pct[LCE_METRIC_COUNT]; /* no bound (an undefined or unbounded metric): no budget, null */
      for (int m = 0; m < LCE_METRIC_COUNT; m++) pct[m] = isnan(ov->bound[m]) ? NAN : ov->budget_pct[m];
      json_metric_map(f, "budget_pct", pct);
      if (ov->metrics.no_mags) { /* the metrics whose bound needs the magnitudes the reference did not keep */
        fputs(",\"unbounded\":[", f);
        for (int m = 0, k = 0; m < LCE_METRIC_COUNT; m++)
          if (ov->unbounded[m]) fprintf(f, "%s\"%s\"", k++ ? "," : "", lce_metric_name((lce_metric)m));
        fputc(']', f);
      }
      fprintf(f, ",\"pass\":%s", ov->pass ? "true" : "false");
    }
    fputc('}', f);
    first = 0;
  }
  fputs("}}", f);
}
