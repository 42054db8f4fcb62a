/* test_probe_replay_data.c — replays every committed hardware dump (conformance/tests/data/probe/
 * *.bin, written by `lcecheck probe --dump` on a GPU) against the model named in the dump, and
 * fails on any mismatch or invalid file. So once a dump from a GPU is committed, no change to
 * lce_gemm_model.c can silently stop matching that GPU. Prints every file it checked; with none
 * committed it says so and passes. Usage: test_probe_replay_data DIR */
#define _POSIX_C_SOURCE 200809L /* opendir */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_test.h"
#include "probe_check.h"
#include "probe_dump.h"

static int is_dump(const char *name) {
  const size_t n = strlen(name);
  return n > 4 && strcmp(name + n - 4, ".bin") == 0;
}

static int cmp_names(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* EXPECTs that the dump reads and every vector of it matches its model. */
static void replay_one(const char *path) {
  probe_dump d;
  lce_status st;
  lce_status_clear(&st);
  const lce_code rc = probe_dump_read(path, &d, &st);
  EXPECT(rc == LCE_OK, "%s", st.msg);
  if (rc != LCE_OK) return;
  const lce_gemm_arch *arch = lce_gemm_arch_find(d.model);
  EXPECT(arch != NULL, "%s names model '%s', which lce_gemm_model.c does not have", path, d.model);
  if (arch == NULL) {
    probe_dump_free(&d);
    return;
  }
  for (int s = 0; s < d.sections; s++) {
    probe_counts counts;
    probe_mismatch first[3];
    int kept = 0;
    memset(&counts, 0, sizeof counts);
    probe_check(arch, &d.set[s], &counts, first, 3, &kept);
    const int64_t mism = probe_counts_total(&counts, 1);
    printf("  %s: %s (%s) %s: %lld vectors, %lld mismatches vs model %s\n", path, d.device,
           probe_format_name(d.set[s].format), mism ? "FAIL" : "ok", (long long)probe_counts_total(&counts, 0),
           (long long)mism, arch->name);
    for (int m = 0; m < kept; m++) {
      char line[1024];
      probe_mismatch_line(&first[m], line, sizeof line);
      printf("    %s\n", line);
    }
    EXPECT(mism == 0 && counts.exact_wrong == 0, "%s section %d: %lld mismatches, %lld exact results wrong", path, s,
           (long long)mism, (long long)counts.exact_wrong);
  }
  probe_dump_free(&d);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test_probe_replay_data DIR\n");
    return 2;
  }
  DIR *dir = opendir(argv[1]);
  if (dir == NULL) {
    fprintf(stderr, "test_probe_replay_data: cannot open directory %s\n", argv[1]);
    return 1;
  }
  char **names = NULL;
  size_t count = 0;
  for (struct dirent *e; (e = readdir(dir)) != NULL;) {
    if (!is_dump(e->d_name)) continue;
    char **grown = realloc(names, (count + 1) * sizeof *names);
    const size_t len = strlen(argv[1]) + strlen(e->d_name) + 2;
    char *path = malloc(len);
    if (grown == NULL || path == NULL) {
      fprintf(stderr, "test_probe_replay_data: out of memory\n");
      return 1;
    }
    snprintf(path, len, "%s/%s", argv[1], e->d_name);
    names = grown;
    names[count++] = path;
  }
  closedir(dir);
  qsort(names, count, sizeof *names, cmp_names);
  for (size_t i = 0; i < count; i++) {
    replay_one(names[i]);
    free(names[i]);
  }
  free(names);
  printf("%zu committed dump(s) under %s%s\n", count, argv[1],
         count ? "" : " (none committed yet: the first comes from the H200 run)");
  return lce_test_finish("test_probe_replay_data");
}
