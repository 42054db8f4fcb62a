/* lce_file.c — see lce_file.h. */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fsync */
#include "lce_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

lce_code lce_file_read(const char *path, char **data, size_t *size, lce_status *st) {
  *data = NULL, *size = 0;
  FILE *f = fopen(path, "rb");
  LCE_CHECK(st, f != NULL, LCE_EIO, "%s: cannot open: %s", path, strerror(errno));
  char *buf = NULL;
  size_t len = 0, cap = 0, got;
  do {
    if (len + 4096 > cap) {
      char *grown = realloc(buf, cap = cap ? 2 * cap : 1 << 16);
      if (grown == NULL) {
        free(buf);
        fclose(f);
        return lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "%s: out of memory", path);
      }
      buf = grown;
    }
    got = fread(buf + len, 1, cap - len - 1, f);
    len += got;
  } while (got > 0);
  const int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return lce_fail(st, LCE_EIO, __FILE__, __LINE__, "%s: read error", path);
  }
  buf[len] = '\0';
  *data = buf, *size = len;
  return LCE_OK;
}

/* Makes the rename itself durable. Some file systems cannot fsync a directory (EINVAL); there the
 * rename is as durable as the platform allows. */
static int sync_parent_dir(const char *path) {
  char dir[1024];
  const char *slash = strrchr(path, '/');
  if (slash == NULL) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  int fd = open(dir, O_RDONLY);
  if (fd < 0) return 0;
  int ok = fsync(fd) == 0 || errno == EINVAL;
  close(fd);
  return ok;
}

lce_code lce_file_replace(const char *path, const void *data, size_t size, lce_status *st) {
  char tmp[1100];
  const int n = snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
  LCE_CHECK(st, n >= 0 && (size_t)n < sizeof tmp, LCE_EINVAL, "path too long: '%.200s...'", path);
  const int fd = mkstemp(tmp);
  LCE_CHECK(st, fd >= 0, LCE_EIO, "cannot create temp file next to '%s': %s", path, strerror(errno));
  /* mkstemp creates the file private (0600); lcecheck's files are meant to be read by everyone. */
  int ok = fchmod(fd, 0644) == 0;
  for (size_t done = 0; ok && done < size;) {
    const ssize_t w = write(fd, (const char *)data + done, size - done);
    ok = w > 0;
    done += ok ? (size_t)w : 0;
  }
  ok = ok && fsync(fd) == 0;
  int err = errno;
  if (close(fd) != 0 && ok) ok = 0, err = errno;
  if (ok && rename(tmp, path) != 0) {
    err = errno;
    unlink(tmp);
    return lce_fail(st, LCE_EIO, __FILE__, __LINE__, "cannot replace '%s': %s", path, strerror(err));
  }
  if (!ok) {
    unlink(tmp);
    return lce_fail(st, LCE_EIO, __FILE__, __LINE__, "cannot write '%s': %s", tmp, strerror(err));
  }
  LCE_CHECK(st, sync_parent_dir(path), LCE_EIO, "replaced '%s' but could not sync its directory: %s", path,
            strerror(errno));
  return LCE_OK;
}
