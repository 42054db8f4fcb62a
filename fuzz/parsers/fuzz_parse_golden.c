/* fuzz_parse_golden.c — golden files (conformance/judge/lce_golden.h): accepted files give finite,
 * non-negative bounds for any K, condition, element count, shard size and coherent scale; refusals
 * name file:line. */
#include <math.h>

#include "fuzz_parse.h"
#include "lce_golden.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lce_golden g;
  lce_status st;
  lce_status_clear(&st);
  lce_code rc = lce_golden_parse((const char *)data, size, FUZZ_INPUT_NAME, &g, &st);
  fuzz_check_refusal(rc, &st);
  if (rc != LCE_OK) return 0;
  for (size_t i = 0; i < g.count; i++) {
    const lce_golden_entry *e = &g.entries[i];
    for (int64_t k = 1; k <= (1 << 20); k *= 32) {
      lce_bound_scales sc = {.cond = 1.0 + (double)k, .neff = (double)k, .vs = (double)k, .h = (double)k,
                             .k = (double)k, .coh = 0x1p-8};
      double b = lce_golden_bound(e, &sc);
      if (!(b >= 0) || isinf(b)) FUZZ_VIOLATION("entry %zu: bound %g at K %lld", i, b, (long long)k);
    }
    if (lce_golden_find(&g, e->subject_class, e->dtype, e->output, e->metric) != e)
      FUZZ_VIOLATION("entry %zu is not the one found for its own key (duplicate accepted)", i);
  }
  lce_golden_free(&g);
  return 0;
}
