/* replay_main.c — runs a fuzz harness's LLVMFuzzerTestOneInput over files, without libFuzzer.
 *
 *   fuzz_replay_<target> [--expect-violations] PATH...
 * Each PATH is a file or a directory (its regular files, in name order, not recursively). Unlike
 * libFuzzer it does not stop at the first violation: it counts them all, prints one progress line
 * per input and a final table. Exit status: 0 when every input ran and there was no violation
 * (with --expect-violations: when there was at least one — how ctest proves a mutant is killed),
 * 1 otherwise, 2 on usage errors or when no input was found (an empty run proves nothing), 77 when
 * every input was skipped (the subject could run none of them: nothing was judged). */
#include <stdio.h>
#include <string.h>

#include "lce_fuzz_session.h"
#include "lce_replay_walk.h"
#include "lce_time.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *outcome_name(lce_fuzz_outcome o) {
  switch (o) {
    case LCE_FUZZ_PASS: return "pass";
    case LCE_FUZZ_SKIPPED: return "skipped";
    case LCE_FUZZ_VIOLATION: return "VIOLATION";
  }
  return "?";
}

static void run_input(void *ctx, const char *path, const uint8_t *data, size_t size) {
  (void)ctx;
  double t0 = lce_now_seconds();
  LLVMFuzzerTestOneInput(data, size);
  const lce_fuzz_session *s = lce_fuzz_session_get();
  printf("%-9s %6.2fs  %s  %s\n", outcome_name(s->last_outcome), lce_now_seconds() - t0, path, s->last_id);
  fflush(stdout);
}

int main(int argc, char **argv) {
  int expect_violations = 0, first = 1;
  if (argc > 1 && strcmp(argv[1], "--expect-violations") == 0) {
    expect_violations = 1;
    first = 2;
  }
  if (first >= argc) {
    fprintf(stderr, "usage: %s [--expect-violations] FILE|DIR...\n", argv[0]);
    return 2;
  }
  LLVMFuzzerInitialize(&argc, &argv);
  lce_fuzz_session *s = lce_fuzz_session_get();
  s->trap_on_violation = 0; /* count every violation instead of stopping at the first */

  int failed_reads = 0;
  int ran = lce_replay_paths(argv + first, argc - first, run_input, NULL, &failed_reads);

  printf("\n%-14s %s\n", "subject", s->subject->name);
  printf("%-14s %d\n", "inputs run", ran);
  printf("%-14s %lld (passed %lld, skipped %lld)\n", "cases", (long long)s->stats.inputs,
         (long long)s->stats.passed, (long long)s->stats.skipped);
  printf("%-14s %lld\n", "violations", (long long)s->stats.violations);
  printf("%-14s %lld\n", "inconclusive", (long long)s->stats.inconclusive);
  if (failed_reads) printf("%-14s %d\n", "unreadable", failed_reads);
  if (ran == 0) {
    fprintf(stderr, "no input found: an empty replay proves nothing\n");
    return 2;
  }
  if (failed_reads) return 1;
  if (s->stats.skipped == s->stats.inputs) {
    fprintf(stderr, "every input was skipped by %s: nothing was judged\n", s->subject->name);
    return 77;
  }
  if (expect_violations) return s->stats.violations > 0 ? 0 : 1;
  return s->stats.violations == 0 ? 0 : 1;
}
