/* cli_repro.c — `lcecheck repro [--subject S | --dir D --subject-name N --golden-class C] ID`: one case in
 * full detail — the case, the oracle's certification, and for every output the class check, each
 * metric, its bound and budget. With --dir the subject is a runner's answer in an exported directory
 * (the exchange door, as `judge` reads it): the repro line of a failing `judge` case. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"

/* The engine's sink: the one case's result. */
static void keep_result(void *ctx, const lce_engine_case *ec) { *(lce_case_result *)ctx = ec->res[0]; }

static void print_case(const lce_case *c) {
  printf("case: n=%lld h=%lld v=%lld vp=%lld tp=%d vocab_chunk=%lld dtype=%s %s reduction=%s\n", (long long)c->n,
         (long long)c->h, (long long)c->v, (long long)c->vp, c->tp, (long long)c->vocab_chunk, lce_dtype_name(c->dtype),
         c->tied ? "tied" : "untied", lce_reduction_name(c->reduction));
  printf("      ignored=%d%% ignore_index=%lld gradient buffers=%s values=%s seed=%llu\n", c->ignore_pct,
         (long long)c->ignore_index, c->prior_grad ? "prior" : "fresh", lce_dist_name(c->dist),
         (unsigned long long)c->seed);
}

int cli_repro(void) {
  cli_args a;
  int rc = cli_parse_args(&a);
  if (rc != CLI_PASS) return rc;
  if (a.case_id == NULL) return cli_fail(CLI_USAGE, "give exactly one case id (see lcecheck help repro)");
  const lce_reference_tier *tier = cli_tier(&a);
  const lce_subject *s = cli_subject(&a);
  if (s == NULL) return CLI_USAGE;
  lce_case *cases = NULL;
  size_t n = 0;
  if ((rc = cli_cases(&a, &cases, &n)) != CLI_PASS) return rc;
  lce_golden g;
  char golden_path[512];
  if ((rc = cli_load_golden(&a, s, &g, golden_path, sizeof golden_path)) != CLI_PASS) {
    free(cases);
    return rc;
  }
  lce_case_result r;
  memset(&r, 0, sizeof r);
  const lce_golden *gp = &g;
  const lce_engine_config cfg = {.cases = cases, .ncases = 1, .subjects = &s, .goldens = &gp, .nsubjects = 1,
                                 .tier = tier};
  lce_status est;
  lce_status_clear(&est);
  if (lce_engine_run(&cfg, keep_result, &r, &est) != LCE_OK) r.error = 1, r.status = est;
  /* A skip for want of a device is 77 in every verb; a skip for a capability is not a pass either. */
  rc = r.error ? CLI_FAIL : r.skipped ? (r.status.code == LCE_ENODEV ? CLI_SKIP : CLI_FAIL)
                                      : r.verdict.pass ? CLI_PASS : CLI_FAIL;
  if (r.skipped) { /* nothing was judged: the one skip/error object of every verb */
    free(cases);
    lce_golden_free(&g);
    return cli_fail(rc, "%s: skipped: %s", r.id, r.status.msg);
  }
  if (a.json) {
    cli_json_begin();
    cli_json_member(stdout, "subject", s->name);
    cli_json_member(stdout, "golden", golden_path);
    printf(",\"oracle\":{\"tier\":\"%s\",\"decisive\":%lld,\"total\":%lld,\"worst_rel_err\":%.3e},\"result\":",
           tier->name, (long long)r.oracle_decisive, (long long)r.oracle_total,
           r.oracle_worst_rel_err);
    cli_json_case(stdout, &r, 1);
    printf("}\n");
  } else {
    printf("subject %s (golden class %s), golden %s, oracle %s\n", s->name, s->golden_class, golden_path,
           tier->name);
    printf("id:   %s\n", r.id);
    print_case(&r.c);
    if (r.error || r.skipped) {
      printf("%s: %s\n", r.error ? "ERROR" : "skipped", r.status.msg);
    } else {
      printf("valid tokens: %lld   subject %.3f s   oracle %.3f s (%lld/%lld elements decisive, certified "
             "relative accuracy %.1e)\n\n", (long long)r.n_valid, r.subject_seconds, r.oracle_seconds,
             (long long)r.oracle_decisive, (long long)r.oracle_total, r.oracle_worst_rel_err);
      printf("%-12s %-6s %-10s %12s %12s %9s  %s\n", "output", "class", "metric", "value", "bound", "budget", "verdict");
      for (int o = 0; o < LCE_OUT_COUNT; o++) {
        const lce_output_verdict *ov = &r.verdict.out[o];
        if (!ov->judged) continue;
        const char *name = lce_output_name((lce_output_id)o);
        const char *cls = ov->class_ok ? "ok" : "FAIL";
        if (!ov->class_ok) printf("%-12s %-6s %s\n", name, "FAIL", ov->class_msg);
        if (isnan(ov->metrics.cond)) { /* class checks only: no metric exists for this output */
          printf("%-12s %-6s %s\n", name, cls, "(class checks only, no metrics)");
          continue;
        }
        printf("%-12s %-6s %-10s %12.4e", name, cls, "cond", ov->metrics.cond);
        /* Elements the oracle could not certify are left out of every metric: say how many. */
        if (ov->metrics.inconclusive > 0)
          printf("   (%lld of %lld elements not judged: the oracle could not certify them)",
                 (long long)ov->metrics.inconclusive, (long long)(ov->metrics.inconclusive + ov->metrics.judged));
        printf("\n");
        for (int m = 0; m < LCE_METRIC_COUNT; m++) {
          if (ov->metrics.undefined[m]) { /* lce_metrics.h: too few elements, reported and not bounded */
            printf("%-12s %-6s %-10s %12s %12s %9s  %s\n", name, cls, lce_metric_name((lce_metric)m), "undefined",
                   "-", "-", "not bounded");
            continue;
          }
          printf("%-12s %-6s %-10s %12.4e %12.4e %8.1f%%  %s\n", name, cls, lce_metric_name((lce_metric)m),
                 ov->metrics.v[m], ov->bound[m], ov->budget_pct[m], ov->metric_ok[m] ? "ok" : "OVER");
        }
      }
      printf("\n%s\n", r.verdict.summary);
      if (!r.verdict.pass) printf("repro: %s\n", r.repro);
    }
  }
  free(cases);
  lce_golden_free(&g);
  return rc;
}
