/* replay_main.c — runs a fuzz harness's LLVMFuzzerTestOneInput over files, without libFuzzer.
 *
 *   fuzz_replay_<target> [--expect-violations] PATH...
 * Each PATH is a file or a directory (its regular files, in name order, not recursively). Unlike
 * libFuzzer it does not stop at the first violation: it counts them all, prints one progress line
 * per input and a final table. Exit status: 0 when every input ran and there was no violation
 * (with --expect-violations: when there was at least one — how ctest proves a mutant is killed),
 * 1 otherwise, 2 on usage errors or when no input was found (an empty run proves nothing), 77 when
 * every input was skipped (the subject could run none of them: nothing was judged). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "lce_file.h"
#include "lce_fuzz_session.h"
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

static int run_file(const char *path, int *failed_reads) {
  char *data;
  size_t size;
  lce_status st;
  if (lce_file_read(path, &data, &size, &st) != LCE_OK) {
    fprintf(stderr, "%s\n", st.msg);
    ++*failed_reads;
    return 0;
  }
  double t0 = lce_now_seconds();
  LLVMFuzzerTestOneInput((const uint8_t *)data, size);
  const lce_fuzz_session *s = lce_fuzz_session_get();
  printf("%-9s %6.2fs  %s  %s\n", outcome_name(s->last_outcome), lce_now_seconds() - t0, path, s->last_id);
  fflush(stdout);
  free(data);
  return 1;
}

static int is_listed_file(const struct dirent *e) { return e->d_name[0] != '.'; }

/* Runs every regular file of dir in name order; returns the count run. */
static int run_dir(const char *dir, int *failed_reads) {
  struct dirent **names;
  int n = scandir(dir, &names, is_listed_file, alphasort);
  if (n < 0) {
    perror(dir);
    ++*failed_reads;
    return 0;
  }
  int ran = 0;
  for (int i = 0; i < n; i++) {
    char path[4096];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) ran += run_file(path, failed_reads);
    free(names[i]);
  }
  free(names);
  return ran;
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

  int failed_reads = 0, ran = 0;
  for (int i = first; i < argc; i++) {
    struct stat sb;
    if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode))
      ran += run_dir(argv[i], &failed_reads);
    else
      ran += run_file(argv[i], &failed_reads);
  }

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
