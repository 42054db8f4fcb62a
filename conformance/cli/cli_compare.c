/* cli_compare.c — `lcecheck compare --subjects A,B[,C...]`: several subjects on the same case,
 * against one oracle run (the options: lcecheck_main.c's table, `lcecheck compare --help`).
 *
 * Per case the tensors are generated once, every subject runs on them (a subject that cannot run the
 * case, or needs a GPU the machine lacks, is skipped visibly), the oracle runs once, and each
 * subject is judged against the golden of its own class (lce_judge, $LCE_GOLDEN_DIR or golden/).
 * Then, per output that has metrics, every pair (A, B) is measured against the oracle's values r on the elements the
 * judge measures (decisive, finite r; valid tokens for lse; real vocab rows for d_weight):
 *   distance = ||A - B|| / ||r||        and   bias = <A - B, r> / <r, r>
 * so that a distance is on the scale of the subjects' own relerr. It must satisfy the triangle
 * inequality distance <= relerr_A + relerr_B (up to the rounding of the metric sums): the check
 * that the two subjects were judged on the same elements of the same reference.
 *
 * --predict-factor F asks whether the first subject predicts the second (fused-host-sm90 for
 * fused-cuda): for every output measured over at least LCE_STAT_MIN_ELEMS effective elements,
 *   relerr: when either relerr exceeds u/8 (u: unit roundoff of the output format; below it the
 *           output is essentially exact and the ratio of two roundings is luck), each relerr must be
 *           within a factor F of the other;
 *   bias:   when both biases are defined and either |bias| exceeds its noise level
 *           COMPARE_BIAS_SIGMAS * max(relerr) / sqrt(neff) (a random error of that relerr has a
 *           bias of about relerr / sqrt(neff)), the biases must have the same sign and each |bias|
 *           must be within a factor F of the other.
 * A value above its floor against one at zero fails: a prediction that misses a systematic error
 * is what this check exists to catch. --predict-outputs and --predict-precisions (comma lists; default
 * all) restrict the check to what the predictor models: fused-host-sm90 models the tensor-core GEMMs
 * (bf16, fp16, tf32), which dominate the gradients' error, but neither CUDA's expf/logf (the forward
 * outputs) nor cuBLAS's fp32 SGEMM summation order; the triangle check still covers every output.
 *
 * Exit status: 0 when every subject that ran passed its golden and every check held and at least
 * one pair was measured; 1 otherwise; 2 bad usage; 77 when nothing could be compared because a
 * device (GPU subject or fp64-gpu oracle) was missing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "lce_metrics.h"

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

/* ---- arguments ------------------------------------------------------------------------------- */

static int precision_index(const char *name) {
  lce_precision t;
  return lce_precision_parse(name, &t) ? (int)t : -1;
}

static int parse_compare_args(compare_args *a) {
  memset(a, 0, sizeof *a);
  a->predict_outputs = ~0u, a->predict_precisions = ~0u;
  if (cli_parse_args(&a->sel) != CLI_PASS) return CLI_USAGE;
  a->tier = cli_tier(&a->sel);
  const char *subjects = cli_opt("--subjects"), *factor = cli_opt("--predict-factor");
  const char *outputs = cli_opt("--predict-outputs"), *precisions = cli_opt("--predict-precisions");
  if (subjects == NULL) return cli_fail(CLI_USAGE, "--subjects A,B[,C...] is required");
  if (factor && cli_opt_real("--predict-factor", 1.0, 1, &a->predict_factor) != CLI_PASS) return CLI_USAGE;
  if (!factor && (outputs || precisions)) /* they restrict a check that would not run */
    return cli_fail(CLI_USAGE, "%s restricts --predict-factor's check: give --predict-factor F too",
                    outputs ? "--predict-outputs" : "--predict-precisions");
  if (outputs && cli_outputs("--predict-outputs", outputs, &a->predict_outputs) != CLI_PASS) return CLI_USAGE;
  if (precisions &&
      cli_name_mask("--predict-precisions", precisions, "dtype", precision_index, &a->predict_precisions) != CLI_PASS)
    return CLI_USAGE;
  char buf[4096], *names[COMPARE_MAX_SUBJECTS];
  if (cli_split("--subjects", subjects, buf, sizeof buf, names, COMPARE_MAX_SUBJECTS, &a->count) != CLI_PASS)
    return CLI_USAGE;
  for (int k = 0; k < a->count; k++) {
    const cli_args one = {.subject = names[k]};
    if ((a->subj[k] = cli_subject(&one)) == NULL) return CLI_USAGE;
  }
  if (a->count < 2) return cli_fail(CLI_USAGE, "--subjects needs at least two subjects");
  return CLI_PASS;
}

/* ---- one pair on one output ------------------------------------------------------------------ */

/* The elements lce_judge measures (its masks, lce_judge.c): valid tokens for lse, real vocab rows
 * for d_weight, everything else for the other outputs; and only decisive, finite oracle values. */
static int measured_element(const lce_case *c, const lce_tensors *in, lce_output_id o, const lce_ref_output *ref,
                            int64_t i) {
  if (o == LCE_OUT_LSE && in->labels[i] == c->ignore_index) return 0;
  if (o == LCE_OUT_D_WEIGHT && i >= c->v * c->h) return 0;
  return ref->decisive[i] && isfinite(ref->value[i]) && isfinite(ref->rounded[i]);
}

static void measure_pair(const lce_case *c, const lce_tensors *in, const lce_ref_output *ref, lce_output_id o,
                         const lce_outputs *a, const lce_outputs *b, pair_output *po) {
  long double dd = 0, dr = 0, rr = 0;
  int nonfinite = 0;
  po->predict_ok = 1; /* until check_prediction says otherwise */
  for (int64_t i = 0; i < ref->count; i++) {
    if (!measured_element(c, in, o, ref, i)) continue;
    double xa = lce_output_get(c, a, o, i), xb = lce_output_get(c, b, o, i), r = ref->value[i];
    po->elements++;
    if (!isfinite(xa) || !isfinite(xb)) {
      nonfinite = 1;
      continue;
    }
    long double d = (long double)xa - (long double)xb;
    dd += d * d;
    dr += d * r;
    rr += (long double)r * r;
  }
  po->measured = po->elements > 0 && rr > 0; /* r == 0 everywhere: no scale to measure a distance on */
  if (!po->measured) return;
  po->distance = nonfinite ? INFINITY : (double)sqrtl(dd / rr);
  po->bias = nonfinite ? NAN : (double)(dr / rr);
}

static void check_triangle(const lce_output_verdict *va, const lce_output_verdict *vb, pair_output *po) {
  double sum = va->metrics.v[LCE_METRIC_RELERR] + vb->metrics.v[LCE_METRIC_RELERR];
  po->triangle_ok = po->distance <= sum * (1 + COMPARE_TRIANGLE_SLACK);
}

static int within_factor(double x, double y, double f) { return x <= f * y && y <= f * x; }

/* The --predict-factor rule of the header comment, for subject A (predictor) and B. */
static void check_prediction(const lce_case *c, lce_output_id o, const lce_metric_values *ma,
                             const lce_metric_values *mb, double f, pair_output *po) {
  po->predict_ok = 1;
  if (mb->neff < LCE_STAT_MIN_ELEMS) return;
  double ra = ma->v[LCE_METRIC_RELERR], rb = mb->v[LCE_METRIC_RELERR];
  double floor_r = COMPARE_RELERR_FLOOR_ULPS * lce_dtype_unit_roundoff(lce_output_format(c, o));
  size_t used = 0;
  if (fmax(ra, rb) > floor_r) {
    po->predict_checked = 1;
    if (!within_factor(ra, rb, f)) {
      po->predict_ok = 0;
      used += (size_t)snprintf(po->predict_msg, sizeof po->predict_msg, "relerr %.3e vs %.3e not within x%g", ra,
                               rb, f);
    }
  }
  if (ma->undefined[LCE_METRIC_BIAS] || mb->undefined[LCE_METRIC_BIAS]) return;
  double ba = ma->v[LCE_METRIC_BIAS], bb = mb->v[LCE_METRIC_BIAS];
  double floor_b = COMPARE_BIAS_SIGMAS * fmax(ra, rb) / sqrt(mb->neff);
  if (!(fmax(fabs(ba), fabs(bb)) > floor_b)) return;
  po->predict_checked = 1;
  if ((ba > 0) != (bb > 0) || !within_factor(fabs(ba), fabs(bb), f)) {
    po->predict_ok = 0;
    if (used < sizeof po->predict_msg)
      snprintf(po->predict_msg + used, sizeof po->predict_msg - used, "%sbias %.3e vs %.3e not within x%g (same sign)",
               used ? "; " : "", ba, bb, f);
  }
}

/* ---- reports: one block of text or one JSON object per case (subjects with their golden verdicts,
 * then each pair's distance, bias, triangle and prediction checks per output), the totals, and the
 * final table per pair and output. */

/* 1 when the case fails: a subject failed its golden or errored, or a pair check failed. */
static int compare_case_failed(const compare_args *a, const case_run *run) {
  for (int k = 0; k < a->count; k++)
    if (run->res[k].error || (run->ran[k] && !run->res[k].verdict.pass)) return 1;
  for (int i = 0; i < a->count; i++)
    for (int j = i + 1; j < a->count; j++)
      for (int o = 0; o < LCE_OUT_COUNT; o++) {
        const pair_output *po = &run->pair[i][j][o];
        if (po->measured && (!po->triangle_ok || !po->predict_ok)) return 1;
      }
  return 0;
}

/* Adds the case to the totals (and marks t->failed). */
static void compare_tally_case(const compare_args *a, const case_run *run, compare_tally *t) {
  t->cases++;
  t->device_skips += run->device_skip;
  for (int k = 0; k < a->count; k++) cli_counts_add(&t->subj[k], &run->res[k]);
  for (int i = 0; i < a->count; i++)
    for (int j = i + 1; j < a->count; j++) {
      int any = 0;
      for (int o = 0; o < LCE_OUT_COUNT; o++) {
        const pair_output *po = &run->pair[i][j][o];
        if (!po->measured) continue;
        any = 1;
        pair_tally *pt = &t->pair[i][j][o];
        pt->measured++;
        pt->triangle_fail += !po->triangle_ok;
        pt->predict_checked += po->predict_checked;
        pt->predict_fail += !po->predict_ok;
        pt->worst_distance = fmax(pt->worst_distance, po->distance);
        if (isfinite(po->bias)) pt->worst_abs_bias = fmax(pt->worst_abs_bias, fabs(po->bias));
        double sum = run->res[i].verdict.out[o].metrics.v[LCE_METRIC_RELERR] +
                     run->res[j].verdict.out[o].metrics.v[LCE_METRIC_RELERR];
        if (sum > 0 && isfinite(sum)) pt->worst_triangle_use = fmax(pt->worst_triangle_use, po->distance / sum);
      }
      t->pairs_measured += any;
    }
  t->failed |= compare_case_failed(a, run);
}

/* The case as text (index of total), or as one JSON object of the "cases" array (first: no comma). */
static void compare_print_case_text(const compare_args *a, const case_run *run, size_t index, size_t total) {
  printf("\n[%zu/%zu] %s  %s\n", index + 1, total, run->res[0].id, compare_case_failed(a, run) ? "FAIL" : "ok");
  for (int k = 0; k < a->count; k++) {
    const lce_case_result *r = &run->res[k];
    const char *detail = (r->error || !run->ran[k]) ? r->status.msg : r->verdict.summary;
    printf("  %-36s %-5s %s\n", a->subj[k]->name, lce_case_result_status(r), detail[0] ? detail : "-");
  }
  printf("  %-12s %-44s %12s %12s  %s\n", "output", "subject / pair A - B", "relerr|dist", "bias", "check");
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const char *oname = lce_output_name((lce_output_id)o);
    for (int k = 0; k < a->count; k++) {
      const lce_output_verdict *ov = &run->res[k].verdict.out[o];
      if (!run->ran[k] || run->res[k].error || !ov->judged) continue;
      char relerr[16], bias[16]; /* undefined metrics print as '-' (lce_metrics.h) */
      cli_cell(relerr, sizeof relerr, ov->metrics.undefined[LCE_METRIC_RELERR] ? NAN : ov->metrics.v[LCE_METRIC_RELERR],
               "%.4e");
      cli_cell(bias, sizeof bias, ov->metrics.undefined[LCE_METRIC_BIAS] ? NAN : ov->metrics.v[LCE_METRIC_BIAS], "%.4e");
      printf("  %-12s %-44s %12s %12s  %s\n", oname, a->subj[k]->name, relerr, bias, ov->pass ? "golden ok" : "golden FAIL");
    }
    for (int i = 0; i < a->count; i++)
      for (int j = i + 1; j < a->count; j++) {
        const pair_output *po = &run->pair[i][j][o];
        if (!po->measured) continue;
        char label[96], dist[16], bias[16];
        snprintf(label, sizeof label, "%s - %s", a->subj[i]->name, a->subj[j]->name);
        cli_cell(dist, sizeof dist, po->distance, "%.4e");
        cli_cell(bias, sizeof bias, po->bias, "%.4e");
        printf("  %-12s %-44s %12s %12s  triangle %s%s%s\n", oname, label, dist, bias,
               po->triangle_ok ? "ok" : "FAIL", po->predict_checked ? (po->predict_ok ? ", predict ok" : ", predict FAIL: ") : "",
               po->predict_ok ? "" : po->predict_msg);
      }
  }
}

static void compare_print_case_json(const compare_args *a, const case_run *run, int first) {
  printf("%s{\"id\":", first ? "" : ",");
  cli_json_string(stdout, run->res[0].id);
  printf(",\"status\":\"%s\"", compare_case_failed(a, run) ? "fail" : "ok");
  printf(",\"subjects\":[");
  for (int k = 0; k < a->count; k++) {
    printf("%s{\"name\":", k ? "," : "");
    cli_json_string(stdout, a->subj[k]->name);
    printf(",\"result\":");
    cli_json_case(stdout, &run->res[k], 1);
    printf("}");
  }
  printf("],\"pairs\":[");
  int firstp = 1;
  for (int i = 0; i < a->count; i++)
    for (int j = i + 1; j < a->count; j++) {
      printf("%s{\"a\":", firstp ? "" : ",");
      firstp = 0;
      cli_json_string(stdout, a->subj[i]->name);
      cli_json_member(stdout, "b", a->subj[j]->name);
      printf(",\"outputs\":{");
      int firsto = 1;
      for (int o = 0; o < LCE_OUT_COUNT; o++) {
        const pair_output *po = &run->pair[i][j][o];
        if (!po->measured) continue;
        printf("%s\"%s\":{\"elements\":%lld,\"distance\":", firsto ? "" : ",", lce_output_name((lce_output_id)o),
               (long long)po->elements);
        firsto = 0;
        cli_json_number(stdout, po->distance);
        printf(",\"bias\":");
        cli_json_number(stdout, po->bias);
        printf(",\"triangle_ok\":%s,\"predict\":\"%s\"", po->triangle_ok ? "true" : "false",
               !po->predict_checked ? "-" : po->predict_ok ? "ok" : "fail");
        if (!po->predict_ok) {
          cli_json_member(stdout, "predict_message", po->predict_msg);
        }
        printf("}");
      }
      printf("}}");
    }
  printf("]}");
}

/* The table of totals per pair and output that ends the text report. */
static void compare_print_final_table(const compare_args *a, const compare_tally *t) {
  printf("\n%-36s %6s %6s %6s %6s\n", "subject (against its golden)", "pass", "fail", "skip", "error");
  for (int k = 0; k < a->count; k++)
    printf("%-36s %6zu %6zu %6zu %6zu\n", a->subj[k]->name, t->subj[k].pass, t->subj[k].fail, t->subj[k].skip,
           t->subj[k].error);
  printf("\n%-44s %-12s %6s %12s %12s %9s %9s %9s\n", "pair A - B", "output", "cases", "max dist", "max |bias|",
         "max use", "triangle", "predict");
  for (int i = 0; i < a->count; i++)
    for (int j = i + 1; j < a->count; j++) {
      char label[96];
      snprintf(label, sizeof label, "%s - %s", a->subj[i]->name, a->subj[j]->name);
      for (int o = 0; o < LCE_OUT_COUNT; o++) {
        const pair_tally *pt = &t->pair[i][j][o];
        if (!pt->measured) continue;
        char tri[16], pred[24] = "-";
        snprintf(tri, sizeof tri, "%s", pt->triangle_fail ? "FAIL" : "ok");
        if (pt->predict_checked || pt->predict_fail)
          snprintf(pred, sizeof pred, "%d/%d %s", pt->predict_checked - pt->predict_fail, pt->predict_checked,
                   pt->predict_fail ? "FAIL" : "ok");
        printf("%-44s %-12s %6d %12.4e %12.4e %8.1f%% %9s %9s\n", label, lce_output_name((lce_output_id)o),
               pt->measured, pt->worst_distance, pt->worst_abs_bias, 100 * pt->worst_triangle_use, tri, pred);
      }
    }
  printf("(max use: distance as %% of relerr_A + relerr_B, the triangle bound; predict: checked outputs within "
         "the factor / checked)\n");
}

/* ---- one case -------------------------------------------------------------------------------- */

/* The engine's sink: every subject's result on the case, then each pair's distances on the outputs
 * the engine kept, against the reference it judged them with. */
typedef struct compare_sink {
  const compare_args *a;
  case_run *run;
  compare_tally *t;
} compare_sink;

static void compare_case_done(void *ctx, const lce_engine_case *ec) {
  compare_sink *cs = (compare_sink *)ctx;
  const compare_args *a = cs->a;
  case_run *run = cs->run;
  memset(run, 0, sizeof *run);
  for (int k = 0; k < a->count; k++) {
    run->res[k] = ec->res[k];
    run->ran[k] = !ec->res[k].skipped && !ec->res[k].error;
    run->device_skip |= ec->res[k].skipped && ec->res[k].status.code == LCE_ENODEV;
  }
  const lce_case *c = ec->c;
  for (int i = 0; i < a->count && ec->ref; i++)
    for (int j = i + 1; j < a->count; j++) {
      if (!run->ran[i] || !run->ran[j]) continue;
      for (int o = 0; o < LCE_OUT_COUNT; o++) {
        const lce_output_verdict *vi = &run->res[i].verdict.out[o], *vj = &run->res[j].verdict.out[o];
        /* Outputs judged by class checks alone (the loss of reduction none, d_embedding) have no metrics. */
        if (!vi->judged || !vj->judged || vi->metrics.judged == 0 || vj->metrics.judged == 0) continue;
        pair_output *po = &run->pair[i][j][o];
        measure_pair(c, ec->in, &ec->ref->host.out[o], (lce_output_id)o, &ec->out[i], &ec->out[j], po);
        if (!po->measured) continue;
        check_triangle(vi, vj, po);
        if (a->predict_factor > 0 && i == 0 && j == 1 && (a->predict_outputs >> o & 1u) &&
            (a->predict_precisions >> lce_case_precision(c) & 1u))
          check_prediction(c, (lce_output_id)o, &vi->metrics, &vj->metrics, a->predict_factor, po);
      }
    }
  compare_tally_case(a, run, cs->t);
  if (a->sel.json) compare_print_case_json(a, run, ec->index == 0);
  else if (!a->sel.quiet || compare_case_failed(a, run)) compare_print_case_text(a, run, ec->index, ec->ncases);
}

/* ---- the verb -------------------------------------------------------------------------------- */

static int exit_code(const compare_tally *t) {
  if (t->failed) return CLI_FAIL;
  if (t->pairs_measured == 0) return t->device_skips ? CLI_SKIP : CLI_FAIL;
  return CLI_PASS;
}

int cli_compare(void) {
  compare_args a;
  int rc = parse_compare_args(&a);
  if (rc != CLI_PASS) return rc;
  lce_golden goldens[COMPARE_MAX_SUBJECTS];
  memset(goldens, 0, sizeof goldens);
  char path[512];
  for (int k = 0; k < a.count && rc == CLI_PASS; k++) rc = cli_load_golden(&a.sel, a.subj[k], &goldens[k], path, sizeof path);
  lce_case *cases = NULL;
  size_t n = 0;
  if (rc == CLI_PASS) rc = cli_cases(&a.sel, &cases, &n);
  compare_tally *t = calloc(1, sizeof *t);
  case_run *run = malloc(sizeof *run);
  if (rc == CLI_PASS && (t == NULL || run == NULL)) {
    rc = cli_fail(CLI_FAIL, "out of memory");
  }
  if (rc == CLI_PASS) {
    const char *scope = a.sel.case_id ? a.sel.case_id : (a.sel.matrix ? a.sel.matrix : "default");
    if (a.sel.json) {
      cli_json_begin();
      printf(",\"subjects\":[");
      for (int k = 0; k < a.count; k++) {
        if (k) putchar(',');
        cli_json_string(stdout, a.subj[k]->name);
      }
      printf("],\"oracle\":\"%s\",\"predict_factor\":", a.tier->name);
      cli_json_number(stdout, a.predict_factor > 0 ? a.predict_factor : NAN);
      cli_json_member(stdout, a.sel.case_id ? "case" : "matrix", scope);
      printf(",\"cases\":[");
    } else {
      printf("lcecheck compare: %d subjects, oracle %s, %s %s, %zu case%s", a.count, a.tier->name,
             a.sel.case_id ? "case" : "matrix", scope, n, n == 1 ? "" : "s");
      if (a.predict_factor > 0) printf(", %s predicts %s within x%g", a.subj[0]->name, a.subj[1]->name, a.predict_factor);
      printf("\n");
    }
    const lce_golden *gp[COMPARE_MAX_SUBJECTS];
    for (int k = 0; k < a.count; k++) gp[k] = &goldens[k];
    const lce_engine_config cfg = {.cases = cases, .ncases = n, .subjects = a.subj, .goldens = gp,
                                   .nsubjects = (size_t)a.count, .tier = a.tier, .keep_outputs = 1};
    compare_sink cs = {&a, run, t};
    lce_status est;
    lce_status_clear(&est);
    if (lce_engine_run(&cfg, compare_case_done, &cs, &est) != LCE_OK) {
      cli_fail(CLI_FAIL, "%s", est.msg);
      t->failed = 1;
    }
    rc = exit_code(t);
    if (a.sel.json) {
      printf("],\"summary\":{\"cases\":%zu,\"pairs_measured\":%zu,\"device_skips\":%zu,\"ok\":%s}}\n", t->cases,
             t->pairs_measured, t->device_skips, rc == CLI_PASS ? "true" : "false");
    } else {
      compare_print_final_table(&a, t);
      printf("\n%s\n", rc == CLI_PASS ? "PASS"
                       : rc == CLI_SKIP ? "SKIPPED: nothing compared (a device is missing)"
                       : t->pairs_measured == 0 && !t->failed ? "FAIL: no pair was compared" : "FAIL");
    }
  }
  free(run);
  free(t);
  free(cases);
  for (int k = 0; k < a.count; k++) lce_golden_free(&goldens[k]);
  return rc;
}
