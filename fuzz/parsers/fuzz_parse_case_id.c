/* fuzz_parse_case_id.c — case ids (reference/case/lce_case.h): an accepted id describes a valid case
 * whose formatted id parses back to the same id (ids are how every failure is reproduced). */
#include "fuzz_parse.h"
#include "lce_case.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char id[512];
  if (size >= sizeof id) return 0; /* ids are short; longer inputs only repeat what these cover */
  memcpy(id, data, size);
  id[size] = '\0';
  lce_case c, back;
  lce_status st;
  lce_status_clear(&st);
  lce_code rc = lce_case_parse(id, &c, &st);
  if (rc != LCE_OK) {
    if (st.msg[0] == '\0') FUZZ_VIOLATION("case id refused without a message");
    return 0;
  }
  if (lce_case_validate(&c, &st) != LCE_OK) FUZZ_VIOLATION("accepted id '%s' is an invalid case: %s", id, st.msg);
  char once[256], twice[256];
  lce_case_format(&c, once, sizeof once);
  if (lce_case_parse(once, &back, &st) != LCE_OK) FUZZ_VIOLATION("'%s' formats to '%s', which fails: %s", id, once, st.msg);
  lce_case_format(&back, twice, sizeof twice);
  if (strcmp(once, twice) != 0) FUZZ_VIOLATION("'%s' -> '%s' -> '%s'", id, once, twice);
  return 0;
}
