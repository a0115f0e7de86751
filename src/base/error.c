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

/* appends src to the NUL-terminated text of length *len in dst[cap], cutting it when full */
static void append_cut(char *dst, size_t cap, size_t *len, const char *src) {
    while (*src && *len + 1 < cap) dst[(*len)++] = *src++;
    dst[*len] = '\0';
}

int cf_prefix(cf_err *e, const char *fmt, ...) {
    if (!e) return -1;
    char old[sizeof e->msg];
    memcpy(old, e->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof e->msg) return -1;
    /* the cause is cut when the message is full (no snprintf: gcc's -Wformat-truncation flags
     * that intended cut at -O0) */
    size_t len = (size_t)n;
    append_cut(e->msg, sizeof e->msg, &len, ": ");
    append_cut(e->msg, sizeof e->msg, &len, old);
    return -1;
}
