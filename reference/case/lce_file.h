/* lce_file.h — the file I/O under every reader and writer of lcecheck's own formats (golden files,
 * the exchange's JSON and .npy files, probe dumps, fuzz inputs): a whole file read into memory, and
 * a file replaced atomically. */
#ifndef LCE_FILE_H
#define LCE_FILE_H

#include <stddef.h>

#include "lce_status.h"

/* The whole of path in a malloc'd buffer *data (free() it) of *size bytes, followed by a NUL so that
 * text parsers may read it as a string. LCE_EIO "PATH: cannot open: why" or "PATH: read error",
 * LCE_ENOMEM. */
lce_code lce_file_read(const char *path, char **data, size_t *size, lce_status *st);

/* Replaces path with size bytes of data: written to a temporary file beside it (PATH.tmp.XXXXXX,
 * mode 0644), flushed to the disk, renamed over path and the directory synced, so that a crash or a
 * full disk never leaves a half-written file behind, only the old one. LCE_EIO naming the step. */
lce_code lce_file_replace(const char *path, const void *data, size_t size, lce_status *st);

#endif
