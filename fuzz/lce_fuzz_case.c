/* lce_fuzz_case.c — see lce_fuzz_case.h. One field table drives both directions (decode for the
 * harness, encode for the seed-corpus tool), so the two can never disagree about the layout. */
#include "lce_fuzz_case.h"

#include <math.h>
#include <string.h>

#include "lce_prng.h"

typedef struct field_spec {
  const char *name;
  unsigned width;  /* bytes taken from the tail */
  uint32_t lo, hi; /* inclusive range; hi == 0 on a chunk field means "up to v" (or n) */
  int zero_or;     /* 1: the values are 0 (option off) or lo..hi */
} field_spec;

static const field_spec k_fields[LCE_FUZZ_FIELD_COUNT] = {
    [LCE_FUZZ_DTYPE] = {"dtype", 1, 0, LCE_DTYPE_COUNT - 1, 0},
    [LCE_FUZZ_TIED] = {"tied", 1, 0, 1, 0},
    [LCE_FUZZ_PRIOR_GRAD] = {"prior_grad", 1, 0, 1, 0},
    [LCE_FUZZ_TP] = {"tp", 1, 1, 4, 0},
    [LCE_FUZZ_N] = {"n", 1, 1, 24, 0},
    [LCE_FUZZ_H] = {"h", 1, 1, 48, 0},
    [LCE_FUZZ_V] = {"v", 2, 1, 400, 0},
    [LCE_FUZZ_PAD] = {"pad", 1, 0, 130, 0},
    [LCE_FUZZ_VOCAB_CHUNK] = {"vocab_chunk", 2, 1, 0, 0},
    [LCE_FUZZ_REDUCTION] = {"reduction", 1, 0, LCE_RED_MEAN, 0},
    [LCE_FUZZ_IGNORE_LEVEL] = {"ignore_level", 1, 0, 4, 0},
    [LCE_FUZZ_IGNORE_INDEX] = {"ignore_index", 1, 0, 2, 0},
    [LCE_FUZZ_DIST] = {"dist", 1, 0, LCE_DIST_COUNT - 1, 0},
    [LCE_FUZZ_SEED] = {"seed", 4, 0, UINT32_MAX, 0},
    [LCE_FUZZ_TOKEN_CHUNK] = {"token_chunk", 1, 1, 0, 1},
    [LCE_FUZZ_SMOOTHING] = {"smoothing", 1, 0, LCE_SMOOTH_MEGATRON, 0},
    [LCE_FUZZ_SMOOTHING_PERMILLE] = {"smoothing_permille", 2, 0, 300, 0},
    [LCE_FUZZ_Z_LOSS] = {"z_loss_e5", 2, 1, 1000, 1},
    [LCE_FUZZ_SOFTCAP] = {"softcap", 1, 5, 50, 1},
    [LCE_FUZZ_CLASS_WEIGHTS] = {"class_weights", 1, 0, 1, 0},
    [LCE_FUZZ_GEMM] = {"gemm", 1, 0, LCE_GEMM_TF32, 0},
};

static const int32_t k_ignore_pct[] = {0, 10, 25, 50, 100};

static size_t width_sum(int end) {
  size_t total = 0;
  for (int f = 0; f < end; f++) total += k_fields[f].width;
  return total;
}

size_t lce_fuzz_tail_bytes(void) { return width_sum(LCE_FUZZ_FIELD_COUNT); }
size_t lce_fuzz_core_bytes(void) { return width_sum(LCE_FUZZ_SEED + 1); }

const char *lce_fuzz_field_name(lce_fuzz_field f) {
  return (f >= 0 && f < LCE_FUZZ_FIELD_COUNT) ? k_fields[f].name : "?";
}

unsigned lce_fuzz_field_width(lce_fuzz_field f) {
  return (f >= 0 && f < LCE_FUZZ_FIELD_COUNT) ? k_fields[f].width : 0;
}

/* The chunk fields' upper ends are the vocab size and token count decoded before them. */
static uint32_t field_hi(lce_fuzz_field f, const lce_fuzz_params *sofar) {
  if (f == LCE_FUZZ_VOCAB_CHUNK) return sofar->field[LCE_FUZZ_V];
  if (f == LCE_FUZZ_TOKEN_CHUNK) return sofar->field[LCE_FUZZ_N];
  return k_fields[f].hi;
}

/* raw (any 32-bit value) → the field's range; raw 0 gives lo (or 0, the "off" value, on a zero_or
 * field), so an exhausted tail gives minima and options off. */
static uint32_t raw_to_value(lce_fuzz_field f, uint32_t raw, const lce_fuzz_params *sofar) {
  const field_spec *s = &k_fields[f];
  uint64_t span = (uint64_t)field_hi(f, sofar) - s->lo + 1 + (uint64_t)s->zero_or;
  uint64_t r = (uint64_t)raw % span;
  if (s->zero_or) return r == 0 ? 0 : (uint32_t)(s->lo + r - 1);
  return (uint32_t)(s->lo + r);
}

/* The raw value that raw_to_value maps back to value, for a value inside the field's range. */
static uint32_t value_to_raw(lce_fuzz_field f, uint32_t value) {
  const field_spec *s = &k_fields[f];
  if (s->zero_or) return value == 0 ? 0 : value - s->lo + 1;
  return value - s->lo;
}

/* Takes up to width bytes from the end; the first byte taken is the most significant. */
static uint32_t take_from_tail(const uint8_t *data, size_t *size, unsigned width) {
  uint32_t value = 0;
  for (unsigned i = 0; i < width && *size > 0; i++) value = (value << 8) | data[--*size];
  return value;
}

void lce_fuzz_params_decode(const uint8_t *data, size_t size, lce_fuzz_params *p, size_t *front_size) {
  for (int f = 0; f < LCE_FUZZ_FIELD_COUNT; f++)
    p->field[f] = raw_to_value((lce_fuzz_field)f, take_from_tail(data, &size, k_fields[f].width), p);
  *front_size = size;
}

size_t lce_fuzz_params_encode(const lce_fuzz_params *p, const uint8_t *front, size_t front_size,
                              uint8_t *buf, size_t size) {
  size_t total = front_size + lce_fuzz_tail_bytes();
  if (size < total) return 0;
  for (size_t i = 0; i < front_size; i++) buf[i] = front[i];
  lce_fuzz_params reduced;
  uint32_t raw[LCE_FUZZ_FIELD_COUNT];
  size_t pos = total;
  for (int f = 0; f < LCE_FUZZ_FIELD_COUNT; f++) {
    reduced.field[f] = raw_to_value((lce_fuzz_field)f, value_to_raw((lce_fuzz_field)f, p->field[f]), &reduced);
    raw[f] = value_to_raw((lce_fuzz_field)f, reduced.field[f]);
    unsigned w = k_fields[f].width;
    for (unsigned i = 0; i < w; i++) buf[--pos] = (uint8_t)(raw[f] >> (8 * (w - 1 - i)));
  }
  if (front_size > 0) return total;
  /* Without a front, the last fields read that are 0 read the same when absent: leave them out,
   * so that a case with every option off is written in the core layout, byte for byte. */
  size_t drop = 0;
  for (int f = LCE_FUZZ_FIELD_COUNT - 1; f >= 0 && raw[f] == 0; f--) drop += k_fields[f].width;
  memmove(buf, buf + drop, total - drop);
  return total - drop;
}

uint64_t lce_fuzz_front_hash(const uint8_t *front, size_t size) {
  if (size == 0) return 0;
  return lce_fnv1a(LCE_FNV1A_OFFSET, front, size);
}

/* Keeps the oracle inside its budget: shrink h first (it only scales the GEMMs), then n. */
static void fit_oracle_budget(lce_case *c) {
  const int64_t budget = LCE_FUZZ_MAX_MACS / 3;
  if (c->n * c->h * c->v > budget) c->h = budget / (c->n * c->v) > 0 ? budget / (c->n * c->v) : 1;
  if (c->n * c->h * c->v > budget) c->n = budget / (c->h * c->v) > 0 ? budget / (c->h * c->v) : 1;
}

/* The option fields, made valid for the shape: each is canonical (one struct per case id). */
static void set_options(const uint32_t *f, lce_case *c) {
  /* The budget may have shrunk n below the chunk; a chunk of n tokens is the same split. */
  c->token_chunk = f[LCE_FUZZ_TOKEN_CHUNK] < c->n ? f[LCE_FUZZ_TOKEN_CHUNK] : c->n;
  c->smoothing = (lce_smoothing)f[LCE_FUZZ_SMOOTHING];
  if (c->smoothing == LCE_SMOOTH_MEGATRON && c->v < 2) c->smoothing = LCE_SMOOTH_PYTORCH;
  c->smoothing_permille = c->smoothing == LCE_SMOOTH_NONE ? 0 : (int32_t)f[LCE_FUZZ_SMOOTHING_PERMILLE];
  c->z_loss_e5 = (int32_t)f[LCE_FUZZ_Z_LOSS];
  c->softcap = (int32_t)f[LCE_FUZZ_SOFTCAP];
  c->class_weights = (int)f[LCE_FUZZ_CLASS_WEIGHTS];
  c->gemm = c->dtype == LCE_FP32 ? (lce_gemm)f[LCE_FUZZ_GEMM] : LCE_GEMM_IEEE;
}

lce_code lce_fuzz_case_from_params(const lce_fuzz_params *p, uint64_t front_hash, lce_case *c,
                                   lce_status *st) {
  const uint32_t *f = p->field;
  *c = lce_case_default();
  c->dtype = (lce_dtype)f[LCE_FUZZ_DTYPE];
  c->tied = (int)f[LCE_FUZZ_TIED];
  c->prior_grad = (int)f[LCE_FUZZ_PRIOR_GRAD];
  c->tp = (int32_t)f[LCE_FUZZ_TP];
  c->n = f[LCE_FUZZ_N];
  c->h = f[LCE_FUZZ_H];
  c->v = f[LCE_FUZZ_V];
  /* Megatron pads the vocab so every shard has the same row count; do the same for any tp. */
  int64_t vp = c->v + (int64_t)f[LCE_FUZZ_PAD];
  c->vp = (vp + c->tp - 1) / c->tp * c->tp;
  c->vocab_chunk = f[LCE_FUZZ_VOCAB_CHUNK];
  c->reduction = (lce_reduction)f[LCE_FUZZ_REDUCTION];
  c->ignore_pct = k_ignore_pct[f[LCE_FUZZ_IGNORE_LEVEL]];
  /* ignore_index == v is legal and lands on the first padded row: a subject that indexes W with
   * the raw label, or keeps padded rows in the softmax, trips over it. */
  const int64_t ignore_choices[3] = {LCE_DEFAULT_IGNORE_INDEX, -1, c->v};
  c->ignore_index = ignore_choices[f[LCE_FUZZ_IGNORE_INDEX]];
  c->dist = (lce_dist)f[LCE_FUZZ_DIST];
  c->seed = (uint64_t)f[LCE_FUZZ_SEED] ^ front_hash;
  fit_oracle_budget(c);
  set_options(f, c);
  LCE_TRY(lce_case_validate(c, st));
  return LCE_OK;
}

lce_code lce_fuzz_case_from_bytes(const uint8_t *data, size_t size, lce_case *c, lce_status *st) {
  lce_fuzz_params p;
  size_t front_size;
  lce_fuzz_params_decode(data, size, &p, &front_size);
  return lce_fuzz_case_from_params(&p, lce_fuzz_front_hash(data, front_size), c, st);
}

/* One value byte as the element it stands for (lce_fuzz_case.h). */
static double value_of_byte(uint8_t b, int poison) {
  if (poison && b == 0x80) return NAN;
  if (poison && b == 0x7f) return INFINITY;
  return (int8_t)b / 16.0;
}

size_t lce_fuzz_values_apply(const uint8_t *front, size_t front_size, const lce_case *c, lce_tensors *t) {
  const size_t magic = sizeof LCE_FUZZ_VALUES_MAGIC - 1;
  if (front_size < magic || memcmp(front, LCE_FUZZ_VALUES_MAGIC, magic) != 0) return 0;
  const uint8_t *v = front + magic;
  const size_t count = front_size - magic, hidden = (size_t)(c->n * c->h), weight = (size_t)(c->v * c->h);
  void *w = c->tied ? t->embedding : t->weight;
  size_t k = 0;
  for (; k < count && k < hidden; k++) lce_store(c->dtype, t->hidden, k, value_of_byte(v[k], c->dist == LCE_DIST_POISON));
  for (; k < count && k < hidden + weight; k++) lce_store(c->dtype, w, k - hidden, value_of_byte(v[k], 0));
  return k;
}
