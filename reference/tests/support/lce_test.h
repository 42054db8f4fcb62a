/* lce_test.h — what every C test shares: one EXPECT that records a failure with file:line and a
 * message and carries on (so one run reports every broken check; the first 40 are printed), the case
 * a failure names (its id, seed and the rerun command), and one seed variable, $LCE_TEST_SEED. A
 * test's main returns lce_test_finish(name): non-zero when any EXPECT failed. */
#ifndef LCE_TEST_H
#define LCE_TEST_H

#include <stdint.h>

#include "lce_case.h"

extern int lce_test_failures;

void lce_test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define EXPECT(cond, ...)                                         \
  do {                                                            \
    if (!(cond)) lce_test_fail(__FILE__, __LINE__, __VA_ARGS__);  \
  } while (0)

/* The case that failure messages name (NULL: none). */
void lce_test_set_case(const lce_case *c);
/* $LCE_TEST_SEED (decimal or 0x hex), else 1: the seed of every generated case and random value. */
uint64_t lce_test_seed(void);
/* Prints "<name>: passed|FAILED (k failures, seed s)" and returns the process exit code. */
int lce_test_finish(const char *test_name);

#endif
