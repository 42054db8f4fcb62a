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

const lce_subject *lce_subject_resolve_exchange(const char *dir, const char *name, const char *golden_class,
                                                lce_status *st) {
  return own(lce_exchange_subject_open(dir, name, golden_class, st), lce_exec_subject_close, st);
}

/* ---- the way back: a subject to the command that makes it again ----------------------------- */

size_t lce_shell_quote(const char *s, char *buf, size_t size) {
  const char *safe = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:,=+@%#";
  /* '#' first would start a comment, '=' first is zsh's EQUALS expansion */
  if (*s != '\0' && strspn(s, safe) == strlen(s) && *s != '#' && *s != '=') {
    snprintf(buf, size, "%s", s);
    return strlen(s);
  }
  size_t o = 0;
#define PUT(ch) (o + 1 < size ? (void)(buf[o] = (ch)) : (void)0, o++)
  PUT('\'');
  for (; *s; s++) {
    if (*s == '\'') { /* close, an escaped quote, reopen */
      PUT('\'');
      PUT('\\');
      PUT('\'');
    }
    PUT(*s);
  }
  PUT('\'');
#undef PUT
  if (size) buf[o < size ? o : size - 1] = '\0';
  return o;
}

void lce_subject_repro_line(const lce_subject *s, const char *options, const char *case_id, char *buf, size_t size) {
  char name[1100];
  const char *subject = s->repro_args;
  if (subject == NULL) {
    snprintf(name, sizeof name, "--subject ");
    if (lce_shell_quote(s->name, name + 10, sizeof name - 10) >= sizeof name - 10) name[0] = '\0';
    subject = name;
  }
  const int n = subject[0] ? snprintf(buf, size, "build/lcecheck repro %s%s%s %s", subject, options ? " " : "",
                                      options ? options : "", case_id)
                           : -1;
  if (n < 0 || (size_t)n >= size) /* never a cut line: it would rerun something else */
    snprintf(buf, size, "(the repro command is longer than %zu characters: lcecheck repro with this subject, the same "
             "options and case %s)", size - 1, case_id);
}
