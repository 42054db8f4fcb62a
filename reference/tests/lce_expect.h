/* lce_expect.h — the one assertion macro of the C unit tests: EXPECT(cond, fmt, ...) records a
 * failure with file:line and a message and carries on, so one run reports every broken check (the
 * first 40 are printed); a test's main reports `failures` and returns non-zero when it is set. */
#ifndef LCE_EXPECT_H
#define LCE_EXPECT_H

#include <stdio.h>

static int failures;

#define EXPECT(cond, ...)                                     \
  do {                                                        \
    if (!(cond)) {                                            \
      if (failures++ < 40) {                                  \
        fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                         \
        fprintf(stderr, "\n");                                \
      }                                                       \
    }                                                         \
  } while (0)

#endif
