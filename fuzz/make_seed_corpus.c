/* make_seed_corpus.c — writes the fuzz seed corpus (fuzz/corpus/subject/) deterministically from
 * the table below, through the same field table the harness decodes with (lce_fuzz_case.h).
 *
 *   make_seed_corpus DIR           write every seed into DIR and print its case id
 *   make_seed_corpus --check DIR   exit 1 unless every seed in DIR is byte-identical to the table
 *                                  and DIR holds no other file (a stale seed would replay unchecked)
 * The seeds cover each dtype, tied and untied, tp 1..4, each reduction, all-ignored batches,
 * padding, ignore_index values other than -100, many vocab chunks, every value distribution, the
 * oracle-budget shrink, front bytes folded into the seed, and truncated inputs (01-24, written
 * before the option fields existed: their options are off), then each option on its own and in
 * combinations (token chunks, both label smoothings, z-loss, softcap, class weights, tf32), and
 * the value distributions added with them (25 on), and tensor values carried by the input (60 on). A seed that does not decode to exactly the
 * parameters of its row is a bug in this table: the tool refuses to write it. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
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
enum { LS0 = LCE_SMOOTH_NONE, LSP = LCE_SMOOTH_PYTORCH, LSM = LCE_SMOOTH_MEGATRON };
enum { IEEE = LCE_GEMM_IEEE, TF32 = LCE_GEMM_TF32 };
enum { MIXED = LCE_DIST_MIXED, NORMAL = LCE_DIST_NORMAL, HARD = LCE_DIST_HARD, POISON = LCE_DIST_POISON,
       BIG = LCE_DIST_BIG, TIES = LCE_DIST_TIES, TMAX = LCE_DIST_TARGET_MAX, TMIN = LCE_DIST_TARGET_MIN,
       ZERO = LCE_DIST_ZERO, SUBN = LCE_DIST_SUBNORMAL };

/* Columns follow lce_fuzz_field: dtype tied prior tp n h v pad chunk reduction ignore ii dist seed,
 * then the options: token-chunk smoothing permille z-loss(e-5) softcap class-weights gemm (rows
 * that stop at seed leave every option off). */
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
    /* Each option alone. */
    {"25-bf16-token-chunk-5-of-16", "", -1, {B, 0, 0, 1, 16, 16, 200, 0, 40, MEAN, I25, II100, MIXED, 25, 5, LS0, 0, 0, 0, 0, IEEE}},
    {"26-fp32-token-chunk-1-prior", "", -1, {F32, 1, 1, 2, 8, 16, 150, 10, 30, SUM, I10, II100, NORMAL, 26, 1, LS0, 0, 0, 0, 0, IEEE}},
    {"27-bf16-smoothing-pytorch-100", "", -1, {B, 0, 0, 1, 12, 16, 200, 0, 50, MEAN, I10, II100, MIXED, 27, 0, LSP, 100, 0, 0, 0, IEEE}},
    {"28-fp16-smoothing-megatron-300", "", -1, {H16, 1, 0, 2, 10, 16, 120, 8, 30, SUM, I0, II100, NORMAL, 28, 0, LSM, 300, 0, 0, 0, IEEE}},
    {"29-fp32-smoothing-pytorch-0", "", -1, {F32, 0, 0, 1, 8, 16, 100, 0, 25, NONE, I10, II100, MIXED, 29, 0, LSP, 0, 0, 0, 0, IEEE}},
    {"30-bf16-z-loss-1e-2", "", -1, {B, 0, 0, 1, 12, 16, 160, 0, 40, MEAN, I10, II100, NORMAL, 30, 0, LS0, 0, 1000, 0, 0, IEEE}},
    {"31-fp32-z-loss-1e-5-none", "", -1, {F32, 0, 1, 1, 8, 16, 120, 0, 30, NONE, I0, II100, MIXED, 31, 0, LS0, 0, 1, 0, 0, IEEE}},
    {"32-bf16-softcap-5", "", -1, {B, 0, 0, 1, 12, 16, 160, 0, 40, MEAN, I10, II100, NORMAL, 32, 0, LS0, 0, 0, 5, 0, IEEE}},
    {"33-fp32-tied-softcap-50", "", -1, {F32, 1, 0, 2, 8, 16, 200, 0, 50, SUM, I0, II100, MIXED, 33, 0, LS0, 0, 0, 50, 0, IEEE}},
    {"34-bf16-class-weights-mean", "", -1, {B, 0, 0, 1, 16, 16, 200, 0, 50, MEAN, I25, II100, MIXED, 34, 0, LS0, 0, 0, 0, 1, IEEE}},
    {"35-fp16-class-weights-none-prior", "", -1, {H16, 0, 1, 2, 10, 16, 150, 10, 25, NONE, I10, II100, NORMAL, 35, 0, LS0, 0, 0, 0, 1, IEEE}},
    {"36-fp32-tf32-untied", "", -1, {F32, 0, 0, 1, 12, 32, 200, 0, 50, MEAN, I10, II100, NORMAL, 36, 0, LS0, 0, 0, 0, 0, TF32}},
    {"37-fp32-tf32-tied-tp2-prior", "", -1, {F32, 1, 1, 2, 8, 24, 300, 20, 30, SUM, I0, II100, MIXED, 37, 0, LS0, 0, 0, 0, 0, TF32}},
    /* Each value distribution added with the options. */
    {"38-bf16-hard", "", -1, {B, 0, 0, 1, 16, 16, 200, 0, 40, MEAN, I10, II100, HARD, 38}},
    {"39-fp32-poison", "", -1, {F32, 0, 0, 2, 10, 16, 150, 10, 30, MEAN, I10, II100, POISON, 39}},
    {"40-fp16-big", "", -1, {H16, 0, 0, 1, 12, 16, 160, 0, 40, SUM, I0, II100, BIG, 40}},
    {"41-bf16-ties", "", -1, {B, 1, 0, 1, 12, 16, 120, 8, 30, MEAN, I0, II100, TIES, 41}},
    {"42-fp32-target-max", "", -1, {F32, 0, 0, 1, 12, 16, 200, 0, 50, MEAN, I0, II100, TMAX, 42}},
    {"43-bf16-target-min", "", -1, {B, 0, 0, 1, 12, 16, 200, 0, 50, SUM, I10, II100, TMIN, 43}},
    {"44-fp16-zero", "", -1, {H16, 0, 1, 1, 8, 16, 100, 0, 25, MEAN, I10, II100, ZERO, 44}},
    {"45-bf16-subnormal", "", -1, {B, 0, 0, 1, 8, 16, 100, 0, 25, NONE, I0, II100, SUBN, 45}},
    /* Options together, and with the shapes and distributions where they interact. */
    {"46-fp32-every-option-tf32", "", -1, {F32, 0, 1, 2, 16, 16, 200, 8, 30, MEAN, I25, II100, HARD, 46, 5, LSM, 200, 500, 20, 1, TF32}},
    {"47-bf16-tied-tp4-every-option", "", -1, {B, 1, 1, 4, 12, 16, 256, 0, 16, SUM, I10, II100, MIXED, 47, 3, LSP, 100, 100, 30, 1, IEEE}},
    {"48-fp16-all-ignored-cw-smoothing", "", -1, {H16, 0, 0, 1, 8, 16, 100, 0, 20, MEAN, I100, II100, NORMAL, 48, 3, LSP, 150, 50, 0, 1, IEEE}},
    {"49-bf16-poison-softcap-cw", "", -1, {B, 0, 0, 2, 10, 16, 120, 8, 30, MEAN, I10, II100, POISON, 49, 4, LS0, 0, 0, 15, 1, IEEE}},
    {"50-fp32-megatron-v2", "", -1, {F32, 0, 0, 1, 8, 8, 2, 0, 1, MEAN, I0, II100, NORMAL, 50, 0, LSM, 250, 0, 0, 0, IEEE}},
    {"51-bf16-n1-v1-megatron-falls-back", "", -1, {B, 0, 0, 1, 1, 1, 1, 0, 1, MEAN, I0, II100, MIXED, 51, 1, LSM, 300, 1000, 5, 1, IEEE}},
    {"52-bf16-cw-ignore-index-v", "", -1, {B, 0, 0, 2, 10, 16, 100, 28, 30, MEAN, I25, IIV, MIXED, 52, 0, LSP, 50, 0, 0, 1, IEEE}},
    {"53-fp16-big-softcap-10", "", -1, {H16, 1, 0, 1, 12, 16, 160, 0, 40, MEAN, I0, II100, BIG, 53, 0, LS0, 0, 0, 10, 0, IEEE}},
    {"54-fp32-subnormal-tf32", "", -1, {F32, 0, 0, 1, 8, 16, 100, 0, 25, SUM, I0, II100, SUBN, 54, 0, LS0, 0, 0, 0, 0, TF32}},
    {"55-bf16-zero-z-loss", "", -1, {B, 0, 0, 1, 8, 16, 100, 0, 25, MEAN, I0, II100, ZERO, 55, 0, LS0, 0, 1000, 0, 0, IEEE}},
    {"56-fp32-tied-ties-tf32-megatron", "", -1, {F32, 1, 0, 1, 12, 16, 200, 0, 40, MEAN, I10, II100, TIES, 56, 0, LSM, 100, 0, 0, 0, TF32}},
    {"57-bf16-tmin-softcap-z-loss", "", -1, {B, 0, 1, 2, 16, 16, 300, 20, 60, MEAN, I10, II100, TMIN, 57, 8, LS0, 0, 200, 30, 0, IEEE}},
    {"58-fp16-budget-max-every-option", "", -1, {H16, 0, 0, 1, 24, 48, 400, 0, 8, SUM, I10, II100, HARD, 58, 7, LSP, 300, 1000, 50, 1, IEEE}},
    /* Mutant-exposing seeds found by the kill table: each names the bug it makes visible. A weight
     * gradient held in bf16 across 24 one-token chunks (Liger-Kernel) stays inside the bf16 d_weight
     * bound on normal logits, whose own d_logits rounding is as large; flat logits make each chunk's
     * contribution nearly cancel, so the per-chunk roundings dominate (maxscaled 2-3x its bound). */
    {"59-bf16-flat-24-token-chunks-dweight", "", -1, {B, 0, 0, 1, 24, 16, 200, 0, 50, SUM, I0, II100, LCE_DIST_FLAT, 63, 1, LS0, 0, 0, 0, 0, IEEE}},
    /* Values from the input (LCE_FUZZ_VALUES_MAGIC): the 8 hidden and 32 weight elements of a 2x4x8
     * case, one byte each (value byte/16); the poison one carries NaN (0x80) and +Inf (0x7f) in its
     * hidden values, the weight bytes past the input's end keep their generated values. */
    {"60-bf16-values-from-input",
     LCE_FUZZ_VALUES_MAGIC "\x10\x20\x30\x40\xf0\xe0\xd0\xc0\x7f\x81\x01\xff\x08\xf8\x40\xc0\x11\x22\x33\x44"
                           "\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\x01\x02\x03\x04\x05\x06\x07\x09\x0a\x0b",
     -1, {B, 0, 0, 1, 2, 4, 8, 0, 3, MEAN, I0, II100, NORMAL, 60}},
    {"61-fp32-poison-values-from-input", LCE_FUZZ_VALUES_MAGIC "\x80\x10\x20\x30\x7f\xf0\xe0\xd0\x40\x41\x42\x43",
     -1, {F32, 1, 0, 1, 2, 4, 8, 0, 8, SUM, I0, II100, POISON, 61}},
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

/* A whole (untruncated) seed must decode to the parameters of its row: a value outside its field's
 * range would be silently reduced into it and the seed would not be the case its name promises. */
static int decodes_to_row(const seed_spec *s, const uint8_t *buf, size_t len) {
  lce_fuzz_params p;
  size_t front;
  lce_fuzz_params_decode(buf, len, &p, &front);
  for (int f = 0; f < LCE_FUZZ_FIELD_COUNT; f++) {
    if (p.field[f] != s->f[f]) {
      fprintf(stderr, "%s: field %s is %u in the table but decodes to %u (outside its range?)\n", s->name,
              lce_fuzz_field_name((lce_fuzz_field)f), s->f[f], p.field[f]);
      return 0;
    }
  }
  return 1;
}

static int file_equals(const char *path, const uint8_t *want, size_t len) {
  uint8_t have[512];
  FILE *f = fopen(path, "rb");
  if (f == NULL) return 0;
  size_t got = fread(have, 1, sizeof have, f);
  fclose(f);
  return got == len && memcmp(have, want, len) == 0;
}

static int in_table(const char *name) {
  for (size_t i = 0; i < sizeof k_seeds / sizeof k_seeds[0]; i++)
    if (strcmp(k_seeds[i].name, name) == 0) return 1;
  return 0;
}

/* Counts (and names) the files of dir that no table row writes. */
static int count_extra_files(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) {
    perror(dir);
    return 1;
  }
  int extra = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (e->d_name[0] == '.' || in_table(e->d_name)) continue;
    printf("%-4s %-34s not in the table\n", "EXTRA", e->d_name);
    extra++;
  }
  closedir(d);
  return extra;
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
    if (k_seeds[i].keep_tail < 0 && !decodes_to_row(&k_seeds[i], buf, len)) return 1;
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
  if (check) bad += count_extra_files(dir);
  if (bad) fprintf(stderr, "%d seed file(s) differ from the table: rerun make_seed_corpus %s (remove extra files)\n", bad, dir);
  return bad ? 1 : 0;
}
