/* bs_buf.c - see bs_buf.h. Growth doubles the capacity. */
#include "benchserve/bs_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(bs_buf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int bs_buf_append(bs_buf *b, const char *s, size_t n) {
    if (reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int bs_buf_puts(bs_buf *b, const char *s) { return bs_buf_append(b, s, strlen(s)); }

int bs_buf_printf(bs_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || reserve(b, (size_t)n)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void bs_buf_consume(bs_buf *b, size_t n) {
    if (n >= b->len) {
        b->len = 0;
        if (b->p) b->p[0] = 0;
        return;
    }
    memmove(b->p, b->p + n, b->len - n + 1);
    b->len -= n;
}

void bs_buf_free(bs_buf *b) {
    free(b->p);
    *b = (bs_buf){0};
}
