/* lce_output.h — the named outputs of an FLCE run, shared by the oracle, subjects and the judge. */
#ifndef LCE_OUTPUT_H
#define LCE_OUTPUT_H

#include "lce_case.h"

typedef enum lce_output_id {
  LCE_OUT_LOSS = 0,        /* reduced loss, fp32 (reduction none: sum of per-token losses) */
  LCE_OUT_LOSS_TOKEN = 1,  /* per-token loss, fp32 [n] */
  LCE_OUT_LSE = 2,         /* log-sum-exp, fp32 [n] (valid tokens only are judged) */
  LCE_OUT_D_HIDDEN = 3,    /* gradient of hidden, dtype [n*h] */
  LCE_OUT_D_WEIGHT = 4,    /* the output weight's fp32 gradient buffer after the run [vp*h] */
  LCE_OUT_D_EMBEDDING = 5, /* untied only: the embedding's gradient buffer, must equal its prior */
  LCE_OUT_COUNT = 6
} lce_output_id;

const char *lce_output_name(lce_output_id o); /* "loss", "loss_token", "lse", "d_hidden", ... */
int lce_output_parse(const char *s, lce_output_id *out);

/* Elements of output o that a reference (every oracle tier) computes and keeps: lce_output_count's,
 * except d_embedding's 0. That output must equal its prior, and the judge checks it against the inputs
 * (lce_judge.c), never against a reference: at production shapes it would be Vp H elements per array. */
int64_t lce_output_reference_count(const lce_case *c, lce_output_id o);

/* Whether output o exists for case c (d_embedding only when untied). */
int lce_output_applies(const lce_case *c, lce_output_id o);
/* Element count of output o for case c. */
int64_t lce_output_count(const lce_case *c, lce_output_id o);
/* Storage format of output o (d_hidden: the case dtype; all others fp32). */
lce_dtype lce_output_format(const lce_case *c, lce_output_id o);
/* L, the fp32 roundings each element of gradient o goes through in a token- and vocab-chunked, sharded
 * kernel: d_hidden adds V rows, each vocab chunk's partial into its shard's buffer, the shards into the
 * total, and scales it once; the weight gradient sums the N tokens and adds each token chunk's partial
 * into the buffer that holds the prior, once per chunk (the judge's terms acc, accn and outv). */
double lce_accumulation_length(const lce_case *c, lce_output_id o);
/* How far a correct kernel's element of gradient o may sit from r or rnd before its output rounding,
 * beside the reference's flip_i: D_i = flip_i + per_mag·mag_i + per_m·m_i (m_i = max(mag_i, 2^-126)),
 * per_mag = 2u of the d_logit format under reduction none (pertok's two roundings of each term, else 0)
 * and per_m = 4 u32 sqrt(L/3) (four standard deviations of the fp32 accumulation): the judge's term outv,
 * summed by the host and the device comparison alike. */
void lce_kernel_reach(const lce_case *c, lce_output_id o, double *per_mag, double *per_m);
/* Inner size K of the reduction that produces output o (shape-aware golden bounds):
 * loss: n; loss_token, lse, d_hidden: v; d_weight, d_embedding: n. */
int64_t lce_output_inner(const lce_case *c, lce_output_id o);
/* The buffer holding a subject's output o (in lce_output_format; the output weight's gradient is the
 * buffer of the parameter that IS the output weight: the embedding's when tied). */
void *lce_output_buffer(const lce_case *c, const lce_outputs *out, lce_output_id o);
/* Element i of a subject's output o, exactly, as double. */
double lce_output_get(const lce_case *c, const lce_outputs *out, lce_output_id o, int64_t i);
/* Elements [i0, i1) of it into x[0 .. i1 - i0): the same values, the format's switch once a block. */
void lce_output_load(const lce_case *c, const lce_outputs *out, lce_output_id o, int64_t i0, int64_t i1, double *x);

/* The softmax-sum replay behind the judge's term rsum (golden/policy.txt), in one place for the judge
 * and for tier 1, which computes it in its row pass. lce_plain_logit: logit j of token n as the plain
 * double sum of the dtype inputs' products in k order (exact products, one rounding per addition),
 * softcap applied as c tanh(s / c). lce_softmax_sum_replay: for one token's logits z[0..v) and each
 * shard, the exact terms exp(z_j - m) (m the shard's largest logit) each rounded to fp32 and added in
 * row order in fp32, against their exact sum: the largest relative error over the shards, 0 for a
 * shard with no finite largest logit or a non-finite error. */
double lce_plain_logit(const lce_case *c, const lce_tensors *in, int64_t n, int64_t j);
double lce_softmax_sum_replay(const lce_case *c, const double *z);
/* The largest lce_softmax_sum_replay over the case's valid tokens, their logits made as lce_plain_logit
 * makes each (the same bits) from inputs converted to double once, the tokens in parallel, each into its
 * own slot: the same result for any thread count. 0 where its memory cannot be had. */
double lce_softmax_sum_replay_case(const lce_case *c, const lce_tensors *in);

#endif
