/* fused_host.c — fused-host: fused linear cross-entropy (LM-head GEMM + softmax cross-entropy,
 * forward and backward) computed the way a vocab-chunked, vocab-parallel GPU kernel computes it, on
 * the CPU, with the device's fp32 arithmetic emulated exactly, so that CI predicts the kernel.
 *
 * The math is lce_case.h's. How it is evaluated here (every operation is one fp32 operation):
 *   forward, per shard r (its rows below V; padded rows are skipped entirely), per vocab chunk:
 *     z        = hidden · W_chunk^T, an fp32-accumulate GEMM: one fmaf per product, k = 0..H-1
 *     m_r, s_r   online softmax: m' = max(m, max_j z), s = s·exp(m - m') + sum_j exp(z - m')
 *     z_y        recorded by the shard that owns the label
 *   merge as vocab-parallel ranks do: M = max_r m_r, S = sum_r s_r·exp(m_r - M), lse = M + log S
 *   loss_token = lse - z_y (0 when ignored); loss = sum of loss_token (divided by #valid for mean)
 *   backward, per shard, per chunk (the chunk's logits recomputed exactly as in forward):
 *     dz         = round_to_dtype(g·(exp(z - lse) - onehot))          (d_logits in the input dtype)
 *     dh_r      += sum_j dz·W_j     chunk partial (fmaf, rows in order), then one fp32 add per element
 *     gradW_j   += sum_n dz·h_n     per row (fmaf, tokens in order), then one fp32 add into the buffer
 *   d_hidden   = round_to_dtype(sum_r dh_r): shard buffers summed in fp32 in rank order (all-reduce).
 * The build uses -ffp-contract=off: every fmaf is written out, nothing else is contracted.
 *
 * Build and run: part of lce_fused (cmake --build build --target lce_fused); judge one case with
 *   build/lcecheck repro --subject fused-host <case id>; tests in fused/tests/test_fused_host.c.
 *
 * Versions (fused/mutants.txt; each mutant is this file compiled with one LCE_MUTANT_* switch):
 *   production                          no switch: the algorithm above
 *   LCE_MUTANT_BF16_DHIDDEN_ACCUM       d_hidden buffer held in the input dtype (PR #2739, bug 2)
 *   LCE_MUTANT_TIED_WEIGHT_WHEN_UNTIED  untied run uses the embedding as output weight (bug 1) */
#include <math.h>
#include <stdlib.h>

#include "fused_host.h"

/* ---- build variant ---------------------------------------------------------------------------
 * A mutant build must switch on a mutant this file knows and export its own run symbol; the
 * production build must do neither. Adding a mutant: one line in mutants.txt, its switch in this
 * list, and its #if block where the upstream bug lived. */
#if defined(LCE_MUTANT_BF16_DHIDDEN_ACCUM) || defined(LCE_MUTANT_TIED_WEIGHT_WHEN_UNTIED)
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
 * output element is written. */
typedef struct fused_host {
  const lce_case *c;
  const int64_t *labels;
  const void *w;    /* the output weight, dtype bits [vp*h] */
  float *grad_w;    /* its fp32 gradient buffer [vp*h], holding the prior */
  int64_t rows_max; /* most real rows one chunk can hold */
  int64_t n_valid;
  float *hidden;    /* [n*h] hidden, loaded exactly */
  float *w_chunk;   /* [rows_max*h] the chunk's rows of W, loaded exactly */
  float *z;         /* [n*rows_max] the chunk's logits, then its d_logits */
  float *m, *s;     /* [tp*n] each shard's running max and running sum */
  float *z_target;  /* [n] the label's logit, from the shard that owns it */
  float *lse;       /* [n] */
  float *g;         /* [n] d loss / d loss_token (0 for ignored tokens) */
  float *dh_part;   /* [n*h] one chunk's contribution to d_hidden */
  float *dh_shard;  /* [n*h] one shard's fp32 d_hidden buffer */
  float *dh_total;  /* [n*h] the all-reduced d_hidden */
  float *gw_row;    /* [h] one row's weight-gradient contribution from one chunk */
  float *block_;    /* owner of all the float storage above */
} fused_host;

static int token_valid(const fused_host *f, int64_t i) { return f->labels[i] != f->c->ignore_index; }

/* The part of shard r's row range that holds real vocabulary rows: [lo, hi), possibly empty. */
static void shard_real_rows(const lce_case *c, int r, int64_t *lo, int64_t *hi) {
  lce_shard_range(c, r, lo, hi);
  if (*hi > c->v) *hi = c->v;
  if (*lo > *hi) *lo = *hi;
}

static int64_t chunk_rows(const lce_case *c, int64_t row0, int64_t shard_hi) {
  return shard_hi - row0 < c->vocab_chunk ? shard_hi - row0 : c->vocab_chunk;
}

/* ---- kernels: one vocab chunk -------------------------------------------------------------- */

/* Loads rows [row0, row0+rows) of W into w_chunk; dtype values are exact in float. */
static void chunk_load(fused_host *f, int64_t row0, int64_t rows) {
  const int64_t h = f->c->h;
  for (int64_t e = 0; e < rows * h; e++) f->w_chunk[e] = (float)lce_load(f->c->dtype, f->w, (size_t)(row0 * h + e));
}

/* z[i, j] = sum_k hidden[i,k]·W[row0+j,k], accumulated in fp32 with one fmaf per product, k in
 * order: the IEEE model of an fp32-accumulate GEMM. */
static void chunk_logits(fused_host *f, int64_t rows) {
  const int64_t n = f->c->n, h = f->c->h;
  for (int64_t i = 0; i < n; i++) {
    const float *a = f->hidden + i * h;
    for (int64_t j = 0; j < rows; j++) {
      const float *b = f->w_chunk + j * h;
      float acc = 0.0f;
      for (int64_t k = 0; k < h; k++) acc = fmaf(a[k], b[k], acc);
      f->z[i * rows + j] = acc;
    }
  }
}

/* Folds the chunk into shard r's online softmax. The running max starts at -inf (not 0: rows whose
 * logits are all below -87 would underflow every exp), and the running sum is rescaled only when
 * the max grows. */
static void chunk_online_softmax(fused_host *f, int r, int64_t row0, int64_t rows) {
  const int64_t n = f->c->n;
  for (int64_t i = 0; i < n; i++) {
    const float *zi = f->z + i * rows;
    float *m = &f->m[(int64_t)r * n + i], *s = &f->s[(int64_t)r * n + i];
    float chunk_max = -INFINITY;
    for (int64_t j = 0; j < rows; j++) chunk_max = fmaxf(chunk_max, zi[j]);
    float m_new = fmaxf(*m, chunk_max);
    if (m_new > *m) *s *= expf(*m - m_new);
    if (m_new > -INFINITY) /* all logits -inf: every term is exactly 0, not exp(-inf + inf) */
      for (int64_t j = 0; j < rows; j++) *s += expf(zi[j] - m_new);
    *m = m_new;
    int64_t y = f->labels[i];
    if (y >= row0 && y < row0 + rows) f->z_target[i] = zi[y - row0];
  }
}

/* d_logits: dz = g·(p - onehot) in fp32, then rounded to the input dtype, as the kernel stores
 * the d_logits tile in the input format before the two backward GEMMs. Overwrites z. */
static void chunk_dlogits(fused_host *f, int64_t row0, int64_t rows) {
  const int64_t n = f->c->n;
  for (int64_t i = 0; i < n; i++) {
    for (int64_t j = 0; j < rows; j++) {
      float dz = 0.0f; /* ignored tokens are masked, whatever their logits */
      if (token_valid(f, i)) {
        float p = expf(f->z[i * rows + j] - f->lse[i]);
        float onehot = f->labels[i] == row0 + j ? 1.0f : 0.0f;
        dz = (float)lce_round_to(f->c->dtype, (double)(f->g[i] * (p - onehot)));
      }
      f->z[i * rows + j] = dz;
    }
  }
}

/* One addition into the d_hidden accumulation buffer (a chunk into its shard's buffer, or a shard
 * into the all-reduced total). The buffer is fp32: rounding it to bf16 after every chunk is what
 * made d_hidden's error grow with the chunk count upstream. */
static float dhidden_accumulate(lce_dtype dtype, float buffer, float addend) {
  float sum = buffer + addend;
#if defined(LCE_MUTANT_BF16_DHIDDEN_ACCUM)
  /* Megatron-LM PR #2739, seed bug 2: d_hidden += d_logits_chunk @ W_chunk held in the input
   * dtype, so every chunk's addition (and every reduction step) rounded the buffer to bf16. */
  sum = (float)lce_round_to(dtype, (double)sum);
#else
  (void)dtype;
#endif
  return sum;
}

/* dh_shard += dz · W_chunk: the chunk's partial is its own fp32-accumulate GEMM (fmaf over the
 * chunk's rows in order), added to the shard buffer once per element. */
static void chunk_dhidden(fused_host *f, int64_t rows) {
  const int64_t n = f->c->n, h = f->c->h;
  for (int64_t i = 0; i < n; i++) {
    float *part = f->dh_part + i * h;
    for (int64_t k = 0; k < h; k++) part[k] = 0.0f;
    for (int64_t j = 0; j < rows; j++) {
      const float dz = f->z[i * rows + j], *wj = f->w_chunk + j * h;
      for (int64_t k = 0; k < h; k++) part[k] = fmaf(dz, wj[k], part[k]);
    }
  }
  for (int64_t e = 0; e < n * h; e++) f->dh_shard[e] = dhidden_accumulate(f->c->dtype, f->dh_shard[e], f->dh_part[e]);
}

/* gradW[row0+j] += dz[:, j]^T · hidden: per row an fp32-accumulate sum over tokens in order, added
 * into the fp32 gradient buffer (which holds the prior gradient) once per element. */
static void chunk_dweight(fused_host *f, int64_t row0, int64_t rows) {
  const int64_t n = f->c->n, h = f->c->h;
  for (int64_t j = 0; j < rows; j++) {
    for (int64_t k = 0; k < h; k++) f->gw_row[k] = 0.0f;
    for (int64_t i = 0; i < n; i++) {
      const float dz = f->z[i * rows + j], *hi = f->hidden + i * h;
      for (int64_t k = 0; k < h; k++) f->gw_row[k] = fmaf(dz, hi[k], f->gw_row[k]);
    }
    float *dst = f->grad_w + (row0 + j) * h;
    for (int64_t k = 0; k < h; k++) dst[k] = dst[k] + f->gw_row[k];
  }
}

/* ---- launchers: shards and chunks ---------------------------------------------------------- */

/* Shard statistics → lse, as vocab-parallel ranks all-reduce them: the max first, then the sums
 * rescaled to it, in rank order. A shard without real rows (m = -inf) contributes exactly 0. */
static void merge_shards(fused_host *f) {
  const int64_t n = f->c->n;
  for (int64_t i = 0; i < n; i++) {
    float M = -INFINITY, S = 0.0f;
    for (int r = 0; r < f->c->tp; r++) M = fmaxf(M, f->m[(int64_t)r * n + i]);
    for (int r = 0; r < f->c->tp; r++) {
      float m_r = f->m[(int64_t)r * n + i];
      if (m_r > -INFINITY) S += f->s[(int64_t)r * n + i] * expf(m_r - M);
    }
    f->lse[i] = M + logf(S);
  }
}

static void forward(fused_host *f) {
  const lce_case *c = f->c;
  for (int64_t e = 0; e < (int64_t)c->tp * c->n; e++) f->m[e] = -INFINITY, f->s[e] = 0.0f;
  for (int r = 0; r < c->tp; r++) {
    int64_t lo, hi;
    shard_real_rows(c, r, &lo, &hi);
    for (int64_t row0 = lo; row0 < hi; row0 += c->vocab_chunk) {
      int64_t rows = chunk_rows(c, row0, hi);
      chunk_load(f, row0, rows);
      chunk_logits(f, rows);
      chunk_online_softmax(f, r, row0, rows);
    }
  }
  merge_shards(f);
}

/* Per-token loss gradient g (lce_case.h), in fp32 as the kernel receives it. */
static void loss_gradient(fused_host *f, const float *grad_output) {
  const lce_case *c = f->c;
  float scale = grad_output[0];
  if (c->reduction == LCE_RED_MEAN) scale = f->n_valid > 0 ? grad_output[0] / (float)f->n_valid : 0.0f;
  for (int64_t i = 0; i < c->n; i++)
    f->g[i] = !token_valid(f, i) ? 0.0f : c->reduction == LCE_RED_NONE ? grad_output[i] : scale;
}

static void backward(fused_host *f) {
  const lce_case *c = f->c;
  const int64_t nh = c->n * c->h;
  for (int64_t e = 0; e < nh; e++) f->dh_total[e] = 0.0f;
  for (int r = 0; r < c->tp; r++) {
    int64_t lo, hi;
    shard_real_rows(c, r, &lo, &hi);
    for (int64_t e = 0; e < nh; e++) f->dh_shard[e] = 0.0f;
    for (int64_t row0 = lo; row0 < hi; row0 += c->vocab_chunk) {
      int64_t rows = chunk_rows(c, row0, hi);
      chunk_load(f, row0, rows);
      chunk_logits(f, rows);
      chunk_dlogits(f, row0, rows);
      chunk_dhidden(f, rows);
      chunk_dweight(f, row0, rows);
    }
    for (int64_t e = 0; e < nh; e++) f->dh_total[e] = dhidden_accumulate(c->dtype, f->dh_total[e], f->dh_shard[e]);
  }
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

static lce_code workspace_alloc(fused_host *f, lce_status *st) {
  const lce_case *c = f->c;
  int64_t shard_rows = c->vp / c->tp;
  f->rows_max = c->vocab_chunk;
  if (f->rows_max > shard_rows) f->rows_max = shard_rows;
  if (f->rows_max > c->v) f->rows_max = c->v;
  const size_t n = (size_t)c->n, h = (size_t)c->h, nh = n * h, rows = (size_t)f->rows_max;
  const size_t total = 4 * nh + rows * h + n * rows + 2 * (size_t)c->tp * n + 3 * n + h;
  f->block_ = calloc(total, sizeof(float));
  LCE_CHECK(st, f->block_ != NULL, LCE_ENOMEM, "fused-host: out of memory for a %zu-float workspace", total);
  float *p = f->block_;
  f->hidden = p, p += nh;
  f->dh_part = p, p += nh;
  f->dh_shard = p, p += nh;
  f->dh_total = p, p += nh;
  f->w_chunk = p, p += rows * h;
  f->z = p, p += n * rows;
  f->m = p, p += (size_t)c->tp * n;
  f->s = p, p += (size_t)c->tp * n;
  f->z_target = p, p += n;
  f->lse = p, p += n;
  f->g = p, p += n;
  f->gw_row = p;
  return LCE_OK;
}

static lce_code check_outputs(const lce_case *c, const lce_outputs *out, lce_status *st) {
  LCE_CHECK(st, out != NULL && out->loss && out->loss_token && out->lse && out->d_hidden && out->grad_embedding,
            LCE_EINVAL, "fused-host: missing output buffer");
  LCE_CHECK(st, c->tied || out->grad_weight != NULL, LCE_EINVAL,
            "fused-host: untied case needs the grad_weight output buffer");
  return LCE_OK;
}

static void write_forward_outputs(const fused_host *f, lce_outputs *out) {
  const lce_case *c = f->c;
  float total = 0.0f;
  for (int64_t i = 0; i < c->n; i++) {
    float loss_i = token_valid(f, i) ? f->lse[i] - f->z_target[i] : 0.0f;
    out->loss_token[i] = loss_i;
    out->lse[i] = f->lse[i];
    total += loss_i;
  }
  if (c->reduction == LCE_RED_MEAN) total = f->n_valid > 0 ? total / (float)f->n_valid : 0.0f;
  out->loss[0] = total;
}

lce_code LCE_FUSED_HOST_RUN(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st) {
  LCE_TRY(lce_case_validate(c, st));
  LCE_TRY(lce_tensors_validate(c, in, st));
  LCE_TRY(check_outputs(c, out, st));
  fused_host f = {.c = c, .labels = in->labels, .n_valid = lce_count_valid(c, in)};
  LCE_TRY(workspace_alloc(&f, st));
  /* From here on nothing can fail: outputs are written only after every allocation succeeded. */
  select_output_weight(&f, in, out);
  for (int64_t e = 0; e < c->n * c->h; e++) f.hidden[e] = (float)lce_load(c->dtype, in->hidden, (size_t)e);
  forward(&f);
  write_forward_outputs(&f, out);
  loss_gradient(&f, in->grad_output);
  backward(&f);
  for (int64_t e = 0; e < c->n * c->h; e++) lce_store(c->dtype, out->d_hidden, (size_t)e, (double)f.dh_total[e]);
  free(f.block_);
  return LCE_OK;
}
