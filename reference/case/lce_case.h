/* lce_case.h — one struct that describes an FLCE problem completely, its stable case id, the
 * input tensors it regenerates bit-for-bit, and the output buffers a subject fills.
 *
 * The math (what the oracle computes exactly and every subject approximates):
 *   W        = embedding when tied, weight when untied; rows [V, Vp) are padding and never enter
 *              the softmax (their logits do not exist, their gradient rows stay as they were).
 *   s[n,v]   = sum_k hidden[n,k] * W[v,k]                  for v in [0, V); with gemm tf32 (fp32
 *              inputs only) hidden and W are first rounded to tf32 (10 explicit mantissa bits,
 *              round to nearest, ties away from zero: PTX cvt.rna.tf32.f32)
 *   z[n,v]   = softcap c > 0 ? c * tanh(s[n,v] / c) : s[n,v]
 *   lse[n]   = log sum_v exp(z[n,v]),   p[n,v] = exp(z[n,v] - lse[n])
 *   w_v      = class weight of vocab row v (1 without class weights)
 *   e        = label smoothing: 0 | pytorch: eps | megatron: eps * V / (V - 1)
 *   loss[n]  = (1 - e) * w_y * (lse - z_y) + (e / V) * sum_v w_v * (lse - z_v) + lambda * lse^2
 *              (y = label[n]; 0 when label[n] == ignore_index; lambda = z-loss weight)
 *   W_n      = w_{label[n]} for valid tokens, 0 for ignored ones
 *   loss     = none: loss[] itself | sum: sum_n loss[n] | mean: sum / sum_n W_n (0 when that is 0)
 *   g[n]     = none: grad_output[n] | sum: grad_output[0] | mean: grad_output[0] / sum_n W_n
 *              (0 for ignored tokens; all zero when sum_n W_n == 0)
 *   dz[n,v]  = g[n] * ( p[n,v] * ((1 - e) w_y + (e / V) sum_u w_u + 2 lambda lse[n])
 *                       - (1 - e) w_y [v == y] - (e / V) w_v )
 *   ds[n,v]  = dz[n,v] * (softcap ? 1 - (z[n,v] / c)^2 : 1)
 *   d_hidden = ds · W                                         (written, [N, H], input dtype)
 *   grad of W += ds^T · hidden  into the fp32 buffer of the parameter that IS the output weight:
 *              tied → grad_embedding, untied → grad_weight; when untied, grad_embedding must be
 *              left exactly as it was. (With tf32 the gradient GEMMs read the same tf32-rounded
 *              hidden and W as the forward.)
 * Non-finite inputs are not errors: they propagate as IEEE arithmetic in a fused kernel makes them
 * (any NaN or Inf among a token's hidden values or a real W row makes the logits it reaches NaN,
 * because the online softmax subtracts the running maximum; NaN then reaches that token's lse,
 * loss and d_hidden row and every d_weight element it contributes to).
 * Gradient buffers start with a prior gradient when prior_grad is set (the embedding lookup's
 * gradient, or an earlier micro-batch), and the run must add to it.
 *
 * Case id: dot-separated tokens in a fixed order, e.g.
 *   bf16.untied.tp2.n16.h32.v300.vp384.vc8.mean.ign25.prior.mixed.s1
 * dtype . tied|untied . tp<k> . n<N> . h<H> . v<V> . vp<Vp> . vc<vocab chunk> . none|sum|mean .
 * ign<percent ignored> [. ii<ignore_index>] [. tc<token chunk>] [. ls<permille> | lsm<permille>]
 * [. zl<lambda in units of 1e-5>] [. sc<softcap>] [. cw] [. tf32] . prior|fresh . <dist> . s<seed>
 * where bracketed tokens appear only when not at their default (ignore_index -100, one token
 * chunk, no smoothing, no z-loss, no softcap, no class weights, IEEE fp32 GEMMs). */
#ifndef LCE_CASE_H
#define LCE_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "lce_dtype.h"
#include "lce_status.h"

typedef enum lce_reduction { LCE_RED_NONE = 0, LCE_RED_SUM = 1, LCE_RED_MEAN = 2 } lce_reduction;

/* Value distributions. MIXED cycles token rows through the special row kinds below. */
typedef enum lce_dist {
  LCE_DIST_MIXED = 0,     /* every row kind below, in turn */
  LCE_DIST_NORMAL = 1,    /* logits of standard deviation ~3 */
  LCE_DIST_PEAKED = 2,    /* one logit far above the rest */
  LCE_DIST_FLAT = 3,      /* all logits within ~1e-2 of each other */
  LCE_DIST_CONFIDENT = 4, /* the target logit dominates: p_y -> 1 */
  LCE_DIST_NEGATIVE = 5,  /* every logit below -87 (exp underflows in fp32 without a max shift) */
  LCE_DIST_HARD = 6,      /* every row kind below, in turn */
  LCE_DIST_POISON = 7,    /* normal rows, then NaN and +Inf in the hidden values of two tokens */
  LCE_DIST_BIG = 8,       /* |logits| >= 80 */
  LCE_DIST_TIES = 9,      /* two identical W rows share the maximum logit */
  LCE_DIST_TARGET_MAX = 10, /* the label's logit is the maximum (p_y large, not 1) */
  LCE_DIST_TARGET_MIN = 11, /* the label's logit is the minimum */
  LCE_DIST_ZERO = 12,     /* hidden rows of zeros: all logits 0 */
  LCE_DIST_SUBNORMAL = 13, /* hidden values in the dtype's subnormal range */
  LCE_DIST_COUNT = 14
} lce_dist;

/* The precision a golden bound is kept for: the input dtype, or tf32 for fp32 inputs whose GEMMs
 * run in tf32 (the first three equal their lce_dtype). */
typedef enum lce_precision {
  LCE_PREC_BF16 = 0,
  LCE_PREC_FP16 = 1,
  LCE_PREC_FP32 = 2,
  LCE_PREC_TF32 = 3,
  LCE_PREC_COUNT = 4
} lce_precision;

typedef enum lce_smoothing { LCE_SMOOTH_NONE = 0, LCE_SMOOTH_PYTORCH = 1, LCE_SMOOTH_MEGATRON = 2 } lce_smoothing;
typedef enum lce_gemm { LCE_GEMM_IEEE = 0, LCE_GEMM_TF32 = 1 } lce_gemm;

#define LCE_DEFAULT_IGNORE_INDEX (-100)
#define LCE_MAX_DIM ((int64_t)1 << 24)

typedef struct lce_case {
  int64_t n, h, v, vp;   /* tokens, hidden, vocab, padded vocab (vp >= v) */
  int32_t tp;            /* vocab shards: rank r owns padded rows [r*vp/tp, (r+1)*vp/tp) */
  int64_t vocab_chunk;   /* rows of W per chunk inside a shard */
  lce_dtype dtype;       /* hidden, embedding, weight and d_hidden format */
  int tied;              /* 1: the output weight IS the embedding table */
  int prior_grad;        /* 1: gradient buffers already hold a gradient that must be added to */
  lce_reduction reduction;
  int64_t ignore_index;
  int32_t ignore_pct;    /* percent of tokens labelled ignore_index (100: all ignored) */
  lce_dist dist;
  uint64_t seed;
  int64_t token_chunk;   /* tokens per chunk, 0: all tokens in one chunk */
  lce_smoothing smoothing;
  int32_t smoothing_permille; /* eps = permille / 1000, in [0, 1000) */
  int32_t z_loss_e5;     /* lambda = z_loss_e5 * 1e-5 (0: no z-loss) */
  int32_t softcap;       /* c (0: no softcap) */
  int class_weights;     /* 1: per-vocab weights in [0.5, 2) */
  lce_gemm gemm;         /* tf32 only for fp32 inputs */
} lce_case;

/* Inputs, regenerated from the case. Dtype buffers hold raw format bits (uint16 for bf16/fp16,
 * float for fp32); read them with lce_load(). */
typedef struct lce_tensors {
  void *hidden;                 /* [n*h] dtype */
  void *embedding;              /* [vp*h] dtype: embedding table, the output weight when tied */
  void *weight;                 /* [vp*h] dtype: separate output weight; NULL when tied */
  int64_t *labels;              /* [n] in [0, v) or ignore_index */
  float *grad_output;           /* [n] for reduction none, [1] otherwise */
  float *grad_embedding_prior;  /* [vp*h] fp32: what the embedding gradient holds before the run */
  float *grad_weight_prior;     /* [vp*h] fp32; NULL when tied */
  float *class_weight;          /* [v] per-vocab weights; NULL without class weights */
  int64_t n, h, v, vp;          /* the shape these tensors were made for (checked against the case) */
} lce_tensors;

/* Outputs a subject fills. Created by lce_outputs_alloc: value outputs are poisoned with NaN,
 * gradient buffers hold copies of the priors, and every buffer has guard regions on both sides
 * filled with a sentinel that lce_outputs_guards_intact() checks. */
typedef struct lce_outputs {
  float *loss;            /* [1]: reduced loss (reduction none: the sum of loss_token, for logging) */
  float *loss_token;      /* [n]: per-token loss (0 for ignored tokens) */
  float *lse;             /* [n]: log-sum-exp (value of ignored tokens unconstrained: not judged) */
  void *d_hidden;         /* [n*h] dtype */
  float *grad_embedding;  /* [vp*h] in/out */
  float *grad_weight;     /* [vp*h] in/out; NULL when tied */
  void *block_;           /* owner of all storage (private) */
  /* Set by a subject whose outputs come from elsewhere (an exchange runner's files), a bit per
   * lce_output_id (lce_output.h): not_provided, outputs it does not produce at all (not judged, named
   * in the verdict); unusable, outputs it delivered in a form that cannot be judged (a missing file, a
   * wrong shape or dtype): class failures with unusable_msg[o] as the message. */
  unsigned not_provided, unusable;
  char unusable_msg[8][200];
} lce_outputs;

#define LCE_GUARD_ELEMS 16

const char *lce_reduction_name(lce_reduction r);
int lce_reduction_parse(const char *s, lce_reduction *out);
const char *lce_dist_name(lce_dist d);
int lce_dist_parse(const char *s, lce_dist *out);

const char *lce_precision_name(lce_precision p); /* "bf16", "fp16", "fp32", "tf32" */
int lce_precision_parse(const char *s, lce_precision *out);
lce_precision lce_case_precision(const lce_case *c);
/* u of the format the GEMMs read the d_logits in: tf32 (2^-11) for fp32 inputs with tf32 GEMMs, else the
 * dtype's. */
double lce_dlogit_unit_roundoff(const lce_case *c);

/* The effective label smoothing e, the z-loss lambda and the class weight of row v (1 without
 * class weights), as the math above uses them: one definition for the oracle and all subjects. */
double lce_case_smoothing(const lce_case *c);
double lce_case_z_loss(const lce_case *c);
/* x rounded to tf32 (10 explicit mantissa bits, ties away from zero), as a double. */
double lce_round_tf32(double x);

/* A valid small case with every field at its default (bf16, untied, tp 1, ...). */
lce_case lce_case_default(void);

/* Checks shapes and options: n, h, v >= 1; vp >= v; tp >= 1 dividing vp; vocab_chunk >= 1;
 * ignore_pct in [0, 100]; ignore_index outside [0, v); sizes within LCE_MAX_DIM; token_chunk >= 0;
 * smoothing permille in [0, 1000) (megatron needs v >= 2); z-loss and softcap >= 0; tf32 only with
 * fp32 inputs. */
lce_code lce_case_validate(const lce_case *c, lce_status *st);

/* Case id <-> struct. Format writes into buf (>= 160 bytes) and returns buf. Parse validates. */
char *lce_case_format(const lce_case *c, char *buf, size_t size);
lce_code lce_case_parse(const char *id, lce_case *out, lce_status *st);

/* Checks the tensors against the case before any output is touched: presence, the shape they were
 * made for, labels (each in [0, v) or == ignore_index), class weights finite and >= 0,
 * grad_output finite. Used by subjects and the oracle. */
lce_code lce_tensors_validate(const lce_case *c, const lce_tensors *in, lce_status *st);

/* The case's tensors allocated with the shapes it names and left unfilled (a caller that writes every
 * element itself: converge's model); lce_case_generate allocates and fills them from the seed. */
lce_code lce_tensors_alloc(const lce_case *c, lce_tensors *out, lce_status *st);
lce_code lce_case_generate(const lce_case *c, lce_tensors *out, lce_status *st);
void lce_tensors_free(lce_tensors *t);

/* Number of tokens whose label is not ignore_index. */
int64_t lce_count_valid(const lce_case *c, const lce_tensors *in);

/* Rows of the padded vocab owned by shard r: [*lo, *hi); real rows are those below v. */
void lce_shard_range(const lce_case *c, int r, int64_t *lo, int64_t *hi);

/* The output weight W is the embedding table when tied and the separate weight when untied; its
 * gradient accumulates into grad_embedding (from grad_embedding_prior) when tied and into
 * grad_weight (from grad_weight_prior) when untied. These three say it once; each fused subject
 * still makes its own selection (that is where the untied-embedding bug lives). */
const void *lce_output_weight(const lce_case *c, const lce_tensors *in);
const float *lce_output_weight_prior(const lce_case *c, const lce_tensors *in);
float *lce_output_weight_grad(const lce_case *c, const lce_outputs *out);

lce_code lce_outputs_alloc(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st);
/* 1 when every output buffer of a and b holds the same bytes (grad_weight only when untied);
 * otherwise 0 and, when why is not NULL, which buffer and element differ first. */
int lce_outputs_identical(const lce_case *c, const lce_outputs *a, const lce_outputs *b, char *why, size_t size);
/* 1 when every guard element still holds the sentinel; otherwise 0 and names the buffer. */
int lce_outputs_guards_intact(const lce_case *c, const lce_outputs *out, char *which, size_t size);
void lce_outputs_free(lce_outputs *out);

#endif
