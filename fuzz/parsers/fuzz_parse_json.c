/* fuzz_parse_json.c — the JSON parser under the exchange's manifest.json, case.json and meta.json
 * (fused/subject/lce_json.h): an accepted document equals itself, and its top-level members can be
 * looked up by name. */
#include "fuzz_parse.h"
#include "lce_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lce_json j;
  lce_status st;
  lce_status_clear(&st);
  lce_code rc = lce_json_parse((const char *)data, size, FUZZ_INPUT_NAME, &j, &st);
  fuzz_check_refusal(rc, &st);
  if (rc != LCE_OK) return 0;
  char where[128];
  if (!lce_json_equal(&j, &j, where, sizeof where)) FUZZ_VIOLATION("a document differs from itself at %s", where);
  (void)lce_json_get(&j, "cases");
  lce_json_free(&j);
  return 0;
}
