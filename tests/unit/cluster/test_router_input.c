/* test_router_input.c - what the router derives from its inputs: the
 * canonical prompt of a request body (cluster/router_prompt.c: fields in
 * template order, a later conversation turn extends an earlier one's bytes,
 * max_tokens / stream read, bad bodies tolerated), worker specs from flags
 * and a workers file, and the workers' cached-prefix view with and without
 * a shared store (cluster/router_workers.c: a prefix computed on one worker
 * counts on every worker only with --store-shared; a decode step's prefix
 * never reaches the store slot). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/router.h"
#include "cluster/router_internal.h"
#include "testutil.h"

static void test_prompt(void) {
    router_prompt a, b;
    const char *t1 = "{\"model\":\"m\",\"max_tokens\":7,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
                     "\"hi\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}";
    const char *t2 =
        "{\"messages\":[{\"content\":\"hi\",\"role\":\"user\"},{\"role\":\"assistant\",\"content\":\"yo\"}],"
        "\"tools\":[{\"function\":{\"name\":\"f\"},\"type\":\"function\"}]}";
    router_prompt_from_body("/v1/chat/completions", t1, strlen(t1), &a);
    router_prompt_from_body("/v1/chat/completions", t2, strlen(t2), &b);
    CHECK(a.text && b.text);
    CHECK(a.max_tokens == 7 && a.stream && !b.stream && b.max_tokens == 0);
    if (a.text && b.text) {
        CHECK(strstr(a.text, "\"name\":\"f\"") < strstr(a.text, "\"hi\"")); /* tools first */
        CHECK(a.len > 1 && b.len > a.len && memcmp(a.text, b.text, a.len - 1) == 0); /* key order does not matter */
    }
    router_prompt_free(&a);
    router_prompt_free(&b);
    router_prompt_from_body("/v1/completions", "{\"prompt\":\"Once\"}", 17, &a);
    CHECK(a.text && a.len == 4 && !memcmp(a.text, "Once", 4));
    router_prompt_free(&a);
    const char *m = "{\"system\":\"S\",\"messages\":[],\"max_tokens\":3}";
    router_prompt_from_body("/v1/messages", m, strlen(m), &a);
    CHECK(a.text && a.text[0] == 'S' && a.max_tokens == 3);
    router_prompt_free(&a);
    const char *r = "{\"instructions\":\"I\",\"input\":\"x\",\"max_output_tokens\":5}";
    router_prompt_from_body("/v1/responses", r, strlen(r), &a);
    CHECK(a.text && a.len == 2 && !memcmp(a.text, "Ix", 2) && a.max_tokens == 5);
    router_prompt_free(&a);
    router_prompt_from_body("/v1/chat/completions", "{nope", 5, &a);
    CHECK(a.text == NULL && a.len == 0);
    router_prompt_from_body("/v1/chat/completions", "[1]", 3, &a);
    CHECK(a.text == NULL);
    router_prompt_from_body("/v1/chat/completions", "{\"max_tokens\":-4}", 17, &a);
    CHECK(a.text == NULL && a.max_tokens == 0);
}

static void test_worker_specs(void) {
    router_worker_spec w;
    cf_err e;
    CHECK(router_worker_parse("http://10.0.0.2:8080", &w, &e) == 0 && w.role == ROUTER_ROLE_BOTH);
    CHECK(w.url && !strcmp(w.url, "http://10.0.0.2:8080"));
    free(w.url);
    CHECK(router_worker_parse("http://h:1/@decode", &w, &e) == 0 && w.role == ROUTER_ROLE_DECODE);
    CHECK(w.url && !strcmp(w.url, "http://h:1"));
    free(w.url);
    CHECK(router_worker_parse("http://h:1@prefill", &w, &e) == 0 && w.role == ROUTER_ROLE_PREFILL);
    free(w.url);
    CHECK(router_worker_parse("http://h:1@gpu", &w, &e) == -1 && strstr(e.msg, "role"));
    CHECK(router_worker_parse("http://h", &w, &e) == -1);
    CHECK(router_worker_parse("https://h:443", &w, &e) == -1);
    CHECK(router_worker_parse("http://h:1/v1", &w, &e) == -1);
    CHECK(router_worker_parse("http://h:99999", &w, &e) == -1);
    CHECK(router_worker_parse("", &w, &e) == -1);

    char path[512];
    CHECK(test_scratch_path(path, sizeof path, "workers") != NULL);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("# workers\n\nhttp://a:1\n  http://b:2@decode   # D\r\n", f);
    fclose(f);
    router_worker_spec *specs = NULL;
    int32_t n = 0;
    CHECK(router_workers_file(path, &specs, &n, &e) == 0 && n == 2);
    if (n == 2) CHECK(!strcmp(specs[1].url, "http://b:2") && specs[1].role == ROUTER_ROLE_DECODE);
    f = fopen(path, "w");
    if (f) {
        fputs("http://a:1\nnot a url\n", f);
        fclose(f);
    }
    CHECK(router_workers_file(path, &specs, &n, &e) == -1 && strstr(e.msg, ":2"));
    router_worker_specs_free(specs, n);
    CHECK(router_workers_file("/nonexistent/x", &specs, &n, &e) == -1);
    test_scratch_remove(path);
}

/* The cached estimate of each of two prefill workers after worker 0 computed a 2 KiB prompt. */
static void store_view(bool shared, int32_t cached[2], int32_t *decode_only) {
    router_worker_spec specs[2] = {{"http://127.0.0.1:1", ROUTER_ROLE_PREFILL},
                                   {"http://127.0.0.1:2", ROUTER_ROLE_PREFILL}};
    router_config cfg = {.workers = specs, .n_workers = 2, .store_shared = shared};
    router r = {.cfg = &cfg, .tokens_per_byte = 0.25};
    cf_err err = {0};
    char prompt[2048], other[2048];
    memset(prompt, 'a', sizeof prompt);
    memset(other, 'b', sizeof other);
    uint64_t chain[64], chain2[64];
    int32_t n = prefix_chain("k", 1, prompt, sizeof prompt, chain, 64);
    int32_t n2 = prefix_chain("k", 1, other, sizeof other, chain2, 64);
    CHECK(router_workers_init(&r, &err) == 0 && n > 4 && n2 > 4);
    router_note_prefix(&r, 0, chain, n, true); /* computed on worker 0 (its blocks went to the store) */
    router_note_prefix(&r, 0, chain2, n2, false); /* a decode step on worker 0: memory only */
    router_workers_view(&r, ROUTER_ROLE_PREFILL, 0, chain, n, 512);
    cached[0] = r.scratch[0].cached_tokens;
    cached[1] = r.scratch[1].cached_tokens;
    router_workers_view(&r, ROUTER_ROLE_PREFILL, 0, chain2, n2, 512);
    *decode_only = r.scratch[1].cached_tokens;
    CHECK(r.scratch[0].cached_tokens > 0);
    router_workers_free(&r);
}

static void test_store_aware(void) {
    int32_t cached[2], decode_only;
    store_view(false, cached, &decode_only);
    CHECK(cached[0] > 0 && cached[1] == 0 && decode_only == 0); /* no store: affinity to worker 0 only */
    int32_t own = cached[0];
    store_view(true, cached, &decode_only);
    CHECK(cached[0] == own && cached[1] == own && decode_only == 0); /* the store serves worker 1 as well */
}

int main(void) {
    test_prompt();
    test_worker_specs();
    test_store_aware();
    return test_finish();
}
