/* lce_device.h — the one place that asks the CUDA runtime what device this process has: whether one
 * exists, its name and architecture (the directory of its per-architecture goldens, golden/<arch>/),
 * driver and runtime versions, and memory. Every GPU component (fused-cuda, the fp64 tier, the MMA
 * probe, the engine's skip decisions, the golden lookup) asks here.
 *
 * Built from lce_device.cu where CUDA is enabled, from lce_device_none.c otherwise (every query then
 * answers "this build has no CUDA"), so C callers never need an #ifdef. */
#ifndef LCE_DEVICE_H
#define LCE_DEVICE_H

#include <stddef.h>

#include "lce_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lce_device_info {
  char name[128];     /* "NVIDIA H200" */
  char arch[16];      /* "sm_90" */
  int cc_major, cc_minor; /* compute capability, 9 and 0 */
  int driver, runtime;/* CUDA driver and runtime versions, e.g. 13000 */
  double total_bytes; /* device memory */
} lce_device_info;

/* 1 when device 0 is usable (and fills dev when not NULL); otherwise 0 and why (may be NULL). A
 * failed query leaves no sticky error behind for the next CUDA call. */
int lce_device_query(lce_device_info *dev, char *why, size_t size);
/* Free device memory now. LCE_ENODEV without a device. */
lce_code lce_device_free_bytes(size_t *free_bytes, lce_status *st);
/* "sm_90": $LCE_GOLDEN_ARCH when set, else device 0's compute capability, else the build's CUDA
 * target (LCE_CUDA_TARGET_ARCH), else "sm_90". */
void lce_device_arch(char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
