/* cli_check.c — `lcecheck check` (judge a matrix against goldens) and `lcecheck measure` (the same
 * run with no bounds: the numbers golden regeneration starts from); `lcecheck judge` reports through
 * cli_check_report too. Exit code 77 (skipped) when every case was skipped for want of a device, so
 * that gpu-labelled ctests skip on a machine or build without one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "lce_device.h"
#include "lce_engine.h"
#include "lce_exec_subject.h"

typedef struct tally {
  cli_counts n;
  int64_t inconclusive;
  /* Worst value per (output, dtype): budget % (check) and metric (|bias| for bias). */
  double worst_pct[LCE_OUT_COUNT][LCE_PREC_COUNT];
  lce_metric worst_pct_metric[LCE_OUT_COUNT][LCE_PREC_COUNT];
  double worst[LCE_OUT_COUNT][LCE_PREC_COUNT][LCE_METRIC_COUNT];
  int defined[LCE_OUT_COUNT][LCE_PREC_COUNT][LCE_METRIC_COUNT]; /* some case measured it */
  int seen[LCE_OUT_COUNT][LCE_PREC_COUNT];
} tally;

static void tally_add(tally *t, const lce_case_result *r) {
  cli_counts_add(&t->n, r);
  if (r->error || r->skipped) return;
  t->inconclusive += r->verdict.inconclusive;
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_output_verdict *ov = &r->verdict.out[o];
    if (!ov->judged) continue;
    int d = lce_case_precision(&r->c);
    t->seen[o][d] = 1;
    for (int m = 0; m < LCE_METRIC_COUNT; m++) {
      double x = fabs(ov->metrics.v[m]);
      if (ov->metrics.undefined[m]) continue; /* not measured: neither a value nor a budget */
      t->defined[o][d][m] = 1;
      if (x > t->worst[o][d][m] || isnan(x)) t->worst[o][d][m] = x;
      int trivial = m == LCE_METRIC_ULPFRAC && ov->bound[m] >= 1.0; /* a fraction bounded by the whole */
      if (!trivial && ov->budget_pct[m] > t->worst_pct[o][d]) {
        t->worst_pct[o][d] = ov->budget_pct[m];
        t->worst_pct_metric[o][d] = (lce_metric)m;
      }
    }
  }
}

/* The engine's sink for check and measure: one progress line per case, the tally, the results. */
typedef struct check_sink {
  const cli_args *a;
  lce_case_result *results;
  tally t;
} check_sink;

static void check_case_done(void *ctx, const lce_engine_case *ec) {
  check_sink *cs = (check_sink *)ctx;
  const lce_case_result *r = &ec->res[0];
  cs->results[ec->index] = *r;
  tally_add(&cs->t, r);
  if (!cs->a->quiet) {
    const char *detail = r->error || r->skipped ? r->status.msg : r->verdict.summary;
    fprintf(stderr, "[%4zu/%zu] %-5s %s  %s\n", ec->index + 1, ec->ncases, lce_case_result_status(r), r->id, detail);
  }
}

static void print_budget_table(const tally *t) {
  printf("\nworst use of the golden budget per output (%% of bound, metric):\n%-12s", "output");
  for (int d = 0; d < LCE_PREC_COUNT; d++) printf("  %-20s", lce_precision_name((lce_precision)d));
  printf("\n");
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    printf("%-12s", lce_output_name((lce_output_id)o));
    for (int d = 0; d < LCE_PREC_COUNT; d++) {
      char cell[32] = "-";
      if (t->seen[o][d] && t->worst_pct[o][d] > 0)
        snprintf(cell, sizeof cell, "%7.1f%% %s", t->worst_pct[o][d], lce_metric_name(t->worst_pct_metric[o][d]));
      else if (t->seen[o][d]) snprintf(cell, sizeof cell, "%7.1f%%", 0.0);
      printf("  %-20s", cell);
    }
    printf("\n");
  }
}

/* A metric no case of the (output, dtype) defined (too few elements, or an output judged by its class
 * checks only: lce_metrics.h) prints as "-", never as a measured 0; the JSON carries null. */
static void print_metric_table(const tally *t) {
  printf("\nworst measured error per output and dtype (|bias| for bias; -: undefined in every case):\n%-12s %-5s",
         "output", "dtype");
  for (int m = 0; m < LCE_METRIC_COUNT; m++) printf(" %11s", lce_metric_name((lce_metric)m));
  printf("\n");
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    for (int d = 0; d < LCE_PREC_COUNT; d++) {
      if (!t->seen[o][d]) continue;
      printf("%-12s %-5s", lce_output_name((lce_output_id)o), lce_precision_name((lce_precision)d));
      for (int m = 0; m < LCE_METRIC_COUNT; m++) {
        if (t->defined[o][d][m]) printf(" %11.3e", t->worst[o][d][m]);
        else printf(" %11s", "-");
      }
      printf("\n");
    }
}

int cli_check_report(const cli_args *a, const char *verb, const lce_subject *s, const lce_golden *g,
                     const char *golden_path, const char *scope_key, const char *scope, const lce_case *cases,
                     size_t n) {
  const lce_reference_tier *tier = cli_tier(a);
  const int measure_only = g == NULL;
  char shard[64] = ""; /* " shard I/N" with --shard */
  if (a->shard_count) snprintf(shard, sizeof shard, " shard %lu/%lu", a->shard_index, a->shard_count);
  if (!a->json)
    printf("lcecheck %s: subject %s (golden class %s), %s %s%s, %zu case%s, oracle %s%s%s\n", verb, s->name,
           s->golden_class, scope_key, scope, shard, n, n == 1 ? "" : "s", tier->name,
           measure_only ? "" : ", golden ", measure_only ? "" : golden_path);
  check_sink cs;
  memset(&cs, 0, sizeof cs);
  cs.a = a;
  cs.results = calloc(n ? n : 1, sizeof *cs.results);
  lce_case_result *results = cs.results;
  /* What a failing case's repro line needs besides the subject: the oracle and the golden when they are
   * not what repro would take by default (an exec: subject's class comes from $LCE_EXEC_GOLDEN_CLASS). */
  char repro_options[1400] = "", quoted[1100];
  if (a->oracle) snprintf(repro_options, sizeof repro_options, "--oracle %s", a->oracle);
  if (!measure_only && (a->golden || strncmp(s->name, LCE_EXEC_PREFIX, strlen(LCE_EXEC_PREFIX)) == 0) &&
      lce_shell_quote(golden_path, quoted, sizeof quoted) < sizeof quoted)
    snprintf(repro_options + strlen(repro_options), sizeof repro_options - strlen(repro_options), "%s--golden %s",
             repro_options[0] ? " " : "", quoted);
  const lce_engine_config cfg = {.cases = cases, .ncases = n, .subjects = &s, .goldens = &g, .nsubjects = 1,
                                 .tier = tier, .device_compare = a->on_device, .outputs = a->outputs,
                                 .repro_options = repro_options[0] ? repro_options : NULL};
  lce_status est;
  lce_status_clear(&est);
  if (results && lce_engine_run(&cfg, check_case_done, &cs, &est) != LCE_OK) {
    fprintf(stderr, "lcecheck %s: %s\n", verb, est.msg);
    free(results);
    results = NULL;
  }
  const tally t = cs.t;
  const cli_counts c = t.n;
  int ran = (int)(c.pass + c.fail);
  /* No case ran: a failure (nothing was shown), except in a shard that holds no case of its matrix
   * (more shards than cases), which the other shards cover. */
  const int empty_shard = a->shard_count && n == 0;
  int code = (results == NULL || c.fail || c.error || (ran == 0 && !empty_shard)) ? CLI_FAIL : CLI_PASS;
  /* Every case skipped, at least one for want of a device (the others declined by the subject, e.g.
   * fused-sm90's fp32 cases): on a machine with a GPU some would have run, so this is a skip, not a
   * failure to run anything. */
  const int no_device = results != NULL && n > 0 && c.skip == n && c.skip_nodev > 0;
  if (a->json) {
    cli_json_begin(); /* {"verb":"check"|"measure"|"judge" */
    cli_json_member(stdout, "subject", s->name);
    cli_json_member(stdout, "golden_class", s->golden_class);
    cli_json_member(stdout, scope_key, scope);
    if (a->shard_count) printf(",\"shard\":\"%lu/%lu\"", a->shard_index, a->shard_count);
    cli_json_member(stdout, "golden", measure_only ? "" : golden_path);
    printf(",\"oracle\":\"%s\"", tier->name);
    lce_device_info dev; /* a GPU subject's measurements name their device (golden regeneration checks it) */
    if ((s->caps & LCE_CAP_NEEDS_GPU) && lce_device_query(&dev, NULL, 0)) cli_json_device(stdout, &dev);
    if (results == NULL) {
      cli_json_member(stdout, "message", est.msg);
    }
    printf(",\"cases\":[");
    for (size_t i = 0; i < n && results; i++) {
      if (i) putchar(',');
      cli_json_case(stdout, &results[i], !measure_only);
    }
    printf("],\"summary\":{\"cases\":%zu,\"pass\":%zu,\"fail\":%zu,\"skip\":%zu,\"error\":%zu,\"inconclusive\":%lld,"
           "\"ok\":%s}}\n", n, c.pass, c.fail, c.skip, c.error, (long long)t.inconclusive, code == CLI_PASS ? "true" : "false");
  } else {
    if (measure_only) print_metric_table(&t);
    else print_budget_table(&t);
    size_t shown = 0;
    for (size_t i = 0; i < n && results; i++) {
      const lce_case_result *r = &results[i];
      if (!r->error && (r->skipped || r->verdict.pass)) continue;
      if (shown++ == 0) printf("\nfailures:\n");
      if (shown > 20) continue;
      if (r->error) printf("  ERROR %s: %s\n", r->id, r->status.msg);
      else printf("  %s: %s\n    repro: %s\n", r->id, r->verdict.summary, r->repro);
    }
    if (shown > 20) printf("  ... and %zu more\n", shown - 20);
    printf("\ncases%s: %zu  pass %zu  fail %zu  skip %zu  error %zu  inconclusive oracle elements: %lld\n", shard, n, c.pass,
           c.fail, c.skip, c.error, (long long)t.inconclusive);
    printf("%s\n", code == CLI_PASS ? "PASS"
                                    : no_device ? "SKIPPED: no device (every case the subject can run needs a GPU)"
                                                : (ran == 0 && !c.fail && !c.error ? "FAIL: no case ran" : "FAIL"));
  }
  free(results);
  return no_device ? CLI_SKIP : code;
}

int cli_check(int measure_only) {
  const char *verb = measure_only ? "measure" : "check";
  cli_args a;
  int rc = cli_parse_args(&a);
  if (rc != CLI_PASS) return rc;
  const lce_subject *s = cli_subject(&a);
  if (s == NULL) return CLI_USAGE;
  lce_golden g;
  memset(&g, 0, sizeof g);
  char golden_path[512] = "";
  if (!measure_only && (rc = cli_load_golden(&a, s, &g, golden_path, sizeof golden_path)) != CLI_PASS) return rc;
  lce_case *cases = NULL;
  size_t n = 0;
  if ((rc = cli_cases(&a, &cases, &n)) != CLI_PASS) {
    lce_golden_free(&g);
    return rc;
  }
  const char *scope = a.case_id ? a.case_id : (a.matrix ? a.matrix : "default");
  rc = cli_check_report(&a, verb, s, measure_only ? NULL : &g, golden_path, a.case_id ? "case" : "matrix", scope,
                        cases, n);
  free(cases);
  lce_golden_free(&g);
  return rc;
}
