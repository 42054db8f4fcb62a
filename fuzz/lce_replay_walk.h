/* lce_replay_walk.h — the inputs of a replay: each path a file, or a directory whose regular files
 * (not hidden, not recursive) run in name order. Shared by the subject harness's replay (replay_main.c)
 * and the parser harnesses' (parsers/replay_parse_main.c). */
#ifndef LCE_REPLAY_WALK_H
#define LCE_REPLAY_WALK_H

#include <stddef.h>
#include <stdint.h>

typedef void (*lce_replay_fn)(void *ctx, const char *path, const uint8_t *data, size_t size);

/* Calls run for every input under paths[0..count); returns how many ran; unreadable files and
 * directories are reported on stderr and counted in *failed_reads. */
int lce_replay_paths(char **paths, int count, lce_replay_fn run, void *ctx, int *failed_reads);

#endif
