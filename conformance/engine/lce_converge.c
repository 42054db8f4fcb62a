/* lce_converge.c — the two training runs of lce_converge.h. */
#include "lce_converge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lce_parallel.h"
#include "lce_prng.h"
#include "lce_time.h"

enum { STREAM_OFFSET = 0x6301, STREAM_RANK = 0x6302, STREAM_INIT_E = 0x6303, STREAM_INIT_W = 0x6304 };
#define ZIPF_EXPONENT 1.1
#define CONTEXT_CLASSES 8
/* The parameter loops run over V·H elements (half a billion at H 4096, V 128k): element-wise ones in
 * parallel above this size, reductions in fixed blocks of it summed in block order, so that the result
 * is the same bits for any thread count (and, below one block, the plain serial sum). */
#define PARAM_BLOCK ((size_t)1 << 16)

lce_converge_config lce_converge_defaults(void) {
  return (lce_converge_config){.dtype = LCE_BF16, .n = 64, .h = 32, .v = 256, .vocab_chunk = 4, .steps = 60,
                               .eval_every = 10, .lr = 4.0, .seed = 1};
}

/* lce_case_default's tp 1, mean reduction, nothing ignored, no prior gradient, one token chunk. */
lce_case lce_converge_case(const lce_converge_config *cfg) {
  lce_case c = lce_case_default();
  c.n = cfg->n, c.h = cfg->h, c.v = c.vp = cfg->v, c.vocab_chunk = cfg->vocab_chunk;
  c.dtype = cfg->dtype, c.tied = cfg->tied, c.seed = cfg->seed;
  return c;
}

/* The token stream: x[0] = 0, x[t+1] = (offset[x[t] mod 8] + rank) mod V with rank drawn from the Zipf
 * law by inverting its CDF: eight classes of context, each with its own rotation of the vocab, so that a
 * few hundred steps learn a good part of the structure. */
static lce_code make_stream(const lce_converge_config *cfg, int64_t len, int64_t *x, lce_status *st) {
  int64_t v = cfg->v;
  double *cdf = malloc((size_t)v * sizeof *cdf);
  LCE_ALLOC_CHECK(st, cdf);
  double total = 0;
  for (int64_t r = 0; r < v; r++) cdf[r] = (total += pow((double)(r + 1), -ZIPF_EXPONENT));
  x[0] = 0;
  for (int64_t t = 0; t + 1 < len; t++) {
    double u = (double)lce_rand_below(cfg->seed, STREAM_RANK, (uint64_t)t, 1ull << 53) * 0x1p-53 * total;
    int64_t lo = 0, hi = v - 1;
    while (lo < hi) { /* first rank whose cumulative weight exceeds u */
      int64_t mid = (lo + hi) / 2;
      if (cdf[mid] > u) hi = mid;
      else lo = mid + 1;
    }
    int64_t offset = (int64_t)lce_rand_below(cfg->seed, STREAM_OFFSET, (uint64_t)(x[t] % CONTEXT_CLASSES), (uint64_t)v);
    x[t + 1] = (offset + lo) % v;
  }
  free(cdf);
  return LCE_OK;
}

/* Parameters of one run: E [v*h] and, untied, W [v*h], in double. A gradient also keeps d_hidden [n*h]
 * as the head returned it (dh), before assemble scatters it into E's rows. */
typedef struct params {
  double *e, *w, *dh;
  size_t size, nh; /* elements of each table, of dh */
} params;

/* The step's tensors from parameters p and the batch's tokens: hidden rows E[x_i], the tables, the
 * labels x_{i+1}; grad_output 1, priors 0. */
static void fill_tensors(const lce_case *c, const params *p, const int64_t *x, lce_tensors *in) {
  LCE_PARALLEL_FOR_IF(p->size > PARAM_BLOCK)
  for (size_t k = 0; k < p->size; k++) {
    lce_store(c->dtype, in->embedding, k, p->e[k]);
    if (!c->tied) lce_store(c->dtype, in->weight, k, p->w[k]);
  }
  for (int64_t i = 0; i < c->n; i++) {
    for (int64_t j = 0; j < c->h; j++)
      lce_store(c->dtype, in->hidden, (size_t)(i * c->h + j), p->e[x[i] * c->h + j]);
    in->labels[i] = x[i + 1];
  }
  in->grad_output[0] = 1.0f;
  memset(in->grad_embedding_prior, 0, p->size * sizeof(float));
  if (!c->tied) memset(in->grad_weight_prior, 0, p->size * sizeof(float));
}

/* Assembles the parameter gradient (g_e, g_w) from the head's gradient buffers and d_hidden scattered
 * to the embedding rows of the batch's tokens. emb(i): element i of the embedding table's buffer (the
 * output weight's when tied), wgt: the output weight's (untied), head(i) its elements, dh(i): element
 * i of d_hidden. */
typedef double (*elem_fn)(const void *buf, lce_dtype t, size_t i);
static double elem_f32(const void *buf, lce_dtype t, size_t i) {
  (void)t;
  return ((const float *)buf)[i];
}
static double elem_f64(const void *buf, lce_dtype t, size_t i) {
  (void)t;
  return ((const double *)buf)[i];
}
static double elem_dtype(const void *buf, lce_dtype t, size_t i) { return lce_load(t, buf, i); }

static void assemble(const lce_case *c, const int64_t *x, const void *emb, elem_fn embf, const void *wgt, elem_fn head,
                     const void *dh, elem_fn dhf, params *g) {
  LCE_PARALLEL_FOR_IF(g->size > PARAM_BLOCK)
  for (size_t k = 0; k < g->size; k++) {
    g->e[k] = embf(emb, c->dtype, k);
    if (!c->tied) g->w[k] = head(wgt, c->dtype, k);
  }
  for (int64_t i = 0; i < c->n; i++)
    for (int64_t j = 0; j < c->h; j++) {
      const size_t k = (size_t)(i * c->h + j);
      g->dh[k] = dhf(dh, c->dtype, k);
      g->e[x[i] * c->h + j] += g->dh[k];
    }
}

/* The reference at parameters p: exact loss and gradient. */
static lce_code reference_at(const lce_converge_config *cfg, const lce_case *c, const params *p, const int64_t *x,
                             lce_tensors *in, double *loss, params *g, lce_status *st) {
  fill_tensors(c, p, x, in);
  lce_reference ref;
  /* Values only: the loop needs the exact gradient, not the bounds a judge would (tier 2 then skips
   * its magnitudes and copies back two V x H tables instead of eight). */
  lce_code rc = lce_reference_prepare(cfg->tier, c, in, LCE_REF_VALUES, &ref, st);
  if (rc != LCE_OK) return rc;
  const lce_ref_output *o = ref.host.out;
  *loss = o[LCE_OUT_LOSS].value[0];
  /* untied: the embedding's buffer is its prior, which no reference keeps (lce_output_reference_count) */
  if (c->tied) assemble(c, x, o[LCE_OUT_D_WEIGHT].value, elem_f64, NULL, elem_f64, o[LCE_OUT_D_HIDDEN].value, elem_f64, g);
  else assemble(c, x, in->grad_embedding_prior, elem_f32, o[LCE_OUT_D_WEIGHT].value, elem_f64, o[LCE_OUT_D_HIDDEN].value,
                elem_f64, g);
  lce_reference_release(&ref);
  return LCE_OK;
}

/* The subject at parameters p: its gradient (its loss is not used: the reference's is exact). */
static lce_code subject_at(const lce_converge_config *cfg, const lce_case *c, const params *p, const int64_t *x,
                           lce_tensors *in, params *g, lce_status *st) {
  fill_tensors(c, p, x, in);
  lce_outputs out;
  LCE_TRY(lce_outputs_alloc(c, in, &out, st));
  lce_code rc = lce_subject_run(cfg->subject, c, in, &out, st);
  if (rc == LCE_OK)
    assemble(c, x, out.grad_embedding, elem_f32, out.grad_weight, elem_f32, out.d_hidden, elem_dtype, g);
  lce_outputs_free(&out);
  return rc;
}

static void phase(const lce_converge_config *cfg, int step, const char *what) {
  if (cfg->progress) cfg->progress(cfg->ctx, step, cfg->steps, what, NAN);
}

/* Two parameter (or gradient) sets and which part of them a sum runs over. */
typedef struct pair {
  const params *a, *b;
  const unsigned char *skip_row; /* [v] or NULL: rows of E the sum leaves out (head part, tied) */
  int64_t h;
} pair;

/* sum over k < size of term(p, k), in PARAM_BLOCK blocks (see PARAM_BLOCK). */
typedef double (*pair_term)(const pair *p, size_t k);
static double blocked_sum(const pair *p, size_t size, pair_term term) {
  size_t nblocks = (size + PARAM_BLOCK - 1) / PARAM_BLOCK;
  double *part = malloc(nblocks * sizeof *part), s = 0;
  if (part == NULL) { /* no room for the partial sums: the same blocks, one after the other */
    for (size_t k = 0; k < size; k++) s += term(p, k);
    return s;
  }
  LCE_PARALLEL_FOR_IF(nblocks > 1)
  for (size_t blk = 0; blk < nblocks; blk++) {
    size_t end = (blk + 1) * PARAM_BLOCK < size ? (blk + 1) * PARAM_BLOCK : size;
    double t = 0;
    for (size_t k = blk * PARAM_BLOCK; k < end; k++) t += term(p, k);
    part[blk] = t;
  }
  for (size_t blk = 0; blk < nblocks; blk++) s += part[blk];
  free(part);
  return s;
}

static double dot_term(const pair *p, size_t k) {
  return p->a->e[k] * p->b->e[k] + (p->a->w ? p->a->w[k] * p->b->w[k] : 0);
}
static double dist2_term(const pair *p, size_t k) {
  double de = p->a->e[k] - p->b->e[k], dw = p->a->w ? p->a->w[k] - p->b->w[k] : 0;
  return de * de + dw * dw;
}

static double dot(const params *a, const params *b) { return blocked_sum(&(pair){a, b, NULL, 0}, a->size, dot_term); }

/* ‖a − b‖ */
static double dist(const params *a, const params *b) {
  return sqrt(blocked_sum(&(pair){a, b, NULL, 0}, a->size, dist2_term));
}

/* The head weight's gradient alone (lce_converge.h, relerr_head): W untied, E's rows outside the batch
 * tied. The terms are |a−b|² and |b|². */
static double head_value(const pair *p, const params *q, size_t k) {
  if (q->w) return q->w[k];
  return p->skip_row[k / (size_t)p->h] ? 0.0 : q->e[k];
}
static double head_dist2_term(const pair *p, size_t k) {
  double d = head_value(p, p->a, k) - head_value(p, p->b, k);
  return d * d;
}
static double head_norm2_term(const pair *p, size_t k) {
  double r = head_value(p, p->b, k);
  return r * r;
}

/* ‖a − b‖ / ‖b‖ of d_hidden and of the head part; 0 where ‖b‖ is 0. */
static void part_relerr(const pair *p, double *hidden, double *head) {
  double d2 = 0, r2 = 0;
  for (size_t k = 0; k < p->a->nh; k++) {
    double d = p->a->dh[k] - p->b->dh[k];
    d2 += d * d, r2 += p->b->dh[k] * p->b->dh[k];
  }
  *hidden = r2 > 0 ? sqrt(d2 / r2) : 0;
  double hr2 = blocked_sum(p, p->a->size, head_norm2_term);
  *head = hr2 > 0 ? sqrt(blocked_sum(p, p->a->size, head_dist2_term) / hr2) : 0;
}

static void sgd(params *p, const params *g, double lr) {
  LCE_PARALLEL_FOR_IF(p->size > PARAM_BLOCK)
  for (size_t k = 0; k < p->size; k++) {
    p->e[k] -= lr * g->e[k];
    if (p->w) p->w[k] -= lr * g->w[k];
  }
}

static lce_code params_alloc(params *p, size_t size, size_t nh, int tied, lce_status *st) {
  p->size = size, p->nh = nh;
  p->e = calloc(size, sizeof *p->e);
  p->w = tied ? NULL : calloc(size, sizeof *p->w);
  p->dh = calloc(nh, sizeof *p->dh);
  LCE_CHECK(st, p->e != NULL && (tied || p->w != NULL) && p->dh != NULL, LCE_ENOMEM,
            "out of memory for %zu parameters", size);
  return LCE_OK;
}

static void params_free(params *p) {
  free(p->e);
  free(p->w);
  free(p->dh);
}

static void params_copy(params *dst, const params *src) {
  memcpy(dst->e, src->e, src->size * sizeof *dst->e);
  if (src->w) memcpy(dst->w, src->w, src->size * sizeof *dst->w);
  memcpy(dst->dh, src->dh, src->nh * sizeof *dst->dh);
}

/* The start: untied, E ~ N(0, 1) and W ~ N(0, 1/(4H)), so that the first logits are ~N(0, 1/4); tied,
 * E ~ N(0, 1/(4 sqrt H)), so that the logits E_x·E_y are ~N(0, 1/16) and a token's logit with itself,
 * ‖E_x‖² ≈ sqrt(H)/4, starts small too. */
static void params_init(const lce_converge_config *cfg, params *p) {
  double se = cfg->tied ? 0.5 / sqrt(sqrt((double)cfg->h)) : 1.0, sw = 0.5 / sqrt((double)cfg->h);
  LCE_PARALLEL_FOR_IF(p->size > PARAM_BLOCK)
  for (size_t k = 0; k < p->size; k++) {
    p->e[k] = se * lce_rand_normal(cfg->seed, STREAM_INIT_E, k);
    if (p->w) p->w[k] = sw * lce_rand_normal(cfg->seed, STREAM_INIT_W, k);
  }
}

lce_code lce_converge_run(const lce_converge_config *cfg, lce_converge_result *res, lce_status *st) {
  memset(res, 0, sizeof *res);
  LCE_CHECK(st, cfg->subject != NULL, LCE_EINVAL, "converge: no subject");
  LCE_CHECK(st, cfg->steps >= 1 && cfg->steps <= 100000, LCE_EINVAL, "converge: steps %d not in [1, 100000]",
            cfg->steps);
  LCE_CHECK(st, cfg->eval_every >= 1, LCE_EINVAL, "converge: eval_every %d must be >= 1", cfg->eval_every);
  LCE_CHECK(st, isfinite(cfg->lr) && cfg->lr > 0, LCE_EINVAL, "converge: learning rate %g must be finite and > 0",
            cfg->lr);
  lce_case c = lce_converge_case(cfg);
  LCE_TRY(lce_case_validate(&c, st));
  char why[200];
  LCE_CHECK(st, lce_subject_supports(cfg->subject, &c, why, sizeof why), LCE_ESKIP, "converge: %s cannot run %s: %s",
            cfg->subject->name, c.tied ? "tied" : "untied", why);
  lce_converge_config run = *cfg;
  if (run.tier == NULL) run.tier = lce_reference_tier_find("fast");

  double t0 = lce_now_seconds();
  size_t size = (size_t)(c.v * c.h);
  /* A batch per step, then the held-out batch every evaluation uses. */
  int64_t len = (int64_t)(cfg->steps + 1) * c.n + 1;
  int64_t *x = malloc((size_t)len * sizeof *x);
  int nevals = cfg->steps / cfg->eval_every + 2;
  res->eval = calloc((size_t)nevals, sizeof *res->eval);
  params a = {0}, b = {0}, start = {0}, ga = {0}, gr = {0}, gb = {0};
  lce_tensors in;
  memset(&in, 0, sizeof in);
  lce_code rc = LCE_OK;
  if (x == NULL || res->eval == NULL) rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory for the run");
  phase(cfg, 0, "setup: the token stream, six parameter sets, the case tensors");
  if (rc == LCE_OK) rc = make_stream(cfg, len, x, st);
  params *all[] = {&a, &b, &start, &ga, &gr, &gb};
  for (size_t k = 0; rc == LCE_OK && k < sizeof all / sizeof all[0]; k++)
    rc = params_alloc(all[k], size, (size_t)(c.n * c.h), c.tied, st);
  unsigned char *in_batch = calloc((size_t)c.v, 1); /* the agreement's batch rows (relerr_head, tied) */
  if (rc == LCE_OK && in_batch == NULL) rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory for the run");
  if (rc == LCE_OK) rc = lce_tensors_alloc(&c, &in, st); /* fill_tensors writes every element each step */
  if (rc == LCE_OK) {
    params_init(cfg, &start);
    params_copy(&a, &start);
    params_copy(&b, &start);
  }
  const int64_t *held_out = x + (int64_t)cfg->steps * c.n;
  res->steps = cfg->steps;
  res->min_cosine = 1;
  for (int s = 0; rc == LCE_OK && s <= cfg->steps; s++) {
    const int64_t *batch = x + (int64_t)s * c.n;
    int evaluate = s % cfg->eval_every == 0 || s == cfg->steps;
    if (evaluate) {
      lce_converge_step *r = &res->eval[res->nevals];
      phase(cfg, s, "evaluation: the held-out loss of both runs (reference)");
      rc = reference_at(&run, &c, &b, held_out, &in, &r->loss_b, &gr, st);
      /* Both runs start at the same parameters: at step 0 the reference's results at a are those at b
       * (here and for the agreement below), which saves two reference runs of seconds each at a
       * production-sized head. */
      if (rc == LCE_OK && s == 0) r->loss_a = r->loss_b;
      else if (rc == LCE_OK) rc = reference_at(&run, &c, &a, held_out, &in, &r->loss_a, &gr, st);
      if (rc != LCE_OK) break;
      r->step = s;
      r->gap = (r->loss_a - r->loss_b) / r->loss_b;
      double moved = dist(&b, &start);
      r->drift = moved > 0 ? dist(&a, &b) / moved : 0;
      res->nevals++;
    }
    if (s == cfg->steps) break;
    double loss;
    phase(cfg, s, "the reference's gradient at its own parameters");
    rc = reference_at(&run, &c, &b, batch, &in, &loss, &gb, st);
    phase(cfg, s, "the subject's gradient at its own parameters");
    if (rc == LCE_OK) rc = subject_at(&run, &c, &a, batch, &in, &ga, st);
    if (evaluate) phase(cfg, s, "the reference's gradient at the subject's parameters (agreement)");
    if (rc == LCE_OK && evaluate && s == 0) params_copy(&gr, &gb);
    else if (rc == LCE_OK && evaluate) rc = reference_at(&run, &c, &a, batch, &in, &(double){0}, &gr, st);
    if (rc != LCE_OK) break;
    if (evaluate) { /* the subject's gradient against the reference's, at the subject's parameters */
      lce_converge_step *r = &res->eval[res->nevals - 1];
      double nr = sqrt(dot(&gr, &gr)), ns = sqrt(dot(&ga, &ga));
      r->cosine = nr > 0 && ns > 0 ? dot(&ga, &gr) / (nr * ns) : 0;
      r->relerr = nr > 0 ? dist(&ga, &gr) / nr : 0;
      r->bias = nr > 0 ? (dot(&ga, &gr) - nr * nr) / (nr * nr) : 0;
      for (int64_t i = 0; i < c.n; i++) in_batch[batch[i]] = 1;
      part_relerr(&(pair){&ga, &gr, in_batch, c.h}, &r->relerr_hidden, &r->relerr_head);
      for (int64_t i = 0; i < c.n; i++) in_batch[batch[i]] = 0;
      r->has_gradient = 1;
      if (r->cosine < res->min_cosine) res->min_cosine = r->cosine;
      if (r->relerr > res->max_relerr) res->max_relerr = r->relerr;
      if (r->relerr_hidden > res->max_relerr_hidden) res->max_relerr_hidden = r->relerr_hidden;
      if (r->relerr_head > res->max_relerr_head) res->max_relerr_head = r->relerr_head;
    }
    sgd(&a, &ga, cfg->lr);
    sgd(&b, &gb, cfg->lr);
    if (cfg->progress) cfg->progress(cfg->ctx, s + 1, cfg->steps, NULL, loss);
  }
  res->seconds = lce_now_seconds() - t0;
  lce_tensors_free(&in);
  free(in_batch);
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) params_free(all[k]);
  free(x);
  if (rc != LCE_OK) lce_converge_free(res);
  return rc;
}

void lce_converge_free(lce_converge_result *res) {
  free(res->eval);
  res->eval = NULL;
  res->nevals = 0;
}
