/* test_engine_soak.c - 1000 requests through one engine on stories260K with a
 * small KV pool (preemption and prefix-cache eviction happen): random prompt
 * lengths, four shared prefixes plus unshared prompts, exact duplicates,
 * random cancels and releases, submissions in waves while others run, and
 * outputs drained through the eventfd + cinfer_engine_ready() path a server
 * uses. Checks: every request finishes exactly once with a sane reason and
 * usage; duplicates (same prompt, not cancelled) give the same tokens; the KV
 * budget holds; at the end no block is referenced (all free or cached). Half
 * the requests speculate with the n-gram drafter.
 * Run under ASan (-DCINFER_SANITIZE=ON) it also checks for leaks. */
#include <poll.h>
#include <stdio.h>

#include "engine_testlib.h"

#define NSOAK 1000
#define MAXP 300

typedef struct soak_req {
    int32_t prompt[MAXP];
    int32_t n_prompt, max_tokens;
    int dup_of; /* index of an earlier request with the same prompt and max_tokens, or -1 */
    uint64_t id;
    bool cancelled, released, done;
    run_result res;
} soak_req;

static soak_req reqs[NSOAK];

static void make_requests(void) {
    static int32_t prefixes[4][200];
    for (int p = 0; p < 4; p++) tl_prompt(prefixes[p], 200);
    for (int i = 0; i < NSOAK; i++) {
        soak_req *q = &reqs[i];
        q->dup_of = -1;
        if (i >= 10 && tl_rand() % 8 == 0) { /* exact duplicate of an earlier request */
            int j = (int)(tl_rand() % (uint32_t)i);
            while (reqs[j].dup_of >= 0) j = reqs[j].dup_of;
            memcpy(q->prompt, reqs[j].prompt, sizeof q->prompt);
            q->n_prompt = reqs[j].n_prompt;
            q->max_tokens = reqs[j].max_tokens;
            q->dup_of = j;
            continue;
        }
        q->n_prompt = 1 + (int32_t)(tl_rand() % 250);
        q->max_tokens = 1 + (int32_t)(tl_rand() % 40);
        tl_prompt(q->prompt, q->n_prompt);
        if (tl_rand() % 2) { /* shared prefix of 20..200 tokens */
            int32_t pl = 20 + (int32_t)(tl_rand() % 181);
            if (pl > q->n_prompt) pl = q->n_prompt;
            memcpy(q->prompt, prefixes[tl_rand() % 4], (size_t)pl * sizeof(int32_t));
        }
    }
}

static uint64_t submit_one(cinfer_engine *e, int i) {
    cinfer_request r = cinfer_request_default();
    r.prompt = reqs[i].prompt;
    r.n_prompt = reqs[i].n_prompt;
    r.max_tokens = reqs[i].max_tokens;
    r.ignore_eos = true;
    r.priority = (int32_t)(tl_rand() % 3);
    if (i % 2) { /* half speculate (n-gram drafts, k 1..8): greedy, so duplicates still agree */
        r.speculative.drafter = CINFER_SPEC_NGRAM;
        r.speculative.k = 1 + i % 8;
    }
    reqs[i].id = tl_submit(e, &r);
    return reqs[i].id;
}

static int find_req(uint64_t id) {
    for (int i = 0; i < NSOAK; i++)
        if (reqs[i].id == id) return i;
    return -1;
}

/* Drains one ready request; random cancel / release. Returns 1 if it ended. */
static int drain_one(cinfer_engine *e, int i, cinfer_output *o) {
    soak_req *q = &reqs[i];
    if (q->done || q->released) return 0;
    int ended = 0;
    while (cinfer_engine_read(e, q->id, o, 0) == 1) {
        for (int32_t k = 0; k < o->n_tokens && q->res.n_tokens < 2048; k++)
            q->res.tokens[q->res.n_tokens++] = o->tokens[k];
        if (o->finish != CINFER_FINISH_NONE) {
            q->res.finish = o->finish;
            q->res.usage = o->usage;
            q->done = true;
            return 1;
        }
    }
    uint32_t dice = tl_rand() % 1000;
    if (dice < 12 && !q->cancelled) {
        CHECK(cinfer_engine_cancel(e, q->id) == 0);
        q->cancelled = true;
    } else if (dice < 18) {
        CHECK(cinfer_engine_release(e, q->id) == 0);
        q->released = true;
        ended = 1;
    }
    return ended;
}

int main(void) {
    model *m;
    cf_err err = {0};
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) return tu_missing_fixture(err.msg);
    thread_pool *tp = pool_create(1);
    make_requests();
    /* ~60 blocks of 16 tokens: enough for any one request, far from all */
    cinfer_engine *e = tl_engine(m, tp, 60 * 20 * 1024 + 8192, 256, 32, 512);
    CHECK(e != NULL);
    if (!e) return test_finish();
    int submitted = 0, ended = 0;
    cinfer_output o;
    memset(&o, 0, sizeof o);
    while (ended < NSOAK) {
        while (submitted < NSOAK && submitted - ended < 120) {
            CHECK(submit_one(e, submitted) != 0);
            submitted++;
        }
        struct pollfd pfd = {.fd = cinfer_engine_fd(e), .events = POLLIN};
        int pr = poll(&pfd, 1, 5000);
        CHECK(pr == 1);
        if (pr != 1) break;
        uint64_t ids[64];
        int n;
        while ((n = cinfer_engine_ready(e, ids, 64)) > 0)
            for (int k = 0; k < n; k++) {
                int i = find_req(ids[k]);
                if (i >= 0) ended += drain_one(e, i, &o);
            }
        cinfer_engine_stats s = cinfer_engine_get_stats(e);
        CHECK(s.kv_bytes <= s.kv_budget && s.kv_blocks_used <= s.kv_blocks_total);
    }
    cinfer_output_release(&o);
    int n_cancelled = 0, n_released = 0, dup_checked = 0;
    for (int i = 0; i < NSOAK; i++) {
        soak_req *q = &reqs[i];
        n_released += q->released;
        if (q->released) continue;
        CHECK(q->done);
        if (q->res.finish == CINFER_FINISH_CANCELLED) {
            n_cancelled++;
            CHECK(q->cancelled && q->res.n_tokens <= q->max_tokens);
            continue;
        }
        CHECKF(q->res.finish == CINFER_FINISH_LENGTH && q->res.n_tokens == q->max_tokens, "req %d finish %d, %d of %d",
               i, (int)q->res.finish, q->res.n_tokens, q->max_tokens);
        CHECK(q->res.usage.prompt_tokens == q->n_prompt && q->res.usage.completion_tokens == q->max_tokens);
        CHECK(q->res.usage.cached_tokens <= q->n_prompt - 1);
        int j = q->dup_of;
        if (j >= 0 && reqs[j].done && reqs[j].res.finish == CINFER_FINISH_LENGTH) {
            CHECK(tl_same_tokens(&q->res, &reqs[j].res));
            dup_checked++;
        }
    }
    /* let the engine finish released requests, then the pool must be idle */
    cinfer_engine_stats s;
    for (int t = 0; t < 500; t++) {
        s = cinfer_engine_get_stats(e);
        if (s.kv_blocks_used == 0 && s.running == 0 && s.waiting == 0) break;
        struct pollfd pfd = {.fd = cinfer_engine_fd(e), .events = POLLIN};
        poll(&pfd, 1, 10);
        uint64_t ids[64];
        while (cinfer_engine_ready(e, ids, 64) > 0) {}
    }
    fprintf(stderr,
            "soak: %d requests, %d cancelled, %d released, %d duplicates identical; %llu steps, %llu preemptions, "
            "%llu cached prompt tokens, %llu computed; blocks free %d + cached %d of %d, used %d, peak %d\n",
            NSOAK, n_cancelled, n_released, dup_checked, (unsigned long long)s.steps, (unsigned long long)s.preemptions,
            (unsigned long long)s.cached_tokens, (unsigned long long)s.prompt_tokens_computed, s.kv_blocks_free,
            s.kv_blocks_cached, s.kv_blocks_total, s.kv_blocks_used, s.kv_blocks_used_peak);
    CHECK(s.kv_blocks_used == 0);
    CHECK(s.kv_blocks_free + s.kv_blocks_cached == s.kv_blocks_total);
    CHECK(s.kv_blocks_used_peak <= s.kv_blocks_total);
    CHECK(s.preemptions > 0 && s.cached_tokens > 0);
    fprintf(stderr, "soak: %llu verify items, %llu drafted, %llu accepted\n",
            (unsigned long long)s.spec_verifies[CINFER_SPEC_NGRAM],
            (unsigned long long)s.spec_drafted[CINFER_SPEC_NGRAM],
            (unsigned long long)s.spec_accepted[CINFER_SPEC_NGRAM]);
    CHECK(s.spec_verifies[CINFER_SPEC_NGRAM] > 0);
    cinfer_engine_destroy(e);
    pool_destroy(tp);
    model_free(m);
    return test_finish();
}
