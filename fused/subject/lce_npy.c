/* lce_npy.c — the strict .npy reader and writer of lce_npy.h. */
#define _XOPEN_SOURCE 700 /* fileno */
#include "lce_npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const DESCR_NAMES[] = {"<u2", "<f2", "<f4", "<i8"};
static const size_t ITEM_SIZES[] = {2, 2, 4, 8};
static const unsigned char MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

const char *lce_npy_descr_name(lce_npy_descr d) { return (unsigned)d < 4 ? DESCR_NAMES[d] : "?"; }
size_t lce_npy_item_size(lce_npy_descr d) { return (unsigned)d < 4 ? ITEM_SIZES[d] : 0; }

char *lce_npy_shape_text(int ndim, const int64_t *shape, char *buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < ndim && n < size; i++)
    n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}

static int host_is_little_endian(void) {
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 1;
}

/* ---- the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } ------------ */

typedef struct header_parser {
  const char *p, *end;
} header_parser;

static void hskip(header_parser *h) {
  while (h->p < h->end && (*h->p == ' ' || *h->p == '\t')) h->p++;
}

static int hchar(header_parser *h, char ch) {
  hskip(h);
  if (h->p >= h->end || *h->p != ch) return 0;
  h->p++;
  return 1;
}

/* A quoted string ('...' or "...", no escapes) into buf. */
static int hstring(header_parser *h, char *buf, size_t size) {
  hskip(h);
  if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return 0;
  const char q = *h->p++;
  const char *s = h->p;
  while (h->p < h->end && *h->p != q && *h->p != '\\') h->p++;
  if (h->p >= h->end || *h->p != q || (size_t)(h->p - s) >= size) return 0;
  memcpy(buf, s, (size_t)(h->p - s));
  buf[h->p - s] = '\0';
  h->p++;
  return 1;
}

/* A tuple of non-negative ints: (), (3,), (3, 4) or (3, 4,). */
static int hshape(header_parser *h, lce_npy *a) {
  if (!hchar(h, '(')) return 0;
  a->ndim = 0;
  for (;;) {
    if (hchar(h, ')')) return 1;
    hskip(h);
    if (h->p >= h->end || *h->p < '0' || *h->p > '9' || a->ndim >= LCE_NPY_MAX_DIMS) return 0;
    int64_t d = 0;
    while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
      if (d > INT64_MAX / 16) return 0;
      d = d * 10 + (*h->p++ - '0');
    }
    a->shape[a->ndim++] = d;
    if (hchar(h, ',')) continue;
    if (hchar(h, ')')) return a->ndim != 1 ? 1 : 0; /* (3) is not a tuple */
    return 0;
  }
}

static lce_code parse_header(const char *path, const char *text, size_t len, lce_npy *a, lce_status *st) {
  LCE_CHECK(st, len > 0 && text[len - 1] == '\n', LCE_EPARSE, "%s: .npy header does not end with a newline", path);
  header_parser h = {text, text + len - 1};
  int seen_descr = 0, seen_order = 0, seen_shape = 0;
  LCE_CHECK(st, hchar(&h, '{'), LCE_EPARSE, "%s: .npy header is not a dict: %.80s", path, text);
  for (;;) {
    if (hchar(&h, '}')) break;
    char key[32], val[32];
    LCE_CHECK(st, hstring(&h, key, sizeof key) && hchar(&h, ':'), LCE_EPARSE, "%s: malformed .npy header: %.80s", path,
              text);
    if (strcmp(key, "descr") == 0 && !seen_descr++) {
      LCE_CHECK(st, hstring(&h, val, sizeof val), LCE_EPARSE, "%s: .npy descr is not a string", path);
      int found = 0;
      for (int d = 0; d < 4; d++)
        if (strcmp(val, DESCR_NAMES[d]) == 0) a->descr = (lce_npy_descr)d, found = 1;
      LCE_CHECK(st, found, LCE_EPARSE, "%s: unsupported descr '%s' (want one of <u2 <f2 <f4 <i8)", path, val);
    } else if (strcmp(key, "fortran_order") == 0 && !seen_order++) {
      hskip(&h);
      LCE_CHECK(st, (size_t)(h.end - h.p) >= 5 && memcmp(h.p, "False", 5) == 0, LCE_EPARSE,
                "%s: fortran_order must be False (C order)", path);
      h.p += 5;
    } else if (strcmp(key, "shape") == 0 && !seen_shape++) {
      LCE_CHECK(st, hshape(&h, a), LCE_EPARSE, "%s: .npy shape is not a tuple of non-negative ints: %.80s", path, text);
    } else {
      return lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s: .npy header key '%s' unknown or repeated", path, key);
    }
    if (hchar(&h, ',')) continue;
    LCE_CHECK(st, hchar(&h, '}'), LCE_EPARSE, "%s: malformed .npy header: %.80s", path, text);
    break;
  }
  hskip(&h);
  LCE_CHECK(st, h.p == h.end, LCE_EPARSE, "%s: text after the .npy header dict", path);
  LCE_CHECK(st, seen_descr && seen_order && seen_shape, LCE_EPARSE,
            "%s: .npy header must hold descr, fortran_order and shape", path);
  return LCE_OK;
}

/* The magic and version in the first len bytes of a .npy file of total bytes: where its header starts
 * and how long it is. */
static lce_code parse_prefix(const char *path, const unsigned char *buf, size_t len, size_t total, size_t *start,
                             size_t *hlen, lce_status *st) {
  *start = 10, *hlen = 0;
  LCE_CHECK(st, len >= 10 && memcmp(buf, MAGIC, 6) == 0, LCE_EPARSE,
            "%s: not a .npy file (bad magic or shorter than 10 bytes)", path);
  if (buf[6] == 1 && buf[7] == 0) {
    *hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
  } else if (buf[6] == 2 && buf[7] == 0 && len >= 12) {
    *start = 12;
    *hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
  } else {
    return lce_fail(st, LCE_EPARSE, __FILE__, __LINE__, "%s: unsupported .npy version %u.%u", path, buf[6], buf[7]);
  }
  LCE_CHECK(st, *start <= total && *hlen <= total - *start, LCE_EPARSE,
            "%s: truncated: the .npy header (%zu bytes) runs past the end of the file", path, *hlen);
  LCE_CHECK(st, *hlen <= LCE_NPY_MAX_HEADER, LCE_EPARSE, "%s: a .npy header of %zu bytes (at most %d are read)", path,
            *hlen, LCE_NPY_MAX_HEADER);
  return LCE_OK;
}

/* a->bytes from a's shape, which must be exactly the have data bytes the file holds. */
static lce_code check_size(const char *path, lce_npy *a, size_t have, lce_status *st) {
  /* The element count in a size_t, refusing a shape whose byte size would not fit in one (a wrapped
   * product could otherwise match a short file). */
  size_t count = 1;
  const size_t limit = SIZE_MAX / 8;
  for (int i = 0; i < a->ndim; i++) {
    LCE_CHECK(st, a->shape[i] == 0 || count <= limit / (size_t)a->shape[i], LCE_EPARSE,
              "%s: the shape's element count overflows", path);
    count *= (size_t)a->shape[i];
  }
  const size_t want = count * ITEM_SIZES[a->descr];
  char shape[96];
  LCE_CHECK(st, have == want, LCE_EPARSE, "%s: %s %s needs %zu data bytes, the file holds %zu%s", path,
            DESCR_NAMES[a->descr], lce_npy_shape_text(a->ndim, a->shape, shape, sizeof shape), want, have,
            have < want ? " (truncated)" : "");
  a->bytes = want;
  return LCE_OK;
}

/* Parses the .npy bytes in raw (len bytes, malloc'd; owned from here on: kept as a->data on success,
 * freed otherwise); path names the source in messages. */
static lce_code parse_owned(const char *path, char *raw, size_t len, lce_npy *a, lce_status *st) {
  memset(a, 0, sizeof *a);
  unsigned char *buf = (unsigned char *)raw;
  size_t start, hlen;
  lce_code rc = parse_prefix(path, buf, len, len, &start, &hlen, st);
  if (rc == LCE_OK) rc = parse_header(path, (const char *)buf + start, hlen, a, st);
  if (rc == LCE_OK) rc = check_size(path, a, len - start - hlen, st);
  if (rc == LCE_OK) {
    memmove(buf, buf + start + hlen, a->bytes);
    a->data = buf;
    return LCE_OK;
  }
  free(buf);
  return rc;
}

lce_code lce_npy_parse(const void *data, size_t len, const char *name, lce_npy *a, lce_status *st) {
  memset(a, 0, sizeof *a);
  LCE_CHECK(st, host_is_little_endian(), LCE_EINTERNAL, "%s: .npy reading needs a little-endian host", name);
  /* NUL-terminated: the header's error messages print it with %.80s. */
  char *copy = malloc(len + 1);
  LCE_ALLOC_CHECK(st, copy);
  if (len) memcpy(copy, data, len);
  copy[len] = '\0';
  return parse_owned(name, copy, len, a, st);
}

lce_code lce_npy_open(const char *path, lce_npy_file *f, lce_status *st) {
  memset(f, 0, sizeof *f);
  f->path = path;
  LCE_CHECK(st, host_is_little_endian(), LCE_EINTERNAL, "%s: .npy reading needs a little-endian host", path);
  FILE *fp = fopen(path, "rb");
  LCE_CHECK(st, fp != NULL, LCE_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat sb;
  unsigned char pre[12];
  size_t got = 0, start = 0, hlen = 0;
  char *text = NULL;
  lce_code rc = LCE_OK;
  if (fstat(fileno(fp), &sb) != 0)
    rc = lce_fail(st, LCE_EIO, __FILE__, __LINE__, "%s: cannot stat: %s", path, strerror(errno));
  else if (!S_ISREG(sb.st_mode))
    rc = lce_fail(st, LCE_EIO, __FILE__, __LINE__, "%s: not a regular file", path);
  else if ((uintmax_t)sb.st_size > SIZE_MAX)
    rc = lce_fail(st, LCE_EIO, __FILE__, __LINE__, "%s: larger than this build can address", path);
  else {
    got = fread(pre, 1, sizeof pre, fp);
    rc = parse_prefix(path, pre, got, (size_t)sb.st_size, &start, &hlen, st);
  }
  if (rc == LCE_OK && (text = malloc(hlen + 1)) == NULL)
    rc = lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "%s: out of memory", path);
  if (rc == LCE_OK && (fseek(fp, (long)start, SEEK_SET) != 0 || fread(text, 1, hlen, fp) != hlen))
    rc = lce_fail(st, LCE_EIO, __FILE__, __LINE__, "%s: read error", path);
  if (rc == LCE_OK) {
    text[hlen] = '\0';
    rc = parse_header(path, text, hlen, &f->meta, st);
  }
  if (rc == LCE_OK) rc = check_size(path, &f->meta, (size_t)sb.st_size - start - hlen, st);
  free(text);
  if (rc != LCE_OK) {
    fclose(fp);
    memset(f, 0, sizeof *f);
    return rc;
  }
  f->fp = fp;
  return LCE_OK;
}

lce_code lce_npy_read_next(lce_npy_file *f, void *dst, size_t bytes, lce_status *st) {
  LCE_CHECK(st, f->fp != NULL && bytes <= f->meta.bytes - f->done, LCE_EINTERNAL,
            "%s: reading %zu bytes after %zu of the %zu data bytes", f->path, bytes, f->done, f->meta.bytes);
  LCE_CHECK(st, bytes == 0 || fread(dst, 1, bytes, f->fp) == bytes, LCE_EIO,
            "%s: read error (or the file shrank while it was read)", f->path);
  f->done += bytes;
  return LCE_OK;
}

void lce_npy_close(lce_npy_file *f) {
  if (f->fp != NULL) fclose(f->fp);
  memset(f, 0, sizeof *f);
}

lce_code lce_npy_write(const char *path, lce_npy_descr d, int ndim, const int64_t *shape, const void *data,
                       lce_status *st) {
  LCE_CHECK(st, (unsigned)d < 4 && ndim >= 0 && ndim <= LCE_NPY_MAX_DIMS, LCE_EINVAL, "%s: bad descr or rank", path);
  LCE_CHECK(st, host_is_little_endian(), LCE_EINTERNAL, "%s: .npy writing needs a little-endian host", path);
  char dims[256] = "";
  size_t n = 0, count = 1;
  for (int i = 0; i < ndim; i++) {
    n += (size_t)snprintf(dims + n, sizeof dims - n, "%lld,%s", (long long)shape[i], i + 1 < ndim ? " " : "");
    count *= (size_t)shape[i];
  }
  if (ndim > 1) dims[n - 1] = '\0'; /* (3, 4) and (3,), as Python writes tuples */
  char header[512];
  int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", DESCR_NAMES[d],
                     dims);
  int total = 10 + len + 1, padded = (total + 63) / 64 * 64;
  memset(header + len, ' ', (size_t)(padded - total));
  header[padded - 10 - 1] = '\n';
  const size_t hlen = (size_t)(padded - 10);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xFF), (unsigned char)(hlen >> 8)};
  FILE *f = fopen(path, "wb");
  LCE_CHECK(st, f != NULL, LCE_EIO, "%s: cannot create: %s", path, strerror(errno));
  const size_t bytes = count * ITEM_SIZES[d];
  int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(header, 1, hlen, f) == hlen &&
           (bytes == 0 || fwrite(data, 1, bytes, f) == bytes);
  ok = fclose(f) == 0 && ok;
  LCE_CHECK(st, ok, LCE_EIO, "%s: write error: %s", path, strerror(errno));
  return LCE_OK;
}

void lce_npy_free(lce_npy *a) {
  if (a == NULL) return;
  free(a->data);
  memset(a, 0, sizeof *a);
}
