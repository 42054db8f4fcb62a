/* replay_parse_main.c — runs a parser harness's LLVMFuzzerTestOneInput over files, without libFuzzer:
 *   fuzz_replay_parse_<target> PATH...
 * (files, or directories of files: lce_replay_walk.h). A broken property aborts the process (the
 * harness reports which input), so the ctest fails with that input's name last on stdout. Exit status:
 * 0 every input ran, 1 an input could not be read, 2 no input found (an empty replay proves nothing). */
#include <stdio.h>

#include "lce_replay_walk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void run_input(void *ctx, const char *path, const uint8_t *data, size_t size) {
  (void)ctx;
  printf("%s (%zu bytes)\n", path, size);
  fflush(stdout);
  LLVMFuzzerTestOneInput(data, size);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  int failed_reads = 0;
  int ran = lce_replay_paths(argv + 1, argc - 1, run_input, NULL, &failed_reads);
  printf("\n%d inputs, every property held%s\n", ran, failed_reads ? "; some inputs unreadable" : "");
  if (ran == 0) {
    fprintf(stderr, "no input found: an empty replay proves nothing\n");
    return 2;
  }
  return failed_reads ? 1 : 0;
}
