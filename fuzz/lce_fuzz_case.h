/* lce_fuzz_case.h — fuzz input bytes → a small, always-valid lce_case.
 *
 * Layout of an input (zstd-style): the case parameters are read from the END of the input, one
 * field after another (field 0 is the last byte); the bytes left over at the front are hashed into
 * the case seed. A reader that runs out of bytes returns 0, so every prefix of every input still
 * maps to one case, and a truncated input degrades to small default values deterministically.
 *
 *   [ front: hashed into the seed ][ options, 9 bytes ][ core, 19 bytes ]   (read right to left)
 *
 * The core fields (dtype .. seed) are the layout of the first harness; the option fields (token
 * chunk .. gemm) were added after them, i.e. in front of the core, and raw 0 means "option off".
 * So a core-only input (every seed written before the options existed) still decodes to the case it
 * always did: its options read as exhausted, which is the default case. Only an old input with
 * front bytes changes meaning, because its first 9 front bytes now set options.
 *
 * Shapes are kept small so that one iteration (oracle included) takes milliseconds:
 *   n in [1,24], h in [1,48], v in [1,400], vp = v + [0,130] rounded up to a multiple of tp,
 *   tp in [1,4], vocab_chunk in [1,v], and 3*n*h*v <= LCE_FUZZ_MAX_MACS (h, then n, shrinks).
 * Options: token chunk 0 (one chunk) or 1..n; smoothing none/pytorch/megatron with permille 0..300
 * (megatron falls back to pytorch at v = 1, where V / (V - 1) does not exist; permille is 0 without
 * smoothing); z-loss 0 or 1..1000 (units of 1e-5); softcap 0 or 5..50; class weights off/on;
 * GEMM ieee or tf32 (tf32 only for fp32 inputs, otherwise ieee).
 *
 * The same field table drives the encoder, so the seed-corpus tool writes inputs that decode to
 * exactly the parameters it chose. */
#ifndef LCE_FUZZ_CASE_H
#define LCE_FUZZ_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "lce_case.h"

/* Oracle budget per case, in multiply-adds: the forward GEMM, d_hidden and d_weight each cost
 * n*h*v. */
#define LCE_FUZZ_MAX_MACS 1000000

/* Fields in the order they are read from the tail. */
typedef enum lce_fuzz_field {
  LCE_FUZZ_DTYPE = 0,        /* lce_dtype */
  LCE_FUZZ_TIED,             /* 0 untied, 1 tied */
  LCE_FUZZ_PRIOR_GRAD,       /* 0 fresh, 1 prior */
  LCE_FUZZ_TP,               /* 1..4 */
  LCE_FUZZ_N,                /* 1..24 */
  LCE_FUZZ_H,                /* 1..48 */
  LCE_FUZZ_V,                /* 1..400 */
  LCE_FUZZ_PAD,              /* 0..130 extra padded rows before rounding to tp */
  LCE_FUZZ_VOCAB_CHUNK,      /* 1..v */
  LCE_FUZZ_REDUCTION,        /* lce_reduction */
  LCE_FUZZ_IGNORE_LEVEL,     /* index into {0, 10, 25, 50, 100} percent */
  LCE_FUZZ_IGNORE_INDEX,     /* 0: -100, 1: -1, 2: v (first padded row) */
  LCE_FUZZ_DIST,             /* lce_dist */
  LCE_FUZZ_SEED,             /* 32 bits, xor-ed with the hash of the front bytes */
  /* Options (read after the core, so raw 0 = exhausted = off). */
  LCE_FUZZ_TOKEN_CHUNK,      /* 0 (one chunk) or 1..n */
  LCE_FUZZ_SMOOTHING,        /* lce_smoothing */
  LCE_FUZZ_SMOOTHING_PERMILLE, /* 0..300 */
  LCE_FUZZ_Z_LOSS,           /* 0 or 1..1000, units of 1e-5 */
  LCE_FUZZ_SOFTCAP,          /* 0 or 5..50 */
  LCE_FUZZ_CLASS_WEIGHTS,    /* 0 off, 1 on */
  LCE_FUZZ_GEMM,             /* lce_gemm (tf32 kept only for fp32 inputs) */
  LCE_FUZZ_FIELD_COUNT
} lce_fuzz_field;

/* Parameter values, each already inside its field's range. */
typedef struct lce_fuzz_params {
  uint32_t field[LCE_FUZZ_FIELD_COUNT];
} lce_fuzz_params;

/* Bytes every field occupies in the tail, summed: an input this long sets every field. */
size_t lce_fuzz_tail_bytes(void);
/* Bytes of the core fields (dtype .. seed) alone: the whole tail of an input made before the
 * option fields existed. */
size_t lce_fuzz_core_bytes(void);
const char *lce_fuzz_field_name(lce_fuzz_field f);
unsigned lce_fuzz_field_width(lce_fuzz_field f); /* bytes field f takes from the tail */

/* Reads the parameters from the tail of data; *front_size receives the count of unread leading
 * bytes (they belong to the seed hash). Never fails. */
void lce_fuzz_params_decode(const uint8_t *data, size_t size, lce_fuzz_params *p, size_t *front_size);

/* Inverse of decode: writes front (may be NULL when front_size is 0) followed by the tail that
 * decodes to p. buf must hold front_size + lce_fuzz_tail_bytes() bytes; returns the bytes written.
 * Values outside a field's range are reduced into it exactly as decode would. Without front bytes
 * the encoding is the shortest one: trailing fields (in read order) at raw 0 are left out, so a
 * case with every option off comes out in the core layout. */
size_t lce_fuzz_params_encode(const lce_fuzz_params *p, const uint8_t *front, size_t front_size,
                              uint8_t *buf, size_t size);

/* Parameters plus the hash of the front bytes → a case that lce_case_validate accepts. */
lce_code lce_fuzz_case_from_params(const lce_fuzz_params *p, uint64_t front_hash, lce_case *c,
                                   lce_status *st);

/* The whole mapping: bytes → case. An error here is a bug in this file, never in the input. */
lce_code lce_fuzz_case_from_bytes(const uint8_t *data, size_t size, lce_case *c, lce_status *st);

/* Structure-aware values. A front that starts with LCE_FUZZ_VALUES_MAGIC carries tensor values, so
 * that libFuzzer's mutations and comparison guidance reach the data, not only the parameters: its
 * bytes after the magic, one per element, replace the hidden values (n*h, row-major) and then the
 * output weight's real rows (v*h: the embedding when tied, else the weight) as far as they reach;
 * the elements past the input's end keep their generated values, and padded rows always do. A byte
 * b is the value (int8_t)b / 16, in [-8, 127/16] and exact in every dtype. Only a poison case
 * (LCE_DIST_POISON, whose semantics allow NaN and Inf in the hidden values) maps the hidden bytes
 * 0x80 and 0x7f to NaN and +Inf instead. Any other front (every input without the magic) keeps the
 * values generated from the case id. The magic and the values are front bytes, so they are also
 * hashed into the seed. */
#define LCE_FUZZ_VALUES_MAGIC "LCEV"
/* Applies the values of front to t, generated for case c; returns the elements replaced (0 when the
 * front carries no values). */
size_t lce_fuzz_values_apply(const uint8_t *front, size_t front_size, const lce_case *c, lce_tensors *t);

/* 64-bit FNV-1a of the front bytes, 0 for none (so a tail-only input keeps its seed field as is). */
uint64_t lce_fuzz_front_hash(const uint8_t *front, size_t size);

#endif
