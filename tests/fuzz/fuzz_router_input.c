/* fuzz_router_input.c - libFuzzer harness for what `cinfer router` reads
 * from clients and its workers file: the canonical-prompt extraction of a
 * request body (src/cluster/router_prompt.c) for the API path chosen by the
 * first byte, the prefix chain hashed from it (src/cluster/prefix_index.c),
 * a worker spec "URL[@role]" (router_worker_parse) from the same bytes, and the same bytes as a
 * worker's SSE stream with resume marks (src/cluster/router_resume.c: cut into events, committed,
 * Responses sequence numbers renumbered after a rewind) and the resume body built from them.
 * Must not crash, leak or hang; the prompt is deterministic. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/prefix_index.h"
#include "cluster/router.h"
#include "cluster/router_internal.h"
#include "cluster/router_resume.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const paths[] = {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses",
                                        "/tokenize"};
    const char *path = paths[data[0] % 5];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    router_prompt a, b;
    router_prompt_from_body(path, body, len, &a);
    router_prompt_from_body(path, body, len, &b);
    if ((a.text == NULL) != (b.text == NULL) || a.len != b.len || (a.text && memcmp(a.text, b.text, a.len))) abort();
    uint64_t chain[64];
    if (a.text) prefix_chain("key", 3, a.text, a.len, chain, 64);
    router_prompt_free(&a);
    router_prompt_free(&b);
    char *spec = malloc(len + 1);
    if (!spec) return 0;
    memcpy(spec, body, len);
    spec[len] = 0;
    router_worker_spec w;
    cf_err e;
    if (router_worker_parse(spec, &w, &e) == 0) {
        if (!w.url || strncmp(w.url, "http://", 7)) abort();
        free(w.url);
    }
    free(spec);
    router_resume rs;
    struct evbuffer *in = evbuffer_new(), *out = evbuffer_new();
    if (!router_resume_init(&rs) && in && out) {
        size_t half = len / 2;
        evbuffer_add(in, body, half);
        bool ok = router_resume_feed(&rs, in, out, data[0] & 1) == 0;
        router_resume_rewind(&rs);
        evbuffer_add(in, body + half, len - half);
        if (ok) router_resume_feed(&rs, in, out, data[0] & 1);
        router_resume_flush(&rs, out);
        if (rs.n_ids < 0 || rs.text_bytes < 0) abort();
        size_t blen = 0;
        char *b2 = router_resume_body(&rs, "{\"stream\":true}", 15, &blen);
        if (!b2 || blen != strlen(b2)) abort();
        free(b2);
    }
    router_resume_free(&rs);
    if (in) evbuffer_free(in);
    if (out) evbuffer_free(out);
    return 0;
}
