/* fuzz_sse.c - libFuzzer harness for the serving benchmark's stream reader:
 * the SSE parser (src/benchserve/sse.h) fed the input in two pieces split at
 * a point chosen by the first byte, each event interpreted by the stream
 * reader of the API chosen by the second byte (src/benchserve/api.h). Must
 * not crash, leak or hang; the split must not change the events seen. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "benchserve/api.h"
#include "benchserve/sse.h"

typedef struct ctx {
    bs_stream st;
    unsigned long hash;
    size_t n;
} ctx;

static int on_event(void *arg, const char *event, const char *data, size_t len) {
    ctx *c = arg;
    bs_stream_event(&c->st, event, data, len);
    for (size_t i = 0; i < len; i++) c->hash = c->hash * 31 + (unsigned char)data[i];
    for (const char *p = event; *p; p++) c->hash = c->hash * 37 + (unsigned char)*p;
    c->n++;
    return 0;
}

static void run(const char *p, size_t n, size_t split, bs_api api, ctx *c) {
    bs_sse s = {0};
    *c = (ctx){.st = {.api = api}};
    bs_sse_feed(&s, p, split, on_event, c);
    bs_sse_feed(&s, p + split, n - split, on_event, c);
    bs_sse_free(&s);
    bs_stream_free(&c->st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t split = data[0] % (size - 1);
    bs_api api = (bs_api)(data[1] % 4);
    const char *p = (const char *)data + 2;
    size_t n = size - 2;
    if (split > n) split = n;
    ctx a, b;
    run(p, n, split, api, &a);
    run(p, n, 0, api, &b);
    if (a.hash != b.hash || a.n != b.n) abort();
    return 0;
}
