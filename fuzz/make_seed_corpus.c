/* make_seed_corpus.c — writes the fuzz seed corpus (fuzz/corpus/fused_host/) deterministically from
 * the table below, through the same field table the harness decodes with (lce_fuzz_case.h).
 *
 *   make_seed_corpus DIR           write every seed into DIR and print its case id
 *   make_seed_corpus --check DIR   exit 1 unless every seed in DIR is byte-identical to the table
 * The seeds cover each dtype, tied and untied, tp 1..4, each reduction, all-ignored batches,
 * padding, ignore_index values other than -100, many vocab chunks, every value distribution, the
 * oracle-budget shrink, front bytes folded into the seed, and truncated inputs. */
#include <stdio.h>
#include <string.h>

#include "lce_fuzz_case.h"

typedef struct seed_spec {
  const char *name;
  const char *front; /* bytes before the tail (hashed into the case seed); "" for none */
  int keep_tail;     /* -1: the whole encoding; k >= 0: only its last k bytes (a truncated input) */
  uint32_t f[LCE_FUZZ_FIELD_COUNT];
} seed_spec;

enum { B = LCE_BF16, H16 = LCE_FP16, F32 = LCE_FP32 };
enum { NONE = LCE_RED_NONE, SUM = LCE_RED_SUM, MEAN = LCE_RED_MEAN };
/* ignore level: index into {0, 10, 25, 50, 100} percent; ignore index kind: -100, -1, v */
enum { I0 = 0, I10 = 1, I25 = 2, I50 = 3, I100 = 4 };
enum { II100 = 0, II1 = 1, IIV = 2 };

/* Columns follow lce_fuzz_field: dtype tied prior tp n h v pad chunk reduction ignore ii dist seed. */
static const seed_spec k_seeds[] = {
    {"01-bf16-untied-tp1-mean", "", -1, {B, 0, 0, 1, 8, 16, 100, 0, 32, MEAN, I10, II100, LCE_DIST_MIXED, 1}},
    {"02-fp16-tied-tp1-sum", "", -1, {H16, 1, 0, 1, 8, 16, 120, 8, 40, SUM, I0, II100, LCE_DIST_NORMAL, 2}},
    {"03-fp32-untied-tp1-none", "", -1, {F32, 0, 0, 1, 6, 24, 90, 0, 30, NONE, I10, II100, LCE_DIST_MIXED, 3}},
    {"04-bf16-tied-tp2-mean-padding", "", -1, {B, 1, 0, 2, 12, 32, 300, 84, 64, MEAN, I25, II100, LCE_DIST_MIXED, 4}},
    {"05-fp16-untied-tp3-sum-prior", "", -1, {H16, 0, 1, 3, 10, 16, 250, 30, 50, SUM, I10, II100, LCE_DIST_PEAKED, 5}},
    {"06-fp32-tied-tp4-none-prior", "", -1, {F32, 1, 1, 4, 8, 16, 200, 56, 25, NONE, I25, II100, LCE_DIST_MIXED, 6}},
    {"07-bf16-untied-all-ignored-mean", "", -1, {B, 0, 1, 2, 8, 16, 64, 0, 16, MEAN, I100, II100, LCE_DIST_MIXED, 7}},
    {"08-fp16-tied-all-ignored-sum", "", -1, {H16, 1, 0, 1, 6, 8, 50, 14, 10, SUM, I100, II100, LCE_DIST_NORMAL, 8}},
    {"09-bf16-chunks-400", "", -1, {B, 0, 0, 1, 4, 24, 400, 0, 1, MEAN, I0, II100, LCE_DIST_NORMAL, 9}},
    {"10-bf16-tied-tp4-chunks-32", "", -1, {B, 1, 1, 4, 6, 32, 384, 0, 3, SUM, I10, II100, LCE_DIST_MIXED, 10}},
    {"11-fp32-tp2-chunks-40", "", -1, {F32, 0, 0, 2, 6, 16, 300, 20, 4, MEAN, I10, II100, LCE_DIST_MIXED, 11}},
    {"12-fp16-peaked", "", -1, {H16, 0, 0, 1, 16, 32, 128, 0, 32, MEAN, I0, II100, LCE_DIST_PEAKED, 12}},
    {"13-bf16-flat", "", -1, {B, 0, 0, 1, 16, 32, 256, 0, 64, SUM, I0, II100, LCE_DIST_FLAT, 13}},
    {"14-fp32-tied-tp2-confident", "", -1, {F32, 1, 0, 2, 16, 16, 200, 0, 50, MEAN, I0, II100, LCE_DIST_CONFIDENT, 14}},
    {"15-bf16-negative", "", -1, {B, 0, 0, 1, 12, 16, 160, 0, 20, MEAN, I10, II100, LCE_DIST_NEGATIVE, 15}},
    {"16-fp16-none-ignore-minus1", "", -1, {H16, 0, 1, 2, 10, 16, 100, 28, 20, NONE, I50, II1, LCE_DIST_MIXED, 16}},
    {"17-bf16-ignore-index-v-padding", "", -1, {B, 0, 0, 2, 10, 16, 100, 28, 30, MEAN, I25, IIV, LCE_DIST_MIXED, 17}},
    {"18-tiny-n1-h1-v1", "", -1, {B, 0, 0, 1, 1, 1, 1, 0, 1, MEAN, I0, II100, LCE_DIST_MIXED, 18}},
    {"19-fp32-budget-max-shape", "", -1, {F32, 0, 0, 1, 24, 48, 400, 130, 400, SUM, I10, II100, LCE_DIST_MIXED, 19}},
    {"20-fp16-front-bytes", "lcecheck front bytes", -1, {H16, 1, 0, 2, 8, 16, 128, 0, 16, MEAN, I10, II100, LCE_DIST_MIXED, 20}},
    {"21-truncated-6-bytes", "", 6, {H16, 1, 1, 3, 20, 40, 1, 0, 1, NONE, I0, II100, LCE_DIST_MIXED, 0}},
    {"22-empty", "", 0, {B, 0, 0, 1, 1, 1, 1, 0, 1, NONE, I0, II100, LCE_DIST_MIXED, 0}},
    /* Enough d_hidden elements and vocab chunks for ulpfrac to see the seed bug's accumulation. */
    {"23-bf16-400-chunks-768-elements", "", -1, {B, 0, 0, 1, 24, 32, 400, 0, 1, SUM, I0, II100, LCE_DIST_NORMAL, 5}},
    {"24-fp16-tied-tp4-200-chunks", "", -1, {H16, 1, 1, 4, 24, 32, 400, 0, 2, MEAN, I10, II100, LCE_DIST_MIXED, 6}},
};

/* Encodes one seed into buf; returns its length. */
static size_t encode_seed(const seed_spec *s, uint8_t *buf, size_t size) {
  lce_fuzz_params p;
  memcpy(p.field, s->f, sizeof p.field);
  size_t len = lce_fuzz_params_encode(&p, (const uint8_t *)s->front, strlen(s->front), buf, size);
  if (s->keep_tail < 0 || (size_t)s->keep_tail >= len) return len;
  memmove(buf, buf + len - (size_t)s->keep_tail, (size_t)s->keep_tail);
  return (size_t)s->keep_tail;
}

static int file_equals(const char *path, const uint8_t *want, size_t len) {
  uint8_t have[512];
  FILE *f = fopen(path, "rb");
  if (f == NULL) return 0;
  size_t got = fread(have, 1, sizeof have, f);
  fclose(f);
  return got == len && memcmp(have, want, len) == 0;
}

int main(int argc, char **argv) {
  int check = argc == 3 && strcmp(argv[1], "--check") == 0;
  if (!(argc == 2 || check)) {
    fprintf(stderr, "usage: %s [--check] DIR\n", argv[0]);
    return 2;
  }
  const char *dir = argv[argc - 1];
  int bad = 0;
  for (size_t i = 0; i < sizeof k_seeds / sizeof k_seeds[0]; i++) {
    uint8_t buf[512];
    size_t len = encode_seed(&k_seeds[i], buf, sizeof buf);
    lce_case c;
    lce_status st;
    lce_status_clear(&st);
    char path[1024], id[192];
    snprintf(path, sizeof path, "%s/%s", dir, k_seeds[i].name);
    if (len == 0 && k_seeds[i].keep_tail != 0) {
      fprintf(stderr, "%s: encoding buffer too small\n", k_seeds[i].name);
      return 1;
    }
    if (lce_fuzz_case_from_bytes(buf, len, &c, &st) != LCE_OK) {
      fprintf(stderr, "%s: does not map to a valid case: %s\n", k_seeds[i].name, st.msg);
      return 1;
    }
    lce_case_format(&c, id, sizeof id);
    if (check) {
      int same = file_equals(path, buf, len);
      printf("%-4s %-34s %s\n", same ? "ok" : "DIFF", k_seeds[i].name, id);
      bad += !same;
      continue;
    }
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(buf, 1, len, f) != len) {
      perror(path);
      if (f) fclose(f);
      return 1;
    }
    fclose(f);
    printf("%-34s %3zu bytes  %s\n", k_seeds[i].name, len, id);
  }
  if (bad) fprintf(stderr, "%d seed(s) differ from the table: rerun make_seed_corpus %s\n", bad, dir);
  return bad ? 1 : 0;
}
