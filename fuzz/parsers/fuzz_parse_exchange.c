/* fuzz_parse_exchange.c — the exchange directory loader (lce_exchange_open, fused/subject/lce_exchange.h)
 * on fuzzed files. The input is a manifest.json, optionally followed by the separator line
 * FUZZ_CASE_JSON_SEP and the text of a case.json; the harness writes them into a private temporary
 * directory D as D/manifest.json and D/c/case.json (a manifest entry with "dir": "c" reads it) and
 * opens D. Accepted: every case id parses, the case's directory lies under D, its case.json is exactly
 * what the id says, the ids are distinct and findable, and the count is the manifest's. Refused: a
 * message that names the file or directory at fault (a path under D). */
#define _GNU_SOURCE /* memmem, mkdtemp */
#include "fuzz_parse.h"
#include "lce_exchange.h"
#include "lce_file.h"

#include <sys/stat.h>

#define FUZZ_CASE_JSON_SEP "\n--- case.json\n"

static char fuzz_dir[256];

static void remove_fuzz_dir(void) {
  lce_status st;
  lce_status_clear(&st);
  (void)lce_exchange_remove_tree(fuzz_dir, &st);
}

/* D, created on the first call and removed when the process exits. */
static const char *fuzz_root(void) {
  if (fuzz_dir[0]) return fuzz_dir;
  const char *tmp = getenv("TMPDIR");
  snprintf(fuzz_dir, sizeof fuzz_dir, "%s/lce-fuzz-exchange-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (mkdtemp(fuzz_dir) == NULL) {
    perror(fuzz_dir);
    abort();
  }
  char sub[300];
  snprintf(sub, sizeof sub, "%s/c", fuzz_dir);
  if (mkdir(sub, 0777) != 0) {
    perror(sub);
    abort();
  }
  atexit(remove_fuzz_dir);
  return fuzz_dir;
}

/* Writes len bytes to D/name, or removes D/name when text is NULL. */
static void put_file(const char *root, const char *name, const char *text, size_t len) {
  char path[300];
  snprintf(path, sizeof path, "%s/%s", root, name);
  if (text == NULL) {
    (void)remove(path);
    return;
  }
  lce_status st;
  lce_status_clear(&st);
  if (lce_file_replace(path, text, len, &st) != LCE_OK) {
    fprintf(stderr, "%s\n", st.msg);
    abort();
  }
}

/* The accepted export d agrees with its manifest text and with every case.json on disk. */
static void check_accepted(const char *root, const lce_exchange_dir *d, const char *manifest, size_t len) {
  lce_json m;
  lce_status st;
  lce_status_clear(&st);
  if (lce_json_parse(manifest, len, FUZZ_INPUT_NAME, &m, &st) != LCE_OK)
    FUZZ_VIOLATION("accepted an export whose manifest does not parse: %s", st.msg);
  const lce_json *cases = lce_json_get(&m, "cases");
  if (cases == NULL || cases->count != d->count)
    FUZZ_VIOLATION("%zu cases loaded from a manifest listing %zu", d->count, cases ? cases->count : (size_t)0);
  lce_json_free(&m);
  const size_t root_len = strlen(root);
  for (size_t i = 0; i < d->count; i++) {
    const lce_exchange_case *e = &d->cases[i];
    lce_case c;
    char id[192], text_id[192];
    if (lce_case_parse(e->id, &c, &st) != LCE_OK) FUZZ_VIOLATION("accepted case id '%s': %s", e->id, st.msg);
    lce_case_format(&c, id, sizeof id);
    lce_case_format(&e->c, text_id, sizeof text_id);
    if (strcmp(id, text_id) != 0) FUZZ_VIOLATION("case '%s' loaded as %s, parses as %s", e->id, text_id, id);
    if (strncmp(e->dir, root, root_len) != 0 || e->dir[root_len] != '/')
      FUZZ_VIOLATION("case '%s' has its directory %s outside the export", e->id, e->dir);
    if (lce_exchange_find(d, e->id) != e) FUZZ_VIOLATION("case '%s' is not found by its id", e->id);
    char path[LCE_EXCHANGE_MAX_PATH + 16], *want_text = NULL;
    snprintf(path, sizeof path, "%s/case.json", e->dir);
    lce_json have, want;
    if (lce_json_load(path, &have, &st) != LCE_OK) FUZZ_VIOLATION("accepted case '%s': %s", e->id, st.msg);
    if (lce_exchange_case_json(&e->c, &want_text, &st) != LCE_OK ||
        lce_json_parse(want_text, strlen(want_text), "expected", &want, &st) != LCE_OK)
      FUZZ_VIOLATION("case.json of accepted case '%s': %s", e->id, st.msg);
    char where[128];
    if (!lce_json_equal(&have, &want, where, sizeof where))
      FUZZ_VIOLATION("accepted case '%s' whose case.json differs at %s", e->id, where);
    lce_json_free(&have);
    lce_json_free(&want);
    free(want_text);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *root = fuzz_root(), *text = (const char *)data;
  const char *sep = size >= sizeof FUZZ_CASE_JSON_SEP - 1
                        ? memmem(text, size, FUZZ_CASE_JSON_SEP, sizeof FUZZ_CASE_JSON_SEP - 1)
                        : NULL;
  const size_t manifest_len = sep ? (size_t)(sep - text) : size;
  put_file(root, "manifest.json", text, manifest_len);
  if (sep) {
    const char *case_json = sep + sizeof FUZZ_CASE_JSON_SEP - 1;
    put_file(root, "c/case.json", case_json, size - (size_t)(case_json - text));
  } else {
    put_file(root, "c/case.json", NULL, 0);
  }
  lce_exchange_dir d;
  lce_status st;
  lce_status_clear(&st);
  const lce_code rc = lce_exchange_open(root, &d, &st);
  if (rc != LCE_OK) {
    if (st.msg[0] == '\0') FUZZ_VIOLATION("refused (%s) without a message", lce_code_name(rc));
    if (rc != LCE_ENOMEM && strstr(st.msg, root) == NULL)
      FUZZ_VIOLATION("refusal does not name the file at fault: %s", st.msg);
    return 0;
  }
  check_accepted(root, &d, text, manifest_len);
  lce_exchange_close(&d);
  return 0;
}
