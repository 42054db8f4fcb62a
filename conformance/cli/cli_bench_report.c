/* cli_bench_report.c — `lcecheck bench`'s rows: kept, written as JSON, read back from JSON (the peers'
 * process's file and `--render`'s), and printed as one table per shape with the ratio of each row to
 * the three-GEMM floor measured in its own process. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_bench.h"
#include "cli_common.h"

lce_code bench_report_add(bench_report *r, const bench_row *row, lce_status *st) {
  if (r->count == r->cap) {
    const size_t cap = r->cap ? 2 * r->cap : 16;
    bench_row *rows = realloc(r->rows, cap * sizeof *rows);
    LCE_ALLOC_CHECK(st, rows);
    r->rows = rows, r->cap = cap;
  }
  r->rows[r->count++] = *row;
  return LCE_OK;
}

void bench_report_free(bench_report *r) {
  free(r->rows);
  r->rows = NULL, r->count = r->cap = 0;
}

double bench_floor_ms(const bench_report *r, const bench_row *row) {
  for (size_t i = 0; i < r->count; i++) {
    const bench_row *f = &r->rows[i];
    if (f->n == row->n && f->h == row->h && f->v == row->v && strcmp(f->process, row->process) == 0 &&
        strcmp(f->role, "floor") == 0 && strcmp(f->status, "ran") == 0)
      return f->total_ms;
  }
  return NAN;
}

/* 6·N·H·V: the three GEMMs of forward and backward, 2·N·H·V flops each. */
static double flop(const bench_row *row) { return 6.0 * (double)row->n * (double)row->h * (double)row->v; }

/* ---- JSON ------------------------------------------------------------------------------------- */

static void json_row(const bench_report *r, const bench_row *row) {
  printf("{\"n\":%" PRId64 ",\"h\":%" PRId64 ",\"v\":%" PRId64, row->n, row->h, row->v);
  cli_json_member(stdout, "subject", row->subject);
  cli_json_member(stdout, "process", row->process);
  cli_json_member(stdout, "role", row->role);
  cli_json_member(stdout, "status", row->status);
  cli_json_member(stdout, "reason", row->reason);
  cli_json_member(stdout, "version", row->version);
  const double floor_ms = bench_floor_ms(r, row);
  const struct { const char *key; double x; } nums[] = {
      {"fwd_ms", row->fwd_ms}, {"bwd_ms", row->bwd_ms}, {"total_ms", row->total_ms},
      {"extra_bytes", row->extra_bytes}, {"tflops", flop(row) / (row->total_ms * 1e9)},
      {"floor_ms", floor_ms}, {"ratio_to_floor", row->total_ms / floor_ms}};
  for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
    printf(",\"%s\":", nums[k].key);
    cli_json_number(stdout, nums[k].x);
  }
  cli_json_member(stdout, "note", row->note);
  putchar('}');
}

void bench_report_json(const bench_report *r) {
  cli_json_member(stdout, "device", r->device);
  printf(",\"dtype\":\"bf16\",\"reps\":%d,\"warmup\":%d,\"vocab_chunk\":%" PRId64 ",\"seed\":%" PRIu64, r->reps,
         r->warmup, r->vocab_chunk, r->seed);
  cli_json_member(stdout, "peers", r->peers);
  cli_json_member(stdout, "peer_env", r->peer_env);
  printf(",\"rows\":[");
  for (size_t i = 0; i < r->count; i++) {
    if (i) putchar(',');
    json_row(r, &r->rows[i]);
  }
  printf("]}\n");
}

/* key of object o as a string copied into buf (cut to size). */
static lce_code get_string(const lce_json *o, const char *key, char *buf, size_t size, const char *what,
                           lce_status *st) {
  const lce_json *j = lce_json_get(o, key);
  LCE_CHECK(st, j && j->type == LCE_JSON_STRING, LCE_EINVAL, "%s:%d: \"%s\" missing or not a string", what,
            o->line, key);
  snprintf(buf, size, "%s", j->string);
  return LCE_OK;
}

/* key of object o as a number, or NAN for null when nullable. */
static lce_code get_number(const lce_json *o, const char *key, int nullable, double *out, const char *what,
                           lce_status *st) {
  const lce_json *j = lce_json_get(o, key);
  LCE_CHECK(st, j && (j->type == LCE_JSON_NUMBER || (nullable && j->type == LCE_JSON_NULL)), LCE_EINVAL,
            "%s:%d: \"%s\" missing or not a number%s", what, o->line, key, nullable ? " or null" : "");
  *out = j->type == LCE_JSON_NUMBER ? j->number : NAN;
  return LCE_OK;
}

static lce_code get_dim(const lce_json *o, const char *key, int64_t *out, const char *what, lce_status *st) {
  double x;
  LCE_TRY(get_number(o, key, 0, &x, what, st));
  LCE_CHECK(st, x >= 1 && x <= (double)LCE_MAX_DIM && x == floor(x), LCE_EINVAL,
            "%s:%d: \"%s\" %g is not an integer in [1, %lld]", what, o->line, key, x, (long long)LCE_MAX_DIM);
  *out = (int64_t)x;
  return LCE_OK;
}

static int one_of(const char *s, const char *a, const char *b, const char *c) {
  return strcmp(s, a) == 0 || strcmp(s, b) == 0 || (c && strcmp(s, c) == 0);
}

lce_code bench_rows_read(const lce_json *rows, const char *what, bench_report *r, lce_status *st) {
  LCE_CHECK(st, rows && rows->type == LCE_JSON_ARRAY, LCE_EINVAL, "%s: \"rows\" missing or not an array", what);
  for (size_t i = 0; i < rows->count; i++) {
    const lce_json *o = &rows->items[i];
    LCE_CHECK(st, o->type == LCE_JSON_OBJECT, LCE_EINVAL, "%s:%d: a row is not an object", what, o->line);
    bench_row row;
    memset(&row, 0, sizeof row);
    LCE_TRY(get_dim(o, "n", &row.n, what, st));
    LCE_TRY(get_dim(o, "h", &row.h, what, st));
    LCE_TRY(get_dim(o, "v", &row.v, what, st));
    LCE_TRY(get_string(o, "subject", row.subject, sizeof row.subject, what, st));
    LCE_TRY(get_string(o, "process", row.process, sizeof row.process, what, st));
    LCE_TRY(get_string(o, "role", row.role, sizeof row.role, what, st));
    LCE_TRY(get_string(o, "status", row.status, sizeof row.status, what, st));
    LCE_TRY(get_string(o, "reason", row.reason, sizeof row.reason, what, st));
    LCE_TRY(get_string(o, "version", row.version, sizeof row.version, what, st));
    LCE_TRY(get_string(o, "note", row.note, sizeof row.note, what, st));
    LCE_CHECK(st, one_of(row.role, "floor", "subject", NULL) && one_of(row.status, "ran", "skipped", "error") &&
                      one_of(row.process, "lcecheck", "python", NULL),
              LCE_EINVAL, "%s:%d: role '%s', status '%s' or process '%s' is not one of floor|subject, "
              "ran|skipped|error, lcecheck|python", what, o->line, row.role, row.status, row.process);
    LCE_TRY(get_number(o, "fwd_ms", 1, &row.fwd_ms, what, st));
    LCE_TRY(get_number(o, "bwd_ms", 1, &row.bwd_ms, what, st));
    LCE_TRY(get_number(o, "total_ms", 1, &row.total_ms, what, st));
    LCE_TRY(get_number(o, "extra_bytes", 1, &row.extra_bytes, what, st));
    LCE_CHECK(st, strcmp(row.status, "ran") != 0 || (isfinite(row.total_ms) && row.total_ms > 0), LCE_EINVAL,
              "%s:%d: a row that ran needs a positive total_ms", what, o->line);
    LCE_TRY(bench_report_add(r, &row, st));
  }
  return LCE_OK;
}

lce_code bench_report_load(const char *path, bench_report *r, lce_status *st) {
  lce_json j;
  LCE_TRY(lce_json_load(path, &j, st));
  const lce_json *verb = lce_json_get(&j, "verb"), *said = lce_json_get(&j, "message");
  double reps = 0, warmup = 0, chunk = 0, seed = 0;
  lce_code rc = verb && verb->type == LCE_JSON_STRING && strcmp(verb->string, "bench") == 0
                    ? LCE_OK
                    : lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "%s: not the output of `lcecheck bench --json`", path);
  if (rc == LCE_OK && said && said->type == LCE_JSON_STRING) /* cli_fail's object: a run that did not happen */
    rc = lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "%s holds no rows: lcecheck bench said: %.200s", path, said->string);
  if (rc == LCE_OK) rc = get_string(&j, "device", r->device, sizeof r->device, path, st);
  if (rc == LCE_OK) rc = get_string(&j, "peers", r->peers, sizeof r->peers, path, st);
  if (rc == LCE_OK) rc = get_string(&j, "peer_env", r->peer_env, sizeof r->peer_env, path, st);
  if (rc == LCE_OK) rc = get_number(&j, "reps", 0, &reps, path, st);
  if (rc == LCE_OK) rc = get_number(&j, "warmup", 0, &warmup, path, st);
  if (rc == LCE_OK) rc = get_number(&j, "vocab_chunk", 0, &chunk, path, st);
  if (rc == LCE_OK) rc = get_number(&j, "seed", 0, &seed, path, st);
  if (rc == LCE_OK) rc = bench_rows_read(lce_json_get(&j, "rows"), path, r, st);
  r->reps = (int)reps, r->warmup = (int)warmup, r->vocab_chunk = (int64_t)chunk, r->seed = (uint64_t)seed;
  lce_json_free(&j);
  return rc;
}

/* ---- the table -------------------------------------------------------------------------------- */

static void text_row(const bench_report *r, const bench_row *row) {
  if (strcmp(row->status, "ran") != 0) {
    printf("  %-20s %-9s %s: %s%s%s\n", row->subject, row->process, row->status, row->reason,
           row->version[0] ? " | " : "", row->version);
    return;
  }
  char fwd[16], bwd[16], extra[16];
  cli_cell(fwd, sizeof fwd, row->fwd_ms, "%.2f");
  cli_cell(bwd, sizeof bwd, row->bwd_ms, "%.2f");
  cli_cell(extra, sizeof extra, row->extra_bytes / 1e9, "%.3f");
  char ratio[16];
  cli_cell(ratio, sizeof ratio, row->total_ms / bench_floor_ms(r, row), "%.2fx");
  printf("  %-20s %-9s %8s %8s %9.2f %8.0f %7s %9s%s%s%s%s\n", row->subject, row->process, fwd, bwd, row->total_ms,
         flop(row) / (row->total_ms * 1e9), ratio, extra, row->version[0] || row->note[0] ? "  " : "", row->version,
         row->version[0] && row->note[0] ? "; " : "", row->note);
}

void bench_report_text(const bench_report *r) {
  printf("lcecheck bench: bf16, untied, mean, no ignored label; median of %d after %d warm-up, fresh random inputs "
         "each repetition; fused-cuda's vocab chunk %" PRId64 "\n",
         r->reps, r->warmup, r->vocab_chunk);
  printf("device: %s\n", r->device);
  if (r->peers[0]) printf("peers: %s (%s)\n", r->peers, r->peer_env);
  for (size_t i = 0; i < r->count; i++) {
    const bench_row *row = &r->rows[i];
    int first = 1; /* the first row of its shape opens the shape's table */
    for (size_t k = 0; k < i && first; k++)
      first = !(r->rows[k].n == row->n && r->rows[k].h == row->h && r->rows[k].v == row->v);
    if (!first) continue;
    printf("\n%" PRId64 " x %" PRId64 " x %" PRId64 " (6NHV = %.2f TFLOP)\n", row->n, row->h, row->v, flop(row) / 1e12);
    printf("  %-20s %-9s %8s %8s %9s %8s %7s %9s  %s\n", "subject", "process", "fwd ms", "bwd ms", "total ms",
           "TFLOP/s", "/floor", "extra GB", "version; note");
    for (size_t k = i; k < r->count; k++)
      if (r->rows[k].n == row->n && r->rows[k].h == row->h && r->rows[k].v == row->v) text_row(r, &r->rows[k]);
  }
  printf("\n/floor: total (forward + backward) over the three-GEMM floor (logits, d_hidden, d_weight, 2NHV flops "
         "each) measured in the same process: lcecheck's with cuBLAS, the peers' with torch.matmul. TFLOP/s: 6NHV "
         "over the total. extra GB: peak device memory beyond the inputs and the outputs\n");
}
