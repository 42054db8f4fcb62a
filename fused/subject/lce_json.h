/* lce_json.h — a small strict JSON reader for the exchange format's case.json, manifest.json and a
 * runner's meta.json: the whole of RFC 8259 (objects, arrays, strings with every escape, numbers,
 * true/false/null), nothing more (no comments, no trailing commas, no NaN), nesting up to 64 levels.
 * A malformed file is refused with "path:line:column: what was expected". */
#ifndef LCE_JSON_H
#define LCE_JSON_H

#include <stddef.h>

#include "lce_status.h"

typedef enum lce_json_type {
  LCE_JSON_NULL,
  LCE_JSON_BOOL,
  LCE_JSON_NUMBER,
  LCE_JSON_STRING,
  LCE_JSON_ARRAY,
  LCE_JSON_OBJECT
} lce_json_type;

typedef struct lce_json {
  lce_json_type type;
  int boolean;
  double number;
  char *string;            /* NUL-terminated (a string holding \u0000 is refused) */
  char **keys;             /* objects: keys[i] names items[i] */
  struct lce_json *items;  /* arrays and objects */
  size_t count;
  int line, column;        /* where the value starts in its file, for messages */
} lce_json;

/* Parses text (len bytes) into *out; name is the file named in messages. */
lce_code lce_json_parse(const char *text, size_t len, const char *name, lce_json *out, lce_status *st);
/* Reads and parses the file at path. */
lce_code lce_json_load(const char *path, lce_json *out, lce_status *st);
void lce_json_free(lce_json *j);

/* The member key of object j, or NULL (also when j is not an object). */
const lce_json *lce_json_get(const lce_json *j, const char *key);
/* 1 when a and b hold the same value (numbers compared as doubles, object members by key, in any
 * order); otherwise 0 and where they first differ into where ("label_smoothing.eps", "inputs"). */
int lce_json_equal(const lce_json *a, const lce_json *b, char *where, size_t size);

#endif
