/* lce_replay_walk.c — the inputs of a replay (lce_replay_walk.h). */
#define _POSIX_C_SOURCE 200809L
#include "lce_replay_walk.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "lce_file.h"

static int run_file(const char *path, lce_replay_fn run, void *ctx, int *failed_reads) {
  char *data;
  size_t size;
  lce_status st;
  if (lce_file_read(path, &data, &size, &st) != LCE_OK) {
    fprintf(stderr, "%s\n", st.msg);
    ++*failed_reads;
    return 0;
  }
  run(ctx, path, (const uint8_t *)data, size);
  free(data);
  return 1;
}

static int is_listed_file(const struct dirent *e) { return e->d_name[0] != '.'; }

static int run_dir(const char *dir, lce_replay_fn run, void *ctx, int *failed_reads) {
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
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) ran += run_file(path, run, ctx, failed_reads);
    free(names[i]);
  }
  free(names);
  return ran;
}

int lce_replay_paths(char **paths, int count, lce_replay_fn run, void *ctx, int *failed_reads) {
  int ran = 0;
  for (int i = 0; i < count; i++) {
    struct stat sb;
    if (stat(paths[i], &sb) == 0 && S_ISDIR(sb.st_mode)) ran += run_dir(paths[i], run, ctx, failed_reads);
    else ran += run_file(paths[i], run, ctx, failed_reads);
  }
  return ran;
}
