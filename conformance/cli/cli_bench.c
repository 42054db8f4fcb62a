/* cli_bench.c — `lcecheck bench`: FLCE subjects side by side at production shapes, each beside the
 * three-GEMM floor (logits, d_hidden, d_weight: 2·N·H·V flops each) measured in the same process.
 *  - In this process (fused/cuda/fused_cuda_bench.cu): fused-cuda's forward and backward and its extra
 *    device memory (its workspace, cuBLAS's included), and the floor as plain cuBLAS GEMMs, bf16 in,
 *    fp32 out; CUDA events, medians after warm-up, fresh random inputs every repetition. fused-cuda
 *    recomputes the logits in its backward, so its own floor is four GEMMs: the floor row's note
 *    gives the fourth.
 *  - With --peers, in one child process (scripts/subjects/bench_peers.py, run after this process has
 *    freed its device memory): the external kernels through their adapters, and their floor as
 *    torch.matmul. It gets the same shapes, repetitions and seed and writes rows in this verb's JSON
 *    form; a peer that does not import, does not fit or fails is a row saying why, and a requested
 *    peer the process gave no row for is an error row naming the process's exit status.
 * Default shapes (N, H, V) = (8192, 4096, 128256), (4096, 4096, 262144), (16384, 8192, 152064): the
 * largest holds 0.3 GB of bf16 hidden, a 2.5 GB weight and its 5.0 GB fp32 gradient, and the floor's
 * 10 GB of fp32 logits and 5 GB of bf16 d_logits, on a 141 GB H200.
 * `--render FILE` prints the table of a saved --json run (no GPU needed).
 * Exit status: 0 when lcecheck's own rows ran (the peers' rows, errors included, are reported, not
 * judged), 1 when one of them failed or the peers' process could not be run, 2 on bad usage or a
 * malformed --render file, 77 (CLI_SKIP) without a GPU or in a build without fused-cuda. */
#define _XOPEN_SOURCE 700 /* mkstemp */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_bench.h"
#include "cli_common.h"
#include "lce_production.h"
#ifdef LCE_WITH_CUDA
#include "fused_cuda.h"
#endif
#ifdef LCE_WITH_SM90
#include "fused_sm90.h"
#endif

#ifndef LCE_SOURCE_DIR
#error "LCE_SOURCE_DIR must be defined by the build (the repository root)"
#endif

#define BENCH_MAX_SHAPES 8
#define BENCH_PEERS_SCRIPT LCE_SOURCE_DIR "/scripts/subjects/bench_peers.py"

/* The peers bench_peers.py knows (its PEERS), in its order. */
static const char *const PEER_NAMES[] = {"torch-eager", "torch-compile", "liger", "cce", "megatron-fused-lce",
                                         "te-parallel-ce"};
enum { PEER_COUNT = sizeof PEER_NAMES / sizeof PEER_NAMES[0] };

typedef struct bench_args {
  int json, reps, warmup;
  int64_t vocab_chunk;
  uint64_t seed;
  lce_prod_shape shapes[BENCH_MAX_SHAPES];
  int nshapes;
  unsigned peers; /* a bit per PEER_NAMES entry */
  const char *python, *megatron, *render;
} bench_args;

static int peer_index(const char *name) {
  for (int i = 0; i < PEER_COUNT; i++)
    if (strcmp(name, PEER_NAMES[i]) == 0) return i;
  return -1;
}

/* The requested peers as a comma list into buf. */
static void peer_list(unsigned mask, char *buf, size_t size) {
  buf[0] = '\0';
  for (int i = 0; i < PEER_COUNT; i++)
    if (mask >> i & 1u) snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", buf[0] ? "," : "", PEER_NAMES[i]);
}

static int bench_parse(bench_args *a) {
  memset(a, 0, sizeof *a);
  a->json = cli_opt("--json") != NULL;
  uint64_t reps = 20, warmup = 3, chunk = 8192, seed = 0;
  /* Each returns CLI_PASS (0) or, having said why, CLI_USAGE. */
  if (cli_opt_uint("--reps", 10, 200, &reps) || cli_opt_uint("--warmup", 1, 100, &warmup) ||
      cli_opt_uint("--vocab-chunk", 1, LCE_MAX_DIM, &chunk) || cli_opt_uint("--seed", 0, 1u << 30, &seed))
    return CLI_USAGE;
  a->reps = (int)reps, a->warmup = (int)warmup, a->vocab_chunk = (int64_t)chunk, a->seed = seed;
  lce_status st;
  const char *shapes = cli_opt("--shapes"), *peers = cli_opt("--peers");
  if (shapes && lce_prod_parse_shape_list("--shapes", shapes, a->shapes, BENCH_MAX_SHAPES, &a->nshapes, &st) != LCE_OK)
    return cli_fail(CLI_USAGE, "%s", st.msg);
  if (peers && strcmp(peers, "all") == 0) a->peers = (1u << PEER_COUNT) - 1;
  else if (peers) {
    char buf[256], *items[PEER_COUNT + 1];
    int count;
    if (cli_split("--peers", peers, buf, sizeof buf, items, PEER_COUNT + 1, &count) != CLI_PASS) return CLI_USAGE;
    for (int k = 0; k < count; k++) {
      const int p = peer_index(items[k]);
      if (p < 0) {
        char known[256];
        peer_list((1u << PEER_COUNT) - 1, known, sizeof known);
        return cli_fail(CLI_USAGE, "--peers: unknown peer '%s' (known: %s, or all)", items[k], known);
      }
      if (a->peers >> p & 1u) return cli_fail(CLI_USAGE, "--peers: %s named twice", items[k]);
      a->peers |= 1u << p;
    }
  }
  a->python = cli_opt("--python") ? cli_opt("--python") : "python3";
  a->megatron = cli_opt("--megatron");
  a->render = cli_opt("--render");
  if ((cli_opt("--python") || a->megatron) && !peers)
    return cli_fail(CLI_USAGE, "--python and --megatron are for --peers only");
  if (a->render && (shapes || peers || cli_opt("--reps") || cli_opt("--warmup") || cli_opt("--vocab-chunk") ||
                    cli_opt("--seed")))
    return cli_fail(CLI_USAGE, "--render prints a saved run: give it alone (with --json at most)");
  if (a->nshapes == 0) {
    static const lce_prod_shape defaults[] = {{8192, 4096, 128256}, {4096, 4096, 262144}, {16384, 8192, 152064}};
    memcpy(a->shapes, defaults, sizeof defaults);
    a->nshapes = 3;
  }
  return CLI_PASS;
}

/* An error row for subject at shape s, saying why. */
static bench_row error_row(const lce_prod_shape *s, const char *subject, const char *process, const char *why) {
  bench_row row;
  memset(&row, 0, sizeof row);
  row.n = s->n, row.h = s->h, row.v = s->v;
  snprintf(row.subject, sizeof row.subject, "%s", subject);
  snprintf(row.process, sizeof row.process, "%s", process);
  snprintf(row.role, sizeof row.role, "%s", strcmp(subject, BENCH_FLOOR) == 0 ? "floor" : "subject");
  snprintf(row.status, sizeof row.status, "error");
  snprintf(row.reason, sizeof row.reason, "%s", why);
  row.fwd_ms = row.bwd_ms = row.total_ms = row.extra_bytes = NAN;
  return row;
}

/* ---- the peers' process ----------------------------------------------------------------------- */

/* `python bench_peers.py ...` with its stdout on stderr; its rows appended to rep. A process that
 * cannot run or gives no row for a requested peer adds error rows; *ok says whether it exited 0 and
 * its file was read. LCE_OK unless out of memory or the command cannot be formed. */
static lce_code run_peers(const bench_args *a, bench_report *rep, int *ok, lce_status *st) {
  char shapes[BENCH_MAX_SHAPES * 64] = "", path[1024], cmd[4096], why[48];
  for (int i = 0; i < a->nshapes; i++)
    snprintf(shapes + strlen(shapes), sizeof shapes - strlen(shapes), "%s%" PRId64 "x%" PRId64 "x%" PRId64,
             i ? "," : "", a->shapes[i].n, a->shapes[i].h, a->shapes[i].v);
  const char *tmp = getenv("TMPDIR");
  snprintf(path, sizeof path, "%s/lcecheck-bench-peers-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  const int fd = mkstemp(path);
  LCE_CHECK(st, fd >= 0, LCE_EIO, "bench: cannot create %s", path);
  close(fd);
  const char *quoted[] = {a->python, BENCH_PEERS_SCRIPT, a->megatron ? a->megatron : "", path};
  for (size_t k = 0; k < sizeof quoted / sizeof quoted[0]; k++)
    LCE_CHECK(st, strchr(quoted[k], '\'') == NULL, LCE_EINVAL, "bench: '%s' has a quote in it", quoted[k]);
  snprintf(cmd, sizeof cmd, "'%s' '%s' --shapes %s --peers %s --reps %d --warmup %d --seed %" PRIu64 "%s%s%s --json '%s' 1>&2",
           a->python, BENCH_PEERS_SCRIPT, shapes, rep->peers, a->reps, a->warmup, a->seed,
           a->megatron ? " --megatron '" : "", a->megatron ? a->megatron : "", a->megatron ? "'" : "", path);
  fprintf(stderr, "lcecheck bench: %s\n", cmd);
  fflush(stdout);
  fflush(stderr);
  const int status = system(cmd);
  const int exited = status != -1 && WIFEXITED(status), code = exited ? WEXITSTATUS(status) : -1;
  if (exited) snprintf(why, sizeof why, "exit status %d", code);
  else snprintf(why, sizeof why, "%s", status == -1 ? "could not be started" : "killed by a signal");
  snprintf(rep->peer_env, sizeof rep->peer_env, "%s", why);
  lce_json j;
  lce_status jst;
  lce_status_clear(&jst);
  const size_t before = rep->count;
  if (lce_json_load(path, &j, &jst) == LCE_OK) {
    const lce_json *torch = lce_json_get(&j, "torch"), *py = lce_json_get(&j, "python");
    if (torch && torch->type == LCE_JSON_STRING && py && py->type == LCE_JSON_STRING)
      snprintf(rep->peer_env, sizeof rep->peer_env, "torch %.40s, python %.20s; %s", torch->string[0] ? torch->string : "-",
               py->string, why);
    if (bench_rows_read(lce_json_get(&j, "rows"), path, rep, &jst) != LCE_OK) rep->count = before;
    lce_json_free(&j);
  }
  if (jst.code != LCE_OK) snprintf(rep->peer_env, sizeof rep->peer_env, "%s; %.100s", why, jst.msg);
  remove(path);
  *ok = exited && code == 0 && jst.code == LCE_OK;
  /* Every (shape, requested peer) without a row: an error row naming the process's end. */
  char msg[320];
  snprintf(msg, sizeof msg, "no row from the peers' process (%s%s%.200s)", why, jst.code != LCE_OK ? "; " : "",
           jst.code != LCE_OK ? jst.msg : "");
  for (int i = 0; i < a->nshapes; i++)
    for (int p = -1; p < PEER_COUNT; p++) {
      if (p >= 0 && !(a->peers >> p & 1u)) continue;
      const char *name = p < 0 ? BENCH_FLOOR : PEER_NAMES[p];
      int found = 0;
      for (size_t k = before; k < rep->count && !found; k++) {
        const bench_row *r = &rep->rows[k];
        found = r->n == a->shapes[i].n && r->h == a->shapes[i].h && r->v == a->shapes[i].v &&
                strcmp(r->process, "python") == 0 && strcmp(r->subject, name) == 0;
      }
      if (!found) {
        const bench_row row = error_row(&a->shapes[i], name, "python", msg);
        LCE_TRY(bench_report_add(rep, &row, st));
      }
    }
  return LCE_OK;
}

/* ---- this process ----------------------------------------------------------------------------- */

#ifdef LCE_WITH_CUDA
/* Runs fused-cuda and the floor at every shape: their rows, or an error row each for a shape that
 * failed. Returns CLI_PASS, CLI_FAIL (a shape failed) or CLI_SKIP (no device, after cli_fail). */
static int run_own(const bench_args *a, bench_report *rep, lce_status *st) {
  int rc = CLI_PASS;
  for (int i = 0; i < a->nshapes; i++) {
    const lce_prod_shape *s = &a->shapes[i];
    fprintf(stderr, "lcecheck bench: %" PRId64 "x%" PRId64 "x%" PRId64 ": fused-cuda and cuBLAS\n", s->n, s->h, s->v);
    lce_cuda_bench_config cfg = {s->n, s->h, s->v, a->vocab_chunk, a->warmup, a->reps,
                                 a->seed + 1000u * (uint64_t)(i + 1), NULL};
#ifdef LCE_WITH_SM90
    cfg.engine = &lce_fused_sm90_bench_engine; /* timed after fused-cuda, on the same inputs */
#endif
    lce_cuda_bench_result res;
    lce_status rs;
    lce_status_clear(&rs);
    if (lce_cuda_bench_run(&cfg, &res, &rs) != LCE_OK) {
      if (rs.code == LCE_ENODEV) return cli_fail(CLI_SKIP, "%s: skipped", rs.msg);
      char why[320];
      snprintf(why, sizeof why, "%.250s (%s:%d)", rs.msg, rs.file ? rs.file : "?", rs.line);
      const bench_row e1 = error_row(s, BENCH_FLOOR, "lcecheck", why), e2 = error_row(s, "fused-cuda", "lcecheck", why);
      if (bench_report_add(rep, &e1, st) != LCE_OK || bench_report_add(rep, &e2, st) != LCE_OK)
        return cli_fail(CLI_FAIL, "%s", st->msg);
      rc = CLI_FAIL;
      continue;
    }
    snprintf(rep->device, sizeof rep->device, "%s", res.device);
    bench_row fl = error_row(s, BENCH_FLOOR, "lcecheck", ""), fc = error_row(s, "fused-cuda", "lcecheck", "");
    snprintf(fl.status, sizeof fl.status, "ran");
    snprintf(fc.status, sizeof fc.status, "ran");
    fl.fwd_ms = res.gemm_ms[0], fl.bwd_ms = res.gemm_ms[2] + res.gemm_ms[3], fl.total_ms = res.gemm3_total_ms;
    snprintf(fl.note, sizeof fl.note, "cuBLAS bf16 in, fp32 out; the logits GEMM again %.2f ms (fused-cuda's "
             "recomputation: four GEMMs %.2f ms)", res.gemm_ms[1], res.gemm_total_ms);
    fc.fwd_ms = res.fwd_ms, fc.bwd_ms = res.bwd_ms, fc.total_ms = res.fwd_ms + res.bwd_ms;
    fc.extra_bytes = res.workspace_bytes;
    snprintf(fc.note, sizeof fc.note, "vocab chunk %" PRId64 "; free device memory fell %.3f GB; mean loss %.4f",
             a->vocab_chunk, res.measured_extra_bytes / 1e9, res.loss_mean);
    if (bench_report_add(rep, &fl, st) != LCE_OK || bench_report_add(rep, &fc, st) != LCE_OK)
      return cli_fail(CLI_FAIL, "%s", st->msg);
#ifdef LCE_WITH_SM90
    bench_row fs = error_row(s, "fused-sm90", "lcecheck", res.engine_ran ? "" : res.engine_error);
    if (res.engine_ran) {
      snprintf(fs.status, sizeof fs.status, "ran");
      fs.fwd_ms = res.engine_fwd_ms, fs.bwd_ms = res.engine_bwd_ms, fs.total_ms = res.engine_fwd_ms + res.engine_bwd_ms;
      fs.extra_bytes = res.engine_workspace_bytes;
      snprintf(fs.note, sizeof fs.note, "%.84s; free memory fell %.3f GB; loss %.4f; vs fused-cuda: lse %.1e, "
               "d_hidden %.1e, d_weight %.1e", res.engine_note, res.engine_measured_extra_bytes / 1e9,
               res.engine_loss_mean, res.engine_lse_maxdiff, res.engine_dhidden_reldiff, res.engine_gradw_reldiff);
    } else {
      rc = CLI_FAIL;
    }
    if (bench_report_add(rep, &fs, st) != LCE_OK) return cli_fail(CLI_FAIL, "%s", st->msg);
#endif
  }
  return rc;
}
#endif

static int finish(const bench_args *a, const bench_report *rep, int rc) {
  if (a->json) {
    cli_json_begin();
    bench_report_json(rep);
  } else {
    bench_report_text(rep);
  }
  return rc;
}

int cli_bench(void) {
  bench_args a;
  int rc = bench_parse(&a);
  if (rc != CLI_PASS) return rc;
  bench_report rep;
  memset(&rep, 0, sizeof rep);
  lce_status st;
  lce_status_clear(&st);
  if (a.render) {
    if (bench_report_load(a.render, &rep, &st) != LCE_OK) {
      bench_report_free(&rep);
      return cli_fail(CLI_USAGE, "--render: %s", st.msg);
    }
    rc = finish(&a, &rep, CLI_PASS);
    bench_report_free(&rep);
    return rc;
  }
#ifndef LCE_WITH_CUDA
  return cli_fail(CLI_SKIP, "this build has no fused-cuda (configured without a CUDA compiler): skipped");
#else
  char why[256];
  if (!lce_device_query(NULL, why, sizeof why)) return cli_fail(CLI_SKIP, "%s: skipped", why);
  rep.reps = a.reps, rep.warmup = a.warmup, rep.vocab_chunk = a.vocab_chunk, rep.seed = a.seed;
  peer_list(a.peers, rep.peers, sizeof rep.peers);
  rc = run_own(&a, &rep, &st);
  if (rc == CLI_SKIP) {
    bench_report_free(&rep);
    return rc;
  }
  int peers_ok = 1;
  if (a.peers && run_peers(&a, &rep, &peers_ok, &st) != LCE_OK) {
    bench_report_free(&rep);
    return cli_fail(CLI_FAIL, "%s", st.msg);
  }
  if (!peers_ok) rc = CLI_FAIL;
  rc = finish(&a, &rep, rc);
  bench_report_free(&rep);
  return rc;
#endif
}
