/* lce_fast_rnd.c — tier 1's reference of the coherent d_logit rounding (lce_ref_output.rnd).
 *
 * A kernel whose backward GEMMs read low-precision d_logits rounds every d_logit once; on flat rows
 * those roundings share their sign (p_y - 1 rounds to -1 in every token, every p_v alike), so the
 * gradients carry a bias up to u/2 of that format which no cond measures. rnd is the gradient such a
 * kernel computes with everything else exact: t = dz / g (the d_logit before the loss gradient g, as
 * lce_fused_grad_split leaves only a power of two of g in the stored d_logits), rounded to the input
 * dtype and, with tf32 GEMMs, then to tf32, times g, summed in plain double. Its bias against the
 * exact gradient is the coherent part a correct kernel shows; a kernel that folds g into the stored
 * d_logits moves away from it by g's rounding (golden/policy.txt, term rnd). Not certified: double
 * sums err by ~1e-16 of the terms, far below any rounding it stands for. The sums over the terms run
 * in the gradient passes (fast_grad_step), which read each w row and h row once for all of them. */
#include "lce_fast_internal.h"

void fast_rnd_row(const lce_case *c, double g, const double *ds, int64_t v, double *dzr) {
  const int tf32 = lce_case_precision(c) == LCE_PREC_TF32;
  for (int64_t j = 0; j < v; j++) {
    double t = lce_round_to(c->dtype, ds[j] / g);
    if (tf32) t = lce_round_tf32(t);
    dzr[j] = t * g;
  }
}



/* The rounding decisions a kernel's own fp32 errors can change (lce_ref_output.flip; golden/policy.txt,
 * term flip). rnd rounds the exact t_v; a kernel rounds its fp32 t̂_v, and where t_v lies within the
 * kernel's error delta_v of a rounding boundary the two round to different neighbours. Rounding is
 * monotone, so |R(t̂_v) - R(t_v)| <= R(t_v + delta_v) - R(t_v - delta_v) whatever the error's sign:
 * a bound per d_logit that holds when every such flip of a row goes the same way (one lse error
 * reaches every p_v of its token alike, so they do), and that is 0 where no flip is possible. Where R
 * is fp32 itself (fp32 inputs, IEEE GEMMs) it is the first-order image of the kernel's fp32 error.
 * delta_v models fused-host's fp32 arithmetic (policy.txt, "The arithmetic modelled"): the logit as a
 * dot product of H terms, delta_z = sqrt(H) u32 sum|h w| (a random walk of H roundings, the scale the
 * fitted cond*sqrth terms measure); lse = m + log s from the largest such logit error, the running sum
 * of the shard's vs terms (sqrt(vs) u32) and the log and add (u32 |lse| + 2 u32); p_v = exp(z_v - lse)
 * from both plus the subtraction (u32 |z_v - lse|) and expf (2 u32); through d t_v / d log p_v =
 * p_v f_v (|cy| + |K| + 2 lambda) as lsens; 2 u32 of the magnitude of each product and sum that
 * forms t_v; and softcap's factor f_v, computed as 1 - tanh^2 in fp32, within 6 u32 absolutely, times
 * the d_logit it scales. */
void fast_flip_row(const lce_case *c, const fast_row *r, const fast_opts *o, int64_t y, double g, const double *ds,
                   double *dzq) {
  const int tf32 = lce_case_precision(c) == LCE_PREC_TF32;
  const double u32 = 0x1p-24, sh = sqrt((double)c->h) * u32;
  const double vs = (double)((c->v + c->tp - 1) / c->tp);
  double k = 0.0;
  if (o->smoothing) k += o->ev * o->sw;
  if (o->lambda > 0.0) k += 2.0 * o->lambda * r->lse;
  /* softcap's factor f = 1 - tanh^2(z / c) in fp32 errs absolutely (tanhf's two ulps twice, the square
   * and the subtraction), not relatively: where tanh rounds to +-1 it is 0 against a tiny f. */
  const double df = o->softcap > 0.0 ? 6.0 * u32 : 0.0;
  const double cy = fabs(r->cy), dlse = sh * r->term_max + (sqrt(vs) + 2.0) * u32 + u32 * fabs(r->lse);
  for (int64_t v = 0; v < r->v; v++) {
    const double p = r->t[v] / r->s, f = o->softcap > 0.0 ? r->f[v] : 1.0;
    const double w_v = o->class_weight != NULL ? (double)o->class_weight[v] : 1.0;
    const double dlogp = sh * r->term[v] + dlse + u32 * fabs(r->z[v] - r->lse) + 2.0 * u32;
    const double dzmag = p * (cy + fabs(k)) + (v == y ? cy : 0.0) + (o->smoothing ? o->ev * w_v : 0.0);
    const double delta = p * f * (cy + fabs(k) + 2.0 * o->lambda) * dlogp + 2.0 * u32 * f * dzmag + df * dzmag;
    const double t = ds[v] / g;
    double hi = lce_round_to(c->dtype, t + delta), lo = lce_round_to(c->dtype, t - delta);
    if (tf32) hi = lce_round_tf32(hi), lo = lce_round_tf32(lo);
    dzq[v] = fabs(g) * (hi - lo);
  }
}
