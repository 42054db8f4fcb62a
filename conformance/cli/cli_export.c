/* cli_export.c — `lcecheck export`: the cases of a matrix, or one case, written into a directory in
 * the exchange format (scripts/subjects/EXCHANGE.md), for a runner in any language to answer and
 * `lcecheck judge` to judge. Progress on stderr, a table of what was written on stdout (or one JSON
 * object). A non-empty directory is refused unless it holds an earlier export, which is replaced
 * (and said so). */
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "lce_exchange.h"

/* Bytes of the input files of case c (their data; headers are 128 bytes at most each). */
static int64_t input_bytes(const lce_case *c) {
  lce_exchange_tensor t[8];
  const size_t n = lce_exchange_inputs(c, NULL, t);
  int64_t bytes = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t count = t[i].shape[0] * (t[i].ndim == 2 ? t[i].shape[1] : 1);
    bytes += count * (int64_t)lce_npy_item_size(t[i].descr);
  }
  return bytes;
}

int cli_export(void) {
  cli_args a;
  int rc = cli_parse_args(&a);
  if (rc != CLI_PASS) return rc;
  if (a.dir == NULL) return cli_fail(CLI_USAGE, "--dir D is required (where the cases are written)");
  if (a.matrix == NULL && a.case_id == NULL) return cli_fail(CLI_USAGE, "give --matrix M or --case ID");
  lce_case *cases = NULL;
  size_t n = 0;
  if ((rc = cli_cases(&a, &cases, &n)) != CLI_PASS) return rc;
  lce_status st;
  lce_status_clear(&st);
  if (lce_exchange_export(a.dir, cases, n, a.quiet ? NULL : stderr, stderr, &st) != LCE_OK) {
    free(cases);
    return cli_fail(st.code == LCE_EINVAL ? CLI_USAGE : CLI_FAIL, "%s", st.msg);
  }
  /* What was written, per dtype: the cases, how many untied, the input bytes. */
  size_t count[LCE_DTYPE_COUNT] = {0}, untied[LCE_DTYPE_COUNT] = {0};
  int64_t bytes[LCE_DTYPE_COUNT] = {0}, total = 0;
  for (size_t i = 0; i < n; i++) {
    const lce_dtype d = cases[i].dtype;
    count[d]++;
    untied[d] += !cases[i].tied;
    bytes[d] += input_bytes(&cases[i]);
    total += input_bytes(&cases[i]);
  }
  const char *scope_key = a.case_id ? "case" : "matrix", *scope = a.case_id ? a.case_id : a.matrix;
  if (a.json) {
    cli_json_begin();
    printf(",\"status\":\"ok\",\"exit\":0");
    cli_json_member(stdout, "dir", a.dir);
    cli_json_member(stdout, scope_key, scope);
    printf(",\"cases\":%zu,\"input_bytes\":%lld,\"format\":\"lcecheck-exchange\",\"version\":%d}\n", n, (long long)total,
           LCE_EXCHANGE_VERSION);
  } else {
    printf("lcecheck export: %s %s, %zu case%s into %s (manifest.json, one directory per case)\n\n", scope_key, scope, n,
           n == 1 ? "" : "s", a.dir);
    printf("%-6s %7s %7s %14s\n", "dtype", "cases", "untied", "input bytes");
    for (int d = 0; d < LCE_DTYPE_COUNT; d++)
      if (count[d]) printf("%-6s %7zu %7zu %14lld\n", lce_dtype_name((lce_dtype)d), count[d], untied[d], (long long)bytes[d]);
    char qdir[1100];
    if (lce_shell_quote(a.dir, qdir, sizeof qdir) >= sizeof qdir) snprintf(qdir, sizeof qdir, "D");
    printf("%-6s %7zu %7s %14lld\n\nnext: run the kernel over %s (scripts/subjects/EXCHANGE.md), then\n"
           "  build/lcecheck judge --dir %s --subject-name NAME --golden-class CLASS\n",
           "all", n, "", (long long)total, a.dir, qdir);
  }
  free(cases);
  return CLI_PASS;
}
