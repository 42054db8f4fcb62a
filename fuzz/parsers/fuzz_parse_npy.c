/* fuzz_parse_npy.c — .npy files, the exchange's tensors (fused/subject/lce_npy.h): an accepted file's
 * data is exactly its shape's element count times the item size, and readable to its last byte. */
#include "fuzz_parse.h"
#include "lce_npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lce_npy a;
  lce_status st;
  lce_status_clear(&st);
  lce_code rc = lce_npy_parse(data, size, FUZZ_INPUT_NAME, &a, &st);
  fuzz_check_refusal(rc, &st);
  if (rc != LCE_OK) return 0;
  size_t count = 1;
  for (int i = 0; i < a.ndim; i++) {
    if (a.shape[i] < 0) FUZZ_VIOLATION("accepted a negative extent %lld", (long long)a.shape[i]);
    count *= (size_t)a.shape[i];
  }
  if (a.bytes != count * lce_npy_item_size(a.descr)) FUZZ_VIOLATION("%zu data bytes for %zu elements", a.bytes, count);
  unsigned char sum = 0;
  for (size_t i = 0; i < a.bytes; i++) sum ^= ((const unsigned char *)a.data)[i];
  (void)sum;
  lce_npy_free(&a);
  return 0;
}
