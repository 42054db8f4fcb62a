/* lce_judge.c — the verdict on one subject run (see lce_judge.h): class checks, then metrics, then
 * golden bounds, always in that order, because an error metric over a NaN or over an element the
 * subject never wrote means nothing, and a bound is only meaningful for a metric that does.
 *
 * What is judged how:
 *   loss         class checks; metrics and bounds except for reduction none, where it is only a
 *                logging sum of loss_token (loss_token and lse carry the judgement there);
 *   loss_token   class checks, metrics, bounds;
 *   lse          the same over valid tokens only (the lse of an ignored token is unconstrained);
 *   d_hidden     class checks, metrics, bounds;
 *   d_weight     class checks (padded rows [v, vp) bit-identical to the prior), metrics and bounds
 *                over the real rows;
 *   d_embedding  (untied) bit-identical to its prior, nothing else: any change is the seed bug. */
#include "lce_judge.h"
#include "lce_prng.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int has_metrics(const lce_case *c, lce_output_id o) {
  if (o == LCE_OUT_D_EMBEDDING) return 0;
  if (o == LCE_OUT_LOSS && c->reduction == LCE_RED_NONE) return 0;
  return 1;
}

/* Outputs lce_outputs_alloc fills with NaN; gradient buffers start as copies of the priors. */
static int is_poisoned(lce_output_id o) {
  return o == LCE_OUT_LOSS || o == LCE_OUT_LOSS_TOKEN || o == LCE_OUT_LSE || o == LCE_OUT_D_HIDDEN;
}

static int same_double_bits(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }
static int same_float_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* Records the first class violation of an output; later ones are consequences or noise. */
static void class_fail(lce_output_verdict *ov, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void class_fail(lce_output_verdict *ov, const char *fmt, ...) {
  if (!ov->class_ok) return;
  ov->class_ok = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ov->class_msg, sizeof ov->class_msg, fmt, ap);
  va_end(ap);
}

static void describe_class(double x, char *buf, size_t size) {
  if (isnan(x)) snprintf(buf, size, "NaN");
  else if (isinf(x)) snprintf(buf, size, "%cInf", x < 0 ? '-' : '+');
  else snprintf(buf, size, "finite %a", x);
}

static int same_class(double x, double want) {
  if (isnan(want) || isnan(x)) return isnan(want) && isnan(x);
  if (isinf(want) || isinf(x)) return x == want;
  return 1;
}

/* ---- class checks, in the order of lce_judge.h ------------------------------------------------ */

/* The passes over a host reference's elements run together, one block of the subject's values at a
 * time (each element is loaded once), each pass remembering its first violation; the judge then
 * reports them in the order of lce_judge.h, so the first class failure is the one the passes one
 * after the other would have found:
 *   pass 1  an element still holding the exact poison NaN of lce_outputs_alloc was never written
 *           (a NaN with other bits was computed: x86 arithmetic produces the negative default NaN,
 *           and pass 3 reports it as a class mismatch instead);
 *   pass 3  NaN and ±Inf exactly where the oracle has them, with the same sign; inconclusive
 *           elements are skipped (near the overflow threshold the oracle may not know the class);
 *   pass 5  an oracle value that is exactly 0 with no error (ignored tokens, an all-ignored batch)
 *           must come out exactly 0: a tiny non-zero there is a wrong formula, not rounding;
 * and the metrics' sums (lce_compare_block) over the same block. */
typedef struct class_scan {
  int64_t unwritten, mismatch, nonzero; /* first violating element of passes 1, 3, 5; -1: none */
  double mismatch_x, nonzero_x;         /* the subject's value there */
} class_scan;

static void scan_block(lce_output_id o, const double *x, int64_t i0, int64_t i1,
                       const lce_ref_output *ref, const unsigned char *mask, double poison, class_scan *cs) {
  const int poisoned = is_poisoned(o);
  for (int64_t i = i0; i < i1; i++) {
    if (mask != NULL && !mask[i]) continue;
    const double xi = x[i - i0];
    if (poisoned && cs->unwritten < 0 && same_double_bits(xi, poison) && !isnan(ref->rounded[i])) cs->unwritten = i;
    if (cs->mismatch < 0 && ref->decisive[i] && !same_class(xi, ref->rounded[i])) cs->mismatch = i, cs->mismatch_x = xi;
    if (cs->nonzero < 0 && ref->value[i] == 0 && ref->err[i] == 0 && xi != 0) cs->nonzero = i, cs->nonzero_x = xi;
  }
}

/* Passes 1 and 3 as class failures (pass 5 waits for pass 4: report_exact). */
static void report_scan(const lce_ref_output *ref, const class_scan *cs, lce_output_verdict *ov) {
  if (cs->unwritten >= 0) class_fail(ov, "element %lld not written (poison NaN left)", (long long)cs->unwritten);
  if (cs->mismatch >= 0) {
    char got[48], exp[48];
    describe_class(cs->mismatch_x, got, sizeof got);
    describe_class(ref->rounded[cs->mismatch], exp, sizeof exp);
    class_fail(ov, "element %lld: %s (expected %s)", (long long)cs->mismatch, got, exp);
  }
}

static void report_exact(const class_scan *cs, lce_output_verdict *ov) {
  if (cs->nonzero >= 0) class_fail(ov, "element %lld: %a (expected exactly 0)", (long long)cs->nonzero, cs->nonzero_x);
}

/* Pass 4: buffers (or rows) the run must not touch, bit for bit against the prior. */
static void check_untouched(const float *now, const float *prior, int64_t lo, int64_t hi, int64_t h,
                            lce_output_verdict *ov) {
  for (int64_t i = lo; i < hi && ov->class_ok; i++) {
    if (same_float_bits(now[i], prior[i])) continue;
    char row[48] = "";
    if (lo > 0) snprintf(row, sizeof row, " (padded row %lld)", (long long)(i / h));
    class_fail(ov, "element %lld%s changed (was %a, now %a)", (long long)i, row, (double)prior[i], (double)now[i]);
  }
}

/* lce_outputs_guards_intact names the buffer first ("grad_weight: guard region ..."); map it to the
 * output that buffer carries. */
static lce_output_id output_of_buffer(const lce_case *c, const char *which) {
  char name[32];
  size_t len = strcspn(which, ":");
  snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), which);
  lce_output_id o;
  if (strcmp(name, "grad_weight") == 0) return LCE_OUT_D_WEIGHT;
  if (strcmp(name, "grad_embedding") == 0) return c->tied ? LCE_OUT_D_WEIGHT : LCE_OUT_D_EMBEDDING;
  if (lce_output_parse(name, &o)) return o;
  return LCE_OUT_LOSS; /* an unknown buffer name still fails the run, reported on the first output */
}

/* The fp32 gradient buffer and prior of the output weight (tied: the embedding's). */
static void weight_buffers(const lce_case *c, const lce_tensors *in, const lce_outputs *out, const float **now,
                           const float **prior) {
  *now = lce_output_weight_grad(c, out);
  *prior = lce_output_weight_prior(c, in);
}

typedef struct judge_masks {
  unsigned char *lse;      /* valid tokens */
  unsigned char *d_weight; /* real vocab rows */
} judge_masks;

static lce_code build_masks(const lce_case *c, const lce_tensors *in, judge_masks *m, lce_status *st) {
  m->lse = malloc((size_t)c->n);
  LCE_ALLOC_CHECK(st, m->lse);
  for (int64_t i = 0; i < c->n; i++) m->lse[i] = in->labels[i] != c->ignore_index;
  size_t wn = (size_t)(c->vp * c->h), real = (size_t)(c->v * c->h);
  m->d_weight = malloc(wn);
  LCE_ALLOC_CHECK(st, m->d_weight);
  memset(m->d_weight, 1, real);
  memset(m->d_weight + real, 0, wn - real);
  return LCE_OK;
}

static const unsigned char *mask_of(const judge_masks *m, lce_output_id o) {
  return o == LCE_OUT_LSE ? m->lse : o == LCE_OUT_D_WEIGHT ? m->d_weight : NULL;
}

/* The class checks that need no reference: the guards, the untied embedding's gradient and the padded
 * rows left exactly as they were (poisoned and untouched buffers: after the non-finite classes). */
static void class_checks_unreferenced(const lce_case *c, const lce_tensors *in, const lce_outputs *out,
                                      lce_output_id o, const char *guard_msg, lce_output_id guard_out,
                                      lce_output_verdict *ov) {
  if (guard_msg != NULL && guard_out == o) class_fail(ov, "%s", guard_msg);
  if (o == LCE_OUT_D_EMBEDDING) check_untouched(out->grad_embedding, in->grad_embedding_prior, 0, c->vp * c->h, c->h, ov);
  if (o == LCE_OUT_D_WEIGHT) {
    const float *now, *prior;
    weight_buffers(c, in, out, &now, &prior);
    check_untouched(now, prior, c->v * c->h, c->vp * c->h, c->h, ov);
  }
}


/* ---- bounds --------------------------------------------------------------------------------- */

/* The relative error of the loss gradient g that an fp32 kernel computes (term gsc; golden/policy.txt).
 * Under sum it is grad_output itself and under none each token's own (pertok): 0. Under mean it is
 * grad_output / sum_n W_n: the division rounds (u32), and with class weights the fp32 sum of the valid
 * tokens' weights errs by a random walk of roundings within u32 of its partial sums S_j (without
 * class weights the sum is the valid count, exact below 2^24): four standard deviations of it,
 * 4 u32 sqrt(sum_j S_j^2 / 3) / S, the partial sums taken in token order. */
static double loss_gradient_rel_error(const lce_case *c, const lce_tensors *in) {
  if (c->reduction != LCE_RED_MEAN) return 0.0;
  const double u32 = 0x1p-24;
  long double s = 0.0L, s2 = 0.0L;
  int64_t terms = 0;
  for (int64_t i = 0; i < c->n; i++) {
    if (in->labels[i] == c->ignore_index) continue;
    s += c->class_weights ? (long double)in->class_weight[in->labels[i]] : 1.0L;
    if (terms++ > 0) s2 += s * s; /* the first term enters exactly */
  }
  if (!(s > 0.0L)) return 0.0; /* no valid weight: g is 0 */
  const double sum_rel = c->class_weights || terms >= (1 << 24) ? (double)(4.0L * sqrtl(s2 / 3.0L) / s) : 0.0;
  return u32 * (1.0 + sum_rel);
}

/* The share of distinct tokens among the valid ones for output o (lce_metric_values.token_share): two
 * tokens whose output is made by the same arithmetic on the same numbers make the same error, one error
 * counted twice, not two independent ones. lse and loss_token: tokens whose exact lse rounds to the same
 * fp32 value (lse, the reference's values) share that rounding, the last of lse's and the one loss_token
 * inherits, whatever else differs (subnormal logits that vanish in every sum; class weights that scale
 * the loss alike). A d_hidden row: the token's hidden row, its label and, under reduction none, its
 * grad_output. Tokens are told apart by 64-bit FNV-1a hashes: a collision can only lower the share,
 * which loosens the bound it enters. 1 without the reference's lse on the host (tier 2's device mode)
 * or valid tokens. */
static int cmp_u64(const void *a, const void *b) {
  const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double distinct_token_share(const lce_case *c, const lce_tensors *in, lce_output_id o, const double *lse) {
  const size_t row = (size_t)c->h * lce_dtype_size(c->dtype);
  uint64_t *key = o == LCE_OUT_D_HIDDEN || lse ? malloc((size_t)c->n * sizeof *key) : NULL;
  if (key == NULL) return 1.0;
  int64_t valid = 0;
  for (int64_t n = 0; n < c->n; n++) {
    const int64_t y = in->labels[n];
    if (y == c->ignore_index) continue;
    uint64_t h = LCE_FNV1A_OFFSET;
    if (o == LCE_OUT_D_HIDDEN) {
      h = lce_fnv1a(h, (const char *)in->hidden + (size_t)n * row, row);
      h = lce_fnv1a(h, &y, sizeof y);
      if (c->reduction == LCE_RED_NONE) h = lce_fnv1a(h, &in->grad_output[n], sizeof in->grad_output[n]);
    } else {
      const float l32 = (float)lse[n];
      h = lce_fnv1a(h, &l32, sizeof l32);
    }
    key[valid++] = h;
  }
  qsort(key, (size_t)valid, sizeof *key, cmp_u64);
  int64_t distinct = valid > 0;
  for (int64_t i = 1; i < valid; i++) distinct += key[i] != key[i - 1];
  free(key);
  return valid > 0 ? (double)distinct / (double)valid : 1.0;
}

/* The relative error of the softmax denominators a sequential fp32 running sum makes on this case's
 * rows (term rsum; golden/policy.txt): per valid token and shard, the exact terms exp(z_v - m) (z in
 * double from the case's inputs, softcap applied, m the shard's largest logit) each rounded to fp32
 * and added in row order in fp32, against their exact sum; the largest over tokens and shards
 * (lce_softmax_sum_replay). Every p_v of the token inherits that error through lse. A flat row rounds
 * every addition the same way once the partial sum outgrows its terms (up to vs/2 u32, golden/README.md
 * false alarm 3), a row of varied terms walks (~sqrt(vs) u32): a replay of the rows' own arithmetic,
 * not the worst case of the shape, which is ~vs/2 u32 for every row order and would leave the fitted
 * constant nothing to hold. 0 for a non-finite row (the class checks judge it). Tier 1 computes it in
 * its row pass and tier 2 on the GPU, where the logits are; for tier 0 the rows are replayed here
 * (lce_softmax_sum_replay_case). */
static double softmax_sum_rel_error(const lce_case *c, const lce_tensors *in, const lce_reference *ref) {
  if (ref->has_rsum) return ref->rsum_rel;
  return ref->mode == LCE_REF_HOST ? lce_softmax_sum_replay_case(c, in) : 0.0;
}

int lce_output_per_token(lce_output_id o) {
  return o == LCE_OUT_LSE || o == LCE_OUT_LOSS_TOKEN || o == LCE_OUT_D_HIDDEN;
}

int lce_output_has_rsum(lce_output_id o) {
  return o == LCE_OUT_LSE || o == LCE_OUT_LOSS_TOKEN || o == LCE_OUT_D_HIDDEN || o == LCE_OUT_D_WEIGHT;
}

void lce_bound_scales_of(const lce_case *c, lce_output_id o, const lce_output_verdict *ov, lce_bound_scales *s) {
  s->cond = ov->metrics.cond;
  /* The few-element term ms*cond/sqrtn counts the elements the error can be in: those of the error
   * scale emag, which r's count stands for only where r and emag spread alike; a prior the gradient
   * adds to (tied embeddings) spreads r over every row while one token's errors sit in its label
   * row (golden/policy.txt). The smaller count, so that no bound tightens; r's where a tier has no
   * emag count. */
  const double n_r = ov->metrics.neff, n_e = ov->metrics.neff_emag, share = ov->metrics.token_share;
  double n = n_e > 0.0 && n_e < n_r ? n_e : n_r;
  /* Equal tokens make equal per-token errors (lse, loss_token, d_hidden's rows): they count once. */
  if (share > 0.0 && share < 1.0) n *= share;
  s->neff = n > 1.0 ? n : 1.0;
  s->vs = (double)((c->v + c->tp - 1) / c->tp);
  s->h = (double)c->h;
  s->k = (double)ov->inner;
  /* One scale g for every token (sum: grad_output[0], mean: that over the valid weight): a subject
   * that rounds g into low-precision d_logits scales every gradient by the same rounding. */
  s->coh = c->reduction == LCE_RED_NONE ? 0.0 : lce_dtype_unit_roundoff(c->dtype);
  s->ms = 0.0; /* lce_bounds_apply: the maxscaled entry's bound, once it is known */
  /* The coherent rounding of the d_logits, as the reference measured it; 0 from a reference that does
   * not (tier 2 in device mode without its magnitudes), where rndu below stands for it. */
  const int gradient = o == LCE_OUT_D_HIDDEN || o == LCE_OUT_D_WEIGHT;
  s->rnd = gradient && isfinite(ov->metrics.rnd_bias) ? fabs(ov->metrics.rnd_bias) : 0.0;
  s->rndn = gradient && isfinite(ov->metrics.rnd_norm) ? ov->metrics.rnd_norm : 0.0; /* relerr's: rnd normwise */
  s->flip = gradient && isfinite(ov->metrics.flip_bias) ? ov->metrics.flip_bias : 0.0;
  s->outr = gradient && isfinite(ov->metrics.outr_bias) ? ov->metrics.outr_bias : 0.0;
  /* The reference a correct kernel's bias sits at with its output rounded (golden/policy.txt, rnds): at
   * R(rnd) rnd_bias + outs_rnd, at R(r) outs_r; from metrics without those sums, no less than either,
   * |rnd| + outr. outv: the spread of the roundings its own error can change. */
  const double rnd_at = ov->metrics.rnd_bias + ov->metrics.outs_rnd, r_at = ov->metrics.outs_r;
  s->rnds = !gradient ? 0.0 : isfinite(rnd_at) && isfinite(r_at) ? fmax(fabs(rnd_at), fabs(r_at)) : s->rnd + s->outr;
  s->outv = gradient && isfinite(ov->metrics.outv_bias) ? ov->metrics.outv_bias : 0.0;
  const double acc_unit = gradient ? 0x1p-24 * sqrt(lce_accumulation_length(c, o) / 3.0) : 0.0;
  s->acc = gradient && isfinite(ov->metrics.acc_bias) ? acc_unit * ov->metrics.acc_bias : 0.0;
  s->accn = gradient && isfinite(ov->metrics.acc_norm) ? acc_unit * ov->metrics.acc_norm : 0.0;
  s->gsc = gradient && isfinite(ov->metrics.g_rel) ? ov->metrics.g_rel : 0.0;
  /* Where the d_logits are fp32 (fp32 inputs, IEEE GEMMs) flip is the first-order image of the kernel's
   * fp32 d_logit error, which is then the error relerr sees; a coarser d_logit format's own rounding
   * dominates elsewhere, and the fitted terms carry it. */
  s->flipn = gradient && lce_case_precision(c) == LCE_PREC_FP32 && isfinite(ov->metrics.flip_norm)
                 ? ov->metrics.flip_norm : 0.0;
  s->rsum = lce_output_has_rsum(o) && isfinite(ov->metrics.rsum_rel) ? ov->metrics.rsum_rel : 0.0;
  s->uo = lce_dtype_unit_roundoff(lce_output_format(c, o));
  /* Each token's own g applied with roundings of its own, up to u of each term of an element: u per
   * unit of the bias sum_i mag_i |r_i| / <r, r>, which is u where the terms do not cancel and grows
   * where they do (golden/policy.txt, pertok); u itself from a reference without that sum (no rnd). */
  const double pertok_u = lce_dlogit_unit_roundoff(c);
  const double mag_bias = gradient && isfinite(ov->metrics.mag_bias) ? ov->metrics.mag_bias : 0.0;
  s->pertok = c->reduction != LCE_RED_NONE ? 0.0 : pertok_u * (mag_bias > 1.0 ? mag_bias : 1.0);
  /* Its normwise twin (the gradients' relerr): a rounding of every term beside rnd's (fused-host's
   * dtype-rounded rho*h; g folded into the d_logits) moves element i by up to u of each of its terms,
   * so ||e|| by up to u ||m|| (m = max(mag, 2^-126), acc_norm = ||m|| / ||r||); u itself from a
   * reference without that sum (golden/policy.txt, pertokn). */
  const double mag_norm = gradient && isfinite(ov->metrics.acc_norm) ? ov->metrics.acc_norm : 0.0;
  s->pertokn = !gradient || c->reduction != LCE_RED_NONE ? 0.0 : pertok_u * (mag_norm > 1.0 ? mag_norm : 1.0);
  /* Where the reference does not measure rnd (no magnitudes), the bound of what it measures: one rounding to
   * nearest of each d_logit, u/2 of the format the GEMMs read, all taken one way (golden/policy.txt,
   * rndu; at production shapes the label term p_y - 1 of every token rounds to -1, a growth by the mean
   * p_y); in relerr it stands for rndn. Not where r is 0 everywhere: no bias exists there to be coherent with. */
  s->rndu = gradient && !isfinite(ov->metrics.rnd_bias) && ov->metrics.ref_norm > 0.0 ? pertok_u / 2 : 0.0;
  s->tcx = 1.0; /* per metric: lce_bound_scales_for */
}

void lce_bound_scales_for(lce_bound_scales *s, const lce_output_verdict *ov, lce_metric m) {
  s->tcx = ov->metrics.tcx[m];
}

void lce_bound_scales_at(const lce_golden *g, const char *subject_class, const lce_case *c, lce_output_id o,
                         const lce_output_verdict *ov, lce_bound_scales *s) {
  lce_bound_scales_of(c, o, ov, s);
  /* maxscaled first: the other metrics' term ms*cond/sqrtn scales with its bound on this case. */
  const lce_golden_entry *ms =
      g ? lce_golden_find(g, subject_class, lce_case_precision(c), o, LCE_METRIC_MAXSCALED) : NULL;
  if (ms != NULL && !ov->metrics.undefined[LCE_METRIC_MAXSCALED]) {
    lce_bound_scales at = *s;
    lce_bound_scales_for(&at, ov, LCE_METRIC_MAXSCALED);
    s->ms = lce_golden_bound(ms, &at);
  }
}

lce_code lce_bounds_apply(const lce_golden *g, const char *subject_class, const lce_case *c, lce_output_id o,
                          lce_output_verdict *ov, lce_status *st) {
  lce_precision p = lce_case_precision(c);
  lce_bound_scales scales;
  lce_bound_scales_at(g, subject_class, c, o, ov, &scales);
  for (int m = 0; m < LCE_METRIC_COUNT; m++) {
    if (ov->metrics.undefined[m]) { /* a statistic over too few elements: reported, not bounded */
      ov->bound[m] = NAN;
      ov->metric_ok[m] = 1;
      ov->budget_pct[m] = 0.0;
      continue;
    }
    const lce_golden_entry *e = lce_golden_find(g, subject_class, p, o, (lce_metric)m);
    LCE_CHECK(st, e != NULL, LCE_EINVAL, "no golden entry for class '%s' dtype %s output %s metric %s in '%s'",
              subject_class, lce_precision_name(p), lce_output_name(o), lce_metric_name((lce_metric)m), g->path);
    /* Without the reference's magnitudes cond reads 1, the maxscaled bound and the rnd terms 0, each
     * below what it stands for: such a bound would be too tight, and a correct kernel would fail it. */
    ov->unbounded[m] = 0;
    if (ov->metrics.no_mags && lce_golden_needs_mags(e)) {
      ov->unbounded[m] = 1;
      ov->bound[m] = NAN;
      ov->metric_ok[m] = 1;
      ov->budget_pct[m] = 0.0;
      continue;
    }
    lce_bound_scales_for(&scales, ov, (lce_metric)m);
    double bound = lce_golden_bound(e, &scales);
    double val = ov->metrics.v[m];
    if (m == LCE_METRIC_BIAS) val = fabs(val);
    ov->bound[m] = bound;
    ov->metric_ok[m] = val <= bound; /* NaN in either fails */
    if (isnan(val) || isnan(bound)) ov->budget_pct[m] = INFINITY;
    else if (bound > 0) ov->budget_pct[m] = 100.0 * val / bound;
    else ov->budget_pct[m] = val == 0 ? 0.0 : INFINITY;
    if (!ov->metric_ok[m]) ov->pass = 0;
  }
  return LCE_OK;
}

/* ---- verdict -------------------------------------------------------------------------------- */

static void summarize(const lce_case *c, int bounded, lce_verdict *v) {
  v->pass = 1;
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    if (v->out[o].judged && !v->out[o].pass) v->pass = 0;
  /* Class failures outrank every metric: the first one (in output order) is the verdict. */
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_output_verdict *ov = &v->out[o];
    if (!ov->judged || ov->class_ok) continue;
    v->worst_output = (lce_output_id)o, v->worst_metric = LCE_METRIC_RELERR, v->worst_pct = INFINITY;
    snprintf(v->summary, sizeof v->summary, "FAIL %s class: %.200s", lce_output_name((lce_output_id)o), ov->class_msg);
    return;
  }
  if (!bounded) {
    snprintf(v->summary, sizeof v->summary, "pass (class checks only; no golden bounds)");
    return;
  }
  /* Then the failing metric with the highest budget use, else the highest budget use. */
  int found = 0, worst_fails = 0;
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    const lce_output_verdict *ov = &v->out[o];
    if (!ov->judged || !has_metrics(c, (lce_output_id)o)) continue;
    for (int m = 0; m < LCE_METRIC_COUNT; m++) {
      if (ov->unbounded[m]) continue; /* named in the summary's count instead (name_unbounded) */
      int fails = !ov->metric_ok[m];
      /* A fraction bounded by 1 (the whole output) constrains nothing: not worth naming. */
      if (!fails && m == LCE_METRIC_ULPFRAC && ov->bound[m] >= 1.0) continue;
      if (found && (fails < worst_fails || (fails == worst_fails && !(ov->budget_pct[m] > v->worst_pct)))) continue;
      found = 1, worst_fails = fails;
      v->worst_output = (lce_output_id)o, v->worst_metric = (lce_metric)m, v->worst_pct = ov->budget_pct[m];
    }
  }
  const char *on = lce_output_name(v->worst_output), *mn = lce_metric_name(v->worst_metric);
  if (!found) {
    snprintf(v->summary, sizeof v->summary, "pass (nothing to bound)");
  } else if (worst_fails) {
    const lce_output_verdict *ov = &v->out[v->worst_output];
    const char *bar = v->worst_metric == LCE_METRIC_BIAS ? "|" : "";
    snprintf(v->summary, sizeof v->summary, "FAIL %s %s %.0f%% of budget (%s%.1e%s > %.1e)", on, mn, v->worst_pct,
             bar, ov->metrics.v[v->worst_metric], bar, ov->bound[v->worst_metric]);
  } else {
    snprintf(v->summary, sizeof v->summary, "pass (max %.0f%% %s %s)", v->worst_pct, on, mn);
  }
}

/* " (note)" after the summary, whole: the summary's own text is shortened where both do not fit. */
static void append_note(lce_verdict *v, const char *note) {
  const size_t room = sizeof v->summary - 1, len = strlen(note) + 3;
  if (len > room) return;
  size_t keep = strlen(v->summary);
  if (keep + len > room) keep = room - len;
  snprintf(v->summary + keep, sizeof v->summary - keep, " (%s)", note);
}

/* Metrics whose bound needs the magnitudes the reference did not keep (lce_bounds_apply) are counted,
 * and the summary says so: a pass then covers only the bounds that were evaluated. */
static void name_unbounded(lce_verdict *v) {
  v->unbounded = 0;
  for (int o = 0; o < LCE_OUT_COUNT; o++)
    for (int m = 0; m < LCE_METRIC_COUNT; m++) v->unbounded += v->out[o].judged && v->out[o].unbounded[m];
  char note[96];
  snprintf(note, sizeof note, "%d metrics unbounded: the reference has no error magnitudes", v->unbounded);
  if (v->unbounded > 0) append_note(v, note);
}

/* Outputs the subject does not produce are not judged; the summary names them, so that a pass
 * never hides what it did not look at. */
static void name_not_provided(const lce_case *c, const lce_outputs *out, unsigned outputs, lce_verdict *v) {
  char names[128] = "";
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    if (!(out->not_provided >> o & 1u) || !lce_output_applies(c, (lce_output_id)o)) continue;
    if (outputs != 0 && !(outputs >> o & 1u)) continue;
    v->not_provided |= 1u << o;
    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "",
             lce_output_name((lce_output_id)o));
  }
  if (names[0] == '\0') return;
  char note[sizeof names + 16];
  snprintf(note, sizeof note, "%s not provided", names);
  append_note(v, note);
}

static lce_code check_shapes(const lce_case *c, const lce_oracle_result *ref, lce_status *st) {
  for (int o = 0; o < LCE_OUT_COUNT; o++) {
    if (o == LCE_OUT_D_EMBEDDING || !lce_output_applies(c, (lce_output_id)o)) continue;
    const lce_ref_output *r = &ref->out[o];
    int64_t want = lce_output_count(c, (lce_output_id)o);
    LCE_CHECK(st, r->count == want && r->value && r->err && r->mag && r->rounded && r->decisive, LCE_EINVAL,
              "oracle result for %s has %lld elements (or missing arrays); the case needs %lld",
              lce_output_name((lce_output_id)o), (long long)r->count, (long long)want);
  }
  return LCE_OK;
}

/* The start of every judged output's verdict, on either path. An output judged by its class checks
 * only (the untied embedding's gradient, the loss of reduction none) keeps every metric, its cond
 * and its bounds undefined: reported as undefined, never as a measured 0. */
static void begin_output(lce_output_verdict *ov) {
  ov->judged = ov->class_ok = ov->pass = 1;
  for (int m = 0; m < LCE_METRIC_COUNT; m++) ov->metric_ok[m] = 1, ov->bound[m] = NAN, ov->unbounded[m] = 0;
  lce_metrics_undefined(&ov->metrics);
  ov->metrics.cond = NAN;
}

/* What the judge measures once per case from its inputs, for every output's bound scales. */
typedef struct case_terms {
  double g_rel, rsum_rel;
  double token_share[LCE_OUT_COUNT]; /* per-token outputs only (lce_output_per_token) */
} case_terms;

/* Metrics from the comparison, then the bounds: the same step on the host and the device path. */
static lce_code measure_output(const lce_case *c, lce_output_id o, const lce_comparison *cmp, const case_terms *ct,
                               const lce_golden *g, const char *subject_class, const int64_t *inner,
                               lce_output_verdict *ov, lce_verdict *v, lce_status *st) {
  if (!ov->class_ok) ov->pass = 0;
  ov->inner = inner ? inner[o] : lce_output_inner(c, o);
  if (!has_metrics(c, o)) return LCE_OK;
  lce_metrics_from_comparison(cmp, &ov->metrics);
  if (o == LCE_OUT_D_HIDDEN || o == LCE_OUT_D_WEIGHT) ov->metrics.g_rel = ct->g_rel;
  if (lce_output_has_rsum(o)) ov->metrics.rsum_rel = ct->rsum_rel;
  ov->metrics.token_share = lce_output_per_token(o) ? ct->token_share[o] : 1.0;
  v->inconclusive += ov->metrics.inconclusive;
  if (g == NULL) return LCE_OK;
  return lce_bounds_apply(g, subject_class, c, o, ov, st);
}

/* Whether output o is judged: it applies to the case, the caller asked for it and the subject
 * produces it (out->not_provided: an outside kernel without that output). */
static int judged_output(const lce_case *c, const lce_outputs *out, lce_output_id o, unsigned outputs) {
  return lce_output_applies(c, o) && (outputs == 0 || (outputs >> o & 1u)) && !(out->not_provided >> o & 1u);
}

/* One output's comparison: on the host from per-element values (with their class checks, in one
 * scan: class_scan), or through the tier where the reference stayed on the device (its class
 * mismatches counted there). */
static lce_code compare_output(const lce_case *c, const lce_reference *ref, const lce_outputs *out, lce_output_id o,
                               const judge_masks *masks, lce_output_verdict *ov, lce_comparison *cmp, class_scan *cs,
                               lce_status *st) {
  memset(cmp, 0, sizeof *cmp);
  cs->unwritten = cs->mismatch = cs->nonzero = -1;
  if (ref->mode == LCE_REF_DEVICE) {
    LCE_TRY(ref->tier->compare(ref, o, out, cmp, st));
    if (!cmp->class_ok) class_fail(ov, "%s", cmp->class_msg);
    return LCE_OK;
  }
  enum { BLOCK = LCE_COMPARE_BLOCK };
  double x[BLOCK];
  const unsigned char *mask = mask_of(masks, o);
  const lce_ref_output *r = &ref->host.out[o];
  const double poison = lce_round_to(lce_output_format(c, o), NAN);
  const int metrics = has_metrics(c, o);
  lce_compare_acc acc;
  if (metrics) lce_compare_begin(&acc, r, cmp);
  for (int64_t i0 = 0; i0 < r->count; i0 += BLOCK) {
    const int64_t i1 = i0 + BLOCK < r->count ? i0 + BLOCK : r->count;
    lce_output_load(c, out, o, i0, i1, x);
    scan_block(o, x, i0, i1, r, mask, poison, cs);
    if (metrics) lce_compare_block(c, o, x, i0, i1, r, mask, &acc, cmp);
  }
  if (metrics) lce_compare_end(&acc, cmp);
  report_scan(r, cs, ov);
  return LCE_OK;
}

static lce_code judge_outputs(const lce_case *c, const lce_tensors *in, const lce_reference *ref,
                              const lce_outputs *out, const lce_golden *g, const char *subject_class,
                              const int64_t *inner, unsigned outputs, const judge_masks *masks, lce_verdict *v,
                              lce_status *st) {
  LCE_CHECK(st, ref->mode != LCE_REF_VALUES, LCE_EINVAL,
            "judge: the reference holds values only (LCE_REF_VALUES): no bounds to judge by");
  char guard_msg[256];
  const char *guard = lce_outputs_guards_intact(c, out, guard_msg, sizeof guard_msg) ? NULL : guard_msg;
  lce_output_id guard_out = guard ? output_of_buffer(c, guard_msg) : LCE_OUT_LOSS;
  case_terms ct = {.g_rel = loss_gradient_rel_error(c, in)};
  /* From the tier (tiers 1 and 2), else the rows' logits again in double, only where the reference's
   * values are on the host (the shapes tier 0 reaches; at production shapes it would be a GEMM of hours). */
  ct.rsum_rel = softmax_sum_rel_error(c, in, ref);
  const lce_ref_output *lse = &ref->host.out[LCE_OUT_LSE];
  const double *lse_values = ref->mode == LCE_REF_HOST && lse->value && lse->count == c->n ? lse->value : NULL;
  for (int o = 0; o < LCE_OUT_COUNT; o++) ct.token_share[o] = 1.0;
  /* loss_token is keyed on lse as lse is: one share for both */
  ct.token_share[LCE_OUT_LSE] = ct.token_share[LCE_OUT_LOSS_TOKEN] = distinct_token_share(c, in, LCE_OUT_LSE, lse_values);
  ct.token_share[LCE_OUT_D_HIDDEN] = distinct_token_share(c, in, LCE_OUT_D_HIDDEN, NULL);
  for (int oi = 0; oi < LCE_OUT_COUNT; oi++) {
    lce_output_id o = (lce_output_id)oi;
    lce_output_verdict *ov = &v->out[o];
    if (!judged_output(c, out, o, outputs)) continue;
    begin_output(ov);
    /* The order of STYLE.md rule 6: what the subject itself declared unusable, the non-finite classes,
     * the untouched and poisoned buffers, exact zeros, then the metrics. */
    if (out->unusable >> o & 1u) class_fail(ov, "%s", out->unusable_msg[o]);
    lce_comparison cmp;
    memset(&cmp, 0, sizeof cmp);
    class_scan cs = {-1, -1, -1, 0, 0};
    if (o != LCE_OUT_D_EMBEDDING) LCE_TRY(compare_output(c, ref, out, o, masks, ov, &cmp, &cs, st));
    class_checks_unreferenced(c, in, out, o, guard, guard_out, ov);
    if (o == LCE_OUT_D_EMBEDDING) { /* bit-identical to its prior, nothing to measure */
      if (!ov->class_ok) ov->pass = 0;
      continue;
    }
    report_exact(&cs, ov); /* pass 5, after pass 4's untouched buffers */
    LCE_TRY(measure_output(c, o, &cmp, &ct, g, subject_class, inner, ov, v, st));
  }
  return LCE_OK;
}

/* The host path needs the reference's arrays and the judged ranges (valid tokens for lse, real vocab
 * rows for d_weight); the device path (the reference stayed where the tier computed it) needs a tier
 * that can compare there. */
static lce_code judge_checked(const lce_case *c, const lce_tensors *in, const lce_reference *ref,
                              const lce_outputs *out, const lce_golden *g, const char *subject_class,
                              const int64_t *inner, unsigned outputs, lce_verdict *v, lce_status *st) {
  LCE_TRY(lce_tensors_validate(c, in, st)); /* the masks and priors come from the tensors */
  judge_masks masks = {NULL, NULL};
  if (ref->mode == LCE_REF_DEVICE) {
    LCE_CHECK(st, ref->tier && ref->tier->compare, LCE_EINVAL, "reference tier %s cannot compare on the device",
              ref->tier ? ref->tier->name : "?");
    return judge_outputs(c, in, ref, out, g, subject_class, inner, outputs, &masks, v, st);
  }
  LCE_TRY(check_shapes(c, &ref->host, st));
  lce_code rc = build_masks(c, in, &masks, st);
  if (rc == LCE_OK) rc = judge_outputs(c, in, ref, out, g, subject_class, inner, outputs, &masks, v, st);
  free(masks.lse);
  free(masks.d_weight);
  return rc;
}

lce_code lce_judge(const lce_case *c, const lce_tensors *in, const lce_reference *ref, const lce_outputs *out,
                   const lce_golden *g, const char *subject_class, const int64_t *inner, unsigned outputs,
                   lce_verdict *v, lce_status *st) {
  LCE_CHECK(st, c != NULL && in != NULL && ref != NULL && out != NULL && v != NULL, LCE_EINVAL,
            "lce_judge: NULL argument");
  LCE_CHECK(st, g == NULL || subject_class != NULL, LCE_EINVAL, "lce_judge: a golden needs a subject class");
  memset(v, 0, sizeof *v);
  lce_code rc = judge_checked(c, in, ref, out, g, subject_class, inner, outputs, v, st);
  if (rc != LCE_OK) {
    v->pass = 0;
    snprintf(v->summary, sizeof v->summary, "error: %.240s", st ? st->msg : lce_code_name(rc));
    return rc;
  }
  summarize(c, g != NULL, v);
  name_unbounded(v);
  name_not_provided(c, out, outputs, v);
  return LCE_OK;
}
