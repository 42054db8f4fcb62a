/* cli_production.c — `lcecheck production`: GPU subjects at production shapes against the fp64 GPU
 * reference (conformance/engine/lce_production.h says what is run and how it is judged): the options
 * onto the plan, the goldens of the device's architecture, the table or the JSON that
 * scripts/lcecheck_golden.py reads (one run per subject in the schema of `lcecheck measure --json`).
 * Exit status 0 needs every production subject to pass and every mutant to fail at V >= 128k. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "lce_production.h"

/* ---- the table ----------------------------------------------------------------------------------- */
/* One row per judged output: its metrics, bounds and verdict, as the judge gave them. */
static void print_output_row(const lce_prod_report *rep, const lce_prod_case_result *cr, int j, lce_output_id o) {
  const lce_output_verdict *ov = &cr->subj[j].verdict.out[o];
  if (!ov->judged) return;
  const int exact = o == LCE_OUT_D_EMBEDDING, bounded = !rep->cfg->measure_only;
  char shape[48], rel[16], bias[16], brel[16], bbias[16], verdict[48];
  snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)cr->c.n, (long long)cr->c.h, (long long)cr->c.v);
  cli_cell(rel, sizeof rel, exact ? NAN : ov->metrics.v[LCE_METRIC_RELERR], "%.3e");
  cli_cell(bias, sizeof bias, exact ? NAN : ov->metrics.v[LCE_METRIC_BIAS], "%+.2e");
  cli_cell(brel, sizeof brel, bounded && !exact ? ov->bound[LCE_METRIC_RELERR] : NAN, "%.2e");
  cli_cell(bbias, sizeof bbias, bounded && !exact ? ov->bound[LCE_METRIC_BIAS] : NAN, "%.2e");
  double worst = -1.0;
  int unbounded = 0; /* bounds left out: the reference kept no magnitudes (lce_bounds_apply) */
  for (int m = 0; bounded && !exact && m < LCE_METRIC_COUNT; m++) {
    unbounded += ov->unbounded[m];
    if (!ov->metrics.undefined[m] && !ov->unbounded[m] && ov->budget_pct[m] > worst) worst = ov->budget_pct[m];
  }
  const char *word = !ov->class_ok ? "CLASS FAIL" : !bounded ? "measured" : ov->pass ? "pass" : "FAIL";
  char extra[24] = "";
  if (unbounded) snprintf(extra, sizeof extra, ", %d unbounded", unbounded);
  if (exact) snprintf(verdict, sizeof verdict, "%s (exact)", word);
  else if (worst >= 0.0) snprintf(verdict, sizeof verdict, "%s %.0f%%%s", word, worst, extra);
  else snprintf(verdict, sizeof verdict, "%s%s", word, extra);
  printf("%-18s %-6s %3d %-31s %-11s %7lld %10s %10s %9s/%-9s %s\n", shape, cr->c.tied ? "tied" : "untied", cr->c.tp,
         rep->cfg->subjects[j], lce_output_name(o), (long long)ov->inner, rel, bias, brel, bbias, verdict);
  if (!ov->class_ok) printf("%18s   %s\n", "", ov->class_msg);
}

/* One line per mutant: where it was killed, and whether it was at every V >= 128k. */
static void print_mutant_lines(const lce_prod_report *rep) {
  for (int j = 0; j < rep->cfg->nsubjects; j++) {
    if (!rep->mutant[j]) continue;
    int big = 0, big_killed = 0, small = 0, small_killed = 0, undecided = 0;
    for (size_t i = 0; i < rep->ncases; i++) {
      const int k = lce_prod_mutant_killed(rep, i, j), is_big = rep->cases[i].c.v >= LCE_PROD_MUTANT_MIN_V;
      if (k < 0) { undecided++; continue; }
      big += is_big, small += !is_big, big_killed += is_big && k, small_killed += !is_big && k;
    }
    if (rep->cfg->measure_only)
      printf("mutant %s: measure only, no verdicts (compare its d_hidden relerr with its class's above)\n",
             rep->cfg->subjects[j]);
    else
      printf("mutant %s: killed on %d/%d cases with V >= %d%s, %d/%d below%s\n", rep->cfg->subjects[j], big_killed, big,
             LCE_PROD_MUTANT_MIN_V, big_killed == big && big > 0 ? " (required: ok)" : " (required: ALL — NOT MET)",
             small_killed, small, undecided ? " (some cases without a verdict)" : "");
  }
}

static void print_table(const lce_prod_report *rep) {
  const lce_prod_config *cfg = rep->cfg;
  printf("lcecheck production: %s (%s, driver %d, runtime %d), shapes %s, %zu cases, %.0f s%s\n", rep->dev.name,
         rep->dev.arch, rep->dev.driver, rep->dev.runtime, cfg->shape_set, rep->ncases, rep->seconds,
         cfg->measure_only ? ", measure only" : "");
  for (int j = 0; j < cfg->nsubjects; j++)
    if (!cfg->measure_only)
      printf("  %-31s golden %s%s\n", cfg->subjects[j], rep->golden_path[j], "");
  printf("%-18s %-6s %3s %-31s %-11s %7s %10s %10s %19s %s\n", "shape", "emb", "tp", "subject", "output", "K",
         "relerr", "bias", "bound relerr/bias", "verdict");
  for (size_t i = 0; i < rep->ncases; i++) {
    const lce_prod_case_result *cr = &rep->cases[i];
    lce_output_id outs[4];
    const int nout = lce_prod_outputs(&cr->c, outs);
    for (int j = 0; j < cfg->nsubjects; j++) {
      const lce_case_result *r = &cr->subj[j];
      if (r->error || r->skipped) {
        printf("%lldx%lldx%lld %s tp%d %s: %s: %s\n", (long long)cr->c.n, (long long)cr->c.h, (long long)cr->c.v,
               cr->c.tied ? "tied" : "untied", cr->c.tp, cfg->subjects[j], r->error ? "ERROR" : "skipped",
               r->status.msg);
        continue;
      }
      for (int k = 0; k < nout; k++) print_output_row(rep, cr, j, outs[k]);
    }
  }
  print_mutant_lines(rep);
}

/* ---- JSON ------------------------------------------------------------------------------------------ */
static void print_json(const lce_prod_report *rep, int status, const char *why) {
  const lce_prod_config *cfg = rep->cfg;
  FILE *f = stdout;
  cli_json_begin();
  cli_json_device(f, &rep->dev);
  fprintf(f, ",\"measure_only\":%s,\"shapes\":\"%s\",\"vocab_chunk\":%lld,\"seed\":%llu,\"seconds\":%.1f,\"runs\":[",
          cfg->measure_only ? "true" : "false", cfg->shape_set, (long long)cfg->vocab_chunk,
          (unsigned long long)cfg->seed, rep->seconds);
  for (int j = 0; j < cfg->nsubjects; j++) {
    fprintf(f, "%s{\"verb\":\"%s\",\"subject\":", j ? "," : "", cfg->measure_only ? "measure" : "check");
    cli_json_string(f, cfg->subjects[j]);
    cli_json_member(f, "golden_class", rep->golden_class[j]);
    cli_json_member(f, "golden", rep->golden_path[j]);
    /* Every golden was found when the run got here (a missing one is an error before it), or none was asked for. */
    fprintf(f, ",\"golden_found\":%s,\"mutant\":%s,\"cases\":[", cfg->measure_only ? "false" : "true",
            rep->mutant[j] ? "true" : "false");
    for (size_t i = 0; i < rep->ncases; i++) { /* each case as `check --json` writes it */
      if (i) fputc(',', f);
      cli_json_case(f, &rep->cases[i].subj[j], !cfg->measure_only);
    }
    fputs("]}", f);
  }
  fprintf(f, "],\"exit_status\":%d", status);
  cli_json_member(f, "reason", why);
  fputs("}\n", f);
}

/* ---- the verb ---------------------------------------------------------------------------------------- */
/* Golden of subject j: DIR/sm_XX/<class>.golden, or without --golden-dir the one check judges it by
 * (lce_subject_golden_path: golden/sm_XX/). */
static int load_golden(const lce_prod_config *cfg, lce_prod_report *rep, const lce_subject *s, int j, lce_golden *g) {
  if (cfg->golden_dir)
    snprintf(rep->golden_path[j], sizeof rep->golden_path[j], "%s/%s/%s.golden", cfg->golden_dir, rep->dev.arch,
             s->golden_class);
  else
    lce_subject_golden_path(s, rep->golden_path[j], sizeof rep->golden_path[j]);
  memset(g, 0, sizeof *g);
  lce_status st;
  return lce_golden_load(rep->golden_path[j], g, &st) == LCE_OK ? CLI_PASS : cli_fail(CLI_USAGE, "%s", st.msg);
}

static int run_production(const lce_prod_config *cfg, const lce_subject *subjects[]) {
  lce_prod_report rep;
  memset(&rep, 0, sizeof rep);
  rep.cfg = cfg;
  char why[512];
  if (!lce_device_query(&rep.dev, why, sizeof why)) return cli_fail(CLI_SKIP, "no usable GPU (%s): skipped", why);
  lce_golden goldens[LCE_PROD_MAX_SUBJECTS];
  const lce_golden *gp[LCE_PROD_MAX_SUBJECTS];
  memset(goldens, 0, sizeof goldens);
  int rc = CLI_PASS;
  for (int j = 0; j < cfg->nsubjects; j++) {
    rep.golden_class[j] = subjects[j]->golden_class;
    rep.mutant[j] = (subjects[j]->caps & LCE_CAP_MUTANT) != 0;
    gp[j] = NULL;
    if (cfg->measure_only || rc != CLI_PASS) continue;
    rc = load_golden(cfg, &rep, subjects[j], j, &goldens[j]);
    gp[j] = &goldens[j];
  }
  rep.ncases = lce_prod_case_count(cfg);
  rep.cases = rc == CLI_PASS ? calloc(rep.ncases ? rep.ncases : 1, sizeof *rep.cases) : NULL;
  if (rc == CLI_PASS && rep.cases == NULL) rc = cli_fail(CLI_FAIL, "out of memory for %zu case results", rep.ncases);
  if (rc == CLI_PASS) {
    if (!cfg->quiet)
      fprintf(stderr, "lcecheck production: %s (%s), %zu cases x %d subjects, %d generator threads\n", rep.dev.name,
              rep.dev.arch, rep.ncases, cfg->nsubjects, cfg->jobs);
    lce_status st;
    lce_code code = lce_prod_run(&rep, subjects, gp, &st);
    if (code == LCE_ENODEV) rc = cli_fail(CLI_SKIP, "%s: skipped", st.msg);
    else if (code != LCE_OK) rc = cli_fail(CLI_FAIL, "%s", st.msg);
    else {
      rc = lce_prod_exit_status(&rep, why, sizeof why);
      if (cfg->json) print_json(&rep, rc, why);
      else print_table(&rep);
      if (!cfg->json) printf("%s%s%s\n", rc == 0 ? "PASS" : "FAIL", rc ? ": " : "", rc ? why : "");
    }
  }
  for (int j = 0; j < cfg->nsubjects; j++) lce_golden_free(&goldens[j]);
  free(rep.cases);
  return rc;
}

/* The options given, onto the plan's defaults. */
static int production_options(lce_prod_config *cfg) {
  lce_prod_config_default(cfg);
  cfg->json = cli_opt("--json") != NULL, cfg->quiet = cli_opt("--quiet") != NULL;
  cfg->measure_only = cli_opt("--measure-only") != NULL, cfg->golden_dir = cli_opt("--golden-dir");
  uint64_t chunk = (uint64_t)cfg->vocab_chunk, jobs = (uint64_t)cfg->jobs, tp;
  /* Each returns CLI_PASS (0) or, having said why, CLI_USAGE. */
  if (cli_opt_uint("--vocab-chunk", 1, LCE_MAX_DIM, &chunk) || cli_opt_uint("--seed", 0, INT64_MAX, &cfg->seed) ||
      cli_opt_uint("--jobs", 1, 16, &jobs))
    return CLI_USAGE;
  cfg->vocab_chunk = (int64_t)chunk, cfg->jobs = (int)jobs;
  const char *shapes = cli_opt("--shapes"), *subjects = cli_opt("--subjects"), *tps = cli_opt("--tp");
  const char *emb = cli_opt("--embeddings");
  lce_status st;
  if (shapes && lce_prod_parse_shapes(shapes, cfg, &st) != LCE_OK) return cli_fail(CLI_USAGE, "%s", st.msg);
  char buf[64], *items[LCE_PROD_MAX_SUBJECTS];
  if (subjects && cli_split("--subjects", subjects, cfg->names_, sizeof cfg->names_, (char **)cfg->subjects,
                            LCE_PROD_MAX_SUBJECTS, &cfg->nsubjects))
    return CLI_USAGE;
  for (int i = 0; subjects && i < cfg->nsubjects; i++)
    for (int j = 0; j < i; j++)
      if (strcmp(cfg->subjects[i], cfg->subjects[j]) == 0)
        return cli_fail(CLI_USAGE, "--subjects: '%s' named twice", cfg->subjects[i]);
  if (tps && cli_split("--tp", tps, buf, sizeof buf, items, LCE_PROD_MAX_TPS, &cfg->ntps)) return CLI_USAGE;
  for (int i = 0; tps && i < cfg->ntps; i++) {
    if (cli_uint("--tp", items[i], 1, 64, &tp) != CLI_PASS) return CLI_USAGE;
    for (int j = 0; j < i; j++)
      if (cfg->tps[j] == (int)tp) return cli_fail(CLI_USAGE, "--tp: %d named twice", (int)tp);
    cfg->tps[i] = (int)tp;
  }
  unsigned mask;
  if (emb == NULL) return CLI_PASS;
  if (cli_embeddings(emb, &mask) != CLI_PASS) return CLI_USAGE;
  if (mask != (CLI_TIED | CLI_UNTIED)) cfg->tied[0] = mask == CLI_TIED, cfg->ntied = 1;
  return CLI_PASS;
}

int cli_production(void) {
  lce_prod_config cfg;
  const int rc = production_options(&cfg);
  if (rc != CLI_PASS) return rc;
  const lce_subject *subjects[LCE_PROD_MAX_SUBJECTS];
  for (int j = 0; j < cfg.nsubjects; j++) {
    const cli_args one = {.subject = cfg.subjects[j]};
    if ((subjects[j] = cli_subject(&one)) == NULL) return CLI_USAGE;
  }
  return run_production(&cfg, subjects);
}
