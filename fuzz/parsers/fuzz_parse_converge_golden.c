/* fuzz_parse_converge_golden.c — golden/converge.bounds (conformance/engine/lce_converge_golden.h):
 * accepted files hold finite non-negative bounds, one per key, and a valid configuration. */
#include <math.h>

#include "fuzz_parse.h"
#include "lce_converge_golden.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lce_converge_golden g;
  lce_status st;
  lce_status_clear(&st);
  lce_code rc = lce_converge_golden_parse((const char *)data, size, FUZZ_INPUT_NAME, &g, &st);
  fuzz_check_refusal(rc, &st);
  if (rc != LCE_OK) return 0;
  if (g.config.n <= 0 || g.config.steps <= 0 || !(g.config.lr > 0)) FUZZ_VIOLATION("accepted an invalid config");
  for (size_t i = 0; i < g.count; i++) {
    const lce_converge_bound *b = &g.bounds[i];
    if (!(b->bound >= 0) || !isfinite(b->bound)) FUZZ_VIOLATION("bound %zu is %g", i, b->bound);
    if (lce_converge_golden_find(&g, b->subject_class, b->dtype, b->tied, b->metric) != b)
      FUZZ_VIOLATION("bound %zu: duplicate key accepted", i);
  }
  lce_converge_golden_free(&g);
  return 0;
}
