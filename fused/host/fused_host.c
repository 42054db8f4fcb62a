/* fused_host.c — fused-host: fused linear cross-entropy (LM-head GEMM + softmax cross-entropy,
 * forward and backward) computed the way a token- and vocab-chunked, vocab-parallel GPU kernel
 * computes it, on the CPU, with the device's fp32 arithmetic emulated exactly, so that CI predicts
 * the kernel.
 *
 * The math is lce_case.h's. The tile sizes, the option constants, each shard's real rows, g and the
 * mean's divisor come from the plan fused-cuda shares (fused/plan/lce_fused_plan.h). How it is
 * evaluated here (every operation is one fp32 operation; e, e/V, 1 - e and lambda are rounded to
 * fp32 once, from double, as a host passes them to a kernel):
 *   GEMM inputs: dtype values loaded exactly; with tf32 GEMMs every GEMM operand (hidden, W and the
 *     d_logits) is first rounded to tf32 with lce_round_tf32 (cvt.rna.tf32.f32).
 *   GEMM arithmetic: every GEMM element is lce_gemm_dot under the run's model (lce_gemm_model.h):
 *     fused-host runs "ieee" (one fmaf per product, k in order); fused-host-sm90 runs "sm90" for
 *     bf16/fp16 and tf32 GEMMs (Hopper tensor-core steps of 16 / 8 products), and ieee for plain
 *     fp32 (CUDA cores), as fused-cuda's cuBLAS GEMMs do. Each GEMM starts from 0 and its result is
 *     added to a buffer by cuBLAS's beta = 1 epilogue, alpha·acc + C in one fmaf (the single fp32
 *     add acc + C when alpha = 1; lce_gemm_epilogue, which test_fused_cuda_epilogue checks on the
 *     GPU); K is blocked from 0 in order exactly as fused-cuda's GEMMs see it (logits: K = H;
 *     d_hidden: the chunk's rows; d_weight: the token chunk, ignored tokens included as zero rows).
 *   Both passes walk token chunks (token_chunk tokens, 0: all), then shards r (their rows below V;
 *   padded rows are skipped entirely), then vocab chunks; per chunk:
 *     s        = hidden · W_chunk^T, an fp32-accumulate GEMM over k = 0..H-1
 *     z        = softcap c ? c·tanhf(s / c) : s
 *   forward, per token and shard, the online statistics:
 *     m_r, s_r   online softmax: m' = max(m, max_j z), s = s·exp(m - m') + sum_j exp(z - m')
 *     W_r, D_r   smoothing sums W_r = sum_j w_j and D_r = sum_j w_j (m_r - z_j) (rescaled like s_r:
 *                D += W·(m' - m)); every term is >= 0, so lse·W - sum w z never cancels
 *     z_y        recorded by the shard that owns the label
 *   merge as vocab-parallel ranks all-reduce, in rank order: M = max_r m_r,
 *     S = sum_r s_r·exp(m_r - M), lse = M + log S; with smoothing, each shard's partial sums scaled
 *     by e/V of the GLOBAL vocab: A = sum_r (e/V)·W_r, B = sum_r (e/V)·(D_r + W_r (M - m_r)), so that
 *     (e/V) sum_v w_v (lse - z_v) = B + A·log S does not depend on tp beyond rounding.
 *   loss_token = (1-e)·w_y·(lse - z_y) [+ B + A·log S] [+ lambda·lse·lse]   (0 when ignored)
 *   loss       = sum of loss_token in token order; mean divides by sum_n W_n (fp32, token order),
 *                0 when that is 0
 *   backward, per chunk (its logits recomputed exactly as in forward), for valid tokens only
 *   (ignored tokens are skipped: their d_hidden stays 0, and in d_weight they are rows of zeros):
 *     g          = dl·rho, split by lce_fused_grad_split (lce_fused_plan.h): only dl, 1 or a power
 *                  of two, enters d_logits, so their rounding carries no common error of g
 *     dz         = dl·(p·K - (1-e)·w_y·[v == y] - (e/V)·w_v),  p = exp(z - lse),
 *                  K = (1-e)·w_y [+ A] [+ 2·lambda·lse]
 *     ds         = dz·(1 - (z/c)·(z/c)) with softcap, then rounded to the input dtype (d_logits
 *                  are stored in the input format before the two backward GEMMs; tf32: then to tf32)
 *     dh_r      += alpha·sum_j ds·W_j   chunk partial (a GEMM over the rows), then one fmaf per element
 *     gradW_j   += alpha·sum_n ds·h'_n  per row and token chunk its own GEMM over the tokens in order,
 *                                   ADDED into the fp32 gradient buffer once per element (one fmaf);
 *                                   alpha = g under mean and sum, 1 under none, where instead
 *                                   h'_n = round_to_dtype(rho_n·h_n)
 *   d_hidden   = round_to_dtype(rho·sum_r dh_r): shard buffers summed in fp32 in rank order
 *                (all-reduce), then scaled by the token's rho (1 under mean and sum) in fp32.
 * Non-finite inputs propagate as lce_case.h says: a non-finite GEMM result becomes a NaN logit;
 * fmaxf ignores a NaN logit, but exp(NaN - m) does not, so it reaches s_r, lse, the loss, and through
 * p the d_logits of its token (hence its d_hidden row and every d_weight element); a shard whose
 * logits are all NaN keeps m_r = -inf and s_r = NaN, and the merge keeps that NaN. Ignored tokens
 * never reach the backward GEMMs, so their NaN stays in their lse.
 * The build uses -ffp-contract=off: every fmaf is written out, nothing else is contracted.
 *
 * Build and run: part of lce_fused (cmake --build build --target lce_fused); judge one case with
 *   build/lcecheck repro --subject fused-host <case id>; tests in fused/tests/.
 *
 * Versions (fused/mutants.txt names the upstream bug of each; each mutant is this file compiled with
 * one LCE_MUTANT_* switch, whose #if block sits where that bug lived): see FUSED_HOST_IS_MUTANT. */
#include <math.h>
#include <stdlib.h>

#include "fused_host.h"
#include "lce_fused_plan.h"
#include "lce_gemm_model.h"
#include "lce_parallel.h"

/* ---- build variant ---------------------------------------------------------------------------
 * A mutant build must switch on a mutant this file knows and export its own run symbol; the
 * production build must do neither. Adding a mutant: one line in mutants.txt, its switch in this
 * list, and its #if block where the upstream bug lived. */
#if defined(LCE_MUTANT_BF16_DHIDDEN_ACCUM) || defined(LCE_MUTANT_TIED_WEIGHT_WHEN_UNTIED) ||             \
    defined(LCE_MUTANT_RUNNING_MAX_ZERO_INIT) || defined(LCE_MUTANT_MEAN_EMPTY_NAN) ||                   \
    defined(LCE_MUTANT_MEAN_COUNTS_IGNORED) || defined(LCE_MUTANT_GRAD_OUTPUT_AFTER_SUM) ||              \
    defined(LCE_MUTANT_PADDED_ROWS_IN_SOFTMAX) || defined(LCE_MUTANT_NO_RESCALE_ONLINE) ||               \
    defined(LCE_MUTANT_SHARD_MERGE_NO_RESCALE) || defined(LCE_MUTANT_LAST_CHUNK_SKIPPED) ||              \
    defined(LCE_MUTANT_TIED_GRAD_OVERWRITTEN) || defined(LCE_MUTANT_SMOOTHING_PER_SHARD_VOCAB) ||        \
    defined(LCE_MUTANT_TARGET_WRONG_SHARD_OFFSET) || defined(LCE_MUTANT_DWEIGHT_DTYPE_ACROSS_TOKEN_CHUNKS) || \
    defined(LCE_MUTANT_SOFTCAP_NO_DERIVATIVE) || defined(LCE_MUTANT_MEAN_FACTOR_IN_DLOGITS)
#define FUSED_HOST_IS_MUTANT 1
#else
#define FUSED_HOST_IS_MUTANT 0
#endif
#if defined(LCE_FUSED_HOST_RUN) && !FUSED_HOST_IS_MUTANT
#error "mutant build of fused_host.c without a known LCE_MUTANT_* switch: add its #if block here"
#endif
#if !defined(LCE_FUSED_HOST_RUN) && FUSED_HOST_IS_MUTANT
#error "LCE_MUTANT_* switch in a production build: a mutant must export its own run symbol"
#endif
#ifndef LCE_FUSED_HOST_RUN
#define LCE_FUSED_HOST_RUN lce_fused_host_run
#endif
lce_code LCE_FUSED_HOST_RUN(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st);

/* Everything one run needs, allocated up front so that no failure can happen after the first
 * output element is written. Per-shard statistics are [tp*n], shard-major. */
typedef struct fused_host {
  const lce_case *c;
  const lce_gemm_arch *arch; /* the GEMMs' arithmetic for this case (ieee for plain fp32) */
  lce_mma_format fmt;        /* the GEMM operands' format */
  const lce_tensors *in;
  const int64_t *labels;
  const void *w;             /* the output weight, dtype bits [vp*h] */
  float *grad_w;             /* its fp32 gradient buffer [vp*h], holding the prior */
  lce_fused_plan plan;       /* tile sizes and option constants (lce_fused_plan.h) */
  float weight_sum;          /* sum_n W_n over valid tokens: the mean's divisor */
  float *hidden;             /* [n*h] hidden as the GEMMs read it */
  float *hidden_dw;          /* [n*h] hidden as the d_weight GEMM reads it: ignored tokens' rows 0 */
  float *w_chunk;            /* [rows_max*h] the chunk's rows of W as the GEMMs read them */
  float *z;                  /* [tok_max*rows_max] the chunk's logits, then its d_logits */
  float *m, *s, *sw, *d;     /* [tp*n] running max, running sum, sum w_v, sum w_v (m - z_v) */
  float *z_target;           /* [n] the label's logit, from the shard that owns it */
  float *lse, *smooth_a, *smooth_b; /* [n] lse, A and B of the smoothing term (see the top) */
  float *g;                  /* [n] d loss / d loss_token (0 for ignored tokens) */
  float *dl, *rho;           /* [n] g split (lce_fused_grad_split): into d_logits; d_hidden's and hidden's row */
  float alpha;               /* the backward GEMMs' alpha */
  float *dh_part;            /* [tok_max*h] one chunk's contribution to d_hidden */
  float *dh_shard;           /* [tok_max*h] one shard's fp32 d_hidden buffer for the token chunk */
  float *dh_total;           /* [n*h] the all-reduced d_hidden */
#if defined(LCE_MUTANT_DWEIGHT_DTYPE_ACROSS_TOKEN_CHUNKS)
  float *gw_dtype;           /* [vp*h] the run's weight gradient, held in the input dtype */
#endif
  float *block_;             /* owner of all the float storage above */
} fused_host;

static int token_valid(const fused_host *f, int64_t i) { return f->labels[i] != f->c->ignore_index; }

/* Class weight of vocab row v (1 without class weights). Rows >= V have none: only a kernel that
 * lets padded rows in asks. */
static float class_w(const fused_host *f, int64_t v) { return lce_fused_class_weight(f->c, f->in, v); }

/* The operand a GEMM reads: x itself, or x rounded to tf32 in tf32 mode. */
static float gemm_operand(const fused_host *f, float x) { return f->plan.tf32 ? (float)lce_round_tf32(x) : x; }

/* The rows of shard r that enter the softmax: its real vocabulary rows [lo, hi), possibly empty. */
static void shard_real_rows(const lce_case *c, int r, int64_t *lo, int64_t *hi) {
#if defined(LCE_MUTANT_PADDED_ROWS_IN_SOFTMAX)
  /* Padded vocab rows left in the softmax: the shard's whole padded row range is treated as vocab
   * (Megatron-style padding to a multiple of 128·tp without masking the padded logits). */
  lce_shard_range(c, r, lo, hi);
#else
  lce_fused_shard_rows(c, r, lo, hi);
#endif
}

/* Where the vocab-chunk loop over [lo, hi) stops: hi, so that the last, partial chunk is done. */
static int64_t chunks_end(const lce_case *c, int64_t lo, int64_t hi) {
#if defined(LCE_MUTANT_LAST_CHUNK_SKIPPED)
  /* Chunk count by floor division, (rows / chunk) instead of ceil: the last partial chunk of every
   * shard is never visited (its logits miss the softmax, its rows get no gradient). */
  return lo + (hi - lo) / c->vocab_chunk * c->vocab_chunk;
#endif
  (void)c, (void)lo;
  return hi;
}

/* The global row whose logit is label y's target as shard r sees it, or -1 when r does not own y.
 * A shard owns the labels in its own row range [lo, lo + vp/tp). */
static int64_t target_row(const fused_host *f, int r, int64_t y) {
  int64_t lo, hi;
  lce_shard_range(f->c, r, &lo, &hi);
  int64_t start = lo; /* the vocab-start index the label is made local with */
#if defined(LCE_MUTANT_TARGET_WRONG_SHARD_OFFSET)
  /* The label is made local with the previous rank's vocab start: every rank > 0 claims the labels
   * of the shard before it and reads its own row at that local offset. Tests that place labels only
   * on rank 0's shard never see it. */
  if (r > 0) start = lo - (hi - lo);
#endif
  int64_t local = y - start;
  return local >= 0 && local < hi - lo ? lo + local : -1;
}

/* ---- kernels: one (token chunk, vocab chunk) tile ------------------------------------------ */

/* Loads rows [row0, row0+rows) of W into w_chunk as the GEMMs read them. */
static void chunk_load(fused_host *f, int64_t row0, int64_t rows) {
  const int64_t h = f->c->h;
  LCE_PARALLEL_FOR_IF(rows * h >= LCE_PARALLEL_MIN_MACS)
  for (int64_t e = 0; e < rows * h; e++)
    f->w_chunk[e] = gemm_operand(f, (float)lce_load(f->c->dtype, f->w, (size_t)(row0 * h + e)));
}

/* z[i, j] = sum_k hidden[i,k]·W[row0+j,k] for tokens [t0, t1), an fp32-accumulate GEMM under the
 * run's arithmetic model (k = 0..H-1 in order), then softcapped. A
 * non-finite GEMM result becomes a NaN logit (lce_case.h: a NaN or Inf input makes the logits it
 * reaches NaN): without softcap the online softmax would turn +Inf into NaN anyway (exp(inf - inf))
 * but not a row of -Inf, and tanh would cap an Inf to a finite c, as a kernel whose tanh is
 * (e^2x - 1)/(e^2x + 1) does not. */
static void chunk_logits(fused_host *f, int64_t t0, int64_t t1, int64_t rows) {
  const int64_t h = f->c->h;
  LCE_PARALLEL_FOR_IF((t1 - t0) * rows * h >= LCE_PARALLEL_MIN_MACS)
  for (int64_t i = t0; i < t1; i++) {
    const float *a = f->hidden + i * h;
    float *zi = f->z + (i - t0) * rows;
    lce_gemm_dots(f->arch, f->fmt, 0.0f, a, 1, f->w_chunk, 1, h, h, rows, zi);
    for (int64_t j = 0; j < rows; j++) {
      float acc = zi[j];
      if (!isfinite(acc)) acc = NAN;
      zi[j] = f->plan.cap > 0.0f ? f->plan.cap * tanhf(acc / f->plan.cap) : acc;
    }
  }
}

/* Folds the tile into shard r's online statistics. The running sum is rescaled only when the max
 * grows. Logits are finite or NaN (chunk_logits): a NaN is skipped by fmaxf but not by exp. */
static void chunk_online_softmax(fused_host *f, int r, int64_t t0, int64_t t1, int64_t row0, int64_t rows) {
  const int64_t n = f->c->n;
  LCE_PARALLEL_FOR_IF((t1 - t0) * rows * 16 >= LCE_PARALLEL_MIN_MACS) /* an exp costs ~16 multiply-adds */
  for (int64_t i = t0; i < t1; i++) {
    const float *zi = f->z + (i - t0) * rows;
    const int64_t at = (int64_t)r * n + i;
    float m = f->m[at], s = f->s[at];
    float chunk_max = -INFINITY;
    for (int64_t j = 0; j < rows; j++) chunk_max = fmaxf(chunk_max, zi[j]);
    float m_new = fmaxf(m, chunk_max);
#if defined(LCE_MUTANT_NO_RESCALE_ONLINE)
    /* The running sum is not rescaled by exp(m - m') when a later chunk raises the max: the terms
     * summed before are taken relative to a max that no longer holds. */
#else
    if (m_new > m) s *= expf(m - m_new);
#endif
    for (int64_t j = 0; j < rows; j++) s += expf(zi[j] - m_new);
    if (f->plan.ev != 0.0f) { /* smoothing sums, relative to the running max */
      float sw = f->sw[at], d = f->d[at];
      if (m_new > m && sw != 0.0f) d += sw * (m_new - m);
      for (int64_t j = 0; j < rows; j++) {
        float w = class_w(f, row0 + j);
        d += w * (m_new - zi[j]);
        sw += w;
      }
      f->sw[at] = sw, f->d[at] = d;
    }
    f->m[at] = m_new, f->s[at] = s;
    int64_t ty = target_row(f, r, f->labels[i]);
    if (ty >= row0 && ty < row0 + rows) f->z_target[i] = zi[ty - row0];
  }
}

/* d_logits of the tile (see the top), rounded to the input dtype, as the kernel stores the d_logits
 * tile in the input format before the two backward GEMMs. Overwrites z. */
static void chunk_dlogits(fused_host *f, int r, int64_t t0, int64_t t1, int64_t row0, int64_t rows) {
  const lce_case *c = f->c;
  LCE_PARALLEL_FOR_IF((t1 - t0) * rows * 16 >= LCE_PARALLEL_MIN_MACS)
  for (int64_t i = t0; i < t1; i++) {
    float *zi = f->z + (i - t0) * rows;
    if (!token_valid(f, i)) { /* ignored tokens are masked, whatever their logits */
      for (int64_t j = 0; j < rows; j++) zi[j] = 0.0f;
      continue;
    }
    const int64_t y = f->labels[i], ty = target_row(f, r, y);
    const float wy = f->plan.one_minus_e * class_w(f, y), g = f->dl[i], lse = f->lse[i];
    float k = wy;
    if (f->plan.ev != 0.0f) k += f->smooth_a[i];
    if (f->plan.lambda != 0.0f) k += 2.0f * f->plan.lambda * lse;
    for (int64_t j = 0; j < rows; j++) {
      const float z = zi[j];
      float t = expf(z - lse) * k;
      if (row0 + j == ty) t -= wy;
      if (f->plan.ev != 0.0f) t -= f->plan.ev * class_w(f, row0 + j);
      float dz = g * t;
#if defined(LCE_MUTANT_SOFTCAP_NO_DERIVATIVE)
      /* The softcap's derivative 1 - tanh^2 is left out of the backward: d_logits are taken as the
       * gradient of the capped logits z, not of the GEMM output s. */
#else
      if (f->plan.cap > 0.0f) {
        float q = z / f->plan.cap;
        dz *= 1.0f - q * q;
      }
#endif
      zi[j] = gemm_operand(f, (float)lce_round_to(c->dtype, (double)dz));
    }
  }
}

/* One addition into the d_hidden accumulation buffer (a chunk's GEMM, alpha·partial, into its
 * shard's buffer, or a shard into the all-reduced total with alpha = 1). The buffer is fp32:
 * rounding it to bf16 after every chunk is what made d_hidden's error grow with the chunk count
 * upstream. */
static float dhidden_accumulate(lce_dtype dtype, float buffer, float alpha, float addend) {
  float sum = lce_gemm_epilogue(alpha, addend, buffer);
#if defined(LCE_MUTANT_BF16_DHIDDEN_ACCUM)
  /* Megatron-LM PR #2739, seed bug 2: d_hidden += d_logits_chunk @ W_chunk held in the input
   * dtype, so every chunk's addition (and every reduction step) rounded the buffer to bf16. */
  sum = (float)lce_round_to(dtype, (double)sum);
#else
  (void)dtype;
#endif
  return sum;
}

/* dh_shard += alpha · ds · W_chunk for the valid tokens of [t0, t1): the chunk's partial is its own
 * fp32-accumulate GEMM (over the chunk's rows in order), added to the shard buffer once per
 * element by the epilogue. Ignored tokens' partials stay exactly 0. */
static void chunk_dhidden(fused_host *f, int64_t t0, int64_t t1, int64_t rows) {
  const int64_t h = f->c->h;
  LCE_PARALLEL_FOR_IF((t1 - t0) * rows * h >= LCE_PARALLEL_MIN_MACS)
  for (int64_t i = t0; i < t1; i++) {
    float *part = f->dh_part + (i - t0) * h;
    const float *ds = f->z + (i - t0) * rows;
    if (token_valid(f, i)) lce_gemm_dots(f->arch, f->fmt, 0.0f, ds, 1, f->w_chunk, h, 1, rows, h, part);
    else
      for (int64_t k = 0; k < h; k++) part[k] = 0.0f;
  }
  for (int64_t e = 0; e < (t1 - t0) * h; e++)
    f->dh_shard[e] = dhidden_accumulate(f->c->dtype, f->dh_shard[e], f->alpha, f->dh_part[e]);
}

/* gradW[row0+j] += alpha · ds[:, j]^T · hidden over the tokens of [t0, t1): per row an
 * fp32-accumulate GEMM over the tokens in order (hidden rows scaled by rho under reduction none),
 * ignored tokens taking part as zero d_logits and zero hidden rows (as fused-cuda zeroes them: they
 * occupy positions of K, and 0·0 adds nothing to an fmaf chain that starts from +0), then ADDED by
 * the epilogue into the fp32 gradient buffer (which holds the prior gradient, or the embedding
 * lookup's when tied) once per element and token chunk. */
static void chunk_dweight(fused_host *f, int64_t t0, int64_t t1, int64_t row0, int64_t rows) {
  const int64_t h = f->c->h;
  LCE_PARALLEL_FOR_IF(rows * h * (t1 - t0) >= LCE_PARALLEL_MIN_MACS)
  for (int64_t j = 0; j < rows; j++) {
    float *dst = f->grad_w + (row0 + j) * h;
#if defined(LCE_MUTANT_DWEIGHT_DTYPE_ACROSS_TOKEN_CHUNKS)
    dst = f->gw_dtype + (row0 + j) * h; /* the mutant's buffer in the weight's dtype (below) */
#endif
    float g8[8]; /* the GEMM results of columns k - k % 8 .. + 7, computed together (lce_gemm_dots) */
    for (int64_t k = 0; k < h; k++) {
      if (k % 8 == 0) lce_gemm_dots(f->arch, f->fmt, 0.0f, f->z + j, rows, f->hidden_dw + t0 * h + k, h, 1, t1 - t0, h - k < 8 ? h - k : 8, g8);
      const float g = g8[k % 8];
#if defined(LCE_MUTANT_DWEIGHT_DTYPE_ACROSS_TOKEN_CHUNKS)
      /* Liger-Kernel fused_linear_cross_entropy: grad_weight = zeros_like(weight) in the weight's
       * dtype, grad_weight += grad_logits_chunk^T @ input_chunk per token chunk (rounded every
       * time), only added to the fp32 gradient at the end (backward()). */
      dst[k] = (float)lce_round_to(f->c->dtype, (double)lce_gemm_epilogue(f->alpha, g, dst[k]));
#elif defined(LCE_MUTANT_TIED_GRAD_OVERWRITTEN)
      /* The tied embedding's gradient buffer is written with = (a copy into main_grad) instead of
       * +=: the embedding lookup's gradient (and earlier token chunks) is lost. */
      dst[k] = f->c->tied ? f->alpha * g : lce_gemm_epilogue(f->alpha, g, dst[k]);
#else
      dst[k] = lce_gemm_epilogue(f->alpha, g, dst[k]);
#endif
    }
  }
}

/* ---- launchers: token chunks, shards, vocab chunks ----------------------------------------- */

typedef enum pass { PASS_FORWARD, PASS_BACKWARD } pass;

/* Walks the tiles in kernel order: token chunks, then shards in rank order, then vocab chunks. */
static void run_pass(fused_host *f, pass p) {
  const lce_case *c = f->c;
  const int64_t h = c->h;
  for (int64_t t0 = 0; t0 < c->n; t0 += f->plan.tok_max) {
    const int64_t t1 = t0 + f->plan.tok_max < c->n ? t0 + f->plan.tok_max : c->n;
    for (int r = 0; r < c->tp; r++) {
      int64_t lo, hi;
      shard_real_rows(c, r, &lo, &hi);
      for (int64_t e = 0; p == PASS_BACKWARD && e < (t1 - t0) * h; e++) f->dh_shard[e] = 0.0f;
      for (int64_t row0 = lo, end = chunks_end(c, lo, hi); row0 < end; row0 += c->vocab_chunk) {
        const int64_t rows = hi - row0 < c->vocab_chunk ? hi - row0 : c->vocab_chunk;
        chunk_load(f, row0, rows);
        chunk_logits(f, t0, t1, rows);
        if (p == PASS_FORWARD) {
          chunk_online_softmax(f, r, t0, t1, row0, rows);
        } else {
          chunk_dlogits(f, r, t0, t1, row0, rows);
          chunk_dhidden(f, t0, t1, rows);
          chunk_dweight(f, t0, t1, row0, rows);
        }
      }
      for (int64_t e = 0; p == PASS_BACKWARD && e < (t1 - t0) * h; e++)
        f->dh_total[t0 * h + e] = dhidden_accumulate(c->dtype, f->dh_total[t0 * h + e], 1.0f, f->dh_shard[e]);
    }
  }
}

/* Shard statistics → lse and the smoothing sums A, B, as vocab-parallel ranks all-reduce them: the
 * max first, then the sums rescaled to it, in rank order. A shard without real rows (s_r = 0)
 * contributes exactly 0; an all-NaN shard (m_r = -inf, s_r = NaN) contributes its NaN. */
static void merge_shards(fused_host *f) {
  const int64_t n = f->c->n;
  for (int64_t i = 0; i < n; i++) {
    float M = -INFINITY, S = 0.0f, A = 0.0f, B = 0.0f;
    for (int r = 0; r < f->c->tp; r++) M = fmaxf(M, f->m[(int64_t)r * n + i]);
    for (int r = 0; r < f->c->tp; r++) {
      const int64_t at = (int64_t)r * n + i;
      const float m_r = f->m[at], s_r = f->s[at];
      if (s_r == 0.0f) continue;
#if defined(LCE_MUTANT_SHARD_MERGE_NO_RESCALE)
      /* Ranks all-reduce their sums as they are, each relative to its own max, not to the global
       * max: S mixes exponentials of different scales. */
      S += s_r;
#else
      S += s_r * expf(m_r - M);
#endif
      if (f->plan.ev != 0.0f) {
        A += f->plan.ev * f->sw[at];
        B += f->plan.ev * (f->d[at] + f->sw[at] * (M - m_r));
      }
    }
    f->lse[i] = M + logf(S);
    f->smooth_a[i] = A;
    f->smooth_b[i] = B + A * logf(S);
  }
}

static void forward(fused_host *f) {
  const lce_case *c = f->c;
  float m0 = -INFINITY;
#if defined(LCE_MUTANT_RUNNING_MAX_ZERO_INIT)
  /* The running max starts at 0 instead of -inf: a row whose logits are all below about -87 sums
   * exp(z - 0), which underflows to 0, and log(0) = -inf reaches lse, the loss and the gradients. */
  m0 = 0.0f;
#endif
  for (int64_t e = 0; e < (int64_t)c->tp * c->n; e++) f->m[e] = m0, f->s[e] = f->sw[e] = f->d[e] = 0.0f;
  for (int64_t i = 0; i < c->n; i++) f->z_target[i] = 0.0f;
  run_pass(f, PASS_FORWARD);
  merge_shards(f);
}

/* sum_n W_n, the mean's divisor (lce_fused_plan.h). */
static float token_weight_sum(const fused_host *f) {
#if defined(LCE_MUTANT_MEAN_COUNTS_IGNORED)
  /* The mean divides by every token (labels.numel()), ignored ones included. */
  float sum = 0.0f;
  for (int64_t i = 0; i < f->c->n; i++) sum += token_valid(f, i) ? class_w(f, f->labels[i]) : 1.0f;
  return sum;
#else
  return lce_fused_weight_sum(f->c, f->in);
#endif
}

/* Per-token loss gradient g (lce_case.h), in fp32 as the kernel receives it. */
static void loss_gradient(fused_host *f) {
  const lce_case *c = f->c;
  lce_fused_loss_gradient(c, f->in, f->weight_sum, f->g);
#if defined(LCE_MUTANT_MEAN_EMPTY_NAN)
  /* PyTorch cross_entropy(reduction='mean') semantics copied into a fused kernel: the mean divides
   * by sum_n W_n even when it is 0. */
  if (c->reduction == LCE_RED_MEAN)
    for (int64_t i = 0; i < c->n; i++) f->g[i] = token_valid(f, i) ? f->in->grad_output[0] / f->weight_sum : 0.0f;
#elif defined(LCE_MUTANT_GRAD_OUTPUT_AFTER_SUM)
  /* Reduction none: grad_output treated as a scalar applied to gradients already summed over
   * tokens (Liger-Kernel's backward scaled precomputed grads by grad_output): every token gets
   * grad_output[0]. */
  for (int64_t i = 0; i < c->n; i++) f->g[i] = token_valid(f, i) ? f->in->grad_output[0] : 0.0f;
#endif
  lce_fused_grad_split(c, f->in, f->g, f->dl, f->rho, &f->alpha);
#if defined(LCE_MUTANT_MEAN_FACTOR_IN_DLOGITS)
  /* What every bf16 fused kernel in conformance/EXTERNAL.md does: the whole g (grad_output /
   * n_valid under mean) is folded into d_logits before they are rounded to the input dtype, so the
   * label term -g(1 - p_y) of every token carries the same relative rounding error of g. */
  for (int64_t i = 0; i < c->n; i++) f->dl[i] = f->g[i], f->rho[i] = 1.0f;
  f->alpha = 1.0f;
#endif
}

/* hidden as the weight-gradient GEMMs read it: ignored tokens' rows 0, every other row scaled by
 * its rho and rounded to the dtype (then tf32) as fused-cuda's scaled copy is; rho = 1 leaves it. */
static void scale_hidden_rows(fused_host *f) {
  const lce_case *c = f->c;
  for (int64_t e = 0; e < c->n * c->h; e++) {
    const int64_t i = e / c->h;
    float x = token_valid(f, i) ? f->hidden[e] : 0.0f;
    if (f->rho[i] != 1.0f) x = gemm_operand(f, (float)lce_round_to(c->dtype, (double)(f->rho[i] * x)));
    f->hidden_dw[e] = x;
  }
}

static void backward(fused_host *f) {
  const lce_case *c = f->c;
  scale_hidden_rows(f);
  for (int64_t e = 0; e < c->n * c->h; e++) f->dh_total[e] = 0.0f;
  run_pass(f, PASS_BACKWARD);
#if defined(LCE_MUTANT_DWEIGHT_DTYPE_ACROSS_TOKEN_CHUNKS)
  for (int64_t e = 0; e < c->v * c->h; e++) f->grad_w[e] = f->grad_w[e] + f->gw_dtype[e];
#endif
}

/* ---- dispatcher ---------------------------------------------------------------------------- */

/* Picks the output weight and the gradient buffer it owns (lce_case.h): the embedding table and
 * grad_embedding when tied, the separate weight and grad_weight when untied. */
static void select_output_weight(fused_host *f, const lce_tensors *in, lce_outputs *out) {
  int use_embedding = f->c->tied;
#if defined(LCE_MUTANT_TIED_WEIGHT_WHEN_UNTIED)
  /* Megatron-LM PR #2739, seed bug 1: the fused loss took the input embedding matrix as the output
   * weight even with untied embeddings, so the output layer's weight got no gradient at all. */
  use_embedding = 1;
#endif
  f->w = use_embedding ? in->embedding : in->weight;
  f->grad_w = use_embedding ? out->grad_embedding : out->grad_weight;
}

/* Tile sizes and the option constants as fp32 kernel arguments (lce_fused_plan.h). */
static void make_plan(fused_host *f) {
  lce_fused_plan_make(&f->plan, f->c);
#if defined(LCE_MUTANT_SMOOTHING_PER_SHARD_VOCAB)
  /* Megatron-LM tensor_parallel cross_entropy: the smoothing mean is taken over the partition's
   * logits (vocab_size = exp_logits.size(-1) = padded vocab / tp), not over the global vocab. */
  f->plan.ev = (float)(lce_case_smoothing(f->c) / (double)(f->c->vp / f->c->tp));
#endif
}

static lce_code workspace_alloc(fused_host *f, lce_status *st) {
  const lce_case *c = f->c;
  const size_t n = (size_t)c->n, h = (size_t)c->h, rows = (size_t)f->plan.rows_max, tok = (size_t)f->plan.tok_max;
  const size_t tpn = (size_t)c->tp * n;
  size_t total = 3 * n * h + 2 * tok * h + rows * h + tok * rows + 4 * tpn + 7 * n;
#if defined(LCE_MUTANT_DWEIGHT_DTYPE_ACROSS_TOKEN_CHUNKS)
  total += (size_t)(c->vp * c->h);
#endif
  f->block_ = calloc(total, sizeof(float));
  LCE_CHECK(st, f->block_ != NULL, LCE_ENOMEM, "fused-host: out of memory for a %zu-float workspace", total);
  float *p = f->block_;
  f->hidden = p, p += n * h;
  f->hidden_dw = p, p += n * h;
  f->dh_total = p, p += n * h;
  f->dh_part = p, p += tok * h;
  f->dh_shard = p, p += tok * h;
  f->w_chunk = p, p += rows * h;
  f->z = p, p += tok * rows;
  f->m = p, p += tpn;
  f->s = p, p += tpn;
  f->sw = p, p += tpn;
  f->d = p, p += tpn;
  f->z_target = p, p += n;
  f->lse = p, p += n;
  f->smooth_a = p, p += n;
  f->smooth_b = p, p += n;
  f->g = p, p += n;
  f->dl = p, p += n;
  f->rho = p, p += n;
#if defined(LCE_MUTANT_DWEIGHT_DTYPE_ACROSS_TOKEN_CHUNKS)
  f->gw_dtype = p;
#endif
  return LCE_OK;
}

/* loss_token, lse and the reduced loss. An ignored token's loss is exactly 0 whatever its lse. */
static void write_forward_outputs(const fused_host *f, lce_outputs *out) {
  const lce_case *c = f->c;
  for (int64_t i = 0; i < c->n; i++) {
    float loss_i = 0.0f;
    if (token_valid(f, i)) {
      const float lse = f->lse[i];
      loss_i = f->plan.one_minus_e * class_w(f, f->labels[i]) * (lse - f->z_target[i]);
      if (f->plan.ev != 0.0f) loss_i += f->smooth_b[i];
      if (f->plan.lambda != 0.0f) loss_i += f->plan.lambda * lse * lse;
    }
    out->loss_token[i] = loss_i;
    out->lse[i] = f->lse[i];
  }
  out->loss[0] = lce_fused_loss(c, out->loss_token, f->weight_sum);
#if defined(LCE_MUTANT_MEAN_EMPTY_NAN)
  /* The mean's division without the empty-batch case (see loss_gradient): 0/0 = NaN when every
   * token is ignored. */
  if (c->reduction == LCE_RED_MEAN) out->loss[0] = lce_fused_loss_total(c, out->loss_token) / f->weight_sum;
#endif
}

/* The GEMMs' model and operand format for case c under arch: plain fp32 GEMMs run on CUDA cores
 * (ieee) whatever the architecture; tf32 GEMMs read fp32 registers as tf32. */
static void select_gemm_model(fused_host *f, const lce_gemm_arch *arch) {
  const lce_case *c = f->c;
  f->fmt = c->dtype == LCE_BF16 ? LCE_MMA_BF16 : (c->dtype == LCE_FP16 ? LCE_MMA_FP16 : LCE_MMA_TF32);
  f->arch = c->dtype == LCE_FP32 && c->gemm != LCE_GEMM_TF32 ? lce_gemm_arch_find("ieee") : arch;
}

/* The run under one GEMM arithmetic model (see the top). */
static lce_code fused_host_run(const lce_gemm_arch *arch, const lce_case *c, const lce_tensors *in, lce_outputs *out,
                               lce_status *st) {
  LCE_TRY(lce_case_validate(c, st));
  LCE_TRY(lce_tensors_validate(c, in, st));
  LCE_TRY(lce_fused_check_outputs(c, out, "fused-host", st));
  fused_host f = {.c = c, .in = in, .labels = in->labels};
  select_gemm_model(&f, arch);
  make_plan(&f);
  LCE_TRY(workspace_alloc(&f, st));
  /* From here on nothing can fail: outputs are written only after every allocation succeeded. */
  select_output_weight(&f, in, out);
  f.weight_sum = token_weight_sum(&f);
  for (int64_t e = 0; e < c->n * c->h; e++)
    f.hidden[e] = gemm_operand(&f, (float)lce_load(c->dtype, in->hidden, (size_t)e));
  forward(&f);
  write_forward_outputs(&f, out);
  loss_gradient(&f);
  backward(&f);
  for (int64_t e = 0; e < c->n * c->h; e++) /* the remainder of g, in fp32, then the dtype */
    lce_store(c->dtype, out->d_hidden, (size_t)e, (double)(f.rho[e / c->h] * f.dh_total[e]));
  free(f.block_);
  return LCE_OK;
}

lce_code LCE_FUSED_HOST_RUN(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st) {
  return fused_host_run(lce_gemm_arch_find("ieee"), c, in, out, st);
}

#if !FUSED_HOST_IS_MUTANT /* mutants export only their own run symbol */
lce_code lce_fused_host_sm90_run(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st) {
  return fused_host_run(lce_gemm_arch_find("sm90"), c, in, out, st);
}
#endif
