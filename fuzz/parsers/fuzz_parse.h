/* fuzz_parse.h — what the parser harnesses share: the parsers a user feeds files to must, on any
 * bytes, either accept them or refuse them with a message naming the input, and never crash, leak,
 * read out of bounds or allocate without bound (ASan/UBSan/libFuzzer's -rss_limit_mb see those).
 * A property broken on accepted input is reported here and aborts, which libFuzzer records as a crash
 * and the replay test as a failure. */
#ifndef FUZZ_PARSE_H
#define FUZZ_PARSE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_status.h"

#define FUZZ_INPUT_NAME "fuzz-input"

#define FUZZ_VIOLATION(...)                                   \
  do {                                                        \
    fprintf(stderr, "fuzz property violated: " __VA_ARGS__);  \
    fprintf(stderr, "\n");                                    \
    abort();                                                  \
  } while (0)

/* A refusal must say what was wrong and where: a non-empty message naming the input. */
static inline void fuzz_check_refusal(lce_code rc, const lce_status *st) {
  if (rc == LCE_OK) return;
  if (st->msg[0] == '\0') FUZZ_VIOLATION("refused (%s) without a message", lce_code_name(rc));
  if (rc == LCE_EPARSE && strstr(st->msg, FUZZ_INPUT_NAME) == NULL)
    FUZZ_VIOLATION("parse error does not name the input: %s", st->msg);
}

#endif
