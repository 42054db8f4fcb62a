/* lce_exec_subject.c — the exchange subjects of lce_exec_subject.h: one context per subject holding
 * the exported directory, and one run function that loads a case's answer from it. */
#define _XOPEN_SOURCE 700 /* mkdtemp, fork, strdup */
#include "lce_exec_subject.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lce_exchange.h"

typedef struct exchange_subject {
  lce_subject subject; /* first: the lce_subject * handed out is this struct */
  char *name, *golden_class, *cmd, *dir;
  char *repro_args;    /* the exchange door's: --dir D --subject-name N --golden-class C (lce_subject.h) */
  int temporary;       /* dir was made by prepare: removed at close */
  lce_exchange_dir export;
} exchange_subject;

static lce_code run_answer(void *ctx, const lce_case *c, const lce_tensors *in, lce_outputs *out, lce_status *st) {
  const exchange_subject *x = ctx;
  char id[192];
  lce_case_format(c, id, sizeof id);
  LCE_CHECK(st, x->export.root != NULL, LCE_EINVAL, "%s: no exported directory (the command did not run)", x->name);
  const lce_exchange_case *e = lce_exchange_find(&x->export, id);
  LCE_CHECK(st, e != NULL, LCE_EINVAL, "case %s is not in %s/manifest.json", id, x->export.root);
  return lce_exchange_load_answer(e, c, in, out, st);
}

static exchange_subject *make(const char *name, const char *golden_class, lce_status *st) {
  exchange_subject *x = calloc(1, sizeof *x);
  if (x == NULL || (x->name = strdup(name)) == NULL || (x->golden_class = strdup(golden_class)) == NULL) {
    if (x) free(x->name);
    free(x);
    lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory making subject %s", name);
    return NULL;
  }
  x->subject.name = x->name;
  x->subject.golden_class = x->golden_class;
  x->subject.description = "outputs written by a runner through the exchange format (scripts/subjects/EXCHANGE.md)";
  x->subject.caps = LCE_CAP_ALL_SEMANTICS;
  x->subject.ctx = x;
  x->subject.run_ctx = run_answer;
  return x;
}

/* 1 when $LCE_KEEP_EXCHANGE=1: exec:'s temporary directory is kept at close (its path printed). */
static int keep_exchange(void) {
  const char *keep = getenv("LCE_KEEP_EXCHANGE");
  return keep && strcmp(keep, "1") == 0;
}

void lce_exec_subject_close(lce_subject *s) {
  if (s == NULL) return;
  exchange_subject *x = (exchange_subject *)s;
  lce_exchange_close(&x->export);
  if (x->temporary && x->dir) {
    lce_status st;
    lce_status_clear(&st);
    if (keep_exchange()) fprintf(stderr, "lcecheck: exec: exchange directory kept: %s\n", x->dir);
    else if (lce_exchange_remove_tree(x->dir, &st) != LCE_OK) fprintf(stderr, "lcecheck: exec: %s\n", st.msg);
  }
  free(x->name);
  free(x->golden_class);
  free(x->cmd);
  free(x->dir);
  free(x->repro_args);
  free(x);
}

lce_subject *lce_exchange_subject_open(const char *dir, const char *name, const char *golden_class, lce_status *st) {
  exchange_subject *x = make(name, golden_class, st);
  if (x == NULL) return NULL;
  /* repro's options for this subject: the directory absolute, so that the line works from the repository
   * root that its build/lcecheck assumes */
  char *abs = realpath(dir, NULL);
  const char *flags[3] = {"--dir", "--subject-name", "--golden-class"}, *values[3] = {abs ? abs : dir, name, golden_class};
  size_t n = 1;
  for (int i = 0; i < 3; i++) n += strlen(flags[i]) + 2 + lce_shell_quote(values[i], NULL, 0);
  if ((x->repro_args = malloc(n)) != NULL)
    for (size_t i = 0, o = 0; i < 3; i++) { /* "--dir D --subject-name N --golden-class C", each value one word */
      o += (size_t)snprintf(x->repro_args + o, n - o, "%s%s ", i ? " " : "", flags[i]);
      o += lce_shell_quote(values[i], x->repro_args + o, n - o);
    }
  free(abs);
  if (x->repro_args == NULL) {
    lce_exec_subject_close(&x->subject);
    lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory making subject %s", name);
    return NULL;
  }
  x->subject.repro_args = x->repro_args;
  if (lce_exchange_open(dir, &x->export, st) != LCE_OK) {
    lce_exec_subject_close(&x->subject);
    return NULL;
  }
  return &x->subject;
}

/* ---- exec:CMD --------------------------------------------------------------------------------- */

/* `cmd <dir quoted>` through /bin/sh -c, its stdout sent to stderr; LCE_OK only for exit status 0. */
static lce_code run_command(const char *cmd, const char *dir, lce_status *st) {
  size_t n = strlen(cmd) + lce_shell_quote(dir, NULL, 0) + 2;
  char *line = malloc(n);
  LCE_ALLOC_CHECK(st, line);
  const size_t c = (size_t)snprintf(line, n, "%s ", cmd);
  lce_shell_quote(dir, line + c, n - c);
  fprintf(stderr, "lcecheck: exec: /bin/sh -c \"%s\"\n", line);
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(STDERR_FILENO, STDOUT_FILENO);
    execl("/bin/sh", "sh", "-c", line, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  const int waited = pid > 0 && waitpid(pid, &status, 0) == pid;
  lce_code rc = LCE_OK;
  if (!waited) rc = lce_fail(st, LCE_EINTERNAL, __FILE__, __LINE__, "exec: cannot run %s: %s", line, strerror(errno));
  else if (WIFSIGNALED(status))
    rc = lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "exec: `%s` was killed by signal %d", line, WTERMSIG(status));
  else if (WEXITSTATUS(status) != 0)
    rc = lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "exec: `%s` exited with status %d%s", line, WEXITSTATUS(status),
                  WEXITSTATUS(status) == 127 ? " (command not found?)" : "");
  free(line);
  return rc;
}

/* Every case the engine will run, exported into a fresh directory, answered by the command once. */
static lce_code prepare_exec(void *ctx, const lce_case *cases, size_t n, lce_status *st) {
  exchange_subject *x = ctx;
  lce_exchange_close(&x->export);
  if (x->dir) { /* a second loop over the same subject gets a fresh export */
    LCE_TRY(lce_exchange_remove_tree(x->dir, st));
    free(x->dir);
    x->dir = NULL;
  }
  const char *tmp = getenv("TMPDIR");
  char templ[1024];
  snprintf(templ, sizeof templ, "%s/lcecheck-exchange-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  LCE_CHECK(st, mkdtemp(templ) != NULL, LCE_EIO, "exec: cannot create %s: %s", templ, strerror(errno));
  x->dir = strdup(templ);
  LCE_ALLOC_CHECK(st, x->dir);
  x->temporary = 1;
  fprintf(stderr, "lcecheck: exec: exporting %zu case%s to %s\n", n, n == 1 ? "" : "s", x->dir);
  LCE_TRY(lce_exchange_export(x->dir, cases, n, NULL, stderr, st));
  if (run_command(x->cmd, x->dir, st) != LCE_OK) { /* the directory goes at close: say how to keep it */
    if (!keep_exchange())
      snprintf(st->msg + strlen(st->msg), sizeof st->msg - strlen(st->msg), " (LCE_KEEP_EXCHANGE=1 keeps the directory)");
    return st->code;
  }
  return lce_exchange_open(x->dir, &x->export, st);
}

lce_subject *lce_exec_subject_open(const char *cmd, lce_status *st) {
  if (cmd == NULL || cmd[strspn(cmd, " \t")] == '\0') {
    lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "exec: no command (exec:CMD runs `CMD <exported dir>`)");
    return NULL;
  }
  const char *cls = getenv("LCE_EXEC_GOLDEN_CLASS");
  char name[1024];
  snprintf(name, sizeof name, "%s%s", LCE_EXEC_PREFIX, cmd);
  exchange_subject *x = make(name, cls && *cls ? cls : "fused-host", st);
  if (x == NULL) return NULL;
  if ((x->cmd = strdup(cmd)) == NULL) {
    lce_exec_subject_close(&x->subject);
    lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory");
    return NULL;
  }
  x->subject.prepare = prepare_exec;
  return &x->subject;
}

const lce_exchange_dir *lce_exchange_subject_dir(const lce_subject *s) { return &((const exchange_subject *)s)->export; }
