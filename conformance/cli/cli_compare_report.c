/* cli_compare_report.c — `lcecheck compare`'s reports: one block of text or one JSON object per case
 * (subjects with their golden verdicts, then each pair's distance, bias, triangle and prediction
 * checks per output), the totals, and the final table per pair and output. */
#include <math.h>
#include <stdio.h>

#include "cli_compare.h"

int compare_case_failed(const compare_args *a, const case_run *run) {
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

void compare_tally_case(const compare_args *a, const case_run *run, compare_tally *t) {
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

void compare_print_case_text(const compare_args *a, const case_run *run, size_t index, size_t total) {
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
      char bias[16]; /* undefined over too few elements (lce_metrics.h) */
      cli_cell(bias, sizeof bias, ov->metrics.undefined[LCE_METRIC_BIAS] ? NAN : ov->metrics.v[LCE_METRIC_BIAS], "%.4e");
      printf("  %-12s %-44s %12.4e %12s  %s\n", oname, a->subj[k]->name, ov->metrics.v[LCE_METRIC_RELERR], bias,
             ov->pass ? "golden ok" : "golden FAIL");
    }
    for (int i = 0; i < a->count; i++)
      for (int j = i + 1; j < a->count; j++) {
        const pair_output *po = &run->pair[i][j][o];
        if (!po->measured) continue;
        char label[96];
        snprintf(label, sizeof label, "%s - %s", a->subj[i]->name, a->subj[j]->name);
        printf("  %-12s %-44s %12.4e %12.4e  triangle %s%s%s\n", oname, label, po->distance, po->bias,
               po->triangle_ok ? "ok" : "FAIL", po->predict_checked ? (po->predict_ok ? ", predict ok" : ", predict FAIL: ") : "",
               po->predict_ok ? "" : po->predict_msg);
      }
  }
}

void compare_print_case_json(const compare_args *a, const case_run *run, int first) {
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

void compare_print_final_table(const compare_args *a, const compare_tally *t) {
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

