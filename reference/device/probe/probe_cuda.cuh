/* probe_cuda.cuh — checked-call macros of the probe's CUDA sources (probe_mma.cu, probe_curve.cu):
 * the failing call, the error name and text and the file:line go into the lce_status, and the
 * function jumps to its cleanup label `done` with rc set, so device buffers are always freed (C++
 * forbids jumping over initializations: such functions declare their variables first). */
#ifndef PROBE_CUDA_CUH
#define PROBE_CUDA_CUH

#include "lce_cuda_status.cuh"
extern "C" {
#include "lce_device.h"
}

#define PROBE_CUDA_CHECK(st, call) LCE_CUDA_ON_ERROR(st, "probe", call, { rc = lce_rc_; goto done; })
#define PROBE_CUBLAS_CHECK(st, call) LCE_CUBLAS_ON_ERROR(st, "probe", call, { rc = lce_rc_; goto done; })

/* After every launch: a bad configuration or an earlier fault shows only in the last error. */
#define PROBE_LAUNCH_CHECK(st, kernel)               \
  do {                                               \
    PROBE_CUDA_CHECK(st, cudaGetLastError());        \
    PROBE_CUDA_CHECK(st, cudaDeviceSynchronize());   \
  } while (0)

/* LCE_ENODEV with the runtime's reason where no device is usable. */
lce_code probe_require_device(lce_status *st);

#endif
