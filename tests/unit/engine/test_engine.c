/* test_engine.c - the serving engine on stories260K (F32):
 *  - batch invariance: 32 requests of different prompt lengths and
 *    max_tokens submitted at once (greedy) give exactly the tokens each gives
 *    alone; again with a KV budget small enough to force preemption, and with
 *    max_batch_tokens 16 (chunked prefill); all of it with BF16 attention
 *    where the CPU runs it natively (the default of serve / bench / run
 *    there), then with F32 attention;
 *  - prefix caching: a request sharing a 1000-token prefix with a finished one
 *    reports >= 992 cached tokens, computes only the rest (engine stats) and
 *    matches a cold run; a different cache salt gets 0;
 *  - stops: EOS (forced by a logit bias, and natural), max_tokens, stop token
 *    ids, a stop string spanning token boundaries (absent from the text),
 *    cancel mid-generation frees the blocks at once;
 *  - threads: 4 client threads submitting and reading 8 requests each at the
 *    same time get the solo tokens.
 * The solo references run with synchronous scheduling and every batched run
 * with asynchronous scheduling (the default), so async == sync is checked
 * too; the stop tests run in both modes. */
#include <pthread.h>
#include <stdio.h>

#include "engine_testlib.h"

#define NREQ 32
#define CTX 1024

static const model *g_m;
static thread_pool *g_tp;

typedef struct req_spec {
    int32_t prompt[128];
    int32_t n_prompt, max_tokens;
} req_spec;

static req_spec specs[NREQ];
static run_result alone[NREQ], together[NREQ];

static cinfer_request greedy(const int32_t *p, int32_t n, int32_t max_tokens) {
    cinfer_request r = cinfer_request_default();
    r.prompt = p;
    r.n_prompt = n;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    return r;
}

/* All NREQ requests at once; checks each against the alone run. */
static void run_batch(const char *name, int64_t kv_bytes, int32_t max_batch, bool expect_preempt) {
    cinfer_engine *e = tl_engine(g_m, g_tp, kv_bytes, max_batch, 64, CTX);
    CHECK(e != NULL);
    if (!e) return;
    uint64_t ids[NREQ];
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = greedy(specs[i].prompt, specs[i].n_prompt, specs[i].max_tokens);
        ids[i] = tl_submit(e, &r);
        memset(&together[i], 0, sizeof together[i]);
    }
    int same = 0;
    for (int i = 0; i < NREQ; i++) {
        CHECK(tl_collect(e, ids[i], &together[i]) == 0);
        same += tl_same_tokens(&alone[i], &together[i]);
        CHECKF(tl_same_tokens(&alone[i], &together[i]), "%s: request %d differs (%d vs %d tokens)", name, i,
               together[i].n_tokens, alone[i].n_tokens);
        CHECK(together[i].finish == CINFER_FINISH_LENGTH);
    }
    cinfer_engine_stats s = cinfer_engine_get_stats(e);
    fprintf(stderr, "%s: %d/%d identical, %llu steps, %llu preemptions, %llu recomputed, peak %d of %d blocks\n", name,
            same, NREQ, (unsigned long long)s.steps, (unsigned long long)s.preemptions,
            (unsigned long long)s.recomputed_tokens, s.kv_blocks_used_peak, s.kv_blocks_total);
    if (expect_preempt) CHECK(s.preemptions > 0);
    CHECK(s.kv_blocks_used == 0);
    CHECK(s.kv_blocks_used_peak <= s.kv_blocks_total && s.kv_bytes <= s.kv_budget);
    if (max_batch < 64) CHECK(s.steps > NREQ);
    cinfer_engine_destroy(e);
}

static void test_invariance_as(void) {
    tl_sync_scheduling = true;
    cinfer_engine *e = tl_engine(g_m, g_tp, 64 << 20, 2048, 64, CTX);
    tl_sync_scheduling = false;
    CHECK(e != NULL);
    if (!e) return;
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = greedy(specs[i].prompt, specs[i].n_prompt, specs[i].max_tokens);
        CHECK(tl_run(e, &r, &alone[i]) == 0);
        CHECK(alone[i].n_tokens == specs[i].max_tokens);
    }
    cinfer_engine_destroy(e);
    run_batch("batched", 64 << 20, 2048, false);
    /* ~24 blocks of 16 tokens (20 KiB each): far less than 32 requests need */
    run_batch("preempting", 24 * 20 * 1024 + 4096, 2048, true);
    run_batch("chunked", 64 << 20, 16, false);
}

static void test_invariance(void) {
    for (int i = 0; i < NREQ; i++) {
        specs[i].n_prompt = 5 + (int32_t)(tl_rand() % 120);
        specs[i].max_tokens = 4 + (int32_t)(tl_rand() % 60);
        tl_prompt(specs[i].prompt, specs[i].n_prompt);
    }
    if (attn_prec_native(ATTN_PREC_BF16)) {
        fprintf(stderr, "with BF16 attention:\n");
        tl_attn_precision = CINFER_ATTN_BF16;
        test_invariance_as();
        tl_attn_precision = CINFER_ATTN_F32;
    } else {
        fprintf(stderr, "BF16 attention: not native here, not run\n");
    }
    fprintf(stderr, "with F32 attention:\n");
    test_invariance_as(); /* last: the threads test compares against these F32 solo runs */
}

static void test_prefix(void) {
    static int32_t a[1010], b[1010];
    tl_prompt(a, 1000);
    memcpy(b, a, 1000 * sizeof(int32_t));
    tl_prompt(a + 1000, 8);
    tl_prompt(b + 1000, 8);
    cinfer_engine *e = tl_engine(g_m, g_tp, 64 << 20, 2048, 64, CTX + 100);
    CHECK(e != NULL);
    if (!e) return;
    static run_result ra, rb, rc, rs;
    cinfer_request r = greedy(a, 1008, 12);
    CHECK(tl_run(e, &r, &ra) == 0);
    CHECK(ra.usage.cached_tokens == 0);
    cinfer_engine_stats s0 = cinfer_engine_get_stats(e);
    r = greedy(b, 1008, 12);
    CHECK(tl_run(e, &r, &rb) == 0);
    cinfer_engine_stats s1 = cinfer_engine_get_stats(e);
    uint64_t computed = s1.prompt_tokens_computed - s0.prompt_tokens_computed;
    fprintf(stderr, "prefix: cached %d of %d prompt tokens, computed %llu\n", rb.usage.cached_tokens,
            rb.usage.prompt_tokens, (unsigned long long)computed);
    CHECK(rb.usage.cached_tokens >= 992);
    CHECK(rb.usage.prompt_tokens == 1008);
    CHECK(computed == (uint64_t)(1008 - rb.usage.cached_tokens));
    /* different salt: nothing shared */
    r.cache_salt = "tenant-b";
    r.cache_salt_len = 8;
    CHECK(tl_run(e, &r, &rs) == 0);
    CHECK(rs.usage.cached_tokens == 0);
    CHECK(tl_same_tokens(&rs, &rb));
    cinfer_engine_destroy(e);
    /* cold run on a fresh engine */
    e = tl_engine(g_m, g_tp, 64 << 20, 2048, 64, CTX + 100);
    r = greedy(b, 1008, 12);
    CHECK(tl_run(e, &r, &rc) == 0);
    CHECK(rc.usage.cached_tokens == 0);
    CHECK(tl_same_tokens(&rc, &rb));
    fprintf(stderr, "prefix: warm == cold: %s, salted cached %d\n", tl_same_tokens(&rc, &rb) ? "yes" : "NO",
            rs.usage.cached_tokens);
    cinfer_engine_destroy(e);
}

static void test_stops(void) {
    cinfer_engine *e = tl_engine(g_m, g_tp, 64 << 20, 2048, 64, CTX);
    CHECK(e != NULL);
    if (!e) return;
    static run_result ref, got;
    int32_t p[] = {1, 400, 34, 87, 300, 12, 45};
    cinfer_request r = greedy(p, 7, 200);
    CHECK(tl_run(e, &r, &ref) == 0);
    CHECK(ref.n_tokens == 200 && ref.finish == CINFER_FINISH_LENGTH);

    /* forced EOS: first token is EOS, nothing emitted, one completion token */
    cinfer_logit_bias eosb = {.token = 2, .bias = 1000};
    r.ignore_eos = false;
    r.sampling.bias = &eosb;
    r.sampling.n_bias = 1;
    CHECK(tl_run(e, &r, &got) == 0);
    CHECK(got.finish == CINFER_FINISH_STOP && got.n_tokens == 0 && got.usage.completion_tokens == 1);
    CHECK(got.stop_string == -1); /* EOS: no stop string */
    r.sampling.bias = NULL;
    r.sampling.n_bias = 0;

    /* natural EOS, if the reference has one */
    int eos_at = -1;
    for (int i = 0; i < ref.n_tokens && eos_at < 0; i++)
        if (ref.tokens[i] == 2) eos_at = i;
    CHECK(tl_run(e, &r, &got) == 0);
    if (eos_at >= 0) {
        CHECK(got.finish == CINFER_FINISH_STOP && got.n_tokens == eos_at);
        CHECK(!memcmp(got.tokens, ref.tokens, (size_t)eos_at * sizeof(int32_t)));
    }
    fprintf(stderr, "stops: natural EOS at %d\n", eos_at);
    r.ignore_eos = true;

    /* max_tokens */
    r.max_tokens = 9;
    CHECK(tl_run(e, &r, &got) == 0);
    CHECK(got.finish == CINFER_FINISH_LENGTH && got.n_tokens == 9 && got.usage.completion_tokens == 9);
    CHECK(!memcmp(got.tokens, ref.tokens, 9 * sizeof(int32_t)));

    /* stop token id: the first occurrence of ref's 6th token */
    int32_t stop_id = ref.tokens[5];
    int first = 0;
    while (ref.tokens[first] != stop_id) first++;
    r.max_tokens = 200;
    r.stop_tokens = &stop_id;
    r.n_stop_tokens = 1;
    CHECK(tl_run(e, &r, &got) == 0);
    CHECK(got.finish == CINFER_FINISH_STOP && got.n_tokens == first);
    CHECK(got.stop_string == -1); /* a stop token id is not a stop string */
    r.stop_tokens = NULL;
    r.n_stop_tokens = 0;

    /* stop string spanning a token boundary: last 2 bytes of the text after
     * token k + first 2 bytes of token k+1's piece */
    static run_result pieces;
    size_t bound = 0;
    char stop[8] = {0};
    {
        /* text after k tokens: run with max_tokens k (no stop strings) */
        for (int k = 4; k < 60 && !stop[0]; k++) {
            cinfer_request q = r;
            q.max_tokens = k;
            CHECK(tl_run(e, &q, &pieces) == 0);
            size_t lk = pieces.text_len;
            if (lk >= 2 && lk + 2 <= ref.text_len && ref.text[lk] != ' ' && ref.text[lk - 1] != ' ' &&
                (unsigned char)ref.text[lk] < 128 && (unsigned char)ref.text[lk + 1] < 128 &&
                (unsigned char)ref.text[lk - 2] < 128) {
                memcpy(stop, ref.text + lk - 2, 4);
                bound = lk;
            }
        }
    }
    CHECK(stop[0] != 0);
    const char *stops[] = {"zzqq-never", stop};
    r.stop_strings = stops;
    r.n_stop_strings = 2;
    CHECK(tl_run(e, &r, &got) == 0);
    const char *first_at = strstr(ref.text, stop);
    size_t expect_len = first_at ? (size_t)(first_at - ref.text) : 0;
    fprintf(stderr, "stops: stop string '%s' spans the boundary at byte %zu; text kept %zu bytes\n", stop, bound,
            got.text_len);
    CHECK(got.finish == CINFER_FINISH_STOP);
    CHECK(got.stop_string == 1); /* stops[1] matched */
    CHECK(got.usage.completion_tokens == got.n_tokens); /* a step already in flight is not counted */
    CHECK(got.text_len == expect_len && !memcmp(got.text, ref.text, expect_len));
    CHECK(strstr(got.text, stop) == NULL);
    { /* two stop strings at the same offset: the lower index is reported; an earlier
         * occurrence of a later-listed string wins over a later occurrence */
        char pre[4] = {stop[0], stop[1], stop[2], 0};
        const char *same[] = {"zzqq-never", pre, stop};
        r.stop_strings = same;
        r.n_stop_strings = 3;
        CHECK(tl_run(e, &r, &got) == 0);
        CHECK(got.finish == CINFER_FINISH_STOP);
        const char *pre_at = strstr(ref.text, pre);
        CHECK(pre_at && got.text_len == (size_t)(pre_at - ref.text) && got.stop_string == 1);
    }
    r.stop_strings = NULL;
    r.n_stop_strings = 0;

    /* text of a full run equals the reference text */
    r.max_tokens = 200;
    CHECK(tl_run(e, &r, &got) == 0);
    CHECK(got.text_len == ref.text_len && !strcmp(got.text, ref.text));

    /* logprobs of greedy tokens: finite, <= 0; a timed-out read returns 0 */
    {
        cinfer_request q = r;
        q.max_tokens = 5;
        q.want_logprobs = true;
        uint64_t lid = tl_submit(e, &q);
        cinfer_output lo;
        memset(&lo, 0, sizeof lo);
        int32_t nl = 0, ok = 0;
        while (lo.finish == CINFER_FINISH_NONE && cinfer_engine_read(e, lid, &lo, 2000) == 1)
            for (int32_t k = 0; k < lo.n_tokens; k++, nl++) ok += lo.logprobs[k] <= 0 && lo.logprobs[k] > -50;
        CHECK(nl == 5 && ok == 5);
        cinfer_output_release(&lo);
    }

    /* cancel mid-generation */
    r.max_tokens = 900;
    uint64_t id = tl_submit(e, &r);
    cinfer_output o;
    memset(&o, 0, sizeof o);
    int32_t seen = 0;
    while (seen < 20 && cinfer_engine_read(e, id, &o, -1) == 1) seen += o.n_tokens;
    CHECK(o.finish == CINFER_FINISH_NONE);
    CHECK(cinfer_engine_get_stats(e).kv_blocks_used > 0);
    CHECK(cinfer_engine_cancel(e, id) == 0);
    while (o.finish == CINFER_FINISH_NONE && cinfer_engine_read(e, id, &o, -1) == 1) seen += o.n_tokens;
    CHECK(o.finish == CINFER_FINISH_CANCELLED);
    cinfer_engine_stats s = cinfer_engine_get_stats(e);
    fprintf(stderr, "cancel: after %d tokens; blocks used %d (cached %d)\n", seen, s.kv_blocks_used,
            s.kv_blocks_cached);
    CHECK(s.kv_blocks_used == 0);
    CHECK(cinfer_engine_read(e, id, &o, 0) == -1);
    cinfer_output_release(&o);
    cinfer_engine_destroy(e);
}

typedef struct client {
    cinfer_engine *e;
    int first;
    int same;
} client;

static void *client_main(void *arg) {
    client *c = arg;
    static run_result res[NREQ];
    uint64_t ids[8];
    for (int k = 0; k < 8; k++) {
        int i = c->first + k;
        cinfer_request r = greedy(specs[i].prompt, specs[i].n_prompt, specs[i].max_tokens);
        ids[k] = tl_submit(c->e, &r);
    }
    for (int k = 0; k < 8; k++) {
        int i = c->first + k;
        memset(&res[i], 0, sizeof res[i]);
        if (ids[k] && tl_collect(c->e, ids[k], &res[i]) == 0) c->same += tl_same_tokens(&res[i], &alone[i]);
    }
    return NULL;
}

static void test_threads(void) {
    cinfer_engine *e = tl_engine(g_m, g_tp, 64 << 20, 2048, 64, CTX);
    CHECK(e != NULL);
    if (!e) return;
    client c[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        c[t] = (client){.e = e, .first = 8 * t};
        CHECK(pthread_create(&th[t], NULL, client_main, &c[t]) == 0);
    }
    int same = 0;
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        same += c[t].same;
    }
    fprintf(stderr, "threads: %d/%d identical from 4 client threads\n", same, NREQ);
    CHECK(same == NREQ);
    cinfer_engine_destroy(e);
}

/* vLLM extras: min_tokens masks EOS (and stop ids) until that many tokens were generated;
 * include_stop_str keeps the matched stop string at the end of the text; keep_special renders
 * control tokens. */
static void test_extras(void) {
    cinfer_engine *e = tl_engine(g_m, g_tp, 64 << 20, 2048, 64, CTX);
    CHECK(e != NULL);
    if (!e) return;
    static run_result ref, got;
    int32_t p[] = {1, 400, 34, 87, 300, 12, 45};
    cinfer_request r = greedy(p, 7, 80);
    CHECK(tl_run(e, &r, &ref) == 0);

    cinfer_logit_bias eosb = {.token = 2, .bias = 1000};
    r.ignore_eos = false;
    r.sampling.bias = &eosb;
    r.sampling.n_bias = 1;
    r.min_tokens = 5;
    CHECK(tl_run(e, &r, &got) == 0);
    CHECKF(got.finish == CINFER_FINISH_STOP && got.n_tokens == 5 && got.usage.completion_tokens == 6,
           "min_tokens: finish %d after %d tokens", got.finish, got.n_tokens);
    for (int i = 0; i < got.n_tokens; i++) CHECK(got.tokens[i] != 2);
    r.min_tokens = 0;

    /* EOS forced at every step with ignore_eos: the control token's text only with keep_special */
    r.ignore_eos = true;
    r.max_tokens = 3;
    CHECK(tl_run(e, &r, &got) == 0);
    size_t plain = got.text_len;
    r.keep_special = true;
    CHECK(tl_run(e, &r, &got) == 0);
    CHECKF(got.n_tokens == 3 && got.text_len > plain, "keep_special: %zu vs %zu bytes", got.text_len, plain);
    r.keep_special = false;
    r.sampling.bias = NULL;
    r.sampling.n_bias = 0;

    /* a stop string taken from the reference text: cut before it, or after it when included */
    r.max_tokens = 80;
    CHECK(ref.text_len > 40);
    if (ref.text_len > 40) {
        char stop[4];
        memcpy(stop, ref.text + 30, 3);
        stop[3] = 0;
        size_t at = (size_t)(strstr(ref.text, stop) - ref.text);
        const char *stops[] = {stop};
        r.stop_strings = stops;
        r.n_stop_strings = 1;
        CHECK(tl_run(e, &r, &got) == 0);
        CHECK(got.finish == CINFER_FINISH_STOP && got.text_len == at && !memcmp(got.text, ref.text, at));
        r.include_stop_str = true;
        CHECK(tl_run(e, &r, &got) == 0);
        CHECKF(got.finish == CINFER_FINISH_STOP && got.text_len == at + 3 && !memcmp(got.text, ref.text, at + 3),
               "include_stop_str: %zu bytes, want %zu", got.text_len, at + 3);
    }
    cinfer_engine_destroy(e);
}

int main(void) {
    model *m;
    cf_err err = {0};
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) return tu_missing_fixture(err.msg);
    g_m = m;
    g_tp = pool_create(1);
    tl_sync_scheduling = true;
    test_stops();
    tl_sync_scheduling = false;
    test_stops();
    test_extras();
    test_prefix();
    test_invariance();
    test_threads();
    pool_destroy(g_tp);
    model_free(m);
    return test_finish();
}
