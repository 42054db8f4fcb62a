/* lce_exec_subject.h — subjects whose outputs come from a runner in any language through the
 * exchange format (lce_exchange.h, scripts/subjects/EXCHANGE.md), judged like any built-in subject.
 *
 *   lce_exchange_subject_open  a directory a runner has already answered (lcecheck judge)
 *   lce_exec_subject_open      exec:CMD — prepare() exports every case the engine will run into a
 *                              fresh temporary directory, runs `CMD <dir>` once through /bin/sh -c
 *                              (the command printed on stderr, the runner's stdout sent to stderr
 *                              so that --json stays one object), and each run loads that case's
 *                              answer. The directory is removed at close unless LCE_KEEP_EXCHANGE=1
 *                              (then its path is printed). Golden class: $LCE_EXEC_GOLDEN_CLASS,
 *                              default fused-host (pick the golden file with --golden).
 *
 * Both are judged with lce_inner_unchunked K (an outside kernel's chunking is unknown: the loosest
 * K term), declare every capability (a runner skips what its kernel cannot do, visibly, with
 * out/skip.txt) and are released with lce_exec_subject_close. */
#ifndef LCE_EXEC_SUBJECT_H
#define LCE_EXEC_SUBJECT_H

#include "lce_subject.h"

#define LCE_EXEC_PREFIX "exec:"

lce_subject *lce_exchange_subject_open(const char *dir, const char *name, const char *golden_class, lce_status *st);
lce_subject *lce_exec_subject_open(const char *cmd, lce_status *st);
void lce_exec_subject_close(lce_subject *s);
/* The exported directory subject s reads (for exec:CMD, after prepare; before, an empty one). */
const struct lce_exchange_dir *lce_exchange_subject_dir(const lce_subject *s);

#endif
