/* lce_npy.h — .npy files as the exchange format uses them (scripts/subjects/EXCHANGE.md): version 1.0
 * (2.0 also read), C order, little endian, descr <u2 (bf16 bits), <f2, <f4 or <i8. The reader is
 * strict: the header must be the dict numpy writes (descr, fortran_order False, a shape of
 * non-negative ints), the data exactly the shape's size; anything else is refused with the file
 * named and what was wrong. */
#ifndef LCE_NPY_H
#define LCE_NPY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lce_status.h"

typedef enum lce_npy_descr { LCE_NPY_U2 = 0, LCE_NPY_F2 = 1, LCE_NPY_F4 = 2, LCE_NPY_I8 = 3 } lce_npy_descr;

#define LCE_NPY_MAX_DIMS 8

typedef struct lce_npy {
  lce_npy_descr descr;
  int ndim;
  int64_t shape[LCE_NPY_MAX_DIMS];
  void *data; /* little-endian elements, C order */
  size_t bytes;
} lce_npy;

const char *lce_npy_descr_name(lce_npy_descr d); /* "<u2", "<f2", "<f4", "<i8" */
size_t lce_npy_item_size(lce_npy_descr d);
/* "[16, 32]" of a shape, into buf. */
char *lce_npy_shape_text(int ndim, const int64_t *shape, char *buf, size_t size);

/* The largest header read (numpy writes tens of bytes; its own reader stops at 10,000). */
#define LCE_NPY_MAX_HEADER 65536

/* A .npy file's bytes in memory (len bytes, copied); name stands for the file in messages. */
lce_code lce_npy_parse(const void *data, size_t len, const char *name, lce_npy *out, lce_status *st);
/* A .npy file, read in pieces (the judge's production inputs and outputs are gigabytes: never held
 * twice): lce_npy_open parses the header, refuses what lce_npy_parse refuses (with the same messages)
 * and anything but a regular file, and leaves the file at its data; lce_npy_read_next reads the next
 * bytes of it into dst. */
typedef struct lce_npy_file {
  lce_npy meta; /* descr, ndim, shape, bytes; data stays NULL */
  const char *path; /* the caller's, for messages */
  FILE *fp;
  size_t done; /* data bytes read so far */
} lce_npy_file;
lce_code lce_npy_open(const char *path, lce_npy_file *f, lce_status *st);
lce_code lce_npy_read_next(lce_npy_file *f, void *dst, size_t bytes, lce_status *st);
void lce_npy_close(lce_npy_file *f);
/* Writes a v1.0 file whose header is padded to a multiple of 64 bytes, as numpy does. */
lce_code lce_npy_write(const char *path, lce_npy_descr d, int ndim, const int64_t *shape, const void *data,
                       lce_status *st);
void lce_npy_free(lce_npy *a);

#endif
