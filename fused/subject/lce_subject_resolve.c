/* lce_subject_resolve.c — a --subject spec to a subject: a registry name, or a subject made at run
 * time (plugin:PATH[#NAME], exec:CMD). Subjects made here are owned here and released at exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lce_exec_subject.h"
#include "lce_plugin.h"
#include "lce_subject.h"

/* One subject made at run time, and how to release it. */
typedef struct owned_subject {
  lce_subject *subject;
  void (*close)(lce_subject *s);
  struct owned_subject *next;
} owned_subject;

static owned_subject *owned; /* newest first */

static void release_owned(void) {
  while (owned) {
    owned_subject *o = owned;
    owned = o->next;
    o->close(o->subject);
    free(o);
  }
}

static const lce_subject *own(lce_subject *s, void (*close)(lce_subject *), lce_status *st) {
  static int registered;
  if (s == NULL) return NULL;
  owned_subject *o = malloc(sizeof *o);
  if (o == NULL || (!registered && atexit(release_owned) != 0)) {
    free(o);
    close(s);
    lce_fail(st, LCE_ENOMEM, __FILE__, __LINE__, "out of memory keeping subject");
    return NULL;
  }
  registered = 1;
  *o = (owned_subject){s, close, owned};
  owned = o;
  return s;
}

static int has_prefix(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

const lce_subject *lce_subject_resolve(const char *spec, lce_status *st) {
  if (spec == NULL) {
    lce_fail(st, LCE_EINVAL, __FILE__, __LINE__, "no subject named");
    return NULL;
  }
  const lce_subject *s = lce_subject_find(spec);
  if (s) return s;
  if (has_prefix(spec, LCE_PLUGIN_PREFIX)) return own(lce_plugin_open(spec + strlen(LCE_PLUGIN_PREFIX), st), lce_plugin_close, st);
  if (has_prefix(spec, LCE_EXEC_PREFIX))
    return own(lce_exec_subject_open(spec + strlen(LCE_EXEC_PREFIX), st), lce_exec_subject_close, st);
  /* The subjects by name and the mutants (names with a '/') by count: the whole list outgrows a
   * status message, and `lcecheck list` prints it. */
  char known[512] = "";
  size_t mutants = 0;
  for (size_t i = 0; i < lce_subject_count(); i++) {
    const char *name = lce_subject_at(i)->name;
    if (strchr(name, '/')) mutants++;
    else snprintf(known + strlen(known), sizeof known - strlen(known), " %s", name);
  }
  lce_fail(st, LCE_EINVAL, __FILE__, __LINE__,
           "unknown subject '%s'; known subjects:%s, %zu mutants (lcecheck list); or plugin:PATH[#NAME], exec:CMD", spec,
           known, mutants);
  return NULL;
}
