/* lce_test.c — see lce_test.h. */
#include "lce_test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define LCE_TEST_PRINTED 40

int lce_test_failures = 0;
static const lce_case *current_case = NULL;

void lce_test_set_case(const lce_case *c) { current_case = c; }

uint64_t lce_test_seed(void) {
  const char *s = getenv("LCE_TEST_SEED");
  return s && *s ? strtoull(s, NULL, 0) : 1;
}

void lce_test_fail(const char *file, int line, const char *fmt, ...) {
  if (lce_test_failures++ >= LCE_TEST_PRINTED) return;
  va_list ap;
  fprintf(stderr, "FAIL %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  if (current_case) {
    char id[192];
    fprintf(stderr, "  case %s (case seed %llu; rerun: LCE_TEST_SEED=%llu <this test>)\n",
            lce_case_format(current_case, id, sizeof id), (unsigned long long)current_case->seed,
            (unsigned long long)lce_test_seed());
  } else {
    fprintf(stderr, "  (rerun: LCE_TEST_SEED=%llu <this test>)\n", (unsigned long long)lce_test_seed());
  }
}

int lce_test_finish(const char *test_name) {
  printf("%s: %s (%d failure%s, seed %llu)\n", test_name, lce_test_failures ? "FAILED" : "passed",
         lce_test_failures, lce_test_failures == 1 ? "" : "s", (unsigned long long)lce_test_seed());
  return lce_test_failures ? 1 : 0;
}
