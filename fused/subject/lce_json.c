/* lce_json.c — the strict JSON reader of lce_json.h: recursive descent over the text with the
 * position kept for messages. */
#include "lce_json.h"
#include "lce_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JSON_MAX_DEPTH 64

typedef struct parser {
  const char *p, *end, *name, *line_start;
  int line;
  lce_status *st;
} parser;

static lce_code perr(parser *ps, const char *what) {
  const int col = (int)(ps->p - ps->line_start) + 1;
  if (ps->p >= ps->end) return lce_fail(ps->st, LCE_EPARSE, __FILE__, __LINE__, "%s:%d:%d: %s (at the end of the file)",
                                        ps->name, ps->line, col, what);
  return lce_fail(ps->st, LCE_EPARSE, __FILE__, __LINE__, "%s:%d:%d: %s (found '%c')", ps->name, ps->line, col, what,
                  *ps->p >= 0x20 && *ps->p < 0x7f ? *ps->p : '?');
}

static void skip_ws(parser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) {
    if (*ps->p == '\n') ps->line++, ps->line_start = ps->p + 1;
    ps->p++;
  }
}

static int literal(parser *ps, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return 0;
  ps->p += n;
  return 1;
}

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char ch = p[i];
    int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
    if (d < 0) return 0;
    v = v * 16 + (unsigned)d;
  }
  *out = v;
  return 1;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3F)), o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3F)), o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* A string at ps->p (on its opening quote) into a malloc'd buffer: escapes decoded, control
 * characters and \u0000 refused. */
static lce_code parse_string(parser *ps, char **out) {
  ps->p++;
  const char *start = ps->p;
  char *buf = malloc((size_t)(ps->end - start) + 1); /* decoding never lengthens the text */
  LCE_ALLOC_CHECK(ps->st, buf);
  size_t n = 0;
  for (;;) {
    if (ps->p >= ps->end) return free(buf), perr(ps, "unterminated string");
    unsigned char ch = (unsigned char)*ps->p;
    if (ch == '"') break;
    if (ch < 0x20) return free(buf), perr(ps, "control character inside a string");
    if (ch != '\\') {
      buf[n++] = (char)ch, ps->p++;
      continue;
    }
    if (ps->end - ps->p < 2) return free(buf), perr(ps, "unterminated escape");
    char e = ps->p[1];
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e != '\0' && simple != NULL) {
      static const char decoded[] = "\"\\/\b\f\n\r\t";
      buf[n++] = decoded[simple - "\"\\/bfnrt"];
      ps->p += 2;
      continue;
    }
    unsigned cp, lo;
    if (e != 'u' || ps->end - ps->p < 6 || !hex4(ps->p + 2, &cp)) return free(buf), perr(ps, "bad escape in a string");
    ps->p += 6;
    if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
      if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' || !hex4(ps->p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
        return free(buf), perr(ps, "unpaired surrogate escape");
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      ps->p += 6;
    } else if (cp >= 0xDC00 && cp < 0xE000) {
      return free(buf), perr(ps, "unpaired surrogate escape");
    }
    if (cp == 0) return free(buf), perr(ps, "\\u0000 inside a string");
    n += put_utf8(buf + n, cp);
  }
  ps->p++;
  buf[n] = '\0';
  *out = buf;
  return LCE_OK;
}

/* A number in JSON's grammar exactly: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static lce_code parse_number(parser *ps, double *out) {
  const char *s = ps->p, *q = s;
  if (q < ps->end && *q == '-') q++;
  if (q < ps->end && *q == '0') q++;
  else if (q < ps->end && *q >= '1' && *q <= '9') while (q < ps->end && *q >= '0' && *q <= '9') q++;
  else return perr(ps, "expected a value");
  if (q < ps->end && *q == '.') {
    if (++q >= ps->end || *q < '0' || *q > '9') return ps->p = q, perr(ps, "expected a digit after '.'");
    while (q < ps->end && *q >= '0' && *q <= '9') q++;
  }
  if (q < ps->end && (*q == 'e' || *q == 'E')) {
    q++;
    if (q < ps->end && (*q == '+' || *q == '-')) q++;
    if (q >= ps->end || *q < '0' || *q > '9') return ps->p = q, perr(ps, "expected a digit in the exponent");
    while (q < ps->end && *q >= '0' && *q <= '9') q++;
  }
  char tmp[128];
  if ((size_t)(q - s) >= sizeof tmp) return perr(ps, "number too long");
  memcpy(tmp, s, (size_t)(q - s));
  tmp[q - s] = '\0';
  errno = 0;
  *out = strtod(tmp, NULL);
  if (!isfinite(*out)) return perr(ps, "number out of the range of a double");
  ps->p = q;
  return LCE_OK;
}

static lce_code parse_value(parser *ps, lce_json *v, int depth);

static lce_code grow(parser *ps, lce_json *v, size_t *cap, int with_keys) {
  if (v->count < *cap) return LCE_OK;
  *cap = *cap ? 2 * *cap : 4;
  lce_json *items = realloc(v->items, *cap * sizeof *items);
  LCE_ALLOC_CHECK(ps->st, items);
  v->items = items;
  if (with_keys) {
    char **keys = realloc(v->keys, *cap * sizeof *keys);
    LCE_ALLOC_CHECK(ps->st, keys);
    v->keys = keys;
  }
  return LCE_OK;
}

/* An array or object at ps->p (on its opening bracket). */
static lce_code parse_container(parser *ps, lce_json *v, int depth) {
  const int object = *ps->p == '{';
  const char close = object ? '}' : ']';
  v->type = object ? LCE_JSON_OBJECT : LCE_JSON_ARRAY;
  if (depth >= JSON_MAX_DEPTH) return perr(ps, "nested too deeply");
  ps->p++;
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == close) return ps->p++, LCE_OK;
  size_t cap = 0;
  for (;;) {
    LCE_TRY(grow(ps, v, &cap, object));
    if (object) {
      skip_ws(ps);
      if (ps->p >= ps->end || *ps->p != '"') return perr(ps, "expected a member name in quotes");
      char *key;
      LCE_TRY(parse_string(ps, &key));
      for (size_t i = 0; i < v->count; i++)
        if (strcmp(v->keys[i], key) == 0) {
          char what[160];
          snprintf(what, sizeof what, "member \"%.100s\" given twice", key);
          free(key);
          return perr(ps, what);
        }
      v->keys[v->count] = key;
      skip_ws(ps);
      if (ps->p >= ps->end || *ps->p != ':') {
        memset(&v->items[v->count++], 0, sizeof *v->items); /* freed with its key */
        return perr(ps, "expected ':' after a member name");
      }
      ps->p++;
    }
    lce_json *item = &v->items[v->count++];
    memset(item, 0, sizeof *item);
    LCE_TRY(parse_value(ps, item, depth + 1));
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
      continue;
    }
    if (ps->p < ps->end && *ps->p == close) return ps->p++, LCE_OK;
    return perr(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static lce_code parse_value(parser *ps, lce_json *v, int depth) {
  skip_ws(ps);
  v->line = ps->line;
  v->column = (int)(ps->p - ps->line_start) + 1;
  if (ps->p >= ps->end) return perr(ps, "expected a value");
  switch (*ps->p) {
    case '{':
    case '[': return parse_container(ps, v, depth);
    case '"': v->type = LCE_JSON_STRING; return parse_string(ps, &v->string);
    case 't': if (!literal(ps, "true")) break; v->type = LCE_JSON_BOOL, v->boolean = 1; return LCE_OK;
    case 'f': if (!literal(ps, "false")) break; v->type = LCE_JSON_BOOL, v->boolean = 0; return LCE_OK;
    case 'n': if (!literal(ps, "null")) break; v->type = LCE_JSON_NULL; return LCE_OK;
    default: v->type = LCE_JSON_NUMBER; return parse_number(ps, &v->number);
  }
  return perr(ps, "expected a value");
}

lce_code lce_json_parse(const char *text, size_t len, const char *name, lce_json *out, lce_status *st) {
  memset(out, 0, sizeof *out);
  parser ps = {text, text + len, name, text, 1, st};
  lce_code rc = parse_value(&ps, out, 0);
  if (rc == LCE_OK) {
    skip_ws(&ps);
    if (ps.p != ps.end) rc = perr(&ps, "text after the value");
  }
  if (rc != LCE_OK) lce_json_free(out);
  return rc;
}

lce_code lce_json_load(const char *path, lce_json *out, lce_status *st) {
  memset(out, 0, sizeof *out);
  char *buf;
  size_t len;
  LCE_TRY(lce_file_read(path, &buf, &len, st));
  lce_code rc = lce_json_parse(buf, len, path, out, st);
  free(buf);
  return rc;
}

void lce_json_free(lce_json *j) {
  if (j == NULL) return;
  free(j->string);
  for (size_t i = 0; i < j->count; i++) {
    lce_json_free(&j->items[i]);
    if (j->keys) free(j->keys[i]);
  }
  free(j->items);
  free(j->keys);
  memset(j, 0, sizeof *j);
}

const lce_json *lce_json_get(const lce_json *j, const char *key) {
  if (j == NULL || j->type != LCE_JSON_OBJECT) return NULL;
  for (size_t i = 0; i < j->count; i++)
    if (strcmp(j->keys[i], key) == 0) return &j->items[i];
  return NULL;
}

static int differ(char *where, size_t size, const char *prefix, const char *part) {
  if (where && size) snprintf(where, size, "%s%s%s", prefix, *prefix && *part ? "." : "", part);
  return 0;
}

static int equal_at(const lce_json *a, const lce_json *b, const char *prefix, char *where, size_t size) {
  if (a->type != b->type) return differ(where, size, prefix, "");
  switch (a->type) {
    case LCE_JSON_NULL: return 1;
    case LCE_JSON_BOOL: return a->boolean == b->boolean ? 1 : differ(where, size, prefix, "");
    case LCE_JSON_NUMBER: return a->number == b->number ? 1 : differ(where, size, prefix, "");
    case LCE_JSON_STRING: return strcmp(a->string, b->string) == 0 ? 1 : differ(where, size, prefix, "");
    default: break;
  }
  if (a->count != b->count) return differ(where, size, prefix, "");
  for (size_t i = 0; i < a->count; i++) {
    char sub[256];
    const lce_json *other = &b->items[i];
    if (a->type == LCE_JSON_OBJECT) {
      snprintf(sub, sizeof sub, "%s%s%s", prefix, *prefix ? "." : "", a->keys[i]);
      other = lce_json_get(b, a->keys[i]);
      if (other == NULL) return differ(where, size, sub, "");
    } else {
      snprintf(sub, sizeof sub, "%s[%zu]", prefix, i);
    }
    if (!equal_at(&a->items[i], other, sub, where, size)) return 0;
  }
  return 1;
}

int lce_json_equal(const lce_json *a, const lce_json *b, char *where, size_t size) {
  if (where && size) where[0] = '\0';
  return equal_at(a, b, "", where, size);
}
