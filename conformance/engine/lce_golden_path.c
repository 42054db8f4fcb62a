/* lce_golden_path.c — which golden file judges a subject by default (lce_engine.h).
 *
 * GPU subjects have a directory per architecture because a GPU's GEMM arithmetic is its own (DESIGN.md
 * "Device arithmetic is not IEEE": Hopper tensor cores truncate, so the bounds carry a K term measured
 * there); without a device (a GPU subject is then skipped) the architecture is LCE_GOLDEN_ARCH or the
 * one this build targets. Production shapes are judged by the same files: their bound forms carry the
 * error mechanisms (golden/policy.txt), so bounds fitted on the default, wide and medium matrices hold
 * at production shapes they never saw (golden/README.md, "Production shapes out of sample"). */
#include <stdio.h>
#include <stdlib.h>

#include "lce_device.h"
#include "lce_engine.h"

#ifndef LCE_SOURCE_DIR
#error "LCE_SOURCE_DIR must be defined by the build (the repository root)"
#endif

static const char *golden_dir(void) {
  const char *dir = getenv("LCE_GOLDEN_DIR");
  return dir && *dir ? dir : LCE_SOURCE_DIR "/golden";
}

void lce_default_golden_path(const char *golden_class, char *buf, size_t size) {
  snprintf(buf, size, "%s/%s.golden", golden_dir(), golden_class);
}

void lce_converge_bounds_path(char *buf, size_t size) { snprintf(buf, size, "%s/converge.bounds", golden_dir()); }

/* <golden dir>/<prefix><arch>/<class>.golden */
static void arch_golden_path(const char *prefix, const lce_subject *s, char *buf, size_t size) {
  char arch[32];
  lce_device_arch(arch, sizeof arch);
  snprintf(buf, size, "%s/%s%s/%s.golden", golden_dir(), prefix, arch, s->golden_class);
}

void lce_subject_golden_path(const lce_subject *s, char *buf, size_t size) {
  if (s->caps & LCE_CAP_NEEDS_GPU) arch_golden_path("", s, buf, size);
  else lce_default_golden_path(s->golden_class, buf, size);
}
