/* error.c - formatting of cf_err messages (see error.h). */
#include "base/error.h"

#include <stdio.h>
#include <string.h>

int cf_vfail(cf_err *e, const char *fmt, va_list ap) {
    if (e) vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return -1;
}

int cf_fail(cf_err *e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cf_vfail(e, fmt, ap);
    va_end(ap);
    return -1;
}

int cf_prefix(cf_err *e, const char *fmt, ...) {
    if (!e) return -1;
    char old[sizeof e->msg];
    memcpy(old, e->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof e->msg) snprintf(e->msg + n, sizeof e->msg - (size_t)n, ": %s", old);
    return -1;
}
