/* lce_device_none.c — lce_device.h in builds without CUDA (sanitizer, fuzzer or CPU-only builds):
 * there is no device, and the queries say so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_device.h"

int lce_device_query(lce_device_info *dev, char *why, size_t size) {
  if (dev) memset(dev, 0, sizeof *dev);
  if (why && size) snprintf(why, size, "this build has no CUDA (sanitizer, fuzzer or CPU-only build)");
  return 0;
}

lce_code lce_device_free_bytes(size_t *free_bytes, lce_status *st) {
  *free_bytes = 0;
  return lce_fail(st, LCE_ENODEV, __FILE__, __LINE__, "this build has no CUDA (sanitizer, fuzzer or CPU-only build)");
}

void lce_device_arch(char *buf, size_t size) {
  const char *env = getenv("LCE_GOLDEN_ARCH");
  snprintf(buf, size, "%s", env && *env ? env : LCE_CUDA_TARGET_ARCH);
}
