/* cli_judge.c — `lcecheck judge`: the outputs a runner wrote into an exported directory, judged by the
 * engine exactly as `check` judges a built-in subject (the same class checks, metrics, golden bounds,
 * report and exit status). The cases are the manifest's; each case's inputs are regenerated from its
 * id and must be bit-identical to the exported files (lce_exchange_load_answer). A malformed export
 * (manifest.json or a case.json) is bad input: exit 2, naming the file. */
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "lce_exchange.h"
#include "lce_exec_subject.h"

int cli_judge(void) {
  cli_args a;
  int rc = cli_parse_args(&a);
  if (rc != CLI_PASS) return rc;
  if (a.dir == NULL || a.subject_name == NULL || a.golden_class == NULL)
    return cli_fail(CLI_USAGE, CLI_EXCHANGE_REQUIRED); /* cli_subject would take fused-host without them */
  const lce_subject *s = cli_subject(&a);
  if (s == NULL) return CLI_USAGE;
  lce_golden g;
  memset(&g, 0, sizeof g);
  char golden_path[512] = "";
  if ((rc = cli_load_golden(&a, s, &g, golden_path, sizeof golden_path)) != CLI_PASS) return rc;
  const lce_exchange_dir *d = lce_exchange_subject_dir(s);
  lce_case *cases = calloc(d->count ? d->count : 1, sizeof *cases);
  if (cases == NULL) rc = cli_fail(CLI_FAIL, "out of memory");
  else {
    for (size_t i = 0; i < d->count; i++) cases[i] = d->cases[i].c;
    rc = cli_check_report(&a, "judge", s, &g, golden_path, "dir", a.dir, cases, d->count);
  }
  free(cases);
  lce_golden_free(&g);
  return rc;
}
