/* lce_cuda_status.cuh — the checked-call idiom of every CUDA source (fused-cuda, the fp64 tier in
 * reference/gpu/, the MMA probe): a failing CUDA runtime or cuBLAS call, or a failed kernel launch,
 * becomes an lce_status naming the component, the call, the error's name and text and file:line
 * (LCE_ENOMEM for allocation failures, LCE_EINTERNAL otherwise). Defined once here; each component's
 * own macros only say who it is and what its failure path does (return, or set rc and jump to a
 * cleanup label). Header-only: the CUDA targets include it, the C library never sees it. */
#ifndef LCE_CUDA_STATUS_CUH
#define LCE_CUDA_STATUS_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

extern "C" {
#include "lce_status.h"
}

static inline lce_code lce_cuda_fail(lce_status *st, cudaError_t e, const char *who, const char *what,
                                     const char *file, int line) {
  return lce_fail(st, e == cudaErrorMemoryAllocation ? LCE_ENOMEM : LCE_EINTERNAL, file, line,
                  "%s: %s failed: %s (%s)", who, what, cudaGetErrorName(e), cudaGetErrorString(e));
}

static inline lce_code lce_cublas_fail(lce_status *st, cublasStatus_t s, const char *who, const char *what,
                                       const char *file, int line) {
  return lce_fail(st, s == CUBLAS_STATUS_ALLOC_FAILED ? LCE_ENOMEM : LCE_EINTERNAL, file, line,
                  "%s: %s failed: %s (%s)", who, what, cublasGetStatusName(s), cublasGetStatusString(s));
}

static inline lce_code lce_cuda_launch_fail(lce_status *st, cudaError_t e, const char *who, const char *kernel,
                                            const char *file, int line) {
  return lce_fail(st, LCE_EINTERNAL, file, line, "%s: launch of %s failed: %s (%s)", who, kernel,
                  cudaGetErrorName(e), cudaGetErrorString(e));
}

/* cudaMalloc of bytes (at least 8: an empty buffer is still a distinct pointer) into *p, counted into
 * *total (which may be NULL). On failure *p is NULL, the error is cleared, and st names who, the size
 * and what the buffer is for. */
static inline lce_code lce_cuda_alloc(void **p, size_t bytes, const char *what, size_t *total, const char *who,
                                      lce_status *st) {
  const cudaError_t rc = cudaMalloc(p, bytes ? bytes : 8);
  if (rc != cudaSuccess) {
    *p = NULL;
    cudaGetLastError();
    return lce_fail(st, rc == cudaErrorMemoryAllocation ? LCE_ENOMEM : LCE_EINTERNAL, __FILE__, __LINE__,
                    "%s: cudaMalloc of %zu bytes for %s failed: %s", who, bytes, what, cudaGetErrorString(rc));
  }
  if (total) *total += bytes;
  return LCE_OK;
}

/* Evaluates call once; on failure fills st and runs on_fail with the code in lce_rc_ (e.g.
 * `return lce_rc_`, or `{ rc = lce_rc_; goto done; }`). */
#define LCE_CUDA_ON_ERROR(st, who, call, on_fail)                                               \
  do {                                                                                          \
    cudaError_t lce_cuda_e_ = (call);                                                           \
    if (lce_cuda_e_ != cudaSuccess) {                                                           \
      lce_code lce_rc_ = lce_cuda_fail((st), lce_cuda_e_, (who), #call, __FILE__, __LINE__);    \
      on_fail;                                                                                  \
    }                                                                                           \
  } while (0)

#define LCE_CUBLAS_ON_ERROR(st, who, call, on_fail)                                             \
  do {                                                                                          \
    cublasStatus_t lce_cublas_s_ = (call);                                                      \
    if (lce_cublas_s_ != CUBLAS_STATUS_SUCCESS) {                                               \
      lce_code lce_rc_ = lce_cublas_fail((st), lce_cublas_s_, (who), #call, __FILE__, __LINE__); \
      on_fail;                                                                                  \
    }                                                                                           \
  } while (0)

/* After a kernel launch: a bad configuration, or a fault of an earlier kernel, shows only in the
 * last error. kernel names the kernel in the message. */
#define LCE_LAUNCH_ON_ERROR(st, who, kernel, on_fail)                                           \
  do {                                                                                          \
    cudaError_t lce_cuda_e_ = cudaGetLastError();                                               \
    if (lce_cuda_e_ != cudaSuccess) {                                                           \
      lce_code lce_rc_ = lce_cuda_launch_fail((st), lce_cuda_e_, (who), (kernel), __FILE__, __LINE__); \
      on_fail;                                                                                  \
    }                                                                                           \
  } while (0)

#endif
