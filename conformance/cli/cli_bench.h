/* cli_bench.h — what the two halves of `lcecheck bench` share (cli_bench.c: arguments, the GPU runs in
 * this process and the peers' process; cli_bench_report.c: the rows as JSON, read back from JSON and
 * printed as the table). The verb's contract is in cli_bench.c's header comment.
 *
 * A row is one subject at one shape, timed in one process: lcecheck's own (fused-cuda and its
 * three-GEMM floor, cuBLAS) or the peers' Python process (scripts/subjects/bench_peers.py: the
 * external kernels and their three-GEMM floor, torch.matmul). The peers' process writes its rows in
 * the same JSON form as `lcecheck bench --json`, so one reader takes both. */
#ifndef LCE_CLI_BENCH_H
#define LCE_CLI_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "lce_json.h"
#include "lce_status.h"

#define BENCH_FLOOR "three-GEMM floor"

typedef struct bench_row {
  int64_t n, h, v;
  char subject[48];
  char process[16];  /* "lcecheck" or "python": the floor a row is divided by is its process's */
  char role[8];      /* "floor" or "subject" */
  char status[8];    /* "ran", "skipped" or "error" */
  char reason[320];  /* why, for skipped and error */
  char version[96];
  char note[200];
  double fwd_ms, bwd_ms, total_ms; /* medians; NAN where not measured */
  double extra_bytes;              /* peak device memory beyond inputs and outputs; NAN: not measured */
} bench_row;

/* A whole run: what `lcecheck bench --json` writes and `--render` reads. */
typedef struct bench_report {
  char device[160];   /* lcecheck's device */
  char peers[160];    /* the peers asked for, comma list, or "" */
  char peer_env[160]; /* the peers' process: "torch X, python Y" or why it did not run */
  int reps, warmup;
  int64_t vocab_chunk;
  uint64_t seed;
  bench_row *rows;
  size_t count, cap;
} bench_report;

/* Appends a copy of row. */
lce_code bench_report_add(bench_report *r, const bench_row *row, lce_status *st);
void bench_report_free(bench_report *r);

/* The rows of JSON array rows (bench_peers.py's "rows" or lcecheck's own), each checked for its keys
 * and their types, appended to r; what names the file in messages. */
lce_code bench_rows_read(const lce_json *rows, const char *what, bench_report *r, lce_status *st);
/* A file written by `lcecheck bench --json`, into a zeroed r. */
lce_code bench_report_load(const char *path, bench_report *r, lce_status *st);

/* total_ms of the floor row of row's process and shape, NAN when it has none that ran. */
double bench_floor_ms(const bench_report *r, const bench_row *row);

/* The report as one JSON object on stdout (cli_json_begin first) and as the text table. */
void bench_report_json(const bench_report *r);
void bench_report_text(const bench_report *r);

#endif
