/* lce_device.cu — lce_device.h on the CUDA runtime. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "lce_device.h"
}

extern "C" int lce_device_query(lce_device_info *dev, char *why, size_t size) {
  if (dev) memset(dev, 0, sizeof *dev);
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  cudaDeviceProp prop;
  if (rc == cudaSuccess && count > 0) rc = cudaGetDeviceProperties(&prop, 0);
  if (rc != cudaSuccess || count == 0) {
    if (why && size) {
      if (rc != cudaSuccess) snprintf(why, size, "no CUDA device: %s (%s)", cudaGetErrorName(rc), cudaGetErrorString(rc));
      else snprintf(why, size, "no CUDA device: cudaGetDeviceCount reports 0 devices");
    }
    cudaGetLastError(); /* the failed query must not surface as a later call's error */
    return 0;
  }
  if (dev) {
    snprintf(dev->name, sizeof dev->name, "%.127s", prop.name);
    snprintf(dev->arch, sizeof dev->arch, "sm_%d%d", prop.major, prop.minor);
    dev->cc_major = prop.major, dev->cc_minor = prop.minor;
    dev->total_bytes = (double)prop.totalGlobalMem;
    cudaDriverGetVersion(&dev->driver);
    cudaRuntimeGetVersion(&dev->runtime);
  }
  if (why && size) why[0] = '\0';
  return 1;
}

extern "C" lce_code lce_device_free_bytes(size_t *free_bytes, lce_status *st) {
  char why[200];
  LCE_CHECK(st, lce_device_query(NULL, why, sizeof why), LCE_ENODEV, "%s", why);
  size_t total = 0;
  cudaError_t rc = cudaMemGetInfo(free_bytes, &total);
  LCE_CHECK(st, rc == cudaSuccess, LCE_EINTERNAL, "cudaMemGetInfo failed: %s (%s)", cudaGetErrorName(rc),
            cudaGetErrorString(rc));
  return LCE_OK;
}

extern "C" void lce_device_arch(char *buf, size_t size) {
  const char *env = getenv("LCE_GOLDEN_ARCH");
  lce_device_info dev;
  if (env && *env) snprintf(buf, size, "%s", env);
  else if (lce_device_query(&dev, NULL, 0)) snprintf(buf, size, "%s", dev.arch);
  else snprintf(buf, size, "%s", LCE_CUDA_TARGET_ARCH);
}
