/* lce_exchange_answer.c — a runner's answer to one exported case, loaded for the judge
 * (lce_exchange_load_answer in lce_exchange.h). What is the runner's fault about one output (a file
 * absent, unreadable, of another dtype or shape) is that output's class failure, so the verdict names
 * it beside the others; what makes the whole case meaningless (inputs that are not the case's, an
 * error the runner reported, a missing out/ or meta.json) is an error of the case. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lce_exchange.h"

/* dir/a b into buf (lce_exchange_open refuses case directories of LCE_EXCHANGE_MAX_PATH or more). */
static void path_of(char *buf, size_t size, const char *dir, const char *a, const char *b) {
  snprintf(buf, size, "%.*s/%.40s%.8s", LCE_EXCHANGE_MAX_PATH, dir, a, b);
}

/* Whether a file's dtype and shape are the tensor's. */
static int same_shape(const lce_npy *a, const lce_exchange_tensor *t) {
  int same = a->descr == t->descr && a->ndim == t->ndim;
  for (int k = 0; same && k < a->ndim; k++) same = a->shape[k] == t->shape[k];
  return same;
}

/* The first element (of item bytes) at which n bytes of have and want differ; n / item when none does. */
static size_t first_difference(const unsigned char *have, const unsigned char *want, size_t n, size_t item) {
  size_t k = 0;
  while (k < n / item && memcmp(have + k * item, want + k * item, item) == 0) k++;
  return k;
}

/* Every input file bit-identical to the tensor regenerated from the case id, read a piece at a time
 * (production inputs are gigabytes: the file is never held whole beside the tensor). */
static lce_code check_inputs(const lce_exchange_case *e, const lce_case *c, const lce_tensors *in, lce_status *st) {
  enum { PIECE = 16 << 20 };
  lce_exchange_tensor t[8];
  const size_t n = lce_exchange_inputs(c, in, t);
  unsigned char *piece = malloc(PIECE);
  LCE_ALLOC_CHECK(st, piece);
  lce_code rc = LCE_OK;
  for (size_t i = 0; i < n && rc == LCE_OK; i++) {
    char path[1024], want_shape[64], have_shape[64];
    path_of(path, sizeof path, e->dir, t[i].name, ".npy");
    lce_npy_file f;
    if ((rc = lce_npy_open(path, &f, st)) != LCE_OK) break;
    if (!same_shape(&f.meta, &t[i])) {
      rc = lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "%s: %s %s where case %s has %s %s", path,
                    lce_npy_descr_name(f.meta.descr),
                    lce_npy_shape_text(f.meta.ndim, f.meta.shape, have_shape, sizeof have_shape), e->id,
                    lce_npy_descr_name(t[i].descr), lce_npy_shape_text(t[i].ndim, t[i].shape, want_shape, sizeof want_shape));
    }
    const size_t item = lce_npy_item_size(t[i].descr), step = PIECE / item * item;
    const unsigned char *want = t[i].data;
    for (size_t off = 0; rc == LCE_OK && off < f.meta.bytes; off += step) {
      const size_t len = f.meta.bytes - off < step ? f.meta.bytes - off : step;
      if ((rc = lce_npy_read_next(&f, piece, len, st)) != LCE_OK) break;
      if (memcmp(piece, want + off, len) == 0) continue;
      rc = lce_fail(st, LCE_EINVAL, __FILE__, __LINE__,
                    "%s: element %zu differs from the input regenerated from case id %s (the runner changed its "
                    "inputs, or the directory is stale)", path, off / item + first_difference(piece, want + off, len, item),
                    e->id);
    }
    lce_npy_close(&f);
  }
  free(piece);
  return rc;
}

/* The first line of out/skip.txt into reason; 0 when the file does not exist. */
static int read_skip(const char *out_dir, char *reason, size_t size) {
  char path[1024];
  path_of(path, sizeof path, out_dir, "skip.txt", "");
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  if (fgets(reason, (int)size, f) == NULL) reason[0] = '\0';
  fclose(f);
  reason[strcspn(reason, "\r\n")] = '\0';
  if (reason[0] == '\0') snprintf(reason, size, "(skip.txt gives no reason)");
  return 1;
}

/* meta.json: an "error" ends the case; "missing" names outputs of the case, as a bit per output. */
static lce_code read_meta(const char *out_dir, const lce_case *c, unsigned *missing, lce_status *st) {
  char path[1024];
  path_of(path, sizeof path, out_dir, "meta.json", "");
  struct stat sb;
  LCE_CHECK(st, stat(path, &sb) == 0, LCE_EINVAL, "%s: missing (a runner writes meta.json, or skip.txt, for every case)",
            path);
  lce_json meta;
  LCE_TRY(lce_json_load(path, &meta, st));
  const lce_json *error = lce_json_get(&meta, "error"), *list = lce_json_get(&meta, "missing");
  lce_code rc = LCE_OK;
  if (meta.type != LCE_JSON_OBJECT) rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s: not a JSON object", path);
  else if (error != NULL)
    rc = lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "the runner reported an error: %.500s",
                  error->type == LCE_JSON_STRING ? error->string : "(\"error\" is not a string)");
  else if (list == NULL || list->type != LCE_JSON_ARRAY)
    rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s: \"missing\" must be an array of output names", path);
  lce_exchange_tensor t[8];
  const size_t n = lce_exchange_outputs(c, t);
  *missing = 0;
  for (size_t i = 0; rc == LCE_OK && i < list->count; i++) {
    const lce_json *name = &list->items[i];
    size_t k = 0;
    while (k < n && !(name->type == LCE_JSON_STRING && strcmp(name->string, t[k].name) == 0)) k++;
    if (k == n)
      rc = lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s:%d:%d: \"missing\" lists %s, not an output of this case",
                    path, name->line, name->column, name->type == LCE_JSON_STRING ? name->string : "a non-string");
    else *missing |= 1u << t[k].output;
  }
  lce_json_free(&meta);
  return rc;
}

static void unusable(lce_outputs *out, lce_output_id o, const char *msg) {
  char *dst = out->unusable_msg[o];
  const size_t len = strnlen(msg, sizeof out->unusable_msg[o] - 1);
  out->unusable |= 1u << o;
  memcpy(dst, msg, len);
  dst[len] = '\0';
}

/* Gives every element of the buffer that has exactly the poison's bits payload 1 (little endian: the
 * lowest payload bit flipped), typed so that the scan runs at memory speed over a production output. */
static void unpoison(unsigned char *dst, size_t count, lce_dtype fmt) {
  unsigned char poison[8];
  lce_store(fmt, poison, 0, NAN);
  if (lce_dtype_size(fmt) == 2) {
    uint16_t p, v;
    memcpy(&p, poison, 2);
    for (size_t i = 0; i < count; i++) {
      memcpy(&v, dst + 2 * i, 2);
      if (v == p) dst[2 * i] ^= 1;
    }
  } else {
    uint32_t p, v;
    memcpy(&p, poison, 4);
    for (size_t i = 0; i < count; i++) {
      memcpy(&v, dst + 4 * i, 4);
      if (v == p) dst[4 * i] ^= 1;
    }
  }
}

/* One output file, read straight into its buffer. A NaN in the file is data, never the poison
 * lce_outputs_alloc filled the buffer with (unpoison), so that the judge reports a NaN where the oracle
 * is finite as such instead of "not written". */
static void load_output(const lce_exchange_case *e, const lce_case *c, const lce_exchange_tensor *t, lce_outputs *out) {
  char path[1024], want_shape[64], have_shape[64], msg[768];
  snprintf(path, sizeof path, "%.*s/out/%.40s.npy", LCE_EXCHANGE_MAX_PATH, e->dir, t->name);
  struct stat sb;
  if (stat(path, &sb) != 0) {
    snprintf(msg, sizeof msg, "out/%s.npy absent (and not declared missing in meta.json)", t->name);
    return unusable(out, t->output, msg);
  }
  lce_npy_file f;
  lce_status st;
  lce_status_clear(&st);
  const lce_dtype fmt = lce_output_format(c, t->output);
  unsigned char *dst = lce_output_buffer(c, out, t->output);
  int opened = lce_npy_open(path, &f, &st) == LCE_OK;
  if (opened && !same_shape(&f.meta, t)) {
    snprintf(msg, sizeof msg, "out/%s.npy is %s %s, expected %s %s (%s)", t->name, lce_npy_descr_name(f.meta.descr),
             lce_npy_shape_text(f.meta.ndim, f.meta.shape, have_shape, sizeof have_shape), lce_npy_descr_name(t->descr),
             lce_npy_shape_text(t->ndim, t->shape, want_shape, sizeof want_shape), t->dtype);
    lce_npy_close(&f);
    return unusable(out, t->output, msg);
  }
  if (!opened || lce_npy_read_next(&f, dst, f.meta.bytes, &st) != LCE_OK) {
    const size_t len = strlen(path); /* the message starts with the path: name the file as meta.json does */
    snprintf(msg, sizeof msg, "out/%s.npy%.600s", t->name, strncmp(st.msg, path, len) == 0 ? st.msg + len : st.msg);
    lce_npy_close(&f);
    return unusable(out, t->output, msg);
  }
  const size_t bytes = f.meta.bytes;
  lce_npy_close(&f);
  /* The file's items are the buffer's elements (the exchange's descr of each output format). */
  if (lce_npy_item_size(t->descr) != lce_dtype_size(fmt)) {
    snprintf(msg, sizeof msg, "out/%s.npy: %s items for a %zu-byte output format (internal)", t->name,
             lce_npy_descr_name(t->descr), lce_dtype_size(fmt));
    return unusable(out, t->output, msg);
  }
  unpoison(dst, bytes / lce_dtype_size(fmt), fmt);
}

lce_code lce_exchange_load_answer(const lce_exchange_case *e, const lce_case *c, const lce_tensors *in,
                                  lce_outputs *out, lce_status *st) {
  LCE_TRY(check_inputs(e, c, in, st));
  char out_dir[1024], reason[512];
  path_of(out_dir, sizeof out_dir, e->dir, "out", "");
  struct stat sb;
  LCE_CHECK(st, stat(out_dir, &sb) == 0 && S_ISDIR(sb.st_mode), LCE_EINVAL,
            "%s: missing: the runner wrote nothing for this case", out_dir);
  if (read_skip(out_dir, reason, sizeof reason))
    return lce_fail(st, LCE_ESKIP, __FILE__, __LINE__, "the runner skipped it: %s", reason);
  unsigned missing = 0;
  LCE_TRY(read_meta(out_dir, c, &missing, st));
  lce_exchange_tensor t[8];
  const size_t n = lce_exchange_outputs(c, t);
  size_t provided = 0;
  for (size_t i = 0; i < n; i++) {
    if (missing >> t[i].output & 1u) continue;
    provided++;
    load_output(e, c, &t[i], out);
  }
  LCE_CHECK(st, provided > 0, LCE_EINVAL, "%s/meta.json declares every output missing: nothing to judge", out_dir);
  out->not_provided = missing;
  return LCE_OK;
}
