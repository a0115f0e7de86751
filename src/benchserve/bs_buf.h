/* bs_buf.h - a growable byte buffer (always NUL-terminated) for the serving
 * benchmark: request bodies, generated prompts, SSE input. Owns its bytes;
 * bs_buf_free releases them. Appends return 0, or -1 when memory runs out (the
 * buffer is then unchanged). Callers: every file under src/benchserve/. */
#ifndef CINFER_BENCHSERVE_BS_BUF_H
#define CINFER_BENCHSERVE_BS_BUF_H

#include <stddef.h>

typedef struct bs_buf {
    char *p; /* NUL-terminated; NULL until the first append */
    size_t len; /* bytes, without the NUL */
    size_t cap;
} bs_buf;

int bs_buf_append(bs_buf *b, const char *s, size_t n);
int bs_buf_puts(bs_buf *b, const char *s);
int bs_buf_printf(bs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Removes the first n bytes. */
void bs_buf_consume(bs_buf *b, size_t n);
void bs_buf_free(bs_buf *b);
/* The text (an empty string when nothing was appended). */
static inline const char *bs_buf_str(const bs_buf *b) { return b->p ? b->p : ""; }

#endif
