/* lce_matrix.c — the named conformance matrices (see lce_matrix.h).
 *
 * The default matrix is a full cross of the axes where bugs live — tied/untied, tp, dtype,
 * reduction, vocab-chunk count — with the secondary axes (padding, prior gradients, ignored labels,
 * value distribution, seed) rotated through the cross so that every value of each appears many
 * times and in many combinations, plus the edge batches (all tokens ignored, one valid token).
 * Shapes are small (n=16, h=32, v=300) so the MPFR oracle keeps the whole matrix to seconds. A
 * last block draws odd shapes from the fuzz harness's space (n 1..24, h 1..48, v 1..400, any
 * padding, tp 1..4, any chunk): goldens measured on one shape alone would not hold where the
 * fuzzer goes (one vocab row, two tokens, one hidden unit).
 *
 * The medium matrix (medium shapes judged by the oracle) is a hand-picked list at LM-head
 * shapes an order of magnitude below production (V up to 32k, H up to 1024, N up to 512): the
 * reduction lengths where device arithmetic starts to show, far beyond what the MPFR oracle covers
 * in a CI run (one case costs it tens of minutes), so it is meant for the fp64 GPU oracle:
 *   lcecheck check --subject fused-cuda --matrix medium --oracle fp64-gpu
 * The wide matrix is the medium shapes' reduction lengths (V up to 32k, H up to 1024) with 2 tokens,
 * so that the MPFR oracle judges them in seconds: the forward error grows with V (the softmax sum)
 * and H (the logits), and goldens measured at V <= 2k alone do not hold there (fused-host failed its
 * lse bound at V 16k on the H200). The goldens are fitted on the default matrix alone, whose
 * reduction-length cases (LENGTHS) fit the length terms of the model form; wide judges them. */
#include "lce_matrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_prng.h"

#define ODD_SHAPES 72
/* The value distributions the cross rotates through (lce_dist order). */
#define MATRIX_DISTS 6
/* Room for the whole default matrix: it builds ~370 cases; the count is checked after. */
#define MATRIX_MAX 2048
#define ODD_SHAPES_SEED 20261203u

static const lce_matrix MATRICES[] = {
    {"default", "tied/untied x tp{1,2,4} x bf16/fp16/fp32 x none/sum/mean x chunks{1,~6,150} + edge batches "
                "+ 3 many-token cases + 19 reduction lengths (V to 16k, H to 1k, flat rows, many-token mean, many-token long rows, vocab chunks of 1) + every option (smoothing, z-loss, softcap, class weights, token chunks, "
                "tf32) alone and combined + non-finite inputs + 72 odd shapes"},
    {"smoke", "every 7th case of default: a quick look across all axes"},
    {"medium", "16 LM-head shapes up to N 512, H 1024, V 32k: bf16/fp16/fp32/tf32, tied/untied, tp 1/2/8, "
               "smoothing, z-loss, softcap, class weights, token chunks, poison; for GPU subjects with "
               "--oracle fp64-gpu (tier 0 needs ~hours for it)"},
    {"wide", "8 shapes with 2 tokens at the medium matrix's reduction lengths (V up to 32k or H up to 1024, "
             "V*H <= 8M): bf16/fp16/fp32/tf32, tp 1/2/8, options; tier 0 judges them in seconds each"},
};

size_t lce_matrix_count(void) { return sizeof MATRICES / sizeof MATRICES[0]; }
const lce_matrix *lce_matrix_at(size_t i) { return i < lce_matrix_count() ? &MATRICES[i] : NULL; }

/* Vocab chunk size giving about `chunks` chunks over the whole padded vocab (at least one per
 * shard): chunk counts are what the seed bug's error grows with. */
static int64_t chunk_size_for(const lce_case *c, int chunks) {
  int64_t per_shard = c->vp / c->tp;
  int64_t per_shard_chunks = (chunks + c->tp - 1) / c->tp;
  int64_t vc = (per_shard + per_shard_chunks - 1) / per_shard_chunks;
  return vc < 1 ? 1 : vc;
}

static size_t add_options(lce_case *out, size_t k);

/* Cases a fuzz campaign found a correct subject (fused-host, or fused-cuda where fused-host computes
 * the same bits) just over a bound measured without them: the bound was an estimate of the correct
 * error's supremum, and these show it higher. They join the matrix the goldens are measured on
 * (fuzz/CAMPAIGNS.md has the campaigns). */
static const char *const FUZZ_REGRESSIONS[] = {
    "fp32.tied.tp1.n1.h48.v400.vp530.vc2.none.ign0.fresh.mixed.s8257555",
    "bf16.untied.tp1.n1.h40.v114.vp117.vc40.mean.ign10.prior.mixed.s16777216",
    "fp16.untied.tp4.n2.h39.v1.vp4.vc1.none.ign0.fresh.mixed.s0",
    /* fused-cuda on the H200, 2026-12-03: d_hidden relerr 6.03e-7 over its sm_90 bound 5.64e-7 with
     * one token and one hidden unit; fused-host's d_hidden is identical to every printed digit. */
    "fp32.untied.tp1.n1.h1.v400.vp400.vc257.none.ign0.ii400.prior.mixed.s9",
    /* The flattest one-token row among 30 seeds at V 4096 (golden/README.md, false alarm 3): every
     * exp term rounds to exactly 1 once the running sum has grown, each losing the same sign of
     * error; s errs by 250 u32 where seeds 1-30 have rms 53 u32. */
    "fp16.untied.tp1.n1.h2.v4096.vp4096.vc4096.none.ign0.tc1.prior.flat.s12",
};

/* The reduction lengths and element counts the golden forms scale with (golden/policy.txt): a
 * spread of V per shard with flat rows (the softmax sum's running-sum growth) and normal rows, long
 * dot products (H), one valid token of a long row, and many-token bf16/fp16 mean batches whose valid
 * count is no power of two (the coherent rounding of the mean factor in d_logits). Small enough for
 * the default matrix: N*H*V <= 4M each. */
typedef struct length_row {
  lce_dtype dtype;
  int tp;
  int64_t n, h, v, vocab_chunk;
  lce_reduction reduction;
  int ignore_pct;
  lce_dist dist;
} length_row;

static const length_row LENGTHS[] = {
    {LCE_BF16, 1, 96, 32, 1000, 256, LCE_RED_MEAN, 10, LCE_DIST_NORMAL},
    {LCE_FP16, 2, 96, 32, 1000, 128, LCE_RED_MEAN, 25, LCE_DIST_MIXED},
    {LCE_BF16, 1, 2, 2, 2048, 2048, LCE_RED_NONE, 0, LCE_DIST_FLAT},
    {LCE_FP32, 2, 2, 2, 8192, 1024, LCE_RED_SUM, 0, LCE_DIST_FLAT},
    {LCE_BF16, 1, 1, 4, 16384, 4096, LCE_RED_MEAN, 0, LCE_DIST_FLAT},
    {LCE_FP32, 1, 64, 8, 2048, 512, LCE_RED_SUM, 0, LCE_DIST_FLAT},
    {LCE_BF16, 2, 64, 8, 2048, 256, LCE_RED_MEAN, 10, LCE_DIST_FLAT},
    {LCE_BF16, 1, 2, 64, 8192, 2048, LCE_RED_MEAN, 0, LCE_DIST_NORMAL},
    {LCE_FP32, 2, 2, 64, 8192, 2048, LCE_RED_SUM, 0, LCE_DIST_NORMAL},
    {LCE_FP16, 1, 4, 32, 4096, 1024, LCE_RED_NONE, 0, LCE_DIST_NORMAL},
    {LCE_FP32, 1, 16, 16, 2048, 512, LCE_RED_NONE, 94, LCE_DIST_MIXED},
    {LCE_FP16, 1, 16, 16, 2048, 512, LCE_RED_MEAN, 94, LCE_DIST_NORMAL},
    {LCE_FP32, 1, 2, 512, 64, 64, LCE_RED_SUM, 0, LCE_DIST_NORMAL},
    {LCE_FP32, 1, 2, 512, 2048, 512, LCE_RED_MEAN, 0, LCE_DIST_MIXED},
    {LCE_BF16, 1, 2, 1024, 128, 32, LCE_RED_MEAN, 0, LCE_DIST_MIXED},
    /* Many tokens of long normal rows: the running sums' coherent part (the same sign in every
     * row) shows in the forward outputs' bias, which needs many tokens to be defined at all. */
    {LCE_BF16, 1, 160, 3, 8192, 2048, LCE_RED_SUM, 0, LCE_DIST_NORMAL},
    {LCE_FP16, 1, 96, 4, 8192, 1024, LCE_RED_MEAN, 0, LCE_DIST_NORMAL},
    {LCE_FP32, 1, 96, 4, 8192, 4096, LCE_RED_NONE, 0, LCE_DIST_NORMAL},
    /* Vocab chunks of one row: the shard's d_hidden buffer is then a running sum of vs partials,
     * the label row's among them, and flat rows make every later addition round at its size. */
    {LCE_FP32, 2, 8, 32, 2048, 1, LCE_RED_NONE, 0, LCE_DIST_FLAT},
};

static size_t add_lengths(lce_case *out, size_t k) {
  for (size_t i = 0; i < sizeof LENGTHS / sizeof LENGTHS[0]; i++) {
    const length_row *r = &LENGTHS[i];
    lce_case c = lce_case_default();
    c.dtype = r->dtype, c.tp = r->tp, c.n = r->n, c.h = r->h, c.v = r->v, c.vp = r->v;
    c.vocab_chunk = r->vocab_chunk, c.reduction = r->reduction, c.ignore_pct = r->ignore_pct, c.dist = r->dist;
    c.tied = (int)(i % 2), c.prior_grad = (int)((i / 2) % 2), c.seed = 9500 + (uint64_t)i;
    out[k++] = c;
  }
  return k;
}

static size_t build_default(lce_case *out) {
  static const int TPS[] = {1, 2, 4};
  /* 150 chunks of 2 rows: the seed bug's error grows with the chunk count, and at 40 chunks it is
   * still within a factor 2 of the final bf16 rounding every correct subject makes. */
  static const int CHUNKS[] = {1, 6, 150};
  static const int IGNORE[] = {0, 10, 25};
  size_t k = 0;
  for (int tied = 0; tied < 2; tied++)
    for (int ti = 0; ti < 3; ti++)
      for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++)
        for (int red = 0; red < 3; red++)
          for (int ci = 0; ci < 3; ci++) {
            lce_case c = lce_case_default();
            c.n = 16, c.h = 32, c.v = 300;
            c.tied = tied, c.tp = TPS[ti], c.dtype = (lce_dtype)dt, c.reduction = (lce_reduction)red;
            c.vp = (k % 2) ? 384 : 300; /* 384: Megatron-style padding to a multiple of 128 */
            c.prior_grad = (int)((k / 2) % 2);
            c.ignore_pct = IGNORE[k % 3];
            c.dist = (lce_dist)(k % MATRIX_DISTS);
            c.seed = 1000 + k;
            c.vocab_chunk = chunk_size_for(&c, CHUNKS[ci]);
            out[k] = c;
            k++;
          }
  /* Every fp32 case of the cross again with tf32 GEMMs: tf32 bounds are measured on as many cases
   * as fp32 ones (fewer would leave them below fp32's, which no tf32 kernel can beat). */
  for (size_t i = 0, cross = k; i < cross; i++) {
    if (out[i].dtype != LCE_FP32) continue;
    out[k] = out[i];
    out[k].gemm = LCE_GEMM_TF32, out[k].seed = 3000 + k;
    k++;
  }
  /* Edge batches: no valid token at all, and exactly one. */
  for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++)
    for (int red = 0; red < 3; red++)
      for (int edge = 0; edge < 2; edge++) {
        lce_case c = lce_case_default();
        c.n = 16, c.h = 32, c.v = 300, c.vp = 384, c.tp = 2;
        c.dtype = (lce_dtype)dt, c.reduction = (lce_reduction)red;
        c.tied = edge, c.prior_grad = 1;
        c.ignore_pct = edge ? 100 : 94; /* 94% of 16 tokens ignored: exactly one valid */
        c.seed = 5000 + k;
        c.vocab_chunk = chunk_size_for(&c, 150);
        out[k] = c;
        k++;
      }
  /* Many tokens, so that per-token statistics (bias and ulpfrac of lse and loss_token) exist. */
  for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++) {
    lce_case c = lce_case_default();
    c.n = 160, c.h = 16, c.v = 64, c.vp = 128, c.tp = 2, c.vocab_chunk = 8;
    c.dist = dt == 0 ? LCE_DIST_NORMAL : LCE_DIST_FLAT; /* flat rows: lse without cancellation */
    c.dtype = (lce_dtype)dt, c.reduction = (lce_reduction)dt, c.tied = dt == 1, c.prior_grad = 1;
    c.ignore_pct = 10, c.seed = 8000 + (uint64_t)dt;
    out[k] = c;
    k++;
  }
  k = add_options(out, k);
  k = add_lengths(out, k);
  for (size_t i = 0; i < sizeof FUZZ_REGRESSIONS / sizeof FUZZ_REGRESSIONS[0]; i++)
    if (lce_case_parse(FUZZ_REGRESSIONS[i], &out[k], NULL) == LCE_OK) k++; /* checked in lce_matrix_cases */
  /* Tiny batches: with one or two tokens no normwise metric averages anything, and the fuzzer goes
   * there (one vocab row, one hidden unit, 400 rows of 48). */
  static const int64_t TINY[][2] = {{1, 1}, {34, 16}, {400, 48}, {114, 1}}; /* {v, h} */
  for (int n = 1; n <= 2; n++)
    for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++)
      for (int s = 0; s < 4; s++) {
        lce_case c = lce_case_default();
        c.n = n, c.v = TINY[s][0], c.h = TINY[s][1], c.tp = (k % 2) ? 1 : 2;
        c.vp = c.v + (c.v % 2) + 2 * (int64_t)(k % 3); /* even: tp 2 divides it */
        c.dtype = (lce_dtype)dt, c.tied = (int)(k % 2), c.prior_grad = (int)((k / 2) % 2);
        c.reduction = (lce_reduction)(k % 3), c.dist = (lce_dist)(k % MATRIX_DISTS);
        c.vocab_chunk = 1 + (int64_t)(k % 40), c.seed = 7500 + k;
        out[k++] = c;
      }
  for (int i = 0; i < ODD_SHAPES; i++) {
    uint64_t r = 0;
#define DRAW(bound) ((int64_t)lce_rand_below(ODD_SHAPES_SEED, (uint64_t)i, r++, (uint64_t)(bound)))
    lce_case c = lce_case_default();
    c.n = 1 + DRAW(24), c.h = 1 + DRAW(48), c.v = 1 + DRAW(400);
    c.tp = (int32_t)(1 + DRAW(4));
    c.vp = c.v + DRAW(131);
    c.vp += (c.tp - c.vp % c.tp) % c.tp;
    c.vocab_chunk = 1 + DRAW(c.v);
    c.dtype = (lce_dtype)(i % LCE_DTYPE_COUNT); /* every dtype equally often */
    c.tied = (int)DRAW(2), c.prior_grad = (int)DRAW(2);
    c.reduction = (lce_reduction)DRAW(3);
    static const int32_t IGN[] = {0, 10, 25, 50, 100};
    c.ignore_pct = IGN[DRAW(5)];
    c.dist = (lce_dist)DRAW(LCE_DIST_COUNT);
    c.smoothing = (lce_smoothing)DRAW(3), c.smoothing_permille = c.smoothing ? (int32_t)DRAW(301) : 0;
    if (c.smoothing == LCE_SMOOTH_MEGATRON && c.v < 2) c.smoothing = LCE_SMOOTH_PYTORCH;
    c.z_loss_e5 = DRAW(3) == 0 ? (int32_t)(1 + DRAW(1000)) : 0;
    c.softcap = DRAW(3) == 0 ? (int32_t)(5 + DRAW(46)) : 0;
    c.class_weights = (int)DRAW(3) == 0;
    c.token_chunk = DRAW(3) == 0 ? 1 + DRAW(c.n) : 0;
    c.gemm = c.dtype == LCE_FP32 && DRAW(2) ? LCE_GEMM_TF32 : LCE_GEMM_IEEE;
    c.seed = 9000 + (uint64_t)i;
    if (c.n * c.h * c.v > 333333) c.h = 333333 / (c.n * c.v) > 0 ? 333333 / (c.n * c.v) : 1; /* oracle budget */
#undef DRAW
    out[k] = c;
    k++;
  }
  return k;
}

/* Every option of the full FLCE semantics, alone and all together, across dtypes, tp and
 * reductions, with the hard value distributions (|logits| >= 80, ties for the maximum, the target
 * at the maximum and the minimum, zero and subnormal hidden rows), plus non-finite inputs. */
static size_t add_options(lce_case *out, size_t k) {
  typedef struct option_set {
    lce_smoothing smoothing;
    int32_t permille, z_loss_e5, softcap;
    int class_weights;
    int64_t token_chunk;
    lce_gemm gemm;
  } option_set;
  static const option_set SETS[] = {
      {LCE_SMOOTH_PYTORCH, 100, 0, 0, 0, 0, LCE_GEMM_IEEE},  {LCE_SMOOTH_MEGATRON, 100, 0, 0, 0, 0, LCE_GEMM_IEEE},
      {LCE_SMOOTH_NONE, 0, 10, 0, 0, 0, LCE_GEMM_IEEE},      {LCE_SMOOTH_NONE, 0, 0, 30, 0, 0, LCE_GEMM_IEEE},
      {LCE_SMOOTH_NONE, 0, 0, 0, 1, 0, LCE_GEMM_IEEE},       {LCE_SMOOTH_NONE, 0, 0, 0, 0, 5, LCE_GEMM_IEEE},
      {LCE_SMOOTH_NONE, 0, 0, 0, 0, 0, LCE_GEMM_TF32},       {LCE_SMOOTH_PYTORCH, 50, 10, 30, 1, 5, LCE_GEMM_IEEE},
      {LCE_SMOOTH_MEGATRON, 50, 10, 30, 1, 5, LCE_GEMM_TF32},
  };
  static const lce_dist DISTS[] = {LCE_DIST_HARD,       LCE_DIST_BIG,  LCE_DIST_TIES,      LCE_DIST_TARGET_MAX,
                                   LCE_DIST_TARGET_MIN, LCE_DIST_ZERO, LCE_DIST_SUBNORMAL, LCE_DIST_MIXED,
                                   LCE_DIST_NEGATIVE,   LCE_DIST_CONFIDENT};
  static const int32_t IGNORE[] = {0, 10, 25};
  size_t j = 0;
  for (size_t s = 0; s < sizeof SETS / sizeof SETS[0]; s++)
    for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++)
      for (int tp = 1; tp <= 4; tp *= 4)
        for (int rep = 0; rep < (SETS[s].gemm == LCE_GEMM_TF32 ? 3 : 1); rep++, j++) {
          if (SETS[s].gemm == LCE_GEMM_TF32 && dt != LCE_FP32) continue; /* tf32: fp32 inputs only */
          lce_case c = lce_case_default();
          c.n = 16, c.h = 32, c.v = 300, c.vp = j % 2 ? 384 : 300, c.tp = tp;
          c.dtype = (lce_dtype)dt, c.tied = (int)(j % 2), c.prior_grad = (int)((j / 2) % 2);
          c.reduction = (lce_reduction)((j + (size_t)rep) % 3), c.ignore_pct = IGNORE[j % 3];
          c.dist = DISTS[j % (sizeof DISTS / sizeof DISTS[0])];
          c.smoothing = SETS[s].smoothing, c.smoothing_permille = SETS[s].permille;
          c.z_loss_e5 = SETS[s].z_loss_e5, c.softcap = SETS[s].softcap, c.class_weights = SETS[s].class_weights;
          c.token_chunk = SETS[s].token_chunk, c.gemm = SETS[s].gemm;
          c.seed = 6000 + k;
          c.vocab_chunk = chunk_size_for(&c, 40);
          out[k] = c;
          k++;
        }
  for (int dt = 0; dt < LCE_DTYPE_COUNT; dt++) /* NaN and +Inf among the hidden values */
    for (int tied = 0; tied < 2; tied++) {
      lce_case c = lce_case_default();
      c.n = 16, c.h = 32, c.v = 300, c.vp = 384, c.tp = 2, c.dtype = (lce_dtype)dt, c.tied = tied;
      c.prior_grad = 1, c.reduction = (lce_reduction)(dt % 3), c.ignore_pct = 10, c.dist = LCE_DIST_POISON;
      c.seed = 7000 + k;
      c.vocab_chunk = chunk_size_for(&c, 40);
      out[k] = c;
      k++;
    }
  return k;
}

/* One medium case: the shape, the axes, and the option a row exercises (a case id suffix is the
 * simplest way to say which; it is parsed and validated like any case id). */
typedef struct medium_row {
  lce_dtype dtype;
  int tied, tp;
  int64_t n, h, v, vp, vocab_chunk;
  lce_reduction reduction;
  int ignore_pct;
  lce_dist dist;
  const char *option; /* "", "ls100", "lsm100.zl10", "sc30", "cw", "tc128", "tf32" */
} medium_row;

static const medium_row MEDIUM[] = {
    {LCE_BF16, 0, 1, 512, 1024, 32000, 32000, 4096, LCE_RED_MEAN, 10, LCE_DIST_NORMAL, ""},
    {LCE_BF16, 1, 8, 256, 1024, 32000, 32768, 1024, LCE_RED_MEAN, 10, LCE_DIST_MIXED, ""},
    {LCE_BF16, 0, 8, 512, 768, 30522, 30720, 2048, LCE_RED_SUM, 0, LCE_DIST_HARD, ""},
    {LCE_BF16, 1, 2, 512, 1024, 32000, 32000, 8192, LCE_RED_MEAN, 25, LCE_DIST_NORMAL, "tc128"},
    {LCE_FP16, 0, 2, 512, 512, 16384, 16384, 4096, LCE_RED_SUM, 10, LCE_DIST_NORMAL, ""},
    {LCE_FP16, 1, 1, 256, 1024, 32000, 32000, 4096, LCE_RED_NONE, 10, LCE_DIST_MIXED, ""},
    {LCE_FP16, 0, 8, 256, 1024, 32000, 32768, 2048, LCE_RED_MEAN, 10, LCE_DIST_NORMAL, "cw"},
    {LCE_FP32, 0, 1, 256, 512, 8192, 8192, 2048, LCE_RED_MEAN, 10, LCE_DIST_MIXED, ""},
    {LCE_FP32, 1, 2, 256, 1024, 16000, 16128, 4096, LCE_RED_MEAN, 10, LCE_DIST_NORMAL, "tf32"},
    {LCE_FP32, 0, 8, 256, 1024, 32000, 32768, 4096, LCE_RED_SUM, 0, LCE_DIST_CONFIDENT, ""},
    {LCE_BF16, 0, 1, 256, 512, 32000, 32000, 4096, LCE_RED_MEAN, 10, LCE_DIST_NORMAL, "ls100"},
    {LCE_BF16, 1, 2, 256, 512, 32000, 32000, 4096, LCE_RED_MEAN, 10, LCE_DIST_NORMAL, "lsm100.zl10"},
    {LCE_BF16, 0, 1, 256, 1024, 32000, 32000, 4096, LCE_RED_MEAN, 10, LCE_DIST_BIG, "sc30"},
    {LCE_BF16, 0, 2, 256, 256, 8192, 8192, 1024, LCE_RED_MEAN, 10, LCE_DIST_POISON, ""},
    {LCE_BF16, 1, 1, 128, 256, 4096, 4096, 1024, LCE_RED_MEAN, 100, LCE_DIST_NORMAL, ""},
    {LCE_FP16, 0, 1, 512, 1024, 32000, 32000, 4096, LCE_RED_MEAN, 10, LCE_DIST_NEGATIVE, ""},
};
#define MEDIUM_COUNT (sizeof MEDIUM / sizeof MEDIUM[0])

static const medium_row WIDE[] = {
    {LCE_BF16, 0, 1, 2, 256, 32000, 32000, 4096, LCE_RED_MEAN, 0, LCE_DIST_NORMAL, ""},
    {LCE_BF16, 1, 8, 2, 1024, 8192, 8192, 1024, LCE_RED_SUM, 0, LCE_DIST_MIXED, ""},
    {LCE_FP16, 0, 2, 2, 512, 16384, 16384, 4096, LCE_RED_SUM, 0, LCE_DIST_NORMAL, ""},
    {LCE_FP16, 0, 1, 2, 256, 32000, 32000, 4096, LCE_RED_MEAN, 0, LCE_DIST_NEGATIVE, ""},
    {LCE_FP32, 0, 1, 2, 512, 8192, 8192, 2048, LCE_RED_MEAN, 0, LCE_DIST_MIXED, ""},
    {LCE_FP32, 1, 2, 2, 1024, 8000, 8064, 4096, LCE_RED_NONE, 0, LCE_DIST_NORMAL, "tf32"},
    {LCE_BF16, 0, 2, 2, 256, 32000, 32000, 4096, LCE_RED_MEAN, 0, LCE_DIST_NORMAL, "lsm100.zl10"},
    {LCE_BF16, 0, 1, 2, 1024, 8192, 8192, 4096, LCE_RED_MEAN, 0, LCE_DIST_BIG, "sc30"},
};
#define WIDE_COUNT (sizeof WIDE / sizeof WIDE[0])

/* The cases of a hand-picked list (medium, wide), seeds seed0, seed0 + 1, ... */
static lce_code build_rows(const medium_row *rows, size_t count, uint64_t seed0, lce_case *out, lce_status *st) {
  for (size_t i = 0; i < count; i++) {
    const medium_row *m = &rows[i];
    lce_case c = lce_case_default();
    c.dtype = m->dtype, c.tied = m->tied, c.tp = m->tp, c.n = m->n, c.h = m->h, c.v = m->v, c.vp = m->vp;
    c.vocab_chunk = m->vocab_chunk, c.reduction = m->reduction, c.ignore_pct = m->ignore_pct, c.dist = m->dist;
    c.prior_grad = (int)(i % 2), c.seed = seed0 + i;
    char id[256], base[192];
    lce_case_format(&c, base, sizeof base);
    /* The option tokens go before the prior|fresh token of the id (lce_case.h's order). */
    char *tail = strstr(base, c.prior_grad ? ".prior." : ".fresh.");
    LCE_CHECK(st, tail != NULL, LCE_EINTERNAL, "listed case %zu: unexpected id %s", i, base);
    snprintf(id, sizeof id, "%.*s%s%s%s", (int)(tail - base), base, *m->option ? "." : "", m->option, tail);
    LCE_TRY(lce_case_parse(id, &out[i], st));
  }
  return LCE_OK;
}

lce_code lce_matrix_cases(const char *name, lce_case **cases, size_t *count, lce_status *st) {
  *cases = NULL;
  *count = 0;
  int smoke = strcmp(name, "smoke") == 0;
  int medium = strcmp(name, "medium") == 0;
  if (medium || strcmp(name, "wide") == 0) {
    const size_t n = medium ? MEDIUM_COUNT : WIDE_COUNT;
    lce_case *m = malloc(n * sizeof *m);
    LCE_ALLOC_CHECK(st, m);
    lce_code rc = build_rows(medium ? MEDIUM : WIDE, n, medium ? 9100 : 9200, m, st);
    if (rc != LCE_OK) {
      free(m);
      return rc;
    }
    *cases = m;
    *count = n;
    return LCE_OK;
  }
  LCE_CHECK(st, smoke || strcmp(name, "default") == 0, LCE_EINVAL,
            "unknown matrix '%s' (known: default, smoke, medium, wide)", name);
  for (size_t i = 0; i < sizeof FUZZ_REGRESSIONS / sizeof FUZZ_REGRESSIONS[0]; i++) {
    lce_case probe;
    LCE_TRY(lce_case_parse(FUZZ_REGRESSIONS[i], &probe, st)); /* a malformed entry is an error, not a skip */
  }
  lce_case *all = malloc(MATRIX_MAX * sizeof *all);
  LCE_ALLOC_CHECK(st, all);
  size_t n = build_default(all);
  LCE_CHECK(st, n <= MATRIX_MAX, LCE_EINTERNAL, "default matrix has %zu cases, more than MATRIX_MAX", n);
  if (smoke) {
    size_t m = 0;
    for (size_t i = 0; i < n; i += 7) all[m++] = all[i]; /* 7 is coprime to every axis length */
    n = m;
  }
  for (size_t i = 0; i < n; i++) {
    lce_code rc = lce_case_validate(&all[i], st);
    if (rc != LCE_OK) {
      free(all);
      return rc;
    }
  }
  *cases = all;
  *count = n;
  return LCE_OK;
}
