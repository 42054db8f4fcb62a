/* probe_cuda.cuh — checked-call macros of the probe's CUDA sources (probe_mma.cu, probe_curve.cu):
 * the failing call, the error name and text and the file:line go into the lce_status, and the
 * function jumps to its cleanup label `done` with rc set, so device buffers are always freed (C++
 * forbids jumping over initializations: such functions declare their variables first). */
#ifndef PROBE_CUDA_CUH
#define PROBE_CUDA_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "lce_status.h"
}

#define PROBE_CUDA_CHECK(st, call)                                                                           \
  do {                                                                                                       \
    cudaError_t probe_rc_ = (call);                                                                          \
    if (probe_rc_ != cudaSuccess) {                                                                          \
      rc = lce_fail((st), LCE_EINTERNAL, __FILE__, __LINE__, "probe: %s failed: %s (%s)", #call,             \
                    cudaGetErrorName(probe_rc_), cudaGetErrorString(probe_rc_));                             \
      goto done;                                                                                             \
    }                                                                                                        \
  } while (0)

#define PROBE_CUBLAS_CHECK(st, call)                                                                         \
  do {                                                                                                       \
    cublasStatus_t probe_rc_ = (call);                                                                       \
    if (probe_rc_ != CUBLAS_STATUS_SUCCESS) {                                                                \
      rc = lce_fail((st), LCE_EINTERNAL, __FILE__, __LINE__, "probe: %s failed: %s (%s)", #call,             \
                    cublasGetStatusName(probe_rc_), cublasGetStatusString(probe_rc_));                       \
      goto done;                                                                                             \
    }                                                                                                        \
  } while (0)

/* After every launch: a bad configuration or an earlier fault shows only in the last error. */
#define PROBE_LAUNCH_CHECK(st, kernel)               \
  do {                                               \
    PROBE_CUDA_CHECK(st, cudaGetLastError());        \
    PROBE_CUDA_CHECK(st, cudaDeviceSynchronize());   \
  } while (0)

/* LCE_ENODEV with the runtime's reason where no device is usable. */
lce_code probe_require_device(lce_status *st);

#endif
