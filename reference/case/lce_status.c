/* lce_status.c — see lce_status.h. */
#include "lce_status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

lce_code lce_fail(lce_status *st, lce_code code, const char *file, int line, const char *fmt, ...) {
  if (st == NULL) return code;
  st->code = code;
  st->file = file;
  st->line = line;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(st->msg, sizeof st->msg, fmt, ap);
  va_end(ap);
  return code;
}

const char *lce_code_name(lce_code code) {
  switch (code) {
    case LCE_OK: return "ok";
    case LCE_EINVAL: return "invalid input";
    case LCE_ENOMEM: return "out of memory";
    case LCE_EIO: return "i/o error";
    case LCE_EPARSE: return "parse error";
    case LCE_ENODEV: return "no device";
    case LCE_EINTERNAL: return "internal error";
    case LCE_ESKIP: return "skipped by the subject";
  }
  return "unknown error";
}

void lce_status_clear(lce_status *st) {
  if (st == NULL) return;
  memset(st, 0, sizeof *st);
}
