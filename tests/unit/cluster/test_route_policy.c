/* test_route_policy.c - the router's placement policies (cluster/route_policy.c)
 * and its prefix index (cluster/prefix_index.c): each policy's choice on
 * hand-built worker states, eligibility, tie-breaking, consistent hashing's
 * stability when a worker leaves, and the shared cost model. */
#include <string.h>

#include "base/compute_cost.h"
#include "cluster/prefix_index.h"
#include "cluster/route_policy.h"
#include "engine/sched.h"
#include "testutil.h"

static route_worker worker(uint64_t id) {
    return (route_worker){.id = id, .healthy = true, .accepting = true, .max_seqs = 16, .kv_capacity = 10000};
}

static void test_names(void) {
    for (int k = 0; k < ROUTE_POLICY_COUNT; k++) {
        route_policy_kind got;
        CHECK(route_policy_parse(route_policy_name((route_policy_kind)k), &got) == 0 && got == (route_policy_kind)k);
    }
    route_policy_kind got;
    CHECK(route_policy_parse("kv", &got) == 0 && got == ROUTE_DECODE_LOAD);
    CHECK(route_policy_parse("compute", &got) == 0 && got == ROUTE_PREFILL_COMPUTE);
    CHECK(route_policy_parse("bogus", &got) == -1);
    CHECK(route_policy_parse(NULL, &got) == -1);
}

static void test_round_robin(void) {
    route_worker ws[3] = {worker(1), worker(2), worker(3)};
    uint64_t cur = 0;
    CHECK(route_round_robin(ws, 3, &cur) == 0);
    CHECK(route_round_robin(ws, 3, &cur) == 1);
    CHECK(route_round_robin(ws, 3, &cur) == 2);
    CHECK(route_round_robin(ws, 3, &cur) == 0);
    ws[1].healthy = false;
    CHECK(route_round_robin(ws, 3, &cur) == 2); /* skips the unhealthy one */
    ws[0].accepting = ws[2].accepting = false;
    CHECK(route_round_robin(ws, 3, &cur) == -1);
    CHECK(route_round_robin(ws, 0, &cur) == -1);
}

static void test_least_requests(void) {
    route_worker ws[3] = {worker(1), worker(2), worker(3)};
    ws[0].running = 3, ws[1].running = 1, ws[1].waiting = 3, ws[2].running = 2;
    CHECK(route_least_requests(ws, 3) == 2);
    ws[2].healthy = false;
    CHECK(route_least_requests(ws, 3) == 0); /* tie 3 vs 4 -> 0 has fewer */
    ws[0].running = 4, ws[0].waiting = 0; /* 4 vs 4: fewer running wins */
    CHECK(route_least_requests(ws, 3) == 1);
}

static void test_affinity(void) {
    route_params p = route_default_params();
    route_worker ws[4] = {worker(11), worker(22), worker(33), worker(44)};
    /* the same key always lands on the same worker; keys spread over all */
    int hits[4] = {0};
    int moved = 0, kept = 0;
    for (uint64_t k = 1; k <= 400; k++) {
        route_request r = {.prompt_tokens = 10, .affinity_key = prefix_hash_bytes(k, "x", 1)};
        int a = route_cache_affinity(ws, 4, &r, &p);
        CHECK(a >= 0 && a == route_cache_affinity(ws, 4, &r, &p));
        if (a >= 0) hits[a]++;
        /* worker 2 leaves: only its keys move (consistent hashing) */
        ws[2].healthy = false;
        int b = route_cache_affinity(ws, 4, &r, &p);
        ws[2].healthy = true;
        if (a != 2) {
            CHECK(b == a);
            kept += b == a;
        } else {
            CHECK(b != 2 && b >= 0);
            moved++;
        }
    }
    for (int i = 0; i < 4; i++) CHECKF(hits[i] > 50, "worker %d got %d of 400", i, hits[i]);
    CHECK(moved == hits[2] && kept == 400 - hits[2]);
    /* tenants: the key includes the API key, so the same prompt of two tenants hashes differently */
    uint64_t ca[4], cb[4];
    char prompt[512];
    memset(prompt, 'a', sizeof prompt);
    CHECK(prefix_chain("key-A", 5, prompt, sizeof prompt, ca, 4) == 4);
    CHECK(prefix_chain("key-B", 5, prompt, sizeof prompt, cb, 4) == 4);
    for (int i = 0; i < 4; i++) CHECK(ca[i] != cb[i]);
    /* balance: a hot worker beyond the threshold gives way to the least loaded */
    route_request r = {.prompt_tokens = 10, .affinity_key = 12345};
    int a = route_cache_affinity(ws, 4, &r, &p);
    ws[a].running = p.balance_threshold + 1;
    int b = route_cache_affinity(ws, 4, &r, &p);
    CHECK(b != a && ws[b].running == 0);
    ws[a].running = p.balance_threshold; /* at the threshold: affinity holds */
    CHECK(route_cache_affinity(ws, 4, &r, &p) == a);
}

static void test_prefill_compute(void) {
    route_params p = {.linear_cost = 1.0, .attn_cost = 0.01, .balance_threshold = 8};
    route_worker ws[2] = {worker(1), worker(2)};
    route_request r = {.prompt_tokens = 1000};
    /* worker 1 holds 900 tokens of the prefix: much less compute */
    ws[1].cached_tokens = 900;
    CHECK(route_prefill_compute(ws, 2, &r, &p) == 1);
    double s0 = route_prefill_score(&ws[0], &r, &p), s1 = route_prefill_score(&ws[1], &r, &p);
    CHECK(s0 == cf_chunk_cost(1.0, 0.01, 0, 1000));
    CHECK(s1 == cf_chunk_cost(1.0, 0.01, 900, 100));
    /* ... unless its queue holds more compute than that saves */
    ws[1].queued_cost = s0 - s1 + 1;
    CHECK(route_prefill_compute(ws, 2, &r, &p) == 0);
    /* a faster worker finishes sooner */
    ws[1].speed = 2.0;
    CHECK(route_prefill_compute(ws, 2, &r, &p) == 1);
    /* the attention term: with attention costing nothing, a cached prefix saves only linear work */
    route_params flat = {.linear_cost = 1.0, .attn_cost = 0};
    ws[1].queued_cost = 0, ws[1].speed = 1;
    CHECK(route_prefill_score(&ws[1], &r, &flat) == 100);
    /* a fully cached prompt still computes its last token */
    ws[1].cached_tokens = 5000;
    CHECK(route_prefill_score(&ws[1], &r, &flat) == 1);
    ws[0].healthy = ws[1].accepting = false;
    CHECK(route_prefill_compute(ws, 2, &r, &p) == -1);
    /* the shared arithmetic is the scheduler's */
    sched_limits l = {.linear_cost = 1.0, .attn_cost = 0.01};
    CHECK(sched_chunk_cost(&l, 37, 91) == cf_chunk_cost(1.0, 0.01, 37, 91));
}

static void test_decode_load(void) {
    route_params p = {.linear_cost = 1.0, .attn_cost = 0.001};
    route_worker ws[2] = {worker(1), worker(2)};
    route_request r = {.prompt_tokens = 100, .max_tokens = 100};
    /* same requests, more KV on worker 0 -> worker 1 */
    ws[0].running = ws[1].running = 4;
    ws[0].kv_tokens = 8000, ws[1].kv_tokens = 2000;
    CHECK(route_decode_load(ws, 2, &r, &p) == 1);
    /* memory pressure dominates when near full */
    CHECK(route_decode_score(&ws[0], &r, &p) > 0.8);
    /* a worker that cannot hold the prompt is not eligible */
    ws[1].kv_tokens = 9950;
    CHECK(route_decode_load(ws, 2, &r, &p) == 0);
    ws[0].kv_tokens = 9990;
    CHECK(route_decode_load(ws, 2, &r, &p) == -1);
    /* step-time pressure: same KV, more running requests loses */
    ws[0].kv_tokens = ws[1].kv_tokens = 1000;
    ws[0].running = 15, ws[1].running = 2;
    CHECK(route_decode_load(ws, 2, &r, &p) == 1);
    /* normalised per capacity: a bigger worker takes more */
    ws[0].kv_capacity = 100000, ws[0].max_seqs = 256;
    ws[0].running = 6, ws[1].running = 3;
    CHECK(route_decode_load(ws, 2, &r, &p) == 0);
}

static void test_prefix_index(void) {
    prefix_index ix;
    CHECK(prefix_index_init(&ix, 2, 64) == 0);
    char a[1024], b[1024];
    memset(a, 'x', sizeof a);
    memcpy(b, a, sizeof b);
    b[600] = 'y'; /* differs in chunk 4 */
    uint64_t ca[8], cb[8];
    CHECK(prefix_chain("t", 1, a, sizeof a, ca, 8) == 8);
    CHECK(prefix_chain("t", 1, b, sizeof b, cb, 8) == 8);
    CHECK(prefix_chain("t", 1, a, 127, ca, 8) == 0); /* no full chunk */
    CHECK(prefix_chain("t", 1, a, sizeof a, ca, 8) == 8);
    prefix_index_insert(&ix, 0, ca, 8);
    CHECK(prefix_index_match(&ix, 0, ca, 8) == 8);
    CHECK(prefix_index_match(&ix, 0, cb, 8) == 4);
    CHECK(prefix_index_match(&ix, 1, ca, 8) == 0);
    CHECK(prefix_index_match(&ix, 7, ca, 8) == 0); /* out of range */
    prefix_index_clear_worker(&ix, 0);
    CHECK(prefix_index_match(&ix, 0, ca, 8) == 0);
    /* bounded: inserting far more than the table holds keeps the newest */
    uint64_t many[300];
    for (int i = 0; i < 300; i++) many[i] = prefix_hash_bytes((uint64_t)i, "k", 1);
    prefix_index_insert(&ix, 1, many, 300);
    int found = 0;
    for (int i = 236; i < 300; i++) found += prefix_index_match(&ix, 1, &many[i], 1);
    CHECKF(found >= 48, "newest 64 entries: %d found", found);
    prefix_index_free(&ix);
}

int main(void) {
    test_names();
    test_round_robin();
    test_least_requests();
    test_affinity();
    test_prefill_compute();
    test_decode_load();
    test_prefix_index();
    return test_finish();
}
