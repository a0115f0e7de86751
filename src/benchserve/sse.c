/* sse.c - see sse.h. One pass over the input; a line is processed as soon as
 * its terminator is seen. Returns -1 on out-of-memory. */
#include "benchserve/sse.h"

#include <string.h>

static int dispatch(bs_sse *s, bs_sse_cb cb, void *arg) {
    int rc = 0;
    if (s->has_data) {
        s->events++;
        rc = cb(arg, bs_buf_str(&s->event), bs_buf_str(&s->data), s->data.len);
    }
    bs_buf_consume(&s->data, s->data.len);
    bs_buf_consume(&s->event, s->event.len);
    s->has_data = 0;
    return rc;
}

static int process_line(bs_sse *s, const char *l, size_t n, bs_sse_cb cb, void *arg) {
    if (n == 0) return dispatch(s, cb, arg);
    if (l[0] == ':') return 0;
    const char *colon = memchr(l, ':', n);
    size_t fn = colon ? (size_t)(colon - l) : n;
    const char *v = colon ? colon + 1 : l + n;
    size_t vn = (size_t)(l + n - v);
    if (vn && v[0] == ' ') v++, vn--;
    if (fn == 4 && !memcmp(l, "data", 4)) {
        if (s->has_data && bs_buf_append(&s->data, "\n", 1)) return -1;
        s->has_data = 1;
        return bs_buf_append(&s->data, v, vn);
    }
    if (fn == 5 && !memcmp(l, "event", 5)) {
        bs_buf_consume(&s->event, s->event.len);
        return bs_buf_append(&s->event, v, vn);
    }
    return 0;
}

int bs_sse_feed(bs_sse *s, const char *p, size_t n, bs_sse_cb cb, void *arg) {
    size_t i = 0;
    if (s->skip_lf && n) {
        if (p[0] == '\n') i = 1;
        s->skip_lf = 0;
    }
    while (i < n) {
        size_t j = i;
        while (j < n && p[j] != '\n' && p[j] != '\r') j++;
        if (j == n) return bs_buf_append(&s->line, p + i, n - i);
        int rc;
        if (s->line.len) {
            if (bs_buf_append(&s->line, p + i, j - i)) return -1;
            rc = process_line(s, s->line.p, s->line.len, cb, arg);
            bs_buf_consume(&s->line, s->line.len);
        } else {
            rc = process_line(s, p + i, j - i, cb, arg);
        }
        if (rc) return rc;
        if (p[j] == '\r') {
            if (j + 1 < n && p[j + 1] == '\n') j++;
            else if (j + 1 == n) s->skip_lf = 1;
        }
        i = j + 1;
    }
    return 0;
}

void bs_sse_free(bs_sse *s) {
    bs_buf_free(&s->line);
    bs_buf_free(&s->data);
    bs_buf_free(&s->event);
    *s = (bs_sse){0};
}
