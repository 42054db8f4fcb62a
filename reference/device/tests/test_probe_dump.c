/* test_probe_dump.c — the MMA probe's CPU half (reference/device/probe/), no GPU needed:
 *   - the generator: ≥ 10^5 vectors per format at the CLI's default 800 tiles, every class present,
 *     every operand exactly representable in its format, deterministic in the seed;
 *   - the "exact" class is exact under every model (else the harness check means nothing);
 *   - a dump whose results come from the model itself replays with 0 mismatches, bit for bit the
 *     same vectors; one flipped result bit is caught as exactly one mismatch of the right format
 *     and class, with a repro line naming it;
 *   - truncated, garbled, foreign, over-long and wrong-version files are rejected with a message
 *     saying why;
 *   - the curve's host half: predictions equal measurements when the "GPU" results are the model's
 *     own, the PRNG twin check catches a changed operand. */
#define _POSIX_C_SOURCE 200809L /* getpid */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lce_dtype.h"
#include "lce_prng.h"
#include "probe_check.h"
#include "probe_curve.h"
#include "probe_dump.h"

#include "lce_test.h"

/* d = the model's result for every vector, as if the GPU were the model. */
static void fill_with_model(const lce_gemm_arch *arch, probe_tileset *ts) {
  float c, a[PROBE_MAX_K], b[PROBE_MAX_K];
  for (size_t t = 0; t < ts->tiles; t++)
    for (int i = 0; i < PROBE_M; i++)
      for (int j = 0; j < PROBE_N; j++) {
        probe_vector(ts, t, i, j, &c, a, b);
        ts->d[t * PROBE_TILE_OUT + (size_t)i * PROBE_N + (size_t)j] = lce_mma_step(arch, ts->format, c, a, b, ts->k);
      }
}

static void test_generator(void) {
  const lce_gemm_arch *ieee = lce_gemm_arch_find("ieee"), *sm90 = lce_gemm_arch_find("sm90");
  for (int f = 0; f < LCE_MMA_FORMATS; f++) {
    probe_tileset ts, again;
    lce_status st;
    EXPECT(probe_tileset_alloc(&ts, (lce_mma_format)f, 800, &st) == LCE_OK, "alloc: %s", st.msg);
    EXPECT(probe_tileset_alloc(&again, (lce_mma_format)f, 800, &st) == LCE_OK, "alloc: %s", st.msg);
    probe_generate(&ts, 7);
    probe_generate(&again, 7);
    const size_t na = ts.tiles * PROBE_M * (size_t)ts.k, nc = ts.tiles * PROBE_TILE_OUT;
    EXPECT(memcmp(ts.a, again.a, na * sizeof(float)) == 0 && memcmp(ts.c, again.c, nc * sizeof(float)) == 0,
           "%s: generation is not deterministic", probe_format_name((lce_mma_format)f));
    probe_generate(&again, 8);
    EXPECT(memcmp(ts.a, again.a, na * sizeof(float)) != 0, "%s: the seed changes nothing",
           probe_format_name((lce_mma_format)f));
    int64_t per_class[PROBE_CLASSES] = {0}, nonfinite = 0, subnormal = 0, negzero = 0;
    for (size_t t = 0; t < ts.tiles; t++) per_class[ts.cls[t]] += PROBE_TILE_OUT;
    for (int c = 0; c < PROBE_CLASSES; c++)
      EXPECT(per_class[c] > 0, "%s: class %s has no vectors", probe_format_name((lce_mma_format)f),
             probe_class_name((probe_class)c));
    EXPECT(nc >= 100000, "%s: %zu vectors at the default tile count", probe_format_name((lce_mma_format)f), nc);
    for (size_t x = 0; x < na; x++) {
      const float v = ts.a[x];
      if (isnan(v) || isinf(v)) nonfinite++;
      else EXPECT(probe_round((lce_mma_format)f, v) == v, "%s: a[%zu] = %a not representable",
                  probe_format_name((lce_mma_format)f), x, (double)v);
      if (v != 0 && fabsf(v) < ldexpf(1.0f, f == LCE_MMA_FP16 ? -14 : -126)) subnormal++;
      if (v == 0 && signbit(v)) negzero++;
    }
    for (size_t x = 0; x < ts.tiles * PROBE_N * (size_t)ts.k; x++)
      if (!isnan(ts.b[x]) && !isinf(ts.b[x]))
        EXPECT(probe_round((lce_mma_format)f, ts.b[x]) == ts.b[x], "%s: b[%zu] not representable",
               probe_format_name((lce_mma_format)f), x);
    EXPECT(nonfinite > 0 && subnormal > 0 && negzero > 0, "%s: %lld non-finite, %lld subnormal, %lld -0 operands",
           probe_format_name((lce_mma_format)f), (long long)nonfinite, (long long)subnormal, (long long)negzero);
    /* The exact class under both models equals the exact sum: a GPU mismatch there is the harness's. */
    probe_counts counts[2];
    memset(counts, 0, sizeof counts);
    int kept = 0;
    fill_with_model(sm90, &ts);
    probe_check(sm90, &ts, &counts[0], NULL, 0, &kept);
    fill_with_model(ieee, &ts);
    probe_check(ieee, &ts, &counts[1], NULL, 0, &kept);
    EXPECT(counts[0].exact_wrong == 0 && counts[1].exact_wrong == 0, "%s: exact class not exact (sm90 %lld, ieee %lld)",
           probe_format_name((lce_mma_format)f), (long long)counts[0].exact_wrong, (long long)counts[1].exact_wrong);
    /* The classes must tell the models apart, or the probe could not tell the GPU from IEEE. */
    memset(counts, 0, sizeof counts);
    probe_check(sm90, &ts, &counts[0], NULL, 0, &kept); /* d is ieee's now */
    EXPECT(counts[0].mismatches[PROBE_CANCEL] > 0 && counts[0].mismatches[PROBE_NORMAL] > 0,
           "%s: sm90 and ieee agree on every cancel/normal vector", probe_format_name((lce_mma_format)f));
    probe_tileset_free(&ts);
    probe_tileset_free(&again);
  }
}

static char *tmp_path(const char *name) {
  static char buf[3][512];
  static int next;
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char *p = buf[next++ % 3];
  snprintf(p, 512, "%s/test_probe_dump.%ld.%s", dir, (long)getpid(), name);
  return p;
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc(*n + 16);
  if (p && fread(p, 1, *n, f) != *n) *n = 0;
  fclose(f);
  return p;
}

static void spit(const char *path, const unsigned char *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(p, 1, n, f);
    fclose(f);
  }
}

/* Reads path, expecting failure with code and a message containing needle. */
static void expect_rejected(const char *path, lce_code code, const char *needle, const char *what) {
  probe_dump d;
  lce_status st;
  lce_status_clear(&st);
  const lce_code rc = probe_dump_read(path, &d, &st);
  EXPECT(rc == code && strstr(st.msg, needle) != NULL, "%s: got %s '%s', want %s containing '%s'", what,
         lce_code_name(rc), st.msg, lce_code_name(code), needle);
  if (rc == LCE_OK) probe_dump_free(&d);
}

static void replay(const probe_dump *d, const lce_gemm_arch *arch, probe_counts *counts, probe_mismatch *first, int *kept) {
  memset(counts, 0, LCE_MMA_FORMATS * sizeof *counts);
  *kept = 0;
  for (int s = 0; s < d->sections; s++) probe_check(arch, &d->set[s], &counts[d->set[s].format], first, 4, kept);
}

static void test_dump_roundtrip(void) {
  const lce_gemm_arch *sm90 = lce_gemm_arch_find("sm90");
  probe_dump d;
  memset(&d, 0, sizeof d);
  d.seed = 42;
  snprintf(d.device, sizeof d.device, "model sm90 (test)");
  snprintf(d.model, sizeof d.model, "sm90");
  lce_status st;
  for (int f = 0; f < LCE_MMA_FORMATS; f++) {
    EXPECT(probe_tileset_alloc(&d.set[f], (lce_mma_format)f, 2 * PROBE_CLASSES + 1, &st) == LCE_OK, "%s", st.msg);
    probe_generate(&d.set[f], d.seed);
    fill_with_model(sm90, &d.set[f]);
  }
  d.sections = LCE_MMA_FORMATS;
  const char *path = tmp_path("good.bin");
  EXPECT(probe_dump_write(path, &d, &st) == LCE_OK, "write: %s", st.msg);

  probe_dump back;
  EXPECT(probe_dump_read(path, &back, &st) == LCE_OK, "read: %s", st.msg);
  EXPECT(back.sections == d.sections && back.seed == 42 && strcmp(back.model, "sm90") == 0 &&
             strcmp(back.device, d.device) == 0,
         "header did not round-trip");
  for (int s = 0; s < back.sections && s < d.sections; s++) {
    const probe_tileset *x = &d.set[s], *y = &back.set[s];
    EXPECT(x->format == y->format && x->tiles == y->tiles && memcmp(x->cls, y->cls, x->tiles) == 0 &&
               memcmp(x->a, y->a, x->tiles * PROBE_M * (size_t)x->k * 4) == 0 &&
               memcmp(x->b, y->b, x->tiles * PROBE_N * (size_t)x->k * 4) == 0 &&
               memcmp(x->c, y->c, x->tiles * PROBE_TILE_OUT * 4) == 0 &&
               memcmp(x->d, y->d, x->tiles * PROBE_TILE_OUT * 4) == 0,
           "section %d did not round-trip bit for bit", s);
  }
  probe_counts counts[LCE_MMA_FORMATS];
  probe_mismatch first[4];
  int kept;
  replay(&back, sm90, counts, first, &kept);
  for (int f = 0; f < LCE_MMA_FORMATS; f++)
    EXPECT(probe_counts_total(&counts[f], 0) == (int64_t)d.set[f].tiles * PROBE_TILE_OUT &&
               probe_counts_total(&counts[f], 1) == 0,
           "%s: model dump replays with %lld mismatches", probe_format_name((lce_mma_format)f),
           (long long)probe_counts_total(&counts[f], 1));

  /* One flipped bit of one fp16 result in the cancel class's first tile (index 3): one mismatch. */
  float *victim = &back.set[LCE_MMA_FP16].d[3 * PROBE_TILE_OUT + 2 * PROBE_N + 5];
  const uint32_t u = lce_f32_bits(*victim) ^ 1u;
  *victim = lce_f32_from_bits(u);
  const char *flipped = tmp_path("flipped.bin");
  EXPECT(probe_dump_write(flipped, &back, &st) == LCE_OK, "write: %s", st.msg);
  probe_dump_free(&back);
  EXPECT(probe_dump_read(flipped, &back, &st) == LCE_OK, "read: %s", st.msg);
  replay(&back, sm90, counts, first, &kept);
  EXPECT(probe_counts_total(&counts[LCE_MMA_FP16], 1) == 1 && counts[LCE_MMA_FP16].mismatches[PROBE_CANCEL] == 1 &&
             probe_counts_total(&counts[LCE_MMA_BF16], 1) == 0 && kept == 1,
         "flipped bit: fp16 %lld mismatches (cancel %lld), bf16 %lld, kept %d", (long long)probe_counts_total(&counts[LCE_MMA_FP16], 1),
         (long long)counts[LCE_MMA_FP16].mismatches[PROBE_CANCEL], (long long)probe_counts_total(&counts[LCE_MMA_BF16], 1), kept);
  if (kept == 1) {
    char line[1024];
    probe_mismatch_line(&first[0], line, sizeof line);
    EXPECT(strstr(line, "probe-mismatch fp16 cancel tile=3 i=2 j=5 ") == line, "repro line: %s", line);
  }
  probe_dump_free(&back);
  remove(flipped);

  /* Damaged files. */
  size_t n = 0;
  unsigned char *bytes = slurp(path, &n);
  EXPECT(bytes != NULL && n > 1000, "cannot reread %s", path);
  if (bytes != NULL && n > 1000) {
    const char *bad = tmp_path("bad.bin");
    const size_t cuts[] = {0, 5, 60, 104, 120, n / 2, n - 8, n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
      spit(bad, bytes, cuts[i]);
      expect_rejected(bad, LCE_EPARSE, cuts[i] < 8 ? "bad magic" : "truncated", "truncated file");
    }
    bytes[n / 2] ^= 0x10; /* a bit inside the tiles: only the checksum can tell */
    spit(bad, bytes, n);
    expect_rejected(bad, LCE_EPARSE, "checksum mismatch", "garbled file");
    bytes[n / 2] ^= 0x10;
    bytes[n] = 0;
    spit(bad, bytes, n + 1);
    expect_rejected(bad, LCE_EPARSE, "trailing garbage", "over-long file");
    bytes[0] = 'X';
    spit(bad, bytes, n);
    expect_rejected(bad, LCE_EPARSE, "bad magic", "foreign file");
    bytes[0] = 'L';
    bytes[8] = 9;
    spit(bad, bytes, n);
    expect_rejected(bad, LCE_EPARSE, "version 9", "future version");
    bytes[8] = 1;
    bytes[104] = 7; /* section 0's format */
    spit(bad, bytes, n);
    expect_rejected(bad, LCE_EPARSE, "format 7 unknown", "bad format");
    remove(bad);
  }
  free(bytes);
  expect_rejected(tmp_path("missing.bin"), LCE_EIO, "cannot open", "missing file");
  remove(path);
  probe_dump_free(&d);
}

/* The curve's host half with the "GPU" replaced by the model: the sample's measured metrics are
 * the model's prediction exactly; a changed operand shows in the PRNG twin check. */
static void test_curve_evaluate(void) {
  const lce_gemm_arch *sm90 = lce_gemm_arch_find("sm90");
  enum { M = 12, N = 10, K = 700 };
  static float fa[M][K], fb[N][K];
  static uint16_t a_rows[M * K], b_cols[N * K];
  static float x[M * N];
  static double r[M * N];
  int rows[M], cols[N];
  const uint64_t seed = 3;
  for (int i = 0; i < M; i++) {
    rows[i] = i;
    for (int k = 0; k < K; k++) {
      a_rows[i * K + k] = lce_bf16_from_double(lce_rand_normal(seed, PROBE_CURVE_STREAM(K, 0), (uint64_t)(i * K + k)));
      fa[i][k] = (float)lce_bf16_to_double(a_rows[i * K + k]);
    }
  }
  for (int j = 0; j < N; j++) {
    cols[j] = j;
    for (int k = 0; k < K; k++) {
      b_cols[j * K + k] = lce_bf16_from_double(lce_rand_normal(seed, PROBE_CURVE_STREAM(K, 1), (uint64_t)(j * K + k)));
      fb[j][k] = (float)lce_bf16_to_double(b_cols[j * K + k]);
    }
  }
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += (double)fa[i][k] * fb[j][k];
      r[i + j * M] = s;
      x[i + j * M] = lce_gemm_dot(sm90, LCE_MMA_BF16, 0.0f, fa[i], 1, fb[j], 1, K);
    }
  probe_curve_gpu io = {.m = M, .n = N, .k = K, .seed = seed, .rows = rows, .cols = cols, .nrows = M, .ncols = N,
                        .x = x, .r = r, .a_rows = a_rows, .b_cols = b_cols};
  probe_curve_point p;
  lce_status st;
  EXPECT(probe_curve_evaluate(sm90, &io, &p, &st) == LCE_OK, "evaluate: %s", st.msg);
  EXPECT(p.sample == M * N && p.relerr == p.relerr_s && p.relerr_s == p.pred_relerr && p.bias_s == p.pred_bias,
         "model as GPU: relerr %g sample %g predicted %g, bias %g predicted %g", p.relerr, p.relerr_s, p.pred_relerr,
         p.bias_s, p.pred_bias);
  EXPECT(p.relerr > 0 && p.pred_bias < 0 && p.ieee_relerr > 0 && p.ieee_relerr != p.pred_relerr,
         "no visible error: relerr %g, bias %g, ieee %g", p.relerr, p.pred_bias, p.ieee_relerr);
  EXPECT(p.twin_checked == (M + N) * K && p.twin_mismatch == 0, "twin: %lld checked, %lld differ",
         (long long)p.twin_checked, (long long)p.twin_mismatch);
  EXPECT(p.ref_bound > 0 && p.ref_bound < 1e-10, "reference bound %g", p.ref_bound);
  a_rows[5 * K + 17] ^= 1;
  EXPECT(probe_curve_evaluate(sm90, &io, &p, &st) == LCE_OK && p.twin_mismatch == 1, "twin missed a changed operand (%lld)",
         (long long)p.twin_mismatch);
}

int main(void) {
  test_generator();
  test_dump_roundtrip();
  test_curve_evaluate();
  return lce_test_finish("test_probe_dump");
}
