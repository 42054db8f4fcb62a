/* lce_golden.h — golden bound files: strict text, one bound per (subject class, dtype, output,
 * metric), in the spirit of glibc's libm-test-ulps.
 *
 * Format (every line is one of these; anything else is an error naming file:line):
 *   lcecheck-golden 1                                   first line, exactly
 *   # free text                                         provenance and comments (kept verbatim)
 * (<dtype> is bf16, fp16, fp32, or tf32 for fp32 inputs with tf32 GEMMs)
 *   <class> <dtype> <output> <metric> const <a>          bound = a
 *   <class> <dtype> <output> <metric> sqrtk <a> <b>      bound = a + b*sqrt(K)
 *   <class> <dtype> <output> <metric> lineark <a> <b>    bound = a + b*K
 *   <class> <dtype> <output> <metric> cond <a> <b>       bound = a + b*kappa
 *   <class> <dtype> <output> <metric> condk <a> <b> <c>  bound = a + b*kappa + c*K
 *   <class> <dtype> <output> <metric> model <term>=<coef> ...   bound = sum of coef * scale(term)
 * with K = lce_output_inner() of the judged case (condk: the tensor-core term of GPU goldens, whose
 * accumulation error grows linearly in the reduction length; DESIGN.md "Device arithmetic"), kappa = the output's normwise condition
 * ||mag||/||r|| on that case (lce_metric_values.cond, >= 1), a and b finite, >= 0, written as hex floats (%a;
 * decimal is accepted on input). For bias the bound applies to |bias|. Duplicate keys are errors.
 * The model form names its terms (at least one, each at most once, in the order of lce_bound_term;
 * golden/policy.txt derives each) with their coefficients, finite and >= 0:
 *   1            1
 *   cond         kappa
 *   cond/sqrtn   kappa / sqrt(neff), neff = the output's effective element count, the smaller of r's and
 *                the error scale emag's (lce_metric_values.neff, neff_emag; at least 1): a normwise error
 *                over few elements is one element's error, not an rms
 *   cond*sqrtv   kappa * sqrt(vs), vs = ceil(V / tp), a vocab shard's rows: the running sums of the
 *                softmax over one shard
 *   cond*sqrth   kappa * sqrt(H): the dot products of the logits
 *   sqrtv        sqrt(vs)
 *   sqrth        sqrt(H)
 *   sqrtk        sqrt(K)
 *   k            K
 *   coh          u of the case dtype when one scale g is shared by every token (reduction sum or mean,
 *                with a valid token), else 0: the coherent relative rounding of g in low-precision
 *                d_logits, which scales a gradient whatever its condition
 *   ms*cond/sqrtn  ms * kappa / sqrt(neff), ms = the bound of the same output's maxscaled entry on the
 *                same case (whatever its terms): one element's worst error, spread over neff elements
 *   cond*v       kappa * vs: the coherent part of a shard's running sums (rounding the same way in
 *                every row), which grows with the row count, not its square root
 *   h            H
 *   cond*h       kappa * H: the tensor-core truncation of the logits' dot products, a shrink of
 *                every logit by a slope per unit of H
 *   rnd          |bias| of the output computed from the exact d_logits rounded to the format the
 *                GEMMs read (everything else exact), over the judged elements: the coherent rounding
 *                a correct kernel makes (lce_metric_values.rnd_bias); 0 from a reference tier that
 *                does not compute it (tier 2)
 *   pertok       u of the format the GEMMs read when every token has its own g (reduction none), else
 *                0, times max(1, sum_i mag_i |r_i| / <r, r>) for the gradients (lce_metric_values.mag_bias;
 *                1 from a tier without it): how a kernel applies each token's g (folded into its
 *                d_logits, or a power of two there and the rest in fp32) changes its rows' coherent
 *                rounding by up to u of each term per rounding, two against rnd (golden/policy.txt:
 *                coefficient 2); where the terms cancel that is far more than u of the element
 *   flip         sum_i flip_i |r_i| / <r, r> (gradients, from a reference with rnd; else 0): the
 *                most the roundings that the kernel's own fp32 d_logit errors can change move the
 *                bias from rnd's, all taken the same way (lce_ref_output.flip)
 *   outr         sum_i max(|R(r_i) - r_i|, |R(rnd_i) - rnd_i|) |r_i| / <r, r> (gradients, from a reference
 *                with rnd; else 0): the most the rounding R of the output to its format moves the bias of
 *                a result at r (fp32 d_logits) or at rnd (rounded d_logits), taken one way
 *   acc          u32 sqrt(L/3) sqrt(sum_i m_i^2 r_i^2) / <r, r> (gradients' bias): one standard deviation
 *                of the bias that the fp32 accumulation of L terms per element can add, each rounding
 *                within u32 of a partial sum bounded by m_i = max(mag_i, 2^-126) and independent between
 *                elements (L: lce_accumulation_length; lce_metric_values.acc_bias)
 *   accn         u32 sqrt(L/3) ||m|| / ||r|| (gradients' relerr): the same accumulation's normwise rms
 *                (||m|| / ||emag|| when r == 0 everywhere, as relerr)
 *   gsc          the relative error of the loss gradient g a kernel computes in fp32 (reduction mean: the
 *                division, and the fp32 sum of the valid tokens' weights at four standard deviations),
 *                0 under sum (g is grad_output itself) and none (pertok): a scale of every element
 *                (lce_metric_values.g_rel)
 *   flipn        ||flip|| / ||r|| (gradients' relerr) where the d_logits are fp32 (fp32 inputs, IEEE GEMMs):
 *                the most the kernel's fp32 d_logit errors move the output normwise, flip being their
 *                first-order image there; 0 where the d_logits are rounded to a coarser format, whose
 *                rounding the fitted terms carry (lce_metric_values.flip_norm)
 *   rsum         the largest relative error of the case's softmax denominators summed in fp32 in row
 *                order, shard by shard (lse, loss_token and the gradients: lce_output_has_rsum;
 *                lce_metric_values.rsum_rel): lse = m + log s carries it absolutely, loss_token with it,
 *                and every p_v of a token inherits it through lse, coherently on flat rows (up to ~vs/2 u32)
 *   uo           the unit roundoff of the output's own format (lce_output_format: d_hidden the case dtype,
 *                the rest fp32): the rounding of every element to it errs by at most uo relative, so
 *                relerr carries it whatever cond is (a fitted b·cond carried it only at the matrix's cond)
 *   rndu         u/2 of the format the GEMMs read (bf16 2^-9, fp16 and tf32 2^-12, fp32 2^-25) for the gradients
 *                where the reference does not compute rnd (tier 2 without its magnitudes) and r is not 0
 *                everywhere, else 0: one
 *                rounding to nearest per d_logit, the coherent label term's at production shapes
 *                (golden/policy.txt); where rnd is measured it is rnd's place (rndn's in relerr), and
 *                this term is 0
 *   pertokn      pertok's normwise twin (the gradients' relerr): u of the format the GEMMs read
 *                when every token has its own g (reduction none), else 0, times max(1, ||m|| / ||r||),
 *                m_i = max(mag_i, 2^-126) (lce_metric_values.acc_norm; ||m|| / ||emag|| where r == 0
 *                everywhere; 1 from a tier without it): a rounding of every term beside rnd's (fused-host:
 *                the dtype-rounded copy rho*h of the hidden row; g folded into the d_logits) errs by up to u
 *                of the term, so normwise by up to u ||m||, with an rms of u ||m|| / sqrt(3)
 *                (golden/policy.txt: coefficient sqrt(1/3))
 *   rndn         rnd's normwise twin (the gradients' relerr): ||rnd - r|| / ||r|| (||rnd - r|| / ||emag|| where
 *                r == 0 everywhere), from a reference with rnd, else 0 (rndu stands for it): the relative
 *                error of a result at rnd, which rnd (|<rnd - r, r>| / <r, r>, never larger) understates where
 *                the d_logit roundings scatter (lce_metric_values.rnd_norm)
 *   rnds         max(|rnd_bias + outs_rnd|, |outs_r|) (gradients' bias): the bias of a result at rnd or at r
 *                with every element rounded to the output format, signed sums (lce_metric_values.outs_*;
 *                rnd + outr from metrics without those sums): where a correct kernel sits before its
 *                own fp32 error, the reference of the bias (golden/policy.txt)
 *   outv         sqrt(sum_i p_i^2 r_i^2) / <r, r> over the elements within D_i of a rounding boundary at r or
 *                rnd (gradients' bias; lce_metric_values.outv_bias; 0 where not summed): one standard deviation
 *                of the output roundings that a kernel's own error D_i (flip, pertok, acc per element) can
 *                change, one place p_i each
 * Blank lines are allowed. */
#ifndef LCE_GOLDEN_H
#define LCE_GOLDEN_H

#include "lce_metrics.h"

typedef enum lce_bound_form {
  LCE_FORM_CONST = 0,
  LCE_FORM_SQRTK = 1,
  LCE_FORM_LINEARK = 2,
  LCE_FORM_COND = 3,
  LCE_FORM_CONDK = 4,
  LCE_FORM_MODEL = 5
} lce_bound_form;

/* The terms of the model form, in file order. */
typedef enum lce_bound_term {
  LCE_TERM_ONE = 0,
  LCE_TERM_COND = 1,
  LCE_TERM_COND_RSQRTN = 2,
  LCE_TERM_COND_SQRTV = 3,
  LCE_TERM_COND_SQRTH = 4,
  LCE_TERM_SQRTV = 5,
  LCE_TERM_SQRTH = 6,
  LCE_TERM_SQRTK = 7,
  LCE_TERM_K = 8,
  LCE_TERM_COH = 9,
  LCE_TERM_MS_COND_RSQRTN = 10,
  LCE_TERM_COND_V = 11,
  LCE_TERM_H = 12,
  LCE_TERM_COND_H = 13,
  LCE_TERM_RND = 14,
  LCE_TERM_PERTOK = 15,
  LCE_TERM_FLIP = 16,
  LCE_TERM_OUTR = 17,
  LCE_TERM_ACC = 18,
  LCE_TERM_ACCN = 19,
  LCE_TERM_GSC = 20,
  LCE_TERM_FLIPN = 21,
  LCE_TERM_RSUM = 22,
  LCE_TERM_UO = 23,
  LCE_TERM_RNDU = 24,
  LCE_TERM_PERTOKN = 25,
  LCE_TERM_RNDN = 26,
  LCE_TERM_RNDS = 27,
  LCE_TERM_OUTV = 28,
  LCE_TERM_COUNT = 29
} lce_bound_term;

/* What the terms scale with on one judged output of one case (lce_bound_scales_of fills it). */
typedef struct lce_bound_scales {
  double cond; /* the output's normwise condition, >= 1 */
  double neff; /* its effective element count, >= 1 */
  double vs;   /* real vocab rows of one shard, ceil(V / tp) */
  double h;    /* H, the length of the logits' dot products */
  double k;    /* the inner size K of the subject's reduction */
  double coh;  /* u of the case dtype under a shared scale g (sum, mean with a valid token), else 0 */
  double ms;   /* the same output's maxscaled bound on this case (0 until lce_bounds_apply sets it) */
  double rnd;  /* |bias| of the output from exactly rounded d_logits (see the term rnd), else 0 */
  double pertok; /* u of the GEMMs' d_logit format under reduction none (times mag_bias for gradients), else 0 */
  double outr;   /* the bias the output's own rounding can add (term outr) */
  double flip;   /* the bias the roundings a kernel's fp32 d_logit errors can change can add (term flip) */
  double acc;    /* one standard deviation of the bias the fp32 accumulation of the gradient can add (term acc) */
  double accn;   /* that accumulation's normwise rms error over ||r|| (term accn) */
  double gsc;    /* the relative error of an fp32 loss gradient g shared by every token (term gsc) */
  double flipn;  /* the normwise image of the kernel's fp32 d_logit errors, fp32 d_logits only (term flipn) */
  double rsum;   /* the relative error of the rows' fp32 softmax denominators (term rsum) */
  double uo;     /* the unit roundoff of the output's own format (term uo) */
  double rndu;   /* rnd's bound u/2 where the reference does not compute rnd (term rndu), else 0 */
  double pertokn; /* u of the GEMMs' d_logit format under reduction none times ||m|| / ||r|| (gradients), else 0 */
  double rndn;   /* ||rnd - r|| / ||r|| (gradients, from a reference with rnd), else 0 (term rndn) */
  double rnds;   /* the bias of a result at R(rnd) or at R(r), the larger (term rnds) */
  double outv;   /* one standard deviation of the output roundings a kernel's own error changes (term outv) */
  double tcx;    /* the tensor-core alignment ratio of the metric bounded (lce_metric_values.tcx; values
                  * below 1, a zeroed struct's included, count as 1): the tensor-core terms k, h and
                  * cond*h scale with it (golden/sm_90/policy.txt) */
} lce_bound_scales;

typedef struct lce_golden_entry {
  char subject_class[64];
  lce_precision dtype; /* the input dtype, or tf32 (lce_case_precision) */
  lce_output_id output;
  lce_metric metric;
  lce_bound_form form;
  double a, b, c; /* c: condk only; all 0 for the model form */
  unsigned terms;  /* model form: a bit per lce_bound_term it names */
  double coef[LCE_TERM_COUNT]; /* model form: the coefficient of each term it names, else 0 */
} lce_golden_entry;

typedef struct lce_golden {
  lce_golden_entry *entries;
  size_t count;
  char **comments; /* '#' lines, verbatim without the newline, in file order */
  size_t ncomments;
  char path[512];
} lce_golden;

const char *lce_bound_form_name(lce_bound_form f);
const char *lce_bound_term_name(lce_bound_term t); /* "1", "cond", "cond/sqrtn", ... */
lce_code lce_golden_load(const char *path, lce_golden *g, lce_status *st);
/* Parses text held in memory; name is used in messages ("name:line: ..."). */
lce_code lce_golden_parse(const char *text, size_t len, const char *name, lce_golden *g, lce_status *st);
/* Writes atomically (temp file in the same directory, then rename): an error leaves the old file. */
lce_code lce_golden_write(const char *path, const lce_golden *g, lce_status *st);
const lce_golden_entry *lce_golden_find(const lce_golden *g, const char *subject_class, lce_precision t,
                                        lce_output_id o, lce_metric m);
/* The scale of term t (the model form's terms; the other forms use 1, cond, sqrtk and k of it). */
double lce_bound_term_scale(lce_bound_term t, const lce_bound_scales *s);
/* The bound of entry e on an output with scales s. */
double lce_golden_bound(const lce_golden_entry *e, const lce_bound_scales *s);
/* 1 when entry e's bound needs what a reference without error magnitudes (tier 2 on the device, dropped
 * for memory: no mag, emag or rnd) cannot give: cond (the cond form's b, a model's cond terms), the
 * maxscaled bound (ms*cond/sqrtn), or a term measured from the magnitudes or rnd (rnd, rndn, rnds,
 * flip, flipn, outr, outv, acc, accn, pertok, pertokn), each with a non-zero coefficient. Those scales
 * read 0 (or the case's u) there, below what they stand for; rndu does not cover the output's own
 * rounding that rnds carries, nor the kernel's fp32 terms. */
int lce_golden_needs_mags(const lce_golden_entry *e);
void lce_golden_free(lce_golden *g);

#endif
