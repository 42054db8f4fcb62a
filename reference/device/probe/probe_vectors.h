/* probe_vectors.h — the test vectors of the MMA conformance probe (lcecheck probe).
 *
 * A vector is one output element of one MMA instruction: d = c + sum_{k<K} a[k]·b[k], K = 16 for
 * bf16/fp16 (m16n8k16), 8 for tf32 (m16n8k8). The GPU computes a whole 16x8 tile per instruction,
 * so vectors are generated as tiles: A (16 x K, row-major), B (K x 8, row-major), C (16 x 8) and
 * the 128 vectors of a tile are (C[i][j], A[i][:], B[:][j]). Each tile belongs to one class
 * (random normal, cancellation, subnormals, ...), chosen so that every element of the tile is a
 * vector of that class. Values are floats holding exact values of the operand format.
 *
 * Generation is a pure function of (seed, format, tile index) through lce_prng, so a tile can be
 * regenerated anywhere; the dump (probe_dump.h) stores the values anyway, so replay never depends
 * on the generator staying the same. */
#ifndef PROBE_VECTORS_H
#define PROBE_VECTORS_H

#include <stddef.h>
#include <stdint.h>

#include "lce_gemm_model.h"
#include "lce_status.h"

#define PROBE_M 16
#define PROBE_N 8
#define PROBE_TILE_OUT (PROBE_M * PROBE_N) /* vectors per tile */
#define PROBE_MAX_K 16

typedef enum probe_class {
  PROBE_EXACT = 0,       /* small integers: every model gives the exact sum (checks the harness) */
  PROBE_NORMAL,          /* randn a, b, c */
  PROBE_SPREAD,          /* wide exponent spread of a, b, c */
  PROBE_CANCEL,          /* products that cancel to 0, or to a residue below the alignment window */
  PROBE_SUBNORMAL,       /* subnormal inputs, fp32-subnormal products and accumulators */
  PROBE_CARRY,           /* sums that cross into the next (or previous) binade */
  PROBE_SIGNED_ZERO,     /* all-zero products (+0 and -0) with c = +0 or -0 */
  PROBE_C_DOMINANT,      /* |c| far above the products */
  PROBE_C_NEGLIGIBLE,    /* |c| far below the products */
  PROBE_NONFINITE,       /* a few Inf / NaN inputs (Inf·0, Inf - Inf) among finite ones */
  PROBE_NEAR_OVERFLOW,   /* results near FLT_MAX, some overflowing */
  PROBE_CLASSES
} probe_class;

const char *probe_class_name(probe_class c);      /* "exact", "normal", ... */
const char *probe_format_name(lce_mma_format f);  /* "bf16", "fp16", "tf32" */
int probe_format_parse(const char *s, lce_mma_format *out); /* 1 on success */
int probe_format_k(lce_mma_format f);             /* 16, 16, 8 */

/* Rounds x to format f (round to nearest even, subnormals, overflow to Inf); exact result. */
double probe_round(lce_mma_format f, double x);
/* Storage bits of an exactly representable value: bf16/fp16 16 bits, tf32 as its fp32 bits. */
uint32_t probe_bits(lce_mma_format f, float x);

typedef struct probe_tileset {
  lce_mma_format format;
  int k;                 /* products per vector: probe_format_k(format) */
  size_t tiles;
  uint8_t *cls;          /* [tiles] probe_class */
  float *a;              /* [tiles][16][k] */
  float *b;              /* [tiles][k][8] */
  float *c;              /* [tiles][16][8] */
  float *d;              /* [tiles][16][8]: the GPU's results (NaN-filled until run) */
} probe_tileset;

lce_code probe_tileset_alloc(probe_tileset *ts, lce_mma_format f, size_t tiles, lce_status *st);
void probe_tileset_free(probe_tileset *ts);

/* Fills tiles [0, ts->tiles) for seed; every class gets at least one tile when tiles >= PROBE_CLASSES
 * (classes are dealt by a fixed weighted cycle). d is NaN-filled. */
void probe_generate(probe_tileset *ts, uint64_t seed);

/* One vector: a[k] and b[k] gathered from tile t, element (i, j). */
void probe_vector(const probe_tileset *ts, size_t t, int i, int j, float *c, float *a, float *b);

#endif
