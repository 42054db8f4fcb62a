/* lce_explain.c — a verdict in full, as text: for every judged output its condition, effective
 * element counts and the derived terms' scales (lce_bound_scales_of), then every metric with its
 * bound and, for a model-form bound, each term's coefficient × scale = contribution. A finding is
 * triaged from these numbers (which term a false alarm outgrew, which mechanism no term carries)
 * without rebuilding the case; the fuzz harness writes them into its .finding files, where a case
 * whose tensor values came from the input cannot be measured again from its id. */
#include <math.h>
#include <stdio.h>

#include "lce_judge.h"

static void explain_metric(FILE *f, const char *prefix, const lce_golden_entry *e, const lce_bound_scales *s,
                           const lce_output_verdict *ov, lce_output_id o, lce_metric m) {
  fprintf(f, "%s%s %s %.6g", prefix, lce_output_name(o), lce_metric_name(m), ov->metrics.v[m]);
  if (ov->metrics.undefined[m]) {
    fputs(" (undefined: too few elements, not bounded)\n", f);
    return;
  }
  fprintf(f, ", bound %.6g (%.0f%% of budget)", ov->bound[m], ov->budget_pct[m]);
  if (e == NULL || e->form != LCE_FORM_MODEL) {
    fputc('\n', f);
    return;
  }
  fputs(" =", f);
  const char *sep = " ";
  lce_bound_scales at = *s;
  lce_bound_scales_for(&at, ov, m);
  for (int t = 0; t < LCE_TERM_COUNT; t++) {
    if (!(e->terms >> t & 1u)) continue;
    const double scale = lce_bound_term_scale((lce_bound_term)t, &at);
    fprintf(f, "%s%s %.4g*%.4g=%.4g", sep, lce_bound_term_name((lce_bound_term)t), e->coef[t], scale,
            e->coef[t] * scale);
    sep = " + ";
  }
  fputc('\n', f);
}

void lce_verdict_explain(FILE *f, const char *prefix, const lce_golden *g, const char *subject_class,
                         const lce_case *c, const lce_verdict *v) {
  const lce_precision p = lce_case_precision(c);
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_output_verdict *ov = &v->out[o];
    if (!ov->judged) continue;
    if (!ov->class_ok) {
      fprintf(f, "%s%s class: %s\n", prefix, lce_output_name((lce_output_id)o), ov->class_msg);
      continue;
    }
    if (ov->metrics.judged == 0) { /* loss under none, d_embedding: class checks only */
      fprintf(f, "%s%s class ok, no metrics\n", prefix, lce_output_name((lce_output_id)o));
      continue;
    }
    lce_bound_scales s;
    lce_bound_scales_at(g, subject_class, c, (lce_output_id)o, ov, &s);
    fprintf(f, "%s%s judged %lld inner %lld cond %.6g neff %.6g neff_emag %.6g (bound neff %.6g) vs %.0f h %.0f\n",
            prefix, lce_output_name((lce_output_id)o), (long long)ov->metrics.judged, (long long)ov->inner,
            ov->metrics.cond, ov->metrics.neff, ov->metrics.neff_emag, s.neff, s.vs, s.h);
    fprintf(f, "%s%s scales: coh %.4g ms %.4g (rnd signed %.4g) tcx %.4g/%.4g/%.4g", prefix,
            lce_output_name((lce_output_id)o), s.coh, s.ms, ov->metrics.rnd_bias, ov->metrics.tcx[LCE_METRIC_RELERR],
            ov->metrics.tcx[LCE_METRIC_BIAS], ov->metrics.tcx[LCE_METRIC_MAXSCALED]);
    for (int t = LCE_TERM_RND; t < LCE_TERM_COUNT; t++) /* the derived terms, by the golden module's table */
      fprintf(f, " %s %.4g", lce_bound_term_name((lce_bound_term)t), lce_bound_term_scale((lce_bound_term)t, &s));
    fputc('\n', f);
    for (int m = 0; m < LCE_METRIC_COUNT; m++) {
      const lce_golden_entry *e = g ? lce_golden_find(g, subject_class, p, (lce_output_id)o, (lce_metric)m) : NULL;
      explain_metric(f, prefix, e, &s, ov, (lce_output_id)o, (lce_metric)m);
    }
  }
}
