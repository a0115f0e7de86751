/* strbuf.h - a growable byte buffer, always NUL-terminated after append.
 * Owner frees p. Capacity doubles (first allocation: 64 bytes) and is never
 * shrunk, so a buffer reused per token stops allocating once warm.
 * Users: the engine's per-request text buffers, the server's chunk writer. */
#ifndef CINFER_BASE_STRBUF_H
#define CINFER_BASE_STRBUF_H

#include <stddef.h>

typedef struct strbuf {
    char *p;
    size_t len, cap;
} strbuf;

/* Appends n bytes of s (plus a NUL after them). 0, or -1 when out of memory
 * (the buffer is then unchanged). */
int strbuf_append(strbuf *b, const char *s, size_t n);

#endif
