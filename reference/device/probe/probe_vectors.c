/* probe_vectors.c — test-vector tiles of the MMA probe, one generator per class (probe_vectors.h).
 *
 * Every value is drawn from lce_prng with stream (format, tile) and a running index, and rounded
 * to the operand format once, so each tile is a pure function of (seed, format, tile). The class
 * generators shape whole tiles because all 128 elements of a tile share rows of A and columns of
 * B: a cancelling pair of products, for instance, is a pair of equal B rows times a pair of
 * opposite A columns, which cancels in every element of the tile. */
#include "probe_vectors.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lce_dtype.h"
#include "lce_prng.h"

static const char *const CLASS_NAMES[PROBE_CLASSES] = {
    "exact", "normal", "spread", "cancel", "subnormal", "carry", "signed-zero", "c-dominant", "c-negligible",
    "nonfinite", "near-overflow"};

/* How many tiles of each class one cycle deals; NaN/Inf are "a few". */
static const int CLASS_WEIGHT[PROBE_CLASSES] = {1, 4, 3, 3, 2, 3, 1, 2, 2, 1, 1};

typedef struct format_info {
  const char *name;
  int k, precision, emin, emax;
} format_info;

static const format_info FORMATS[LCE_MMA_FORMATS] = {
    [LCE_MMA_BF16] = {"bf16", 16, 8, -126, 127},
    [LCE_MMA_FP16] = {"fp16", 16, 11, -14, 15},
    [LCE_MMA_TF32] = {"tf32", 8, 11, -126, 127},
};

const char *probe_class_name(probe_class c) { return (unsigned)c < PROBE_CLASSES ? CLASS_NAMES[c] : "?"; }
const char *probe_format_name(lce_mma_format f) { return (unsigned)f < LCE_MMA_FORMATS ? FORMATS[f].name : "?"; }
int probe_format_k(lce_mma_format f) { return FORMATS[f].k; }

int probe_format_parse(const char *s, lce_mma_format *out) {
  for (int f = 0; f < LCE_MMA_FORMATS; f++)
    if (strcmp(s, FORMATS[f].name) == 0) {
      *out = (lce_mma_format)f;
      return 1;
    }
  return 0;
}

double probe_round(lce_mma_format f, double x) {
  return lce_round_format(x, FORMATS[f].precision, FORMATS[f].emin, FORMATS[f].emax, 0);
}

uint32_t probe_bits(lce_mma_format f, float x) {
  const uint32_t u = lce_f32_bits(x);
  switch (f) {
    case LCE_MMA_BF16: return u >> 16; /* exact bf16 values have 16 zero low bits */
    case LCE_MMA_FP16: return lce_fp16_from_double((double)x);
    default: return u; /* tf32 travels as fp32 bits with 13 zero low bits */
  }
}

/* ---- drawing -------------------------------------------------------------------------------- */

typedef struct gen {
  uint64_t seed, stream, index;
  lce_mma_format f;
} gen;

static double g_uniform(gen *g) { return lce_rand_uniform(g->seed, g->stream, g->index++); }
static int g_below(gen *g, int n) { return (int)lce_rand_below(g->seed, g->stream, g->index++, (uint64_t)n); }
static int g_range(gen *g, int lo, int hi) { return lo + g_below(g, hi - lo + 1); }
static double g_sign(gen *g) { return g_below(g, 2) ? -1.0 : 1.0; }

/* A randn operand value. */
static float op_normal(gen *g) {
  return (float)probe_round(g->f, lce_rand_normal(g->seed, g->stream, g->index++));
}
/* ±(1 + u)·2^e, e in [elo, ehi], rounded to the operand format. */
static float op_pow(gen *g, int elo, int ehi) {
  const double m = 1.0 + g_uniform(g);
  return (float)probe_round(g->f, g_sign(g) * ldexp(m, g_range(g, elo, ehi)));
}
/* The same for an fp32 accumulator, saturating at FLT_MAX rather than rounding up to Inf. */
static float acc_pow(gen *g, int elo, int ehi) {
  const float v = (float)(g_sign(g) * ldexp(1.0 + g_uniform(g), g_range(g, elo, ehi)));
  return isinf(v) ? copysignf(FLT_MAX, v) : v;
}
static float op_int(gen *g, int lo, int hi) { return (float)g_range(g, lo, hi); }

/* ---- one tile ------------------------------------------------------------------------------- */

typedef struct tile {
  float *a, *b, *c; /* [16][k], [k][8], [16][8] */
  int k;
} tile;

#define A_(t, i, kk) (t)->a[(i) * (t)->k + (kk)]
#define B_(t, kk, j) (t)->b[(kk) * PROBE_N + (j)]
#define C_(t, i, j) (t)->c[(i) * PROBE_N + (j)]

static void fill_ab_normal(tile *t, gen *g) {
  for (int x = 0; x < PROBE_M * t->k; x++) t->a[x] = op_normal(g);
  for (int x = 0; x < t->k * PROBE_N; x++) t->b[x] = op_normal(g);
}
static void fill_c_pow(tile *t, gen *g, int elo, int ehi) {
  for (int x = 0; x < PROBE_TILE_OUT; x++) t->c[x] = acc_pow(g, elo, ehi);
}
/* The exact sum of products of element (i, j): every product is exact in double and these
 * tiles keep the sum within 53 bits. */
static double exact_dot(const tile *t, int i, int j) {
  double s = 0.0;
  for (int kk = 0; kk < t->k; kk++) s += (double)A_(t, i, kk) * (double)B_(t, kk, j);
  return s;
}

static void gen_exact(tile *t, gen *g) {
  for (int x = 0; x < PROBE_M * t->k; x++) t->a[x] = op_int(g, -8, 8);
  for (int x = 0; x < t->k * PROBE_N; x++) t->b[x] = op_int(g, -8, 8);
  for (int x = 0; x < PROBE_TILE_OUT; x++) t->c[x] = op_int(g, -1000, 1000);
}

static void gen_normal(tile *t, gen *g) {
  fill_ab_normal(t, g);
  for (int x = 0; x < PROBE_TILE_OUT; x++) t->c[x] = (float)(4.0 * lce_rand_normal(g->seed, g->stream, g->index++));
}

static void gen_spread(tile *t, gen *g) {
  const int r = g->f == LCE_MMA_FP16 ? 12 : 30;
  for (int x = 0; x < PROBE_M * t->k; x++) t->a[x] = op_pow(g, -r, r);
  for (int x = 0; x < t->k * PROBE_N; x++) t->b[x] = op_pow(g, -r, r);
  fill_c_pow(t, g, -2 * r, 2 * r);
}

/* Four variants by tile index: exact pairwise cancellation to 0; a large cancelling pair beside
 * a lone tiny product (the residue sits below the alignment window of the large terms); c
 * cancelling the whole exact sum, to 0 or ±1 ulp; pairs that cancel up to one operand ulp. */
static void gen_cancel(tile *t, gen *g, size_t index) {
  const int variant = (int)(index % 4), half = t->k / 2;
  const int big = g->f == LCE_MMA_FP16 ? 10 : 20;
  if (variant == 2) {
    for (int x = 0; x < PROBE_M * t->k; x++) t->a[x] = op_int(g, -15, 15) * 0.25f;
    for (int x = 0; x < t->k * PROBE_N; x++) t->b[x] = op_int(g, -15, 15);
    for (int i = 0; i < PROBE_M; i++)
      for (int j = 0; j < PROBE_N; j++) {
        float c = (float)-exact_dot(t, i, j); /* exact: |sum| < 2^12 in quarters */
        const int nudge = g_below(g, 3);
        if (nudge) c = nextafterf(c, nudge == 1 ? INFINITY : -INFINITY);
        C_(t, i, j) = c;
      }
    return;
  }
  for (int p = 0; p < half; p++)
    for (int j = 0; j < PROBE_N; j++) B_(t, 2 * p, j) = B_(t, 2 * p + 1, j) = op_normal(g);
  for (int i = 0; i < PROBE_M; i++)
    for (int p = 0; p < half; p++) {
      float x = op_normal(g);
      if (variant == 1 && p == 0) x = (float)probe_round(g->f, ldexp(x, big));
      A_(t, i, 2 * p) = x;
      A_(t, i, 2 * p + 1) = variant == 3 ? (float)-probe_round(g->f, x * (1.0 + ldexp(1.0, -7))) : -x;
      if (variant == 1 && p == half - 1) {
        A_(t, i, 2 * p) = (float)probe_round(g->f, ldexp(op_normal(g), -big));
        A_(t, i, 2 * p + 1) = 0.0f;
      }
    }
  if (variant == 3) fill_c_pow(t, g, -12, -8);
  else
    for (int x = 0; x < PROBE_TILE_OUT; x++) t->c[x] = 0.0f;
}

/* Subnormal operands (half of A) beside the smallest normals; B either moderate (products near
 * and below fp32's subnormal range for bf16/tf32) or again tiny; c an fp32 subnormal, zero or the
 * smallest normals. */
static void gen_subnormal(tile *t, gen *g, size_t index) {
  const format_info *fi = &FORMATS[g->f];
  const int qexp = fi->emin - fi->precision + 1; /* exponent of the smallest subnormal */
  for (int x = 0; x < PROBE_M * t->k; x++)
    t->a[x] = g_below(g, 2) ? (float)(g_sign(g) * ldexp(g_range(g, 1, (1 << (fi->precision - 1)) - 1), qexp))
                            : op_pow(g, fi->emin, fi->emin + 8);
  const int tiny_b = index % 2 == 1;
  for (int x = 0; x < t->k * PROBE_N; x++)
    t->b[x] = tiny_b ? op_pow(g, fi->emin, fi->emin + 20) : op_pow(g, -4, g->f == LCE_MMA_FP16 ? 15 : 4);
  for (int x = 0; x < PROBE_TILE_OUT; x++) {
    const int kind = g_below(g, 3);
    t->c[x] = kind == 0 ? (float)(g_sign(g) * ldexp(g_range(g, 1, (1 << 23) - 1), -149))
              : kind == 1 ? (float)(g_sign(g) * 0.0)
                          : acc_pow(g, -126, -120);
  }
}

/* c just below a binade boundary and products of c's sign worth about an ulp of c each (carry),
 * or c just above a power of two and products of the other sign (borrow): the 16 products add up
 * to ~9 ulps of c against a distance of 1..32 ulps to the boundary, so about a third of the
 * elements cross it. Each product is at least the alignment quantum of a 2-extra-bit window at
 * c's exponent, so truncation and rounding of the products both show. */
static void gen_carry(tile *t, gen *g, size_t index) {
  const int borrow = index % 2 == 1;
  const int e = g->f == LCE_MMA_FP16 ? g_range(g, 8, 20) : g_range(g, -8, 8);
  const double s = g_sign(g);
  for (int x = 0; x < PROBE_TILE_OUT; x++) {
    const double r = g_range(g, 1, 32);
    t->c[x] = (float)(s * ldexp(borrow ? 1.0 + r * 0x1p-23 : 2.0 - r * 0x1p-23, e));
  }
  const int pe = e - 25; /* products (1+u)(1+v)·2^pe, ~2.25·2^(e-25) on average */
  for (int x = 0; x < PROBE_M * t->k; x++) t->a[x] = (float)probe_round(g->f, ldexp(1.0 + g_uniform(g), pe / 2));
  for (int x = 0; x < t->k * PROBE_N; x++)
    t->b[x] = (float)probe_round(g->f, (borrow ? -s : s) * ldexp(1.0 + g_uniform(g), pe - pe / 2));
}

/* Every product is a zero: A all ±0 (variant 0), B all ±0 (variant 1), or A all -0 times
 * positive B so every product is -0 (variant 2); c is +0 or -0. */
static void gen_signed_zero(tile *t, gen *g, size_t index) {
  const int variant = (int)(index % 3);
  fill_ab_normal(t, g);
  if (variant == 1)
    for (int x = 0; x < t->k * PROBE_N; x++) t->b[x] = (float)(g_sign(g) * 0.0);
  else
    for (int x = 0; x < PROBE_M * t->k; x++) t->a[x] = variant == 2 ? -0.0f : (float)(g_sign(g) * 0.0);
  if (variant == 2)
    for (int x = 0; x < t->k * PROBE_N; x++) t->b[x] = fabsf(t->b[x]);
  for (int x = 0; x < PROBE_TILE_OUT; x++) t->c[x] = (float)(g_sign(g) * 0.0);
}

/* Finite randn data with a few specials: an Inf in A whose column meets a zero of B (Inf·0) and
 * an Inf of B (Inf - Inf), a NaN in A, and NaN, +Inf, -Inf accumulators. */
static void gen_nonfinite(tile *t, gen *g) {
  gen_normal(t, g);
  const int i0 = g_below(g, PROBE_M), k0 = g_below(g, t->k), k1 = (k0 + 1 + g_below(g, t->k - 1)) % t->k;
  A_(t, i0, k0) = (float)(g_sign(g) * INFINITY);
  B_(t, k0, 0) = 0.0f;
  B_(t, k1, g_range(g, 1, PROBE_N - 1)) = (float)(g_sign(g) * INFINITY);
  A_(t, (i0 + 1 + g_below(g, PROBE_M - 1)) % PROBE_M, g_below(g, t->k)) = NAN;
  C_(t, g_below(g, PROBE_M), g_below(g, PROBE_N)) = NAN;
  C_(t, g_below(g, PROBE_M), g_below(g, PROBE_N)) = INFINITY;
  C_(t, g_below(g, PROBE_M), g_below(g, PROBE_N)) = -INFINITY;
}

/* bf16/tf32: products near 2^122..2^128 and c near FLT_MAX, so sums overflow or just fail to;
 * fp16 products cannot get there (below 2^32). */
static void gen_near_overflow(tile *t, gen *g) {
  const int fp16 = g->f == LCE_MMA_FP16;
  for (int x = 0; x < PROBE_M * t->k; x++) t->a[x] = fp16 ? op_pow(g, 12, 15) : op_pow(g, 61, 63);
  for (int x = 0; x < t->k * PROBE_N; x++) t->b[x] = fp16 ? op_pow(g, 12, 15) : op_pow(g, 61, 63);
  /* fp16: half the elements near FLT_MAX (products vanish below its ulp), half with c where the
   * products near fp16's largest matter (the largest results fp16 operands can reach). */
  for (int x = 0; x < PROBE_TILE_OUT; x++)
    t->c[x] = g_below(g, 2) ? (float)(g_sign(g) * (FLT_MAX - g_range(g, 0, 8) * 0x1p104))
                            : acc_pow(g, fp16 ? 30 : 124, fp16 ? 34 : 127);
}

/* ---- the tile set ----------------------------------------------------------------------------- */

lce_code probe_tileset_alloc(probe_tileset *ts, lce_mma_format f, size_t tiles, lce_status *st) {
  memset(ts, 0, sizeof *ts);
  LCE_CHECK(st, (unsigned)f < LCE_MMA_FORMATS, LCE_EINVAL, "probe: unknown MMA format %d", (int)f);
  LCE_CHECK(st, tiles > 0 && tiles <= (1u << 24), LCE_EINVAL, "probe: tile count %zu not in [1, 2^24]", tiles);
  ts->format = f;
  ts->k = FORMATS[f].k;
  ts->tiles = tiles;
  ts->cls = calloc(tiles, 1);
  ts->a = calloc(tiles * PROBE_M * (size_t)ts->k, sizeof(float));
  ts->b = calloc(tiles * PROBE_N * (size_t)ts->k, sizeof(float));
  ts->c = calloc(tiles * PROBE_TILE_OUT, sizeof(float));
  ts->d = calloc(tiles * PROBE_TILE_OUT, sizeof(float));
  if (!ts->cls || !ts->a || !ts->b || !ts->c || !ts->d) {
    probe_tileset_free(ts);
    return lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "probe: out of memory for %zu tiles", tiles);
  }
  return LCE_OK;
}

void probe_tileset_free(probe_tileset *ts) {
  free(ts->cls);
  free(ts->a);
  free(ts->b);
  free(ts->c);
  free(ts->d);
  memset(ts, 0, sizeof *ts);
}

/* The class of tile `index`: one tile of every class first, then the extra weight, cyclically. */
static probe_class class_of_tile(size_t index) {
  int cycle = 0;
  for (int c = 0; c < PROBE_CLASSES; c++) cycle += CLASS_WEIGHT[c];
  int pos = (int)(index % (size_t)cycle);
  if (pos < PROBE_CLASSES) return (probe_class)pos;
  pos -= PROBE_CLASSES;
  for (int c = 0; c < PROBE_CLASSES; c++) {
    if (pos < CLASS_WEIGHT[c] - 1) return (probe_class)c;
    pos -= CLASS_WEIGHT[c] - 1;
  }
  return PROBE_NORMAL; /* unreachable: pos < cycle */
}

void probe_generate(probe_tileset *ts, uint64_t seed) {
  const uint32_t poison = 0xffbadbadu; /* a NaN no GPU produces: an unwritten result shows */
  for (size_t x = 0; x < ts->tiles * PROBE_TILE_OUT; x++) memcpy(&ts->d[x], &poison, sizeof poison);
  for (size_t index = 0; index < ts->tiles; index++) {
    const probe_class cls = class_of_tile(index);
    gen g = {seed, ((uint64_t)ts->format << 32) | index, 0, ts->format};
    tile t = {ts->a + index * PROBE_M * ts->k, ts->b + index * PROBE_N * ts->k, ts->c + index * PROBE_TILE_OUT, ts->k};
    ts->cls[index] = (uint8_t)cls;
    switch (cls) {
      case PROBE_EXACT: gen_exact(&t, &g); break;
      case PROBE_NORMAL: gen_normal(&t, &g); break;
      case PROBE_SPREAD: gen_spread(&t, &g); break;
      case PROBE_CANCEL: gen_cancel(&t, &g, index); break;
      case PROBE_SUBNORMAL: gen_subnormal(&t, &g, index); break;
      case PROBE_CARRY: gen_carry(&t, &g, index); break;
      case PROBE_SIGNED_ZERO: gen_signed_zero(&t, &g, index); break;
      case PROBE_C_DOMINANT: fill_ab_normal(&t, &g), fill_c_pow(&t, &g, 12, 40); break;
      case PROBE_C_NEGLIGIBLE: fill_ab_normal(&t, &g), fill_c_pow(&t, &g, -50, -12); break;
      case PROBE_NONFINITE: gen_nonfinite(&t, &g); break;
      default: gen_near_overflow(&t, &g); break;
    }
  }
}

void probe_vector(const probe_tileset *ts, size_t t, int i, int j, float *c, float *a, float *b) {
  const int k = ts->k;
  *c = ts->c[t * PROBE_TILE_OUT + (size_t)i * PROBE_N + (size_t)j];
  for (int kk = 0; kk < k; kk++) {
    a[kk] = ts->a[t * PROBE_M * (size_t)k + (size_t)i * k + kk];
    b[kk] = ts->b[t * PROBE_N * (size_t)k + (size_t)kk * PROBE_N + j];
  }
}
