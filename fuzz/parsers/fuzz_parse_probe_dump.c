/* fuzz_parse_probe_dump.c — probe dumps (`lcecheck probe --dump/--replay`,
 * reference/device/probe/probe_dump.h): any bytes are accepted as a dump or refused with a message
 * naming the input, without unbounded allocation. */
#include "fuzz_parse.h"
#include "probe_dump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  probe_dump d;
  lce_status st;
  lce_status_clear(&st);
  lce_code rc = probe_dump_parse(data, size, FUZZ_INPUT_NAME, &d, &st);
  fuzz_check_refusal(rc, &st);
  if (rc == LCE_OK) probe_dump_free(&d);
  return 0;
}
