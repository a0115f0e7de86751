/* test_engine_store_soak.c - the store under churn (stories260K): 40
 * requests over 8 shared 200-token prefixes with different suffixes, run all
 * at once on
 *   1. an engine with a fresh store directory (populates it), then
 *   2. a new engine on that directory with a pool of ~60 blocks (heavy
 *      preemption: loads and write-backs interleave with recomputation) where
 *      every 4th request is cancelled shortly after submission,
 * each compared with the request run alone on an engine without a store:
 * every request that was not cancelled gives exactly the solo tokens; the
 * store is used (hits > 0), nothing is quarantined, and once the engine is
 * idle every pool block is free or cached (write-back references released). */
#include <time.h>

#include "engine_testlib.h"
#include "store/store.h"

#define NREQ 40
#define NPREFIX 8
#define PLEN 200
#define BT 16

typedef struct spec {
    int32_t prompt[300];
    int32_t n_prompt, max_tokens;
} spec;

static spec g_specs[NREQ];
static run_result g_solo[NREQ], g_run[NREQ];

static cinfer_engine *mk(const model *m, thread_pool *tp, const char *dir, int64_t kv_bytes) {
    cinfer_engine_options o = {.block_tokens = BT,
                               .kv_memory_bytes = kv_bytes,
                               .max_batch_tokens = 256,
                               .max_seqs = 16,
                               .max_ctx = 512,
                               .kv_store_dir = dir,
                               .kv_store_gc_interval_s = -1};
    cinfer_engine *e = NULL;
    char err[256];
    if (cinfer_engine_create(m, tp, &o, &e, err, sizeof err)) fprintf(stderr, "engine create: %s\n", err);
    return e;
}

static cinfer_request req_of(int i) {
    cinfer_request r = cinfer_request_default();
    r.prompt = g_specs[i].prompt;
    r.n_prompt = g_specs[i].n_prompt;
    r.max_tokens = g_specs[i].max_tokens;
    r.ignore_eos = true;
    r.traffic_class = i % CINFER_TRAFFIC_N;
    return r;
}

/* All requests at once; cancel_every > 0 cancels every n-th. Returns identical count among the others. */
static int run_all(cinfer_engine *e, int cancel_every, int *n_checked) {
    uint64_t ids[NREQ];
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = req_of(i);
        ids[i] = tl_submit(e, &r);
        memset(&g_run[i], 0, sizeof g_run[i]);
    }
    if (cancel_every > 0) {
        struct timespec d = {0, 2 * 1000000L};
        nanosleep(&d, NULL);
        for (int i = 0; i < NREQ; i += cancel_every) cinfer_engine_cancel(e, ids[i]);
    }
    int same = 0;
    *n_checked = 0;
    for (int i = 0; i < NREQ; i++) {
        CHECK(tl_collect(e, ids[i], &g_run[i]) == 0);
        if (cancel_every > 0 && i % cancel_every == 0) {
            CHECK(g_run[i].finish == CINFER_FINISH_CANCELLED || g_run[i].finish == CINFER_FINISH_LENGTH);
            continue;
        }
        (*n_checked)++;
        same += tl_same_tokens(&g_run[i], &g_solo[i]);
        CHECKF(tl_same_tokens(&g_run[i], &g_solo[i]), "request %d differs", i);
    }
    return same;
}

/* Waits (up to 5 s) until no pool block is referenced. */
static cinfer_engine_stats wait_idle(cinfer_engine *e) {
    cinfer_engine_stats s = cinfer_engine_get_stats(e);
    for (int i = 0; i < 500 && s.kv_blocks_used != 0; i++) {
        struct timespec d = {0, 10 * 1000000L};
        nanosleep(&d, NULL);
        s = cinfer_engine_get_stats(e);
    }
    return s;
}

int main(void) {
    model *m;
    cf_err err = {0};
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) return tu_missing_fixture(err.msg);
    thread_pool *tp = pool_create(1);
    static int32_t prefixes[NPREFIX][PLEN];
    for (int p = 0; p < NPREFIX; p++) tl_prompt(prefixes[p], PLEN);
    for (int i = 0; i < NREQ; i++) {
        spec *s = &g_specs[i];
        int32_t suffix = 10 + (int32_t)(tl_rand() % 60);
        memcpy(s->prompt, prefixes[i % NPREFIX], sizeof prefixes[0]);
        tl_prompt(s->prompt + PLEN, suffix);
        s->n_prompt = PLEN + suffix;
        s->max_tokens = 8 + (int32_t)(tl_rand() % 33);
    }
    char dir[256];
    if (!test_scratch_path(dir, sizeof dir, "engine-store-soak")) {
        fprintf(stderr, "cannot make a scratch directory\n");
        return 1;
    }

    cinfer_engine *e = mk(m, tp, NULL, 32 << 20);
    for (int i = 0; e && i < NREQ; i++) {
        cinfer_request r = req_of(i);
        CHECK(tl_run(e, &r, &g_solo[i]) == 0);
    }
    cinfer_engine_destroy(e);

    int checked = 0, same;
    e = mk(m, tp, dir, 32 << 20);
    same = e ? run_all(e, 0, &checked) : 0;
    cinfer_engine_stats s1 = e ? wait_idle(e) : (cinfer_engine_stats){0};
    fprintf(stderr, "populate: %d/%d identical, %llu objects written, %llu dropped\n", same, checked,
            (unsigned long long)s1.store.objects_written, (unsigned long long)s1.store.writes_dropped);
    CHECK(same == checked && s1.store.objects_written > 0 && s1.kv_blocks_used == 0);
    if (e) cinfer_engine_destroy(e);

    /* ~60 blocks of 20 KiB: about 3 requests fit at once */
    e = mk(m, tp, dir, 60 * (20480 + 128));
    same = e ? run_all(e, 4, &checked) : 0;
    cinfer_engine_stats s2 = e ? wait_idle(e) : (cinfer_engine_stats){0};
    fprintf(stderr,
            "churn: %d/%d identical, %d blocks, %llu preemptions, %llu store lookups, %llu hit blocks, %llu "
            "timeouts, %llu quarantined, %llu written, %llu dropped, cached tokens %llu (store %llu), used %d\n",
            same, checked, s2.kv_blocks_total, (unsigned long long)s2.preemptions, (unsigned long long)s2.store.lookups,
            (unsigned long long)s2.store.hit_blocks, (unsigned long long)s2.store.load_timeouts,
            (unsigned long long)s2.store.quarantined, (unsigned long long)s2.store.objects_written,
            (unsigned long long)s2.store.writes_dropped, (unsigned long long)s2.cached_tokens,
            (unsigned long long)s2.cached_tokens_store, s2.kv_blocks_used);
    CHECK(same == checked);
    CHECK(s2.preemptions > 0 && s2.store.hit_blocks > 0 && s2.store.quarantined == 0);
    CHECK(s2.kv_blocks_used == 0 && s2.kv_bytes <= s2.kv_budget);
    if (e) cinfer_engine_destroy(e);
    test_scratch_remove(dir);
    pool_destroy(tp);
    model_free(m);
    return test_finish();
}
