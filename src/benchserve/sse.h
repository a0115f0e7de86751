/* sse.h - incremental parser of a text/event-stream body (the WHATWG
 * EventSource rules that servers use): lines end with \n, \r\n or \r; a blank
 * line ends an event; "event:" names it, "data:" lines are joined with \n, a
 * single space after the colon is dropped, lines starting with ':' are
 * comments, other fields are ignored. Bytes may arrive split anywhere.
 * bs_sse owns its buffers. Callers: runner.c, tests, fuzz_sse. */
#ifndef CINFER_BENCHSERVE_SSE_H
#define CINFER_BENCHSERVE_SSE_H

#include <stddef.h>

#include "benchserve/bs_buf.h"

/* Called once per complete event that has data; event is "" when unnamed. A
 * nonzero return stops the parse and is returned by bs_sse_feed. */
typedef int (*bs_sse_cb)(void *arg, const char *event, const char *data, size_t len);

typedef struct bs_sse {
    bs_buf line; /* the partial current line */
    bs_buf data; /* data of the event being built */
    bs_buf event; /* its name */
    int has_data;
    int skip_lf; /* the previous chunk ended with \r */
    size_t events;
} bs_sse;

int bs_sse_feed(bs_sse *s, const char *p, size_t n, bs_sse_cb cb, void *arg);
void bs_sse_free(bs_sse *s);

#endif
