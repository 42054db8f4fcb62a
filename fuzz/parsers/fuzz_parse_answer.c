/* fuzz_parse_answer.c — a runner's answer to an exported case (lce_exchange_load_answer,
 * fused/subject/lce_exchange_answer.c) through the judge, on fuzzed output files. One fixed small case
 * is exported once into a private temporary directory D; each input is a sequence of sections
 *   "--- NAME\n" CONTENT
 * (a section starts at the input's start or after a newline and runs to the next one), NAME one of
 * meta.json, skip.txt or an output file (loss.npy, loss_token.npy, lse.npy, d_hidden.npy,
 * grad_embedding.npy, grad_weight.npy); each becomes D/<case>/out/NAME, the others are removed.
 * The exchange subject then answers the case and the engine judges it against the fused-host golden.
 * Properties: no crash, leak or unbounded allocation; an error names a file under D (or is the
 * runner's own reported error); a skip comes only from skip.txt; a judged output whose file is
 * absent fails its class check naming out/<name>.npy, and a class failure that names an output file
 * names its own. */
#define _GNU_SOURCE /* memmem, mkdtemp */
#include "fuzz_parse.h"
#include "lce_engine.h"
#include "lce_exchange.h"
#include "lce_exec_subject.h"
#include "lce_file.h"
#include "lce_fuzz_session.h"

#include <sys/stat.h>

/* Small, untied (every output exists), with every option the judge treats specially left at its default. */
#define FUZZ_ANSWER_CASE "bf16.untied.tp1.n4.h8.v40.vp48.vc16.mean.ign5.fresh.normal.s1"
#define FUZZ_ANSWER_FILES 8

static struct {
  char root[256], out_dir[LCE_EXCHANGE_MAX_PATH + 8];
  lce_case c;
  lce_subject *subject;
  lce_golden golden;
  const char *files[FUZZ_ANSWER_FILES];
  char file_names[FUZZ_ANSWER_FILES][48];
  lce_output_id file_output[FUZZ_ANSWER_FILES]; /* LCE_OUT_COUNT for meta.json and skip.txt */
  size_t nfiles;
} g;

static void setup_fail(const lce_status *st) {
  fprintf(stderr, "fuzz_parse_answer: %s (%s:%d)\n", st->msg, st->file ? st->file : "?", st->line);
  abort();
}

static void teardown(void) {
  lce_status st;
  lce_status_clear(&st);
  lce_exec_subject_close(g.subject);
  lce_golden_free(&g.golden);
  (void)lce_exchange_remove_tree(g.root, &st);
}

/* D with the case exported into it, the subject answering from it and its golden. */
static void setup(void) {
  lce_status st;
  lce_status_clear(&st);
  lce_fuzz_use_bundled_goldens();
  const char *tmp = getenv("TMPDIR");
  snprintf(g.root, sizeof g.root, "%s/lce-fuzz-answer-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (mkdtemp(g.root) == NULL) {
    perror(g.root);
    abort();
  }
  if (lce_case_parse(FUZZ_ANSWER_CASE, &g.c, &st) != LCE_OK) setup_fail(&st);
  if (lce_exchange_export(g.root, &g.c, 1, NULL, stderr, &st) != LCE_OK) setup_fail(&st);
  g.subject = lce_exchange_subject_open(g.root, "fuzz-answer", "fused-host", &st);
  if (g.subject == NULL) setup_fail(&st);
  atexit(teardown);
  char path[512];
  lce_subject_golden_path(g.subject, path, sizeof path);
  if (lce_golden_load(path, &g.golden, &st) != LCE_OK) setup_fail(&st);
  snprintf(g.out_dir, sizeof g.out_dir, "%s/out", lce_exchange_subject_dir(g.subject)->cases[0].dir);
  if (mkdir(g.out_dir, 0777) != 0) {
    perror(g.out_dir);
    abort();
  }
  lce_exchange_tensor t[8];
  const size_t n = lce_exchange_outputs(&g.c, t);
  snprintf(g.file_names[0], sizeof g.file_names[0], "meta.json");
  snprintf(g.file_names[1], sizeof g.file_names[1], "skip.txt");
  g.file_output[0] = g.file_output[1] = LCE_OUT_COUNT;
  g.nfiles = 2;
  for (size_t i = 0; i < n; i++, g.nfiles++) {
    snprintf(g.file_names[g.nfiles], sizeof g.file_names[g.nfiles], "%s.npy", t[i].name);
    g.file_output[g.nfiles] = t[i].output;
  }
}

/* The sections of the input into out/; returns a bit per file written (index into g.file_names). */
static unsigned write_sections(const char *text, size_t size) {
  unsigned written = 0;
  const char *p = text, *end = text + size;
  while (p < end) {
    const char *line = (p == text && size >= 4 && memcmp(p, "--- ", 4) == 0) ? p : memmem(p, (size_t)(end - p), "\n--- ", 5);
    if (line == NULL) break;
    if (line != text || p != text) line++;
    const char *name = line + 4, *nl = memchr(name, '\n', (size_t)(end - name));
    if (nl == NULL) break;
    const char *body = nl + 1, *next = memmem(body, (size_t)(end - body), "\n--- ", 5);
    const char *body_end = next ? next : end;
    for (size_t i = 0; i < g.nfiles; i++) {
      if ((size_t)(nl - name) != strlen(g.file_names[i]) || memcmp(name, g.file_names[i], (size_t)(nl - name)) != 0)
        continue;
      char path[LCE_EXCHANGE_MAX_PATH + 64];
      snprintf(path, sizeof path, "%s/%s", g.out_dir, g.file_names[i]);
      lce_status st;
      lce_status_clear(&st);
      if (lce_file_replace(path, body, (size_t)(body_end - body), &st) != LCE_OK) setup_fail(&st);
      written |= 1u << i;
    }
    p = body_end;
  }
  for (size_t i = 0; i < g.nfiles; i++) {
    if (written >> i & 1u) continue;
    char path[LCE_EXCHANGE_MAX_PATH + 64];
    snprintf(path, sizeof path, "%s/%s", g.out_dir, g.file_names[i]);
    (void)remove(path);
  }
  return written;
}

static void keep_result(void *ctx, const lce_engine_case *ec) { *(lce_case_result *)ctx = ec->res[0]; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (g.subject == NULL) setup();
  const unsigned written = write_sections((const char *)data, size);
  lce_case_result r;
  memset(&r, 0, sizeof r);
  lce_status st;
  lce_status_clear(&st);
  const lce_golden *golden = &g.golden;
  const lce_subject *subject = g.subject;
  const lce_engine_config cfg = {.cases = &g.c, .ncases = 1, .subjects = &subject, .goldens = &golden,
                                 .nsubjects = 1, .repeat = 1};
  if (lce_engine_run(&cfg, keep_result, &r, &st) != LCE_OK) r.error = 1, r.status = st;
  if (r.skipped) {
    if (!(written >> 1 & 1u)) FUZZ_VIOLATION("skipped without a skip.txt: %s", r.status.msg);
    return 0;
  }
  if (r.error) {
    const char *msg = r.status.msg;
    if (msg[0] == '\0') FUZZ_VIOLATION("error (%s) without a message", lce_code_name(r.status.code));
    if (r.status.code != LCE_ENOMEM && strstr(msg, g.root) == NULL && strstr(msg, "the runner reported an error") == NULL)
      FUZZ_VIOLATION("error that names no file of the answer: %s", msg);
    return 0;
  }
  if (r.nondeterministic) FUZZ_VIOLATION("the same files judged twice differ: %s", r.nondeterminism);
  for (size_t i = 2; i < g.nfiles; i++) {
    const lce_output_verdict *ov = &r.verdict.out[g.file_output[i]];
    char own[64];
    snprintf(own, sizeof own, "out/%s", g.file_names[i]);
    if (!ov->judged) continue;
    if (!(written >> i & 1u) && (ov->class_ok || strstr(ov->class_msg, own) == NULL))
      FUZZ_VIOLATION("%s absent, yet its output was judged without naming it (%s)", own,
                     ov->class_ok ? "class ok" : ov->class_msg);
    if (!ov->class_ok && strstr(ov->class_msg, "out/") != NULL && strstr(ov->class_msg, own) == NULL)
      FUZZ_VIOLATION("the class failure of %s names another file: %s", own, ov->class_msg);
  }
  return 0;
}
