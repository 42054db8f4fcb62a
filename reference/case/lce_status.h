/* lce_status.h — error codes and the checked-call macros every lcecheck C file uses.
 *
 * Public C functions return an lce_code and fill an lce_status with a message naming the
 * problem and the file:line that detected it. Only fuzz harnesses abort. */
#ifndef LCE_STATUS_H
#define LCE_STATUS_H

typedef enum lce_code {
  LCE_OK = 0,
  LCE_EINVAL = 1,    /* bad input: impossible shape, label out of range, bad option */
  LCE_ENOMEM = 2,    /* allocation failed */
  LCE_EIO = 3,       /* file could not be read or written */
  LCE_EPARSE = 4,    /* malformed text (golden file, case id, corpus entry) */
  LCE_ENODEV = 5,    /* no GPU or other required device */
  LCE_EINTERNAL = 6, /* a library call failed or an invariant broke */
  LCE_ESKIP = 7      /* the subject declines this case (an option it does not express): a visible skip */
} lce_code;

typedef struct lce_status {
  lce_code code;
  const char *file; /* where the failure was detected */
  int line;
  char msg[768];
} lce_status;

/* Records code, location and a printf-style message into st (which may be NULL); returns code. */
lce_code lce_fail(lce_status *st, lce_code code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
const char *lce_code_name(lce_code code);
void lce_status_clear(lce_status *st);

/* Return code from the enclosing function (after recording the message) when cond is false. */
#define LCE_CHECK(st, cond, code, ...)                                   \
  do {                                                                   \
    if (!(cond)) return lce_fail((st), (code), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/* Propagate a non-OK code from a call that already filled the status. */
#define LCE_TRY(expr)                       \
  do {                                      \
    lce_code lce_try_rc_ = (expr);          \
    if (lce_try_rc_ != LCE_OK) return lce_try_rc_; \
  } while (0)

/* Allocation with a checked result: evaluates to LCE_ENOMEM (with message) on failure. */
#define LCE_ALLOC_CHECK(st, ptr) \
  LCE_CHECK((st), (ptr) != NULL, LCE_ENOMEM, "out of memory allocating %s", #ptr)

#endif
