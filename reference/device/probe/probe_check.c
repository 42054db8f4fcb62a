/* probe_check.c — bit-for-bit comparison of GPU results with an arithmetic model (probe_check.h). */
#include "probe_check.h"

#include "lce_dtype.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


/* The exact sum of an "exact"-class vector: small integers, exact in double and in fp32. */
static float exact_value(float c, const float *a, const float *b, int k) {
  double s = c;
  for (int i = 0; i < k; i++) s += (double)a[i] * (double)b[i];
  return (float)s;
}

/* The model's result for one instruction: one step, or (sm80: a k16 MMA is two k8 steps) the
 * steps the architecture splits it into. */
static float model_result(const lce_gemm_arch *arch, lce_mma_format f, float c, const float *a, const float *b, int k) {
  if (arch->ieee || k <= arch->products[f]) return lce_mma_step(arch, f, c, a, b, k);
  return lce_gemm_dot(arch, f, c, a, 1, b, 1, k);
}

void probe_check(const lce_gemm_arch *arch, const probe_tileset *ts, probe_counts *counts, probe_mismatch *first,
                 int keep, int *kept) {
  probe_mismatch m;
  m.format = ts->format;
  m.k = ts->k;
  for (size_t t = 0; t < ts->tiles; t++) {
    const probe_class cls = (probe_class)ts->cls[t];
    for (int i = 0; i < PROBE_M; i++)
      for (int j = 0; j < PROBE_N; j++) {
        probe_vector(ts, t, i, j, &m.c, m.a, m.b);
        m.gpu = ts->d[t * PROBE_TILE_OUT + (size_t)i * PROBE_N + (size_t)j];
        m.model = model_result(arch, ts->format, m.c, m.a, m.b, ts->k);
        counts->vectors[cls]++;
        if (cls == PROBE_EXACT && lce_f32_bits(m.gpu) != lce_f32_bits(exact_value(m.c, m.a, m.b, ts->k))) counts->exact_wrong++;
        if (lce_f32_bits(m.gpu) == lce_f32_bits(m.model)) continue;
        counts->mismatches[cls]++;
        if (isnan(m.gpu) && isnan(m.model)) counts->nan_only[cls]++;
        if (*kept < keep) {
          m.cls = cls;
          m.tile = t;
          m.i = i;
          m.j = j;
          first[(*kept)++] = m;
        }
      }
  }
}

int64_t probe_counts_total(const probe_counts *c, int mismatches) {
  int64_t s = 0;
  for (int k = 0; k < PROBE_CLASSES; k++) s += mismatches ? c->mismatches[k] : c->vectors[k];
  return s;
}

static size_t put_operands(char *buf, size_t size, size_t at, const char *name, const float *x, int k,
                           lce_mma_format f) {
  const int wide = f == LCE_MMA_TF32;
  at += (size_t)snprintf(buf + at, at < size ? size - at : 0, " %s=[", name);
  for (int i = 0; i < k; i++)
    at += (size_t)snprintf(buf + at, at < size ? size - at : 0, wide ? "%s%08x" : "%s%04x", i ? " " : "",
                           (unsigned)probe_bits(f, x[i]));
  at += (size_t)snprintf(buf + at, at < size ? size - at : 0, "]");
  return at;
}

void probe_mismatch_line(const probe_mismatch *m, char *buf, size_t size) {
  size_t at = (size_t)snprintf(buf, size, "probe-mismatch %s %s tile=%zu i=%d j=%d c=0x%08x", probe_format_name(m->format),
                               probe_class_name(m->cls), m->tile, m->i, m->j, (unsigned)lce_f32_bits(m->c));
  at = put_operands(buf, size, at, "a", m->a, m->k, m->format);
  at = put_operands(buf, size, at, "b", m->b, m->k, m->format);
  snprintf(buf + at, at < size ? size - at : 0, " gpu=0x%08x model=0x%08x (gpu %a, model %a)", (unsigned)lce_f32_bits(m->gpu),
           (unsigned)lce_f32_bits(m->model), (double)m->gpu, (double)m->model);
}
