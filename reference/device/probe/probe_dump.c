/* probe_dump.c — writer and validating reader of the probe dump (format in probe_dump.h).
 *
 * Both sides go through one in-memory byte buffer: the writer serializes field by field in
 * little-endian order (independent of the host's), the reader loads the whole file (a dump of the
 * default run is a few MB) and walks it with a cursor that refuses to step past the end, so a
 * truncated file is reported at the field it cuts. The file is replaced atomically
 * (lce_file_replace). */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include "probe_dump.h"

#include "lce_dtype.h"
#include "lce_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char MAGIC[8] = {'L', 'C', 'E', 'P', 'R', 'O', 'B', 'E'};
#define HEADER_BYTES (8 + 4 + 4 + 8 + PROBE_DUMP_NAME_LEN + PROBE_DUMP_MODEL_LEN)

static uint64_t fnv1a(const unsigned char *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

static size_t tile_words(int k) { return 1 + PROBE_TILE_OUT + (size_t)PROBE_M * k + (size_t)k * PROBE_N + PROBE_TILE_OUT; }

/* ---- writing -------------------------------------------------------------------------------- */

typedef struct out_buf {
  unsigned char *p;
  size_t n;
} out_buf;

/* v in its low `bytes` bytes, little-endian. */
static void put_le(out_buf *o, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) o->p[o->n++] = (unsigned char)(v >> (8 * i));
}
static void put_u32(out_buf *o, uint32_t v) { put_le(o, v, 4); }
static void put_f32s(out_buf *o, const float *x, size_t count) {
  for (size_t i = 0; i < count; i++) put_u32(o, lce_f32_bits(x[i]));
}
static void put_text(out_buf *o, const char *s, size_t width) {
  const size_t len = strnlen(s, width);
  memset(o->p + o->n, 0, width);
  memcpy(o->p + o->n, s, len);
  o->n += width;
}

lce_code probe_dump_write(const char *path, const probe_dump *d, lce_status *st) {
  LCE_CHECK(st, d->sections >= 1 && d->sections <= LCE_MMA_FORMATS, LCE_EINVAL, "probe dump: %d sections", d->sections);
  size_t size = HEADER_BYTES + 8;
  for (int s = 0; s < d->sections; s++) size += 16 + d->set[s].tiles * tile_words(d->set[s].k) * 4;
  out_buf o = {malloc(size), 0};
  LCE_ALLOC_CHECK(st, o.p);
  memcpy(o.p, MAGIC, sizeof MAGIC);
  o.n = sizeof MAGIC;
  put_u32(&o, PROBE_DUMP_VERSION);
  put_u32(&o, (uint32_t)d->sections);
  put_le(&o, d->seed, 8);
  put_text(&o, d->device, PROBE_DUMP_NAME_LEN);
  put_text(&o, d->model, PROBE_DUMP_MODEL_LEN);
  for (int s = 0; s < d->sections; s++) {
    const probe_tileset *ts = &d->set[s];
    const size_t k = (size_t)ts->k;
    put_u32(&o, (uint32_t)ts->format);
    put_u32(&o, (uint32_t)ts->k);
    put_u32(&o, (uint32_t)ts->tiles);
    put_u32(&o, 0);
    for (size_t t = 0; t < ts->tiles; t++) {
      put_u32(&o, ts->cls[t]);
      put_f32s(&o, ts->c + t * PROBE_TILE_OUT, PROBE_TILE_OUT);
      put_f32s(&o, ts->a + t * PROBE_M * k, PROBE_M * k);
      put_f32s(&o, ts->b + t * PROBE_N * k, PROBE_N * k);
      put_f32s(&o, ts->d + t * PROBE_TILE_OUT, PROBE_TILE_OUT);
    }
  }
  put_le(&o, fnv1a(o.p, o.n), 8);

  const lce_code rc = lce_file_replace(path, o.p, o.n, st);
  free(o.p);
  return rc;
}

/* ---- reading -------------------------------------------------------------------------------- */

typedef struct cursor {
  const unsigned char *p;
  size_t n, at;
  const char *path;
  lce_status *st;
} cursor;

static lce_code need(cursor *c, size_t bytes, const char *what) {
  if (c->n - c->at < bytes)
    return lce_fail(c->st, LCE_EPARSE, __FILE__, __LINE__,
                    "probe dump %s: truncated: %s at byte %zu needs %zu bytes, the file has %zu left", c->path, what,
                    c->at, bytes, c->n - c->at);
  return LCE_OK;
}
/* The next `bytes` bytes as a little-endian integer (need() has checked they exist). */
static uint64_t get_le(cursor *c, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)c->p[c->at++] << (8 * i);
  return v;
}
static uint32_t get_u32(cursor *c) { return (uint32_t)get_le(c, 4); }
static void get_f32s(cursor *c, float *x, size_t count) {
  for (size_t i = 0; i < count; i++) x[i] = lce_f32_from_bits(get_u32(c));
}
static lce_code get_text(cursor *c, char *dst, size_t width, const char *what) {
  LCE_TRY(need(c, width, what));
  memcpy(dst, c->p + c->at, width);
  dst[width] = '\0';
  for (size_t i = strlen(dst); i < width; i++)
    LCE_CHECK(c->st, c->p[c->at + i] == 0, LCE_EPARSE, "probe dump %s: %s at byte %zu is not NUL-padded", c->path,
              what, c->at);
  c->at += width;
  return LCE_OK;
}

static lce_code read_section(cursor *c, probe_dump *d, int s) {
  LCE_TRY(need(c, 16, "section header"));
  const size_t at = c->at;
  const uint32_t format = get_u32(c), k = get_u32(c), tiles = get_u32(c), reserved = get_u32(c);
  LCE_CHECK(c->st, format < LCE_MMA_FORMATS, LCE_EPARSE, "probe dump %s: section %d at byte %zu: format %u unknown",
            c->path, s, at, format);
  LCE_CHECK(c->st, (int)k == probe_format_k((lce_mma_format)format), LCE_EPARSE,
            "probe dump %s: section %d at byte %zu: K = %u, format %s has K = %d", c->path, s, at, k,
            probe_format_name((lce_mma_format)format), probe_format_k((lce_mma_format)format));
  LCE_CHECK(c->st, tiles >= 1 && tiles <= (1u << 24) && reserved == 0, LCE_EPARSE,
            "probe dump %s: section %d at byte %zu: tile count %u (want 1..2^24), reserved %u (want 0)", c->path, s, at,
            tiles, reserved);
  for (int o = 0; o < s; o++)
    LCE_CHECK(c->st, d->set[o].format != (lce_mma_format)format, LCE_EPARSE,
              "probe dump %s: section %d at byte %zu repeats format %s", c->path, s, at,
              probe_format_name((lce_mma_format)format));
  LCE_TRY(need(c, (size_t)tiles * tile_words((int)k) * 4, "tiles"));
  probe_tileset *ts = &d->set[s];
  LCE_TRY(probe_tileset_alloc(ts, (lce_mma_format)format, tiles, c->st));
  d->sections = s + 1; /* so probe_dump_free releases this section on a later error */
  for (size_t t = 0; t < tiles; t++) {
    const size_t tile_at = c->at;
    const uint32_t cls = get_u32(c);
    LCE_CHECK(c->st, cls < PROBE_CLASSES, LCE_EPARSE, "probe dump %s: section %d tile %zu at byte %zu: class %u unknown",
              c->path, s, t, tile_at, cls);
    ts->cls[t] = (uint8_t)cls;
    get_f32s(c, ts->c + t * PROBE_TILE_OUT, PROBE_TILE_OUT);
    get_f32s(c, ts->a + t * PROBE_M * k, PROBE_M * k);
    get_f32s(c, ts->b + t * PROBE_N * k, PROBE_N * k);
    get_f32s(c, ts->d + t * PROBE_TILE_OUT, PROBE_TILE_OUT);
  }
  return LCE_OK;
}

static lce_code parse(cursor *c, probe_dump *d) {
  /* The magic first: a file of another kind is "not a dump", not "a truncated dump". */
  LCE_CHECK(c->st, c->n >= sizeof MAGIC && memcmp(c->p, MAGIC, sizeof MAGIC) == 0, LCE_EPARSE,
            "probe dump %s: bad magic (not an lcecheck probe dump)", c->path);
  LCE_TRY(need(c, HEADER_BYTES, "header"));
  c->at = sizeof MAGIC;
  const uint32_t version = get_u32(c), sections = get_u32(c);
  LCE_CHECK(c->st, version == PROBE_DUMP_VERSION, LCE_EPARSE, "probe dump %s: version %u, this reader knows %u", c->path,
            version, PROBE_DUMP_VERSION);
  LCE_CHECK(c->st, sections >= 1 && sections <= LCE_MMA_FORMATS, LCE_EPARSE,
            "probe dump %s: %u sections (want 1..%d)", c->path, sections, LCE_MMA_FORMATS);
  d->seed = get_le(c, 8);
  LCE_TRY(get_text(c, d->device, PROBE_DUMP_NAME_LEN, "device name"));
  LCE_TRY(get_text(c, d->model, PROBE_DUMP_MODEL_LEN, "model name"));
  for (int s = 0; s < (int)sections; s++) LCE_TRY(read_section(c, d, s));
  LCE_TRY(need(c, 8, "checksum"));
  const uint64_t want = fnv1a(c->p, c->at), got = get_le(c, 8);
  LCE_CHECK(c->st, c->at == c->n, LCE_EPARSE, "probe dump %s: %zu bytes of trailing garbage after the checksum",
            c->path, c->n - c->at);
  LCE_CHECK(c->st, got == want, LCE_EPARSE,
            "probe dump %s: checksum mismatch (file %016llx, content %016llx): the file is corrupted", c->path,
            (unsigned long long)got, (unsigned long long)want);
  return LCE_OK;
}

lce_code probe_dump_parse(const void *data, size_t n, const char *name, probe_dump *d, lce_status *st) {
  memset(d, 0, sizeof *d);
  cursor c = {(const unsigned char *)data, n, 0, name, st};
  const lce_code rc = parse(&c, d);
  if (rc != LCE_OK) probe_dump_free(d);
  return rc;
}

lce_code probe_dump_read(const char *path, probe_dump *d, lce_status *st) {
  memset(d, 0, sizeof *d);
  char *buf;
  size_t n;
  LCE_TRY(lce_file_read(path, &buf, &n, st));
  const lce_code rc = probe_dump_parse(buf, n, path, d, st);
  free(buf);
  return rc;
}

void probe_dump_free(probe_dump *d) {
  for (int s = 0; s < d->sections && s < LCE_MMA_FORMATS; s++) probe_tileset_free(&d->set[s]);
  d->sections = 0;
}
