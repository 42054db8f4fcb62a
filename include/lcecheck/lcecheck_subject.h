/* lcecheck_subject.h — the interface a shared library exports so that lcecheck can judge the fused
 * linear cross-entropy (FLCE) it implements:  lcecheck check --subject plugin:PATH[#NAME]
 *
 * Self-contained (C99 or later, C++ too) and versioned: a library exports one function,
 *   const lcecheck_subject_v1 *lcecheck_subject_entry(uint32_t abi_version);
 * returning an array of subject tables ended by an entry whose name is NULL. lcecheck calls it with
 * the ABI version it speaks (LCECHECK_SUBJECT_ABI_VERSION); return your array whatever it asks:
 * lcecheck reads abi_version, the first field of every version's table, and refuses a mismatch with
 * both numbers. PATH#NAME picks the subject called NAME; plain PATH takes the first.
 *
 * The math (the contract; lcecheck's MPFR oracle computes it exactly and judges you against it):
 *   W        = embedding when tied, weight when untied; rows [V, Vp) are padding and never enter the
 *              softmax (their logits do not exist; their gradient rows must stay as they were).
 *   s[n,v]   = sum_k hidden[n,k] * W[v,k]                 for v in [0, V); with gemm_tf32 (fp32 inputs
 *              only) hidden and W are first rounded to tf32 (10 explicit mantissa bits, round to
 *              nearest, ties away from zero: PTX cvt.rna.tf32.f32)
 *   z[n,v]   = softcap c > 0 ? c * tanh(s[n,v] / c) : s[n,v]
 *   lse[n]   = log sum_v exp(z[n,v]),   p[n,v] = exp(z[n,v] - lse[n])
 *   w_v      = class_weight[v] (1 when class_weight is NULL)
 *   e        = smoothing_e: 0 | pytorch: eps | megatron: eps * V / (V - 1)
 *   loss[n]  = (1 - e) * w_y * (lse - z_y) + (e / V) * sum_v w_v * (lse - z_v) + lambda * lse^2
 *              (y = label[n]; 0 when label[n] == ignore_index; lambda = z_loss)
 *   W_n      = w_{label[n]} for valid tokens, 0 for ignored ones
 *   loss     = none: sum_n loss[n] (for logging) | sum: sum_n loss[n] | mean: sum / sum_n W_n
 *              (0 when that is 0)
 *   g[n]     = none: grad_output[n] | sum: grad_output[0] | mean: grad_output[0] / sum_n W_n
 *              (0 for ignored tokens; all zero when sum_n W_n == 0)
 *   dz[n,v]  = g[n] * ( p[n,v] * ((1 - e) w_y + (e / V) sum_u w_u + 2 lambda lse[n])
 *                       - (1 - e) w_y [v == y] - (e / V) w_v )
 *   ds[n,v]  = dz[n,v] * (softcap ? 1 - (z[n,v] / c)^2 : 1)
 *   d_hidden = ds . W                                     (written, [N, H], input dtype)
 *   grad of W += ds^T . hidden into the fp32 buffer of the parameter that IS the output weight:
 *              tied: grad_embedding, untied: grad_weight; when untied, grad_embedding must be left
 *              exactly as it was. (With tf32 the gradient GEMMs read the same tf32-rounded hidden and W.)
 * Non-finite inputs are not errors: they propagate as IEEE arithmetic in a fused kernel makes them.
 * A NaN or Inf among a token's hidden values (or in a real W row) makes every logit it reaches NaN
 * (an online softmax subtracts the running maximum); that NaN reaches the token's lse, loss and
 * d_hidden row and every weight-gradient element the token contributes to. Ignored tokens contribute
 * nothing to any gradient (their d_hidden row is 0) and their loss is 0.
 * Vocab-parallel (tp > 1): rank r owns padded rows [r*Vp/tp, (r+1)*Vp/tp); each rank's d_hidden is a
 * partial sum over its rows, and the ranks' partial sums are added. Chunking: vocab_chunk rows of a
 * rank at a time, token_chunk tokens at a time (0: all); a subject may chunk as it likes, these say
 * how lcecheck's own fused algorithm does and what the golden bounds' K terms assume (see inner).
 *
 * How lcecheck runs a subject: the outputs arrive poisoned (loss, loss_token, lse and d_hidden full
 * of NaN) and surrounded by guard elements; gradient buffers already hold their prior. Every value
 * output must be written in full, nothing outside a buffer may be touched. The judge checks classes
 * first (NaN/Inf positions and signs, untouched buffers, every element written), then error metrics
 * against the exact values, then the golden bounds of golden_class. The case and its inputs have
 * been validated before run() is called (shapes, labels in [0, V) or ignore_index, finite
 * grad_output and class weights). run() is called from one thread at a time. */
#ifndef LCECHECK_SUBJECT_H
#define LCECHECK_SUBJECT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LCECHECK_SUBJECT_ABI_VERSION 1u
#define LCECHECK_SUBJECT_ENTRY "lcecheck_subject_entry" /* the one symbol lcecheck looks up */

/* Input formats. bf16 and fp16 tensors hold raw 16-bit patterns (uint16_t); fp32 tensors floats. */
#define LCECHECK_DTYPE_BF16 0
#define LCECHECK_DTYPE_FP16 1
#define LCECHECK_DTYPE_FP32 2

#define LCECHECK_REDUCTION_NONE 0 /* per-token grad_output [n] */
#define LCECHECK_REDUCTION_SUM 1
#define LCECHECK_REDUCTION_MEAN 2 /* over sum_n W_n, the class weights of the valid tokens */

#define LCECHECK_SMOOTHING_NONE 0
#define LCECHECK_SMOOTHING_PYTORCH 1  /* e = eps */
#define LCECHECK_SMOOTHING_MEGATRON 2 /* e = eps * V / (V - 1) */

/* One case. Read-only; valid for the duration of run(). */
typedef struct lcecheck_case_v1 {
  const char *id;          /* lcecheck's case id, e.g. bf16.untied.tp2.n16.h32.v300.vp384.vc8.mean... */
  int64_t n, h, v, vp;     /* tokens, hidden, vocab, padded vocab (vp >= v) */
  int32_t tp;              /* vocab shards (ranks); tp divides vp */
  int32_t dtype;           /* LCECHECK_DTYPE_*: hidden, embedding, weight and d_hidden */
  int64_t vocab_chunk;     /* rows of W per chunk inside a shard (>= 1) */
  int64_t token_chunk;     /* tokens per chunk, 0: all tokens in one chunk */
  int32_t tied;            /* 1: the output weight IS the embedding table */
  int32_t prior_grad;      /* 1: the gradient buffers start with a nonzero prior (add to it) */
  int32_t reduction;       /* LCECHECK_REDUCTION_* */
  int32_t smoothing;       /* LCECHECK_SMOOTHING_* */
  int64_t ignore_index;    /* labels equal to it are ignored (outside [0, v)) */
  double smoothing_eps;    /* eps as given (0 without smoothing) */
  double smoothing_e;      /* e of the math above, derived from smoothing and smoothing_eps */
  double z_loss;           /* lambda (0: no z-loss) */
  double softcap;          /* c (0: no softcap) */
  int32_t class_weights;   /* 1: inputs->class_weight holds w_v */
  int32_t gemm_tf32;       /* 1 (fp32 inputs only): the GEMMs read hidden and W rounded to tf32 */
  uint64_t seed;           /* the seed the inputs were generated from (for your logs) */
} lcecheck_case_v1;

/* Inputs. Read-only. */
typedef struct lcecheck_inputs_v1 {
  const void *hidden;                /* [n*h] dtype, row-major */
  const void *embedding;             /* [vp*h] dtype: the embedding table; the output weight when tied */
  const void *weight;                /* [vp*h] dtype: the separate output weight; NULL when tied */
  const int64_t *labels;             /* [n] in [0, v) or ignore_index */
  const float *grad_output;          /* [n] for reduction none, [1] otherwise */
  const float *grad_embedding_prior; /* [vp*h] what outputs->grad_embedding holds on entry */
  const float *grad_weight_prior;    /* [vp*h] what outputs->grad_weight holds on entry; NULL when tied */
  const float *class_weight;         /* [v] w_v; NULL without class weights */
} lcecheck_inputs_v1;

/* Outputs. */
typedef struct lcecheck_outputs_v1 {
  float *loss;           /* [1] write: the reduced loss */
  float *loss_token;     /* [n] write: loss[n] (0 for ignored tokens) */
  float *lse;            /* [n] write: lse[n] (ignored tokens' values are not judged) */
  void *d_hidden;        /* [n*h] write, in dtype (raw bits for bf16/fp16) */
  float *grad_embedding; /* [vp*h] accumulate into when tied; leave untouched when untied */
  float *grad_weight;    /* [vp*h] accumulate into when untied; NULL when tied */
} lcecheck_outputs_v1;

/* Capabilities: a case that needs one the subject lacks is skipped, visibly, with the reason. */
#define LCECHECK_CAP_BF16 (1u << 0)
#define LCECHECK_CAP_FP16 (1u << 1)
#define LCECHECK_CAP_FP32 (1u << 2)
#define LCECHECK_CAP_UNTIED (1u << 3)        /* a separate output weight */
#define LCECHECK_CAP_TP (1u << 4)            /* tp > 1 */
#define LCECHECK_CAP_PADDING (1u << 5)       /* vp > v */
#define LCECHECK_CAP_RED_NONE (1u << 6)      /* reduction none with per-token grad_output */
#define LCECHECK_CAP_PRIOR_GRAD (1u << 7)    /* gradient buffers that hold a prior */
#define LCECHECK_CAP_SMOOTHING (1u << 8)     /* label smoothing, both forms */
#define LCECHECK_CAP_Z_LOSS (1u << 9)
#define LCECHECK_CAP_SOFTCAP (1u << 10)
#define LCECHECK_CAP_CLASS_WEIGHTS (1u << 11)
#define LCECHECK_CAP_TF32 (1u << 12)         /* gemm_tf32 cases */
#define LCECHECK_CAP_MUTANT (1u << 16)       /* deliberately broken: the suite must kill it */
#define LCECHECK_CAP_NEEDS_GPU (1u << 17)    /* run() may answer LCECHECK_NO_DEVICE */
#define LCECHECK_CAP_ALL_SEMANTICS (0x1fffu) /* every bit from BF16 to TF32 */

/* The inner size K of the GEMM reductions, which the golden bounds' K terms scale with. */
#define LCECHECK_INNER_UNCHUNKED 0 /* d_hidden: a whole shard's vocab rows; weight gradient: all N tokens */
#define LCECHECK_INNER_CHUNKED 1   /* d_hidden: one vocab chunk; weight gradient: one token chunk */

/* What run() returns. */
#define LCECHECK_OK 0
#define LCECHECK_ERROR 1     /* the case errors with msg (never a pass) */
#define LCECHECK_NO_DEVICE 2 /* the case is skipped with msg (e.g. no GPU here) */

typedef struct lcecheck_subject_v1 {
  uint32_t abi_version;     /* LCECHECK_SUBJECT_ABI_VERSION; first in every version, forever */
  const char *name;         /* shown in reports as plugin:<name>; NULL ends the array */
  const char *golden_class; /* the golden file it is judged against; NULL: "fused-host" */
  const char *description;  /* one line */
  uint32_t caps;            /* LCECHECK_CAP_* */
  uint32_t inner;           /* LCECHECK_INNER_* */
  /* Computes case c from in into out. On failure returns LCECHECK_ERROR (or LCECHECK_NO_DEVICE)
   * with a message in msg[0..msg_size). state is the field below, passed back as is. */
  int (*run)(void *state, const lcecheck_case_v1 *c, const lcecheck_inputs_v1 *in, const lcecheck_outputs_v1 *out,
             char *msg, size_t msg_size);
  void *state;
} lcecheck_subject_v1;

typedef const lcecheck_subject_v1 *(*lcecheck_subject_entry_fn)(uint32_t abi_version);

#if defined(_WIN32)
#define LCECHECK_EXPORT __declspec(dllexport)
#else
#define LCECHECK_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
}
#endif

#endif
