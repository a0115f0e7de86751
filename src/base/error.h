/* error.h - the error value every fallible function fills.
 *
 * Convention (see docs/architecture.md): a function that can fail returns int
 * (0 = ok, -1 = failed) and takes a `cf_err *` it fills with a one-line,
 * human-readable message naming the file/offset/field and what was expected.
 * `err` may be NULL when the caller does not care about the message.
 * Input errors never abort; assert() is only for internal invariants. */
#ifndef CINFER_BASE_ERROR_H
#define CINFER_BASE_ERROR_H

#include <stdarg.h>

typedef struct cf_err {
    char msg[512];
} cf_err;

/* Formats the message into `e` (if non-NULL) and returns -1. */
int cf_fail(cf_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cf_vfail(cf_err *e, const char *fmt, va_list ap);
/* Prefixes an existing message: "prefix: old message". Returns -1. */
int cf_prefix(cf_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
