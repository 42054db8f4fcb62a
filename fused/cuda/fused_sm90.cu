/* fused_sm90.cu — fused-sm90: fused linear cross-entropy on Hopper with the logits consumed inside the
 * logits GEMM's epilogue (fused_sm90_gemm.cu, CUTLASS/CuTe sm_90a).
 * Same math as fused-host and fused-cuda (lce_case.h), same plan (lce_fused_plan.h), same g split
 * (lce_fused_grad_split: no 1/n_valid bias), same run() around the passes (fused_cuda_run_passes:
 * validation, uploads, downloads, the output weight selected as fused-cuda selects it).
 *   forward   per shard one GEMM over the shard's real rows with the FS_STATS epilogue (no logits in
 *             memory, no vocab chunks: partials of up to 32 vocab ranges per token), the ranges folded
 *             in order into the shard statistics, fused-cuda's merge kernel for lse and loss_token.
 *   backward  per backward token chunk (the case's, else LCE_FUSED_SM90_TOKEN_CHUNK tokens), shard and
 *             vocab chunk: the logits recomputed by the same GEMM with the FS_DLOGITS epilogue writing
 *             d_logits in the dtype (with dl, the exact part of g); then cuBLAS, as fused-cuda:
 *             d_hidden_chunk += alpha·d_logits·W_chunk into an fp32 buffer of one token chunk (beta = 1:
 *             fp32 accumulation across vocab chunks and shards, the seed bug's fix), grad_W[chunk] +=
 *             alpha·d_logits^T·hidden (beta = 1, fp32); the chunk's d_hidden scaled by rho in fp32 and
 *             rounded to the dtype when its last vocab chunk is done.
 * Coverage: bf16, fp16 and fp32 with tf32 GEMMs (the logits GEMM's wgmma in tf32 on the operands the
 * run rounded to tf32 as fused-cuda does, d_logits rounded to tf32, cuBLAS's FAST_TF32 backward GEMMs);
 * every option and semantic of the plan (tied/untied, tp, padding, every reduction, smoothing, z-loss,
 * softcap, class weights, token chunks, prior gradients, non-finite inputs); h not a multiple of 8
 * through zero-padded copies of hidden and W (TMA needs 16-byte row strides). IEEE fp32 GEMMs have no
 * tensor-core instruction on Hopper: those cases run fused-cuda's passes (fs_passes).
 *
 * Extra device memory beyond inputs and outputs (what the bench reports): the d_logits tile
 * tok_chunk·vocab_chunk·es, the fp32 d_hidden chunk tok_chunk·h·4, partials 32·n·16, statistics
 * tp·n·16 + n·8, cuBLAS's workspace FS_CUBLAS_WORKSPACE_MIB = 8 MiB; at (8192, 4096, 128256) with vocab
 * chunks of 8192 and token chunks of 2048: 33.6 + 33.6 + 4.2 + 0.2 + 8.4 MB = 0.080 GB (with cuBLAS's
 * own 32 MiB: 0.105 GB, or 0.071 GB at token chunks of 1024, 11% slower; fused-cuda: 0.57 GB, its fp32
 * logits tile and an n·h fp32 d_hidden buffer).
 *
 * The target's arithmetic (<= 1.15x the three-GEMM floor F, 3 GEMMs of 2·N·H·V flops, and <= 0.1 GB
 * extra). d_logits = g·(softmax - onehot) need lse, and lse needs the token's whole vocab
 * row, so a kernel either keeps a row's logits until its lse is known or computes them twice:
 *  - recompute (this subject, fused-cuda, Megatron-LM PR 3345: forward 15.0 ms ~ one GEMM, backward
 *    41.5 ms ~ three; Cut Cross-Entropy): four GEMMs, 4/3 F = 1.33x at the floor's GEMM efficiency,
 *    in any memory. 1.15x needs the four at 1.16x cuBLAS's rate: ~850 of the H200's 989 dense bf16
 *    TFLOP/s, where cuBLAS runs these shapes at 700-770;
 *  - keep (Liger-Kernel: token chunks of T tokens over the whole vocab, the gradients computed inside
 *    the forward from the chunk's stored logits): three GEMMs, but T·V logits held (fp32 for a
 *    reference kernel: bf16 logits put a relative error of |z|·2^-9 into p) and one weight-gradient
 *    GEMM of inner size T per chunk, whose fp32 C (V·H·4 bytes, read and written) hides under its
 *    2·T·V·H flops only when T >= 4·R/B = 4·7e14/4.25e12 ~ 660 tokens: >= 0.34 GB of fp32 logits at
 *    V = 128256. Within 0.1 GB, T ~ 195: 42 chunks whose re-accumulation moves 176 GB, ~41 ms on its own,
 *    ~1.8x F in all. Liger's measured 1.11x at (16384, 8192, 152064) (V/H: 19 chunks, 0.31 GB of bf16
 *    logits) and 1.55x at (8192, 4096, 128256) (32 chunks) fit this.
 * Both targets at once are therefore out of reach at (8192, 4096, 128256) for either family at
 * cuBLAS-class GEMM efficiency. At (16384, 8192, 152064) the token chunks cost more: the backward is the
 * recomputed logits (~59 ms, the forward's GEMM) + the two gradient GEMMs (the floor's backward, ~136 ms)
 * + the fp32 weight gradient (5.0 GB) read and written once per token chunk, 8 chunks of 2048 where one
 * pass would do: 70 GB more, ~21 ms at the H100's 3.35 TB/s; ~216 ms against 209 measured (H100), where
 * fused-cuda's backward (one token chunk, an n·h fp32 d_hidden of 0.54 GB) takes 185. A chunk of T tokens
 * adds 8·V·H bytes per 6·T·V·H flops of GEMM, 1.33·R/(T·B) of the GEMM time, whatever the shape (R the
 * GEMM rate, B the bandwidth: with the floor's 640 TFLOP/s at this shape, 12% at T = 2048, 6% at 4096). What approaches them: (a) keep with T ~ 700-1000 fp32 (0.36-0.5 GB):
 * ~1.1x at 4-5x the memory target (a chunk's d_hidden is complete, no n·h accumulator); (b) recompute at
 * FlashAttention-3-class efficiency within 0.1 GB: pingpong consumer warp groups (one group's softmax
 * epilogue under the other's wgmma), a persistent tile scheduler, 2x1 clusters multicasting W tiles,
 * and a backward kernel that keeps each recomputed tile on chip (d_logits as the register A operand of
 * the d_hidden wgmma; d_weight with its W tile stationary over token tiles, written once) — 1.2-1.3x
 * at best. The target's 1.15x of three GEMMs and 0.1 GB cannot both hold without a GEMM faster than
 * cuBLAS's by 16%. For the same reason no kernel within 0.1 GB outruns a peer that keeps all N·V logits in
 * bf16 (torch.compile, TransformerEngine's parallel cross-entropy: 2-12 GB at these shapes): three GEMMs
 * at cuBLAS's rate plus fused elementwise passes, 1.04-1.22x F (conformance/EXTERNAL.md), bought with
 * the bf16 logits' error in every forward output.
 *
 * Build: fused/cuda/cuda.cmake (LCE_WITH_SM90). Run: build/lcecheck check --subject fused-sm90;
 * build/lcecheck bench (fused-sm90's row beside fused-cuda's). Versions: 1 (this), and one mutant per
 * LCE_MUTANT_SM90_* switch below, each its own subject "mutant-sm90/<name>" (golden class fused-cuda,
 * built with mutants only): the seed bugs and the mean factor in this subject's own code —
 *   bf16-dhidden-accum      the d_hidden chunk buffer in the dtype: cuBLAS rounds it after every vocab
 *                           chunk's beta = 1 GEMM (Megatron-LM PR #2739, seed bug 2);
 *   running-max-zero-init   the FS_STATS epilogue's running max from 0 (fused_sm90_gemm.cu's FS_STATS
 *                           kernels compiled again in a namespace of its own; its d_logits GEMM is
 *                           production's): rows whose logits are all below -87 sum only underflowed
 *                           exps, lse = -inf;
 *   mean-factor-in-dlogits  fs_passes folds the whole g into d_logits (dl = g, alpha = rho = 1) instead of
 *                           the split, as every bf16 peer of conformance/EXTERNAL.md does.
 * Seed bug 1 (the embedding table as the output weight when untied) is not one of them: the output
 * weight is selected by fused-cuda's run() that both subjects share (fused_cuda_run_passes), whose
 * line mutant-cuda/tied-weight-when-untied already reproduces. */
#define LCE_CUDA_WHO "fused-sm90" /* its failures name it (fused_cuda_kernels.cuh) */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fused_cuda_driver.cuh"
#include "fused_sm90_gemm.cuh"

extern "C" {
#include "fused_cuda.h"
#include "fused_sm90.h"
#include "lce_fused_plan.h"
}

using namespace lce_fs; /* the GEMM's launchers (a mutant's own namespace when LCE_FS_NS is set) */

/* ---- build variant ---------------------------------------------------------------------------- */
#if (defined(LCE_MUTANT_SM90_BF16_DHIDDEN_ACCUM) + defined(LCE_MUTANT_SM90_RUNNING_MAX_ZERO_INIT) + \
     defined(LCE_MUTANT_SM90_MEAN_FACTOR_IN_DLOGITS)) > 1
#error "one LCE_MUTANT_SM90_* switch per build"
#endif
#if defined(LCE_MUTANT_SM90_RUNNING_MAX_ZERO_INIT) && !defined(LCE_FS_NS)
#error "running-max-zero-init lives in fused_sm90_gemm.cu: build both sources with LCE_FS_NS (cuda.cmake)"
#endif

/* ---- workspace ------------------------------------------------------------------------------- */

typedef struct fs_workspace {
  cublasHandle_t blas;
  cudaStream_t stream;
  lce_fused_plan plan;
  fc_options o;
  int64_t tok_chunk;   /* tokens per backward chunk */
  int pingpong;        /* the logits GEMM's schedule (fs_schedule_env) */
  int64_t ld;          /* the GEMM operands' row stride: h rounded up to 8 */
  void *hidden_pad;    /* [n x ld], [vp x ld]: zero-padded copies when h % 8 != 0, else NULL */
  void *w_pad;
  float *partial;      /* [splits_max x n x 4] */
  void *ds;            /* [tok_chunk x rows_max] dtype */
  void *dh_acc;        /* [tok_chunk x h] in dh_dtype */
  lce_dtype dh_dtype;  /* fp32 (the policy) */
  void *hidden_dw;     /* [tok_chunk x h] dtype: hidden rows scaled by rho (reduction none) */
  fc_stats stats;      /* [tp x n] each */
  float *z_target, *smooth_a;
  int *layout_error;   /* the GEMM epilogue's layout check (fused_sm90_gemm.cu) */
  float *g_folded;     /* mutant-sm90/mean-factor-in-dlogits only: [2 x n] g, then ones (fs_passes) */
  void *blas_ws;
  size_t bytes;
} fs_workspace;

/* fused-sm90's cuBLAS workspace (unless $LCE_CUBLAS_WORKSPACE_MIB sets one): 8 MiB rather than the 32 cuBLAS
 * keeps on Hopper. Its two backward GEMMs per chunk (inner sizes 8192 and 2048) ran as fast with 8 and 2 MiB
 * as with 32 at (8192, 4096, 128256) on an H100 (bench /floor 1.61x, 1.59x, 1.60x), and the 24 MiB saved
 * are a quarter of the 0.1 GB extra-memory target. */
#define FS_CUBLAS_WORKSPACE_MIB 8

#define FS_ALLOC(ws, ptr, size, what) \
  LCE_TRY(lce_cuda_alloc((void **)(ptr), (size), (what), &(ws)->bytes, "fused-sm90", st))

/* $LCE_FUSED_SM90_TOKEN_CHUNK: unset (0), a positive number of tokens (the bench's memory/speed
 * trade-off without a rebuild), or anything else (-1: the workspace refuses it). */
static int64_t fs_token_chunk_env(void) {
  const char *env = getenv("LCE_FUSED_SM90_TOKEN_CHUNK");
  if (env == NULL) return 0;
  char *end;
  errno = 0;
  const long long v = strtoll(env, &end, 10);
  return end != env && *end == '\0' && errno == 0 && v > 0 ? v : -1;
}

/* The case's token chunk, else the environment's (above), else LCE_FUSED_SM90_TOKEN_CHUNK tokens. */
static int64_t fs_token_chunk(const lce_case *c) {
  if (c->token_chunk > 0 && c->token_chunk < c->n) return c->token_chunk;
  const int64_t env = fs_token_chunk_env();
  const int64_t chunk = env > 0 ? env : LCE_FUSED_SM90_TOKEN_CHUNK;
  return c->n < chunk ? c->n : chunk;
}

/* $LCE_FUSED_SM90_SCHEDULE: the consumer warp groups' schedule of the logits GEMM
 * (fused_sm90_gemm_config.cuh): unset or "cooperative" 0, "pingpong" 1, anything else -1 (refused).
 * Both compute the same outputs; the variable lets the bench time one against the other. */
static int fs_schedule_env(void) {
  const char *env = getenv("LCE_FUSED_SM90_SCHEDULE");
  if (env == NULL || strcmp(env, "cooperative") == 0) return 0;
  return strcmp(env, "pingpong") == 0 ? 1 : -1;
}

/* What the subject refuses before it touches a device: a malformed $LCE_FUSED_SM90_TOKEN_CHUNK or
 * $LCE_FUSED_SM90_SCHEDULE. */
static lce_code fs_check_env(lce_status *st) {
  LCE_CHECK(st, fs_token_chunk_env() >= 0, LCE_EINVAL, "fused-sm90: LCE_FUSED_SM90_TOKEN_CHUNK=%s is not a positive "
            "number of tokens", getenv("LCE_FUSED_SM90_TOKEN_CHUNK"));
  LCE_CHECK(st, fs_schedule_env() >= 0, LCE_EINVAL, "fused-sm90: LCE_FUSED_SM90_SCHEDULE=%s is neither cooperative nor "
            "pingpong", getenv("LCE_FUSED_SM90_SCHEDULE"));
  return LCE_OK;
}

static lce_code fs_workspace_create(fs_workspace *ws, const lce_case *c, cudaStream_t stream, lce_status *st) {
  memset(ws, 0, sizeof *ws);
  ws->stream = stream;
  LCE_TRY(fs_check_env(st));
  lce_fused_plan_make(&ws->plan, c);
  ws->o = fc_make_options(c, &ws->plan);
  ws->tok_chunk = fs_token_chunk(c);
  ws->pingpong = fs_schedule_env();
  ws->ld = (c->h + 7) / 8 * 8;
  ws->dh_dtype = LCE_FP32;
#if defined(LCE_MUTANT_SM90_BF16_DHIDDEN_ACCUM)
  /* Megatron-LM PR #2739, seed bug 2: d_hidden += d_logits_chunk @ W_chunk accumulated in a buffer of
   * the input dtype: cuBLAS rounds it to bf16/fp16 after every vocab chunk's beta = 1 GEMM. */
  ws->dh_dtype = c->dtype;
#endif
  const size_t es = lce_dtype_size(c->dtype), n = (size_t)c->n, tpn = (size_t)c->tp * n; /* es: 4 for tf32 */
  const size_t tok = (size_t)ws->tok_chunk, h = (size_t)c->h;
  if (ws->ld != c->h) {
    FS_ALLOC(ws, &ws->hidden_pad, n * (size_t)ws->ld * es, "the padded hidden copy");
    FS_ALLOC(ws, &ws->w_pad, (size_t)c->vp * (size_t)ws->ld * es, "the padded weight copy");
  }
  int64_t splits = 1; /* the most ranges any shard's forward GEMM uses (not monotone in the shard's rows) */
  for (int r = 0; r < c->tp; r++) {
    int64_t lo, hi;
    lce_fused_shard_rows(c, r, &lo, &hi);
    if (hi > lo && fs_stats_splits(hi - lo) > splits) splits = fs_stats_splits(hi - lo);
  }
  FS_ALLOC(ws, (void **)&ws->partial, (size_t)splits * n * 4 * sizeof(float), "the vocab-range partials");
  FS_ALLOC(ws, &ws->ds, tok * (size_t)ws->plan.rows_max * es, "the d_logits tile");
  FS_ALLOC(ws, &ws->dh_acc, tok * h * lce_dtype_size(ws->dh_dtype), "the d_hidden chunk buffer");
  if (c->reduction == LCE_RED_NONE) FS_ALLOC(ws, &ws->hidden_dw, tok * h * es, "the scaled hidden rows");
  FS_ALLOC(ws, (void **)&ws->stats.m, 4 * tpn * sizeof(float), "the online statistics");
  ws->stats.s = ws->stats.m + tpn, ws->stats.sw = ws->stats.s + tpn, ws->stats.d = ws->stats.sw + tpn;
  FS_ALLOC(ws, (void **)&ws->z_target, 2 * n * sizeof(float), "the per-token values");
  ws->smooth_a = ws->z_target + n;
  FS_ALLOC(ws, (void **)&ws->layout_error, sizeof(int), "the layout flag");
  LCE_CUDA_CHECK(st, cudaMemsetAsync(ws->layout_error, 0, sizeof(int), stream));
  return fc_blas_create(&ws->blas, &ws->blas_ws, &ws->bytes, FS_CUBLAS_WORKSPACE_MIB, stream, "fused-sm90", st);
}

static void fs_workspace_destroy(fs_workspace *ws) {
  if (ws->blas) cublasDestroy(ws->blas);
  void *bufs[] = {ws->hidden_pad, ws->w_pad, ws->partial, ws->ds, ws->dh_acc, ws->hidden_dw,
                  ws->stats.m, ws->z_target, ws->layout_error, ws->g_folded, ws->blas_ws};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) cudaFree(bufs[i]);
  memset(ws, 0, sizeof *ws);
}

/* ---- the GEMMs ------------------------------------------------------------------------------- */

static const char *fs_at(const void *base, int64_t elems, lce_dtype t) {
  return (const char *)base + (size_t)elems * lce_dtype_size(t);
}

/* The logits GEMM's operands: the padded copies, or the tensors themselves when h % 8 == 0. */
static const void *fs_hidden(const fs_workspace *ws, const fc_problem *p) { return ws->hidden_pad ? ws->hidden_pad : p->hidden; }
static const void *fs_weight(const fs_workspace *ws, const fc_problem *p) { return ws->w_pad ? ws->w_pad : p->w; }

/* One logits GEMM: tokens [t0, t0+tok) against vocab rows [row0, row0+rows). */
static fs_gemm fs_gemm_make(const fs_workspace *ws, const fc_problem *p, int64_t t0, int64_t tok, int64_t row0,
                            int64_t rows) {
  const lce_case *c = p->c;
  fs_gemm g;
  memset(&g, 0, sizeof g);
  g.dtype = c->dtype;
  g.a = fs_at(fs_hidden(ws, p), t0 * ws->ld, c->dtype);
  g.b = fs_at(fs_weight(ws, p), row0 * ws->ld, c->dtype);
  g.m = tok, g.n = rows, g.k = ws->ld, g.token0 = t0, g.vocab0 = row0;
  g.tk = p->tk, g.o = ws->o;
  g.layout_error = ws->layout_error;
  g.pingpong = ws->pingpong;
  return g;
}

/* cuBLAS, column-major, in the case's dtype and compute type (fused-cuda's, fc_compute_type: tf32 on
 * tf32 operands), beta = 1; out in out_dtype (fp32: the policy). */
static lce_code fs_blas(fs_workspace *ws, const lce_case *c, cublasOperation_t op_a, cublasOperation_t op_b,
                        int64_t m, int64_t n, int64_t k, float alpha, const void *a, int64_t lda, const void *b,
                        int64_t ldb, void *out, lce_dtype out_dtype, int64_t ldc, lce_status *st) {
  LCE_CHECK(st, m <= INT32_MAX && n <= INT32_MAX && k <= INT32_MAX && lda <= INT32_MAX && ldb <= INT32_MAX &&
                    ldc <= INT32_MAX, LCE_EINVAL, "fused-sm90: GEMM dimension beyond int32");
  const cudaDataType t = fc_cuda_type(c->dtype), tc = fc_cuda_type(out_dtype);
  const float one = 1.0f;
  LCE_CUBLAS_CHECK(st, cublasGemmEx(ws->blas, op_a, op_b, (int)m, (int)n, (int)k, &alpha, a, t, (int)lda, b, t, (int)ldb,
                                    &one, out, tc, (int)ldc, fc_compute_type(c), CUBLAS_GEMM_DEFAULT));
  return LCE_OK;
}

/* ---- passes ---------------------------------------------------------------------------------- */

static lce_code fs_forward(fs_workspace *ws, const fc_problem *p, lce_status *st) {
  const lce_case *c = p->c;
  if (ws->hidden_pad) { /* the copies serve the backward too: it follows this forward on the same tensors */
    const size_t es = lce_dtype_size(c->dtype);
    LCE_TRY(fs_launch_pad_rows(p->hidden, ws->hidden_pad, es, c->n, c->h, ws->ld, ws->stream, st));
    LCE_TRY(fs_launch_pad_rows(p->w, ws->w_pad, es, c->vp, c->h, ws->ld, ws->stream, st));
  }
  LCE_TRY(fc_launch_stats_init(ws->stats, (int64_t)c->tp * c->n, ws->z_target, c->n, ws->stream, st));
  for (int r = 0; r < c->tp; r++) {
    int64_t lo, hi;
    lce_fused_shard_rows(c, r, &lo, &hi);
    if (hi <= lo) continue; /* a shard of padded rows only: its statistics stay empty */
    fs_gemm g = fs_gemm_make(ws, p, 0, c->n, lo, hi - lo);
    g.partial = ws->partial, g.z_target = ws->z_target;
    LCE_TRY(fs_launch_gemm(&g, FS_STATS, ws->stream, st));
    fc_stats shard = ws->stats;
    shard.m += (int64_t)r * c->n, shard.s += (int64_t)r * c->n, shard.sw += (int64_t)r * c->n, shard.d += (int64_t)r * c->n;
    LCE_TRY(fs_launch_combine_splits(ws->partial, fs_stats_splits(hi - lo), c->n, 0, shard, ws->stream, st));
  }
  return fc_launch_merge(ws->stats, c->tp, ws->z_target, p->tk, ws->o, p->lse, ws->smooth_a, p->loss_token, ws->stream,
                         st);
}

/* The backward of token chunk [t0, t0+tok): every shard's vocab chunks, then its d_hidden rows. */
static lce_code fs_backward_chunk(fs_workspace *ws, const fc_problem *p, int64_t t0, int64_t tok, lce_status *st) {
  const lce_case *c = p->c;
  const void *hidden_w = fs_at(p->hidden, t0 * c->h, c->dtype); /* the weight gradient's hidden rows */
  if (p->scale_rows) {
    LCE_CHECK(st, ws->hidden_dw != NULL, LCE_EINTERNAL, "fused-sm90: hidden rows to scale without a buffer");
    LCE_TRY(fc_launch_scale_rows(hidden_w, ws->hidden_dw, c->dtype, tok, c->h, p->rho + t0, ws->o.tf32, ws->stream,
                                 st));
    hidden_w = ws->hidden_dw;
  }
  LCE_CUDA_CHECK(st, cudaMemsetAsync(ws->dh_acc, 0, (size_t)(tok * c->h) * lce_dtype_size(ws->dh_dtype), ws->stream));
  for (int r = 0; r < c->tp; r++) {
    int64_t lo, hi;
    lce_fused_shard_rows(c, r, &lo, &hi);
    for (int64_t row0 = lo; row0 < hi; row0 += c->vocab_chunk) {
      const int64_t rows = hi - row0 < c->vocab_chunk ? hi - row0 : c->vocab_chunk;
      fs_gemm g = fs_gemm_make(ws, p, t0, tok, row0, rows);
      g.dl = p->dl, g.lse = p->lse, g.smooth_a = ws->smooth_a, g.ds = ws->ds, g.ld_ds = rows;
      LCE_TRY(fs_launch_gemm(&g, FS_DLOGITS, ws->stream, st));
      /* dh_acc [h x tok] (column-major) += alpha · W_chunk (h x rows) · ds^T (rows x tok) */
      LCE_TRY(fs_blas(ws, c, CUBLAS_OP_N, CUBLAS_OP_N, c->h, tok, rows, p->alpha, fs_at(p->w, row0 * c->h, c->dtype), c->h,
                      ws->ds, rows, ws->dh_acc, ws->dh_dtype, c->h, st));
      /* grad_W[chunk] [h x rows] += alpha · hidden^T (h x tok) · ds (tok x rows) */
      LCE_TRY(fs_blas(ws, c, CUBLAS_OP_N, CUBLAS_OP_T, c->h, rows, tok, p->alpha, hidden_w, c->h, ws->ds, rows,
                      p->grad_w + row0 * c->h, LCE_FP32, c->h, st));
    }
  }
  fc_tokens chunk = p->tk;
  chunk.labels += t0, chunk.n = tok;
  return fc_launch_finish_dhidden(ws->dh_acc, ws->dh_dtype, p->rho + t0, (void *)fs_at(p->d_hidden, t0 * c->h, c->dtype),
                                  c->dtype, c->h, chunk, ws->stream, st);
}

static lce_code fs_backward(fs_workspace *ws, const fc_problem *p, lce_status *st) {
  const lce_case *c = p->c;
  LCE_TRY(fc_launch_zero_ignored_rows(p->hidden, c->dtype, c->h, p->tk, ws->stream, st));
  for (int64_t t0 = 0; t0 < c->n; t0 += ws->tok_chunk)
    LCE_TRY(fs_backward_chunk(ws, p, t0, c->n - t0 < ws->tok_chunk ? c->n - t0 : ws->tok_chunk, st));
  return LCE_OK;
}

/* The epilogue's layout check: an error, never a silent wrong answer. */
static lce_code fs_check_layout(fs_workspace *ws, lce_status *st) {
  int bad = 0;
  LCE_CUDA_CHECK(st, cudaMemcpyAsync(&bad, ws->layout_error, sizeof bad, cudaMemcpyDeviceToHost, ws->stream));
  LCE_CUDA_CHECK(st, cudaStreamSynchronize(ws->stream));
  LCE_CHECK(st, bad == 0, LCE_EINTERNAL,
            "fused-sm90: the wgmma accumulator layout is not the one the epilogue assumes (fused_sm90_gemm.cu)");
  return LCE_OK;
}

#if defined(LCE_MUTANT_SM90_MEAN_FACTOR_IN_DLOGITS)
static __global__ void fs_fold_g_kernel(const float *dl, const float *rho, float alpha, int64_t n, float *g, float *one) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) g[i] = dl[i] * alpha * rho[i], one[i] = 1.0f;
}

/* What every bf16 fused kernel in conformance/EXTERNAL.md does: the whole g (grad_output / n_valid
 * under mean) folded into d_logits before they are rounded to the input dtype, so that the label term
 * -g(1 - p_y) of every token carries the same relative rounding error of g. *q: p with dl = g =
 * dl·alpha·rho (exact: dl is a power of two or g itself) and alpha = rho = 1. */
static lce_code fs_fold_g(fs_workspace *ws, const fc_problem *p, fc_problem *q, lce_status *st) {
  const int64_t n = p->c->n;
  FS_ALLOC(ws, (void **)&ws->g_folded, 2 * (size_t)n * sizeof(float), "the folded g");
  fs_fold_g_kernel<<<(unsigned)((n + 255) / 256), 256, 0, ws->stream>>>(p->dl, p->rho, p->alpha, n, ws->g_folded,
                                                                      ws->g_folded + n);
  LCE_CUDA_LAUNCH_CHECK(st, "fs_fold_g_kernel");
  *q = *p;
  q->dl = ws->g_folded, q->rho = ws->g_folded + n, q->alpha = 1.0f, q->scale_rows = 0;
  return LCE_OK;
}
#endif

static lce_code fs_passes(const fc_problem *p, cudaStream_t stream, lce_status *st) {
  /* IEEE fp32 GEMMs have no tensor-core instruction on Hopper (wgmma takes bf16, fp16, tf32, fp8): those
   * cases run fused-cuda's passes, cuBLAS with CUBLAS_COMPUTE_32F_PEDANTIC on the CUDA cores. */
  if (p->c->dtype == LCE_FP32 && p->c->gemm != LCE_GEMM_TF32) return fused_cuda_passes(p, stream, st);
  fs_workspace ws;
  lce_code rc = fs_workspace_create(&ws, p->c, stream, st);
#if defined(LCE_MUTANT_SM90_MEAN_FACTOR_IN_DLOGITS)
  fc_problem folded = *p;
  if (rc == LCE_OK) rc = fs_fold_g(&ws, p, &folded, st);
  p = &folded;
#endif
  if (rc == LCE_OK) rc = fs_forward(&ws, p, st);
  if (rc == LCE_OK) rc = fs_backward(&ws, p, st);
  if (rc == LCE_OK) rc = fs_check_layout(&ws, st);
  cudaStreamSynchronize(stream); /* nothing may still use the workspace freed below */
  fs_workspace_destroy(&ws);
  return rc;
}

/* ---- the subject ----------------------------------------------------------------------------- */

static lce_code fused_sm90_run(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st) {
  LCE_TRY(lce_case_validate(c, st));
  LCE_TRY(fs_check_env(st)); /* before the device query: a refusal wherever it runs */
  return fused_cuda_run_passes(c, in, out, fs_passes, "fused-sm90", st);
}

#define FS_CAPS (LCE_CAP_ALL_SEMANTICS | LCE_CAP_NEEDS_GPU)

#if defined(LCE_MUTANT_SM90_BF16_DHIDDEN_ACCUM)
extern "C" const lce_subject lce_mutant_sm90_bf16_dhidden_accum_subject = {
    "mutant-sm90/bf16-dhidden-accum", "fused-cuda",
    "Megatron-LM PR #2739 seed bug 2 in fused-sm90: each token chunk's d_hidden accumulated across vocab chunks "
    "and shards by cuBLAS (beta = 1) in a buffer of the input dtype instead of fp32",
    FS_CAPS | LCE_CAP_MUTANT, fused_sm90_run, lce_fused_sm90_inner, NULL, NULL, NULL, NULL};
#elif defined(LCE_MUTANT_SM90_RUNNING_MAX_ZERO_INIT)
extern "C" const lce_subject lce_mutant_sm90_running_max_zero_init_subject = {
    "mutant-sm90/running-max-zero-init", "fused-cuda",
    "fused-sm90's FS_STATS epilogue starts each row's running max at 0 instead of -inf: rows whose logits are "
    "all below -87 sum underflowed exps and get lse = -inf and non-finite losses and gradients",
    FS_CAPS | LCE_CAP_MUTANT, fused_sm90_run, lce_fused_sm90_inner, NULL, NULL, NULL, NULL};
#elif defined(LCE_MUTANT_SM90_MEAN_FACTOR_IN_DLOGITS)
extern "C" const lce_subject lce_mutant_sm90_mean_factor_in_dlogits_subject = {
    "mutant-sm90/mean-factor-in-dlogits", "fused-cuda",
    "fused-sm90 with the loss gradient g (grad_output / n_valid under mean) folded into the epilogue's d_logits "
    "before their rounding to the input dtype instead of the split (alpha and rho in fp32): d_hidden and d_weight "
    "scaled coherently by the rounding of g",
    FS_CAPS | LCE_CAP_MUTANT, fused_sm90_run, lce_fused_sm90_inner, NULL, NULL, NULL, NULL};
#else
extern "C" int64_t lce_fused_sm90_inner(const lce_case *c, lce_output_id o) {
  if (o == LCE_OUT_D_WEIGHT || o == LCE_OUT_D_EMBEDDING) return fs_token_chunk(c);
  return lce_inner_chunked(c, o);
}

extern "C" const lce_subject lce_fused_sm90_subject = {
    "fused-sm90", "fused-cuda",
    "the fused algorithm with a Hopper logits GEMM (CUTLASS sm_90a, TMA + wgmma, warp-specialized) whose epilogue "
    "reduces the logits to online-softmax partials in registers (forward) or writes d_logits in the dtype "
    "(backward); cuBLAS d_hidden (fp32 buffer, beta = 1) and d_weight GEMMs",
    FS_CAPS, fused_sm90_run, lce_fused_sm90_inner, NULL, NULL, NULL, NULL};

/* ---- the bench's engine (fused_cuda_bench.cu) ------------------------------------------------- */

static lce_code fs_bench_create(void **ws, const lce_case *c, cudaStream_t s, size_t *bytes, char *note,
                                size_t note_size, lce_status *st) {
  fs_workspace *w = (fs_workspace *)calloc(1, sizeof *w);
  LCE_ALLOC_CHECK(st, w);
  *ws = w;
  LCE_TRY(fs_workspace_create(w, c, s, st));
  *bytes = w->bytes;
  snprintf(note, note_size, "%s, token chunk %lld, vocab chunk %lld, cuBLAS workspace %zu MiB",
           w->pingpong ? "pingpong" : "cooperative", (long long)w->tok_chunk, (long long)w->plan.rows_max,
           fc_cublas_workspace_bytes(FS_CUBLAS_WORKSPACE_MIB) >> 20);
  return LCE_OK;
}
static lce_code fs_bench_forward(void *ws, const fc_problem *p, lce_status *st) { return fs_forward((fs_workspace *)ws, p, st); }
static lce_code fs_bench_backward(void *ws, const fc_problem *p, lce_status *st) { return fs_backward((fs_workspace *)ws, p, st); }
static lce_code fs_bench_check(void *ws, lce_status *st) { return fs_check_layout((fs_workspace *)ws, st); }
static void fs_bench_destroy(void *ws) {
  if (ws == NULL) return;
  fs_workspace_destroy((fs_workspace *)ws);
  free(ws);
}

extern "C" const lce_cuda_bench_engine lce_fused_sm90_bench_engine = {
    "fused-sm90", fs_bench_create, fs_bench_forward, fs_bench_backward, fs_bench_check, fs_bench_destroy};
#endif
