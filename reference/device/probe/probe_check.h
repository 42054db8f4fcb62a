/* probe_check.h — the probe's verdict: every vector's GPU result compared bit for bit with an
 * arithmetic model (lce_mma_step of lce_gemm_model.h), counted per class, with the first
 * mismatches kept as one-line repros. Used alike on a fresh GPU run and on a replayed dump. */
#ifndef PROBE_CHECK_H
#define PROBE_CHECK_H

#include <stddef.h>

#include "probe_vectors.h"

typedef struct probe_counts {
  int64_t vectors[PROBE_CLASSES];
  int64_t mismatches[PROBE_CLASSES];
  int64_t nan_only[PROBE_CLASSES];  /* of the mismatches: both NaN, payload or sign differs */
  int64_t exact_wrong;              /* "exact"-class results that differ from the exact sum: the
                                     * harness (fragment layout, conversion) is wrong, not the model */
} probe_counts;

typedef struct probe_mismatch {
  lce_mma_format format;
  probe_class cls;
  size_t tile;
  int i, j, k;
  float c, a[PROBE_MAX_K], b[PROBE_MAX_K];
  float gpu, model;
} probe_mismatch;

/* Compares every vector of ts; adds to *counts (zero it first), and stores up to keep - *kept
 * mismatches into first[*kept...]. */
void probe_check(const lce_gemm_arch *arch, const probe_tileset *ts, probe_counts *counts, probe_mismatch *first,
                 int keep, int *kept);

int64_t probe_counts_total(const probe_counts *c, int mismatches); /* sum over classes */

/* "probe-mismatch bf16 cancel tile=12 i=3 j=5 c=0x... a=[3f80 ...] b=[...] gpu=0x... model=0x..."
 * with the operands' storage bits (probe_bits) and the two results' fp32 bits and %a values. */
void probe_mismatch_line(const probe_mismatch *m, char *buf, size_t size);

#endif
