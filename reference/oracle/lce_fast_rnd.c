/* lce_fast_rnd.c — tier 1's reference of the coherent format roundings (lce_ref_output.rnd).
 *
 * A kernel rounds some values to a format whatever its arithmetic: the option constants (1 - e,
 * e/V, lambda) are fp32 kernel arguments and the d_logits are stored in the format the backward
 * GEMMs read. Each of those roundings can reach many elements alike (a rounded constant shifts every
 * smoothing term of every token; on flat rows the d_logits round the same way), so the gradients
 * carry a bias that no cond measures. rnd is the gradient such a kernel computes with everything
 * between those roundings exact:
 *   t_v = p_v·K - [v = y]·c_y - ev·w_v (at v = y: -c_y·(1 - p_y) + p_y·(K - c_y), no cancellation),
 *   K = c_y [+ ev·sw] [+ 2·lambda·lse], c_y = fl32(1 - e)·w_y, ev = fl32(e/V), lambda = fl32(lambda),
 *   p and lse exact, times the softcap factor f_v,
 * rounded to the input dtype (tf32 GEMMs: then to tf32), times g; the gradients' rows summed in
 * double. Its bias against the exact gradient is the coherent part a correct kernel shows
 * (golden/policy.txt, term rnd); the output's own rounding to its format is the judge's second
 * reference (lce_metrics.c), not part of rnd. The logits and lse stay exact on purpose: rounding them
 * to fp32 here was tried and made rnd follow some kernels' roundings and leave others
 * (golden/README.md). Not certified: double
 * arithmetic errs by ~1e-16 of the terms, far below any rounding it stands for. */
#include "lce_fast_internal.h"

static double fp32_of(double x) { return (double)(float)x; }

static double weight_at(const fast_opts *o, int64_t v) { return o->class_weight ? o->class_weight[v] : 1.0; }

void fast_rnd_row(const lce_case *c, const fast_row *r, const fast_opts *o, int64_t y, double g, double *dzr) {
  const int tf32 = lce_case_precision(c) == LCE_PREC_TF32;
  const double ev = fp32_of(o->ev), lambda = fp32_of(o->lambda), cy = fp32_of(o->ome) * weight_at(o, y);
  double k = cy;
  if (o->smoothing) k += ev * o->sw;
  if (o->lambda > 0.0) k += 2.0 * lambda * r->lse;
  for (int64_t v = 0; v < r->v; v++) {
    const double p = r->t[v] / r->s;
    double t = v == y ? p * (k - cy) - cy * (r->s_y / r->s) : p * k;
    if (o->smoothing) t -= ev * weight_at(o, v);
    if (o->softcap > 0.0) t *= r->f[v];
    t = lce_round_to(c->dtype, t);
    if (tf32) t = lce_round_tf32(t);
    dzr[v] = t * g;
  }
}

void fast_rnd_hidden(const double *dzr, const double *w, int64_t v, int64_t h, double *out) {
  for (int64_t k = 0; k < h; k++) out[k] = 0.0;
  for (int64_t j = 0; j < v; j++)
    for (int64_t k = 0; k < h; k++) out[k] += dzr[j] * w[j * h + k];
}

void fast_rnd_weight(const double *dzr, int64_t stride, int64_t col, const unsigned char *active, int64_t n0,
                     int64_t n1, const double *hidden, int64_t h, double *out) {
  for (int64_t n = n0; n < n1; n++) {
    if (!active[n]) continue;
    const double d = dzr[(n - n0) * stride + col];
    for (int64_t k = 0; k < h; k++) out[k] += d * hidden[n * h + k];
  }
}
