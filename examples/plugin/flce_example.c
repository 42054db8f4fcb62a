/* flce_example.c — fused linear cross-entropy (the LM-head GEMM with softmax cross-entropy, forward
 * and backward) as an lcecheck plugin, written against nothing but <lcecheck/lcecheck_subject.h>,
 * whose header comment holds the math this file implements.
 *
 * Clarity over speed, on the CPU: every token's logits row is computed in double (products of
 * bf16/fp16/fp32 values are exact in double), then its lse and loss; the backward walks each
 * vocab-parallel shard's real rows in chunks of vocab_chunk rows, adds each chunk's d_hidden partial
 * sum (double) into a running fp32 buffer per shard (the ranks' buffers are then added in fp32, as an
 * all-reduce does) and accumulates the weight gradient in double before one add into the fp32
 * buffer. Implements every option of the interface (smoothing, z-loss, softcap, class weights, tf32).
 *
 * Build (see CMakeLists.txt and README.md): two plugins from this file,
 *   libflce_example.so           the correct version
 *   libflce_example_seed_bug.so  -DSEED_BUG: Megatron-LM PR #2739's bug, the d_hidden running sum
 *                                kept in the input dtype (bf16 in bf16 training) and so rounded after
 *                                every vocab chunk; lcecheck must fail it on d_hidden.
 * Run: lcecheck check --subject plugin:$PWD/libflce_example.so --matrix smoke */
#include <lcecheck/lcecheck_subject.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- formats ---------------------------------------------------------------------------------- */

static double load(int32_t dtype, const void *buf, int64_t i) {
  if (dtype == LCECHECK_DTYPE_FP32) return ((const float *)buf)[i];
  const uint16_t b = ((const uint16_t *)buf)[i];
  if (dtype == LCECHECK_DTYPE_BF16) { /* the top half of an fp32 */
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
  }
  const int e = (b >> 10) & 0x1f, m = b & 0x3ff; /* fp16 */
  const double x = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, e - 25);
  return (b & 0x8000) ? -x : x;
}

/* x rounded once, to nearest even, to p significant bits with exponents in [emin, emax] (gradual
 * underflow, overflow to infinity). Straight from double: going through float first would round
 * twice. */
static double round_bits(double x, int p, int emin, int emax) {
  if (x == 0.0 || !isfinite(x)) return x;
  int e = ilogb(x);
  if (e < emin) e = emin;
  const double r = ldexp(nearbyint(ldexp(x, p - 1 - e)), e - (p - 1));
  return fabs(r) >= ldexp(1.0, emax + 1) ? copysign(INFINITY, x) : r;
}

static double round_to(int32_t dtype, double x) {
  if (dtype == LCECHECK_DTYPE_BF16) return round_bits(x, 8, -126, 127);
  if (dtype == LCECHECK_DTYPE_FP16) return round_bits(x, 11, -14, 15);
  return (float)x;
}

static void store(int32_t dtype, void *buf, int64_t i, double x) {
  const double r = round_to(dtype, x);
  if (dtype == LCECHECK_DTYPE_FP32) {
    ((float *)buf)[i] = (float)r;
    return;
  }
  uint16_t bits;
  if (dtype == LCECHECK_DTYPE_BF16) { /* r is an fp32 value with 8 significant bits */
    const float f = (float)r;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    bits = isnan(r) ? (uint16_t)((u >> 16) | 0x40) : (uint16_t)(u >> 16);
  } else {
    const double a = fabs(r);
    if (isnan(r)) bits = 0x7e00;
    else if (isinf(r)) bits = 0x7c00;
    else if (a < ldexp(1.0, -14)) bits = (uint16_t)ldexp(a, 24); /* subnormal (or zero) */
    else {
      const int e = ilogb(a);
      bits = (uint16_t)(((e + 15) << 10) | ((int)ldexp(a, 10 - e) - 0x400));
    }
    if (signbit(r)) bits |= 0x8000;
  }
  ((uint16_t *)buf)[i] = bits;
}

/* x rounded to tf32: 10 explicit mantissa bits, ties away from zero (PTX cvt.rna.tf32.f32). */
static double round_tf32(double x) {
  if (x == 0.0 || !isfinite(x)) return x;
  int e = ilogb(x);
  if (e < -126) e = -126;
  const double r = ldexp(round(ldexp(x, 10 - e)), e - 10);
  return fabs(r) > 0x1.ffcp127 ? copysign(INFINITY, x) : r;
}

/* The d_hidden running sum after one more vocab chunk's partial sum: an fp32 buffer, or with the
 * seed bug a buffer in the input dtype, rounded after every chunk. */
static double accumulate(int32_t dtype, double running, double partial) {
#ifdef SEED_BUG
  return round_to(dtype, running + partial);
#else
  (void)dtype;
  return (float)(running + partial);
#endif
}

/* ---- the run ---------------------------------------------------------------------------------- */

typedef struct run {
  const lcecheck_case_v1 *c;
  double *hid;      /* [n*h] hidden as the GEMMs read it */
  double *w;        /* [v*h] the output weight's real rows as the GEMMs read them */
  double *cw;       /* [v] class weights (1 without) */
  double *z, *ds;   /* [v] one token's logits, then its d_logits */
  double *gw;       /* [v*h] the weight gradient of this run */
  double *dh_shard; /* [h] one shard's d_hidden running sum */
  double *dh;       /* [h] the shards' sums added */
  double *part;     /* [h] one chunk's partial sum */
} run;

static double gemm_operand(const lcecheck_case_v1 *c, double x) { return c->gemm_tf32 ? round_tf32(x) : x; }

/* Token t's logits z[v] (NaN where the dot product is not finite) and its lse (NaN if any z is). */
static double logits_and_lse(run *r, int64_t t) {
  const lcecheck_case_v1 *c = r->c;
  double m = -INFINITY;
  int nan = 0;
  for (int64_t v = 0; v < c->v; v++) {
    double s = 0.0;
    for (int64_t k = 0; k < c->h; k++) s += r->hid[t * c->h + k] * r->w[v * c->h + k];
    if (!isfinite(s)) s = NAN;
    r->z[v] = c->softcap > 0 ? c->softcap * tanh(s / c->softcap) : s;
    nan |= isnan(r->z[v]);
    if (r->z[v] > m) m = r->z[v];
  }
  if (nan) return NAN;
  double sum = 0.0;
  for (int64_t v = 0; v < c->v; v++) sum += exp(r->z[v] - m);
  return m + log(sum);
}

/* d_hidden of one token from its d_logits ds: per shard, chunk partial sums into a running buffer. */
static void token_d_hidden(run *r) {
  const lcecheck_case_v1 *c = r->c;
  const int64_t h = c->h, shard = c->vp / c->tp;
  for (int64_t k = 0; k < h; k++) r->dh[k] = 0.0;
  for (int32_t rank = 0; rank < c->tp; rank++) {
    const int64_t lo = rank * shard, hi = lo + shard < c->v ? lo + shard : c->v; /* real rows only */
    for (int64_t k = 0; k < h; k++) r->dh_shard[k] = 0.0;
    for (int64_t row0 = lo; row0 < hi; row0 += c->vocab_chunk) {
      const int64_t row1 = row0 + c->vocab_chunk < hi ? row0 + c->vocab_chunk : hi;
      for (int64_t k = 0; k < h; k++) r->part[k] = 0.0;
      for (int64_t v = row0; v < row1; v++)
        for (int64_t k = 0; k < h; k++) r->part[k] += r->ds[v] * r->w[v * h + k];
      for (int64_t k = 0; k < h; k++) r->dh_shard[k] = accumulate(c->dtype, r->dh_shard[k], r->part[k]);
    }
    for (int64_t k = 0; k < h; k++) r->dh[k] = accumulate(c->dtype, r->dh[k], r->dh_shard[k]);
  }
}

static int flce_run(void *state, const lcecheck_case_v1 *c, const lcecheck_inputs_v1 *in,
                    const lcecheck_outputs_v1 *out, char *msg, size_t msg_size) {
  (void)state;
  const int64_t n = c->n, h = c->h, V = c->v;
  const void *wsrc = c->tied ? in->embedding : in->weight;
  float *grad_w = c->tied ? out->grad_embedding : out->grad_weight;
  run r = {.c = c};
  r.hid = malloc((size_t)(n * h) * sizeof *r.hid);
  r.w = malloc((size_t)(V * h) * sizeof *r.w);
  r.cw = malloc((size_t)V * sizeof *r.cw);
  r.z = malloc((size_t)V * sizeof *r.z);
  r.ds = malloc((size_t)V * sizeof *r.ds);
  r.gw = calloc((size_t)(V * h), sizeof *r.gw);
  r.dh_shard = malloc((size_t)h * sizeof *r.dh_shard);
  r.dh = malloc((size_t)h * sizeof *r.dh);
  r.part = malloc((size_t)h * sizeof *r.part);
  int rc = LCECHECK_OK;
  if (!r.hid || !r.w || !r.cw || !r.z || !r.ds || !r.gw || !r.dh_shard || !r.dh || !r.part) {
    snprintf(msg, msg_size, "out of memory (n %lld, h %lld, v %lld)", (long long)n, (long long)h, (long long)V);
    rc = LCECHECK_ERROR;
    goto done;
  }
  for (int64_t i = 0; i < n * h; i++) r.hid[i] = gemm_operand(c, load(c->dtype, in->hidden, i));
  for (int64_t i = 0; i < V * h; i++) r.w[i] = gemm_operand(c, load(c->dtype, wsrc, i));
  double sum_w = 0.0, sum_valid_w = 0.0; /* sum_v w_v, and sum_n W_n (the mean's divisor) */
  for (int64_t v = 0; v < V; v++) sum_w += r.cw[v] = in->class_weight ? in->class_weight[v] : 1.0;
  for (int64_t t = 0; t < n; t++)
    if (in->labels[t] != c->ignore_index) sum_valid_w += r.cw[in->labels[t]];
  const double e = c->smoothing_e, e_v = e / (double)V, lambda = c->z_loss;
  double loss = 0.0;
  for (int64_t t = 0; t < n; t++) {
    const int64_t y = in->labels[t];
    const double lse = logits_and_lse(&r, t);
    out->lse[t] = (float)lse;
    if (y == c->ignore_index) { /* no loss, no gradient */
      out->loss_token[t] = 0.0f;
      for (int64_t k = 0; k < h; k++) store(c->dtype, out->d_hidden, t * h + k, 0.0);
      continue;
    }
    const double wy = r.cw[y];
    double smooth = 0.0;
    for (int64_t v = 0; v < V; v++) smooth += r.cw[v] * (lse - r.z[v]);
    const double lt = (1 - e) * wy * (lse - r.z[y]) + e_v * smooth + lambda * lse * lse;
    out->loss_token[t] = (float)lt;
    loss += lt;
    /* g: d loss / d loss[t] */
    const double go = c->reduction == LCECHECK_REDUCTION_NONE ? in->grad_output[t] : in->grad_output[0];
    const double g = sum_valid_w == 0.0 ? 0.0 : c->reduction == LCECHECK_REDUCTION_MEAN ? go / sum_valid_w : go;
    const double kp = (1 - e) * wy + e_v * sum_w + 2 * lambda * lse; /* what p multiplies */
    for (int64_t v = 0; v < V; v++) {
      const double p = exp(r.z[v] - lse);
      const double dz = g * (p * kp - (v == y ? (1 - e) * wy : 0.0) - e_v * r.cw[v]);
      const double zc = c->softcap > 0 ? r.z[v] / c->softcap : 0.0;
      r.ds[v] = dz * (c->softcap > 0 ? 1 - zc * zc : 1.0);
      for (int64_t k = 0; k < h; k++) r.gw[v * h + k] += r.ds[v] * r.hid[t * h + k];
    }
    token_d_hidden(&r);
    for (int64_t k = 0; k < h; k++) store(c->dtype, out->d_hidden, t * h + k, r.dh[k]);
  }
  out->loss[0] = (float)(c->reduction == LCECHECK_REDUCTION_MEAN ? (sum_valid_w > 0 ? loss / sum_valid_w : 0.0) : loss);
  for (int64_t i = 0; i < V * h; i++) grad_w[i] = (float)((double)grad_w[i] + r.gw[i]); /* padded rows untouched */
done:
  free(r.hid), free(r.w), free(r.cw), free(r.z), free(r.ds), free(r.gw), free(r.dh_shard), free(r.dh), free(r.part);
  return rc;
}

/* ---- the entry lcecheck looks up ---------------------------------------------------------------- */

#ifdef SEED_BUG
#define FLCE_NAME "flce-example-seed-bug"
#define FLCE_CAPS (LCECHECK_CAP_ALL_SEMANTICS | LCECHECK_CAP_MUTANT)
#define FLCE_DESCRIPTION "the example with Megatron-LM PR #2739's bug: d_hidden accumulated in the input dtype"
#else
#define FLCE_NAME "flce-example"
#define FLCE_CAPS LCECHECK_CAP_ALL_SEMANTICS
#define FLCE_DESCRIPTION "fused linear cross-entropy on the CPU in double, fp32 d_hidden buffer across vocab chunks"
#endif

static const lcecheck_subject_v1 subjects[] = {
    {.abi_version = LCECHECK_SUBJECT_ABI_VERSION,
     .name = FLCE_NAME,
     .golden_class = "fused-host", /* judged by the bounds lcecheck's own fused algorithm meets */
     .description = FLCE_DESCRIPTION,
     .caps = FLCE_CAPS,
     .inner = LCECHECK_INNER_CHUNKED, /* d_hidden sums one vocab chunk at a time */
     .run = flce_run},
    {.name = NULL},
};

LCECHECK_EXPORT const lcecheck_subject_v1 *lcecheck_subject_entry(uint32_t abi_version) {
  (void)abi_version; /* lcecheck checks subjects[0].abi_version against its own */
  return subjects;
}
