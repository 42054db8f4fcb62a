/* lce_outputs.c — output buffers for a subject run: poisoned, guarded, priors copied in.
 *
 * Value outputs (loss, loss_token, lse, d_hidden) start as NaN so that an element a subject never
 * writes is caught by the judge's class check. Every buffer has LCE_GUARD_ELEMS elements on each
 * side filled with GUARD_BYTE; a subject that writes out of bounds changes them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_case.h"

#define GUARD_BYTE 0xA5
enum { BUF_LOSS, BUF_LOSS_TOKEN, BUF_LSE, BUF_D_HIDDEN, BUF_GRAD_E, BUF_GRAD_W, BUF_COUNT };
static const char *const BUF_NAMES[BUF_COUNT] = {"loss", "loss_token", "lse", "d_hidden",
                                                 "grad_embedding", "grad_weight"};

typedef struct outputs_block {
  unsigned char *base[BUF_COUNT];
  size_t bytes[BUF_COUNT]; /* payload bytes, guards excluded */
  size_t elem[BUF_COUNT];
} outputs_block;

static void buffer_shape(const lce_case *c, int b, size_t *count, size_t *elem) {
  size_t wn = (size_t)(c->vp * c->h);
  switch (b) {
    case BUF_LOSS: *count = 1; *elem = sizeof(float); break;
    case BUF_LOSS_TOKEN:
    case BUF_LSE: *count = (size_t)c->n; *elem = sizeof(float); break;
    case BUF_D_HIDDEN: *count = (size_t)(c->n * c->h); *elem = lce_dtype_size(c->dtype); break;
    case BUF_GRAD_E: *count = wn; *elem = sizeof(float); break;
    default: *count = c->tied ? 0 : wn; *elem = sizeof(float); break;
  }
}

static void **buffer_slot(lce_outputs *out, int b) {
  switch (b) {
    case BUF_LOSS: return (void **)&out->loss;
    case BUF_LOSS_TOKEN: return (void **)&out->loss_token;
    case BUF_LSE: return (void **)&out->lse;
    case BUF_D_HIDDEN: return &out->d_hidden;
    case BUF_GRAD_E: return (void **)&out->grad_embedding;
    default: return (void **)&out->grad_weight;
  }
}

lce_code lce_outputs_alloc(const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st) {
  memset(out, 0, sizeof *out);
  LCE_TRY(lce_case_validate(c, st));
  outputs_block *blk = calloc(1, sizeof *blk);
  LCE_ALLOC_CHECK(st, blk);
  out->block_ = blk;
  for (int b = 0; b < BUF_COUNT; b++) {
    size_t count, elem;
    buffer_shape(c, b, &count, &elem);
    if (count == 0) continue;
    size_t guard = LCE_GUARD_ELEMS * elem;
    blk->bytes[b] = count * elem;
    blk->elem[b] = elem;
    blk->base[b] = malloc(blk->bytes[b] + 2 * guard);
    if (blk->base[b] == NULL) {
      lce_outputs_free(out);
      return lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory allocating output %s", BUF_NAMES[b]);
    }
    memset(blk->base[b], GUARD_BYTE, guard);
    memset(blk->base[b] + guard + blk->bytes[b], GUARD_BYTE, guard);
    *buffer_slot(out, b) = blk->base[b] + guard;
  }
  out->loss[0] = NAN;
  for (int64_t i = 0; i < c->n; i++) out->loss_token[i] = out->lse[i] = NAN;
  for (int64_t i = 0; i < c->n * c->h; i++) lce_store(c->dtype, out->d_hidden, (size_t)i, NAN);
  memcpy(out->grad_embedding, in->grad_embedding_prior, blk->bytes[BUF_GRAD_E]);
  if (!c->tied) memcpy(out->grad_weight, in->grad_weight_prior, blk->bytes[BUF_GRAD_W]);
  return LCE_OK;
}

int lce_outputs_guards_intact(const lce_case *c, const lce_outputs *out, char *which, size_t size) {
  const outputs_block *blk = out->block_;
  for (int b = 0; b < BUF_COUNT; b++) {
    if (blk->base[b] == NULL) continue;
    size_t guard = LCE_GUARD_ELEMS * blk->elem[b];
    const unsigned char *lo = blk->base[b], *hi = blk->base[b] + guard + blk->bytes[b];
    for (size_t i = 0; i < guard; i++) {
      if (lo[i] != GUARD_BYTE || hi[i] != GUARD_BYTE) {
        if (which) snprintf(which, size, "%s: guard region %s the buffer was written", BUF_NAMES[b],
                            lo[i] != GUARD_BYTE ? "before" : "after");
        return 0;
      }
    }
  }
  return 1;
}

void lce_outputs_free(lce_outputs *out) {
  if (out == NULL) return;
  outputs_block *blk = out->block_;
  if (blk) {
    for (int b = 0; b < BUF_COUNT; b++) free(blk->base[b]);
    free(blk);
  }
  memset(out, 0, sizeof *out);
}

/* Buffer `name` of elems elements of elem_size bytes, bit for bit. */
static int same_bits(const char *name, const void *a, const void *b, size_t elems, size_t elem_size, char *why,
                     size_t size) {
  if (a == NULL || b == NULL) return a == b;
  const unsigned char *pa = a, *pb = b;
  for (size_t i = 0; i < elems; i++)
    if (memcmp(pa + i * elem_size, pb + i * elem_size, elem_size) != 0) {
      if (why && size) snprintf(why, size, "%s element %zu differs", name, i);
      return 0;
    }
  return 1;
}

int lce_outputs_identical(const lce_case *c, const lce_outputs *a, const lce_outputs *b, char *why, size_t size) {
  const size_t n = (size_t)c->n, nh = (size_t)(c->n * c->h), vph = (size_t)(c->vp * c->h);
  return same_bits("loss", a->loss, b->loss, 1, sizeof(float), why, size) &&
         same_bits("loss_token", a->loss_token, b->loss_token, n, sizeof(float), why, size) &&
         same_bits("lse", a->lse, b->lse, n, sizeof(float), why, size) &&
         same_bits("d_hidden", a->d_hidden, b->d_hidden, nh, lce_dtype_size(c->dtype), why, size) &&
         same_bits("grad_embedding", a->grad_embedding, b->grad_embedding, vph, sizeof(float), why, size) &&
         (c->tied || same_bits("grad_weight", a->grad_weight, b->grad_weight, vph, sizeof(float), why, size));
}
