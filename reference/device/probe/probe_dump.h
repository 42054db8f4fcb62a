/* probe_dump.h — the probe's binary dump: every test vector and the GPU's result, so a GPU run
 * can be re-checked on any CPU against any model (lcecheck probe --replay FILE). The lead fetches
 * one dump from the H200 and tunes the model here, without a GPU.
 *
 * Layout, all integers little-endian, floats as their IEEE binary32 bits (u32):
 *   header   8 bytes  magic "LCEPROBE"
 *            u32      version (PROBE_DUMP_VERSION)
 *            u32      section count S (1..LCE_MMA_FORMATS)
 *            u64      seed the vectors were generated with (provenance only)
 *            64 bytes device name, NUL-padded (e.g. "NVIDIA H200")
 *            16 bytes model the run compared with (e.g. "sm90"), NUL-padded: replay's default
 *   S sections, each:
 *            u32      format (lce_mma_format: 0 bf16, 1 fp16, 2 tf32)
 *            u32      K, products per vector (16, 16, 8; must match the format)
 *            u32      tile count T (1..2^24)
 *            u32      reserved, 0
 *            T tiles, each: u32 class (probe_class), C[16][8], A[16][K], B[K][8], D[16][8]
 *                     (row-major; D is the GPU's result, element (i, j) = vector C[i][j] + A[i]·B[:, j])
 *   trailer  u64      FNV-1a 64 of every byte before it
 * The reader checks magic, version, every count and class against its range, the exact file
 * size and the checksum, and names the first problem it finds. Files are replaced atomically
 * (lce_file_replace), so a reader never sees half a dump. */
#ifndef PROBE_DUMP_H
#define PROBE_DUMP_H

#include "probe_vectors.h"

#define PROBE_DUMP_VERSION 1u
#define PROBE_DUMP_NAME_LEN 64
#define PROBE_DUMP_MODEL_LEN 16

typedef struct probe_dump {
  uint64_t seed;
  char device[PROBE_DUMP_NAME_LEN + 1];
  char model[PROBE_DUMP_MODEL_LEN + 1];
  int sections;
  probe_tileset set[LCE_MMA_FORMATS];
} probe_dump;

lce_code probe_dump_write(const char *path, const probe_dump *d, lce_status *st);
/* Fills d (free with probe_dump_free); LCE_EIO when the file cannot be read, LCE_EPARSE when it
 * is not a valid dump (the message says which field at which byte offset). */
lce_code probe_dump_read(const char *path, probe_dump *d, lce_status *st);
/* The same from n bytes in memory; name stands for the file in messages. */
lce_code probe_dump_parse(const void *data, size_t n, const char *name, probe_dump *d, lce_status *st);
void probe_dump_free(probe_dump *d);

#endif
