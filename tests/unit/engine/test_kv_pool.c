/* test_kv_pool.c - the KV block pool: block count from the budget (never
 * exceeded), spec arithmetic, alloc/free order, ref counts, exhaustion as an
 * error (not a crash), all-or-nothing multi-alloc, cached blocks on the LRU
 * and their eviction (oldest first, hook called), stats consistency. */
#include <stdint.h>
#include <string.h>

#include "engine/kv_pool.h"
#include "testutil.h"

static kv_spec small_spec(void) {
    kv_spec s = {.n_groups = 1};
    s.groups[0] = (kv_group_spec){.kind = KV_LAYER_FULL, .n_layers = 2, .token_floats = 8};
    return s;
}

static int stats_consistent(const kv_pool *p) {
    kv_pool_stats s = kv_pool_get_stats(p);
    return s.total == s.free + s.used + s.cached && s.bytes <= s.budget;
}

static int32_t evicted[64];
static int n_evicted;
static void on_evict(void *ctx, int32_t b) {
    (void)ctx;
    if (n_evicted < 64) evicted[n_evicted++] = b;
}

/* Spec arithmetic and validation (plain, mixed window and row groups) and the window rings. */
static void test_specs_and_rings(void) {
    cf_err err = {{0}};
    kv_spec s = small_spec();

    /* spec arithmetic and validation */
    CHECK(kv_spec_block_floats(&s, 16) == 2 * 8 * 16);
    kv_spec mixed = {.n_groups = 2};
    mixed.groups[0] = (kv_group_spec){.kind = KV_LAYER_FULL, .n_layers = 3, .token_floats = 4};
    mixed.groups[1] = (kv_group_spec){.kind = KV_LAYER_WINDOW, .n_layers = 1, .token_floats = 10, .window = 128};
    CHECK(kv_spec_check(&mixed, &err) == 0);
    /* window groups live in per-sequence rings, not in blocks */
    CHECK(kv_spec_block_floats(&mixed, 4) == 3 * 4 * 4);
    CHECK(kv_spec_ring_row_floats(&mixed) == 10 && kv_spec_max_window(&mixed) == 128);
    CHECK(kv_ring_tokens(128, 32, 16) == 160 && kv_ring_tokens(100, 1, 16) == 112 && kv_ring_tokens(0, 8, 16) == 0);
    kv_spec bad = mixed;
    bad.groups[1].window = 0;
    CHECK(kv_spec_check(&bad, &err) == -1);
    bad = mixed; /* window-only: no paged group */
    bad.groups[0] = bad.groups[1];
    CHECK(kv_spec_check(&bad, &err) == -1 && strstr(err.msg, "no paged") != NULL);
    /* row groups (deepseek4's compressed streams): one row per row_tokens tokens */
    kv_spec rows = {.n_groups = 2};
    rows.groups[0] = (kv_group_spec){.kind = KV_LAYER_MLA, .n_layers = 3, .token_floats = 10, .row_tokens = 4};
    rows.groups[1] = (kv_group_spec){.kind = KV_LAYER_MLA, .n_layers = 2, .token_floats = 6, .row_tokens = 128};
    CHECK(kv_spec_check(&rows, &err) == 0 && kv_spec_block_multiple(&rows) == 128);
    CHECK(kv_spec_block_floats(&rows, 256) == 3 * 10 * 64 + 2 * 6 * 2);
    kv_pool *rp = NULL;
    CHECK(kv_pool_create(&rows, 64, 1 << 20, &rp, &err) == -1 && strstr(err.msg, "multiple") != NULL);
    CHECK(kv_pool_create(&rows, 128, 1 << 20, &rp, &err) == 0 && kv_pool_block_floats(rp) == 3 * 10 * 32 + 2 * 6);
    kv_pool_free(rp);

    /* rings: taken from the budget before the blocks, acquired and released */
    {
        kv_pool *rp = NULL;
        CHECK(kv_pool_create_rings(&mixed, 16, 1 << 20, 4, 32, &rp, &err) == 0);
        kv_pool_stats rs = kv_pool_get_stats(rp);
        CHECK(rs.rings == 4 && rs.rings_used == 0 && rs.ring_tokens == 160 && rs.bytes <= rs.budget);
        CHECK(rs.ring_bytes >= 10 * 160 * 4 && kv_pool_ring_blocks(rp) == 10);
        int32_t r[4];
        for (int i = 0; i < 4; i++) r[i] = kv_pool_ring_acquire(rp);
        CHECK(r[0] >= 0 && r[1] >= 0 && r[2] >= 0 && r[3] >= 0 && r[0] != r[1] && r[2] != r[3]);
        CHECK(kv_pool_ring_acquire(rp) == -1);
        CHECK(((uintptr_t)kv_pool_ring(rp, r[2]) & 63) == 0);
        char why[128];
        CHECK(kv_pool_check(rp, why, sizeof why) == 0);
        kv_pool_ring_release(rp, r[1]);
        CHECK(kv_pool_get_stats(rp).rings_used == 3 && kv_pool_ring_acquire(rp) == r[1]);
        CHECK(kv_pool_check(rp, why, sizeof why) == 0);
        kv_pool_free(rp);
        /* a budget that holds the rings but no block fails cleanly */
        CHECK(kv_pool_create_rings(&mixed, 16, 4 * (10 * 160 * 4 + 64), 4, 32, &rp, &err) == -1 && rp == NULL);
        CHECK(strstr(err.msg, "window rings") != NULL);
    }
    bad = s;
    bad.groups[0].token_floats = 0;
    CHECK(kv_spec_check(&bad, &err) == -1);
    bad.n_groups = 0;
    CHECK(kv_spec_check(&bad, &err) == -1);
}

int main(void) {
    cf_err err = {{0}};
    kv_spec s = small_spec();
    test_specs_and_rings();

    /* a budget too small for one block fails cleanly */
    kv_pool *p = NULL;
    CHECK(kv_pool_create(&s, 16, 100, &p, &err) == -1 && p == NULL);
    CHECK(strstr(err.msg, "holds no block") != NULL);

    /* budget never exceeded, for many budgets */
    for (int64_t budget = 1024; budget < 200000; budget = budget * 3 / 2 + 7) {
        if (kv_pool_create(&s, 16, budget, &p, &err) == 0) {
            kv_pool_stats st = kv_pool_get_stats(p);
            CHECKF(st.bytes <= budget && st.total >= 1, "budget %lld bytes %lld", (long long)budget,
                   (long long)st.bytes);
            /* and it is not wasteful: one more block would not fit */
            CHECK(st.bytes + st.block_bytes + 16 > budget);
            kv_pool_free(p);
        }
    }

    /* default block size */
    CHECK(kv_pool_create(&s, 0, 1 << 20, &p, &err) == 0);
    CHECK(kv_pool_block_tokens(p) == KV_POOL_DEFAULT_BLOCK_TOKENS);
    CHECK(kv_pool_block_floats(p) == 2 * 8 * 16);
    kv_pool_free(p);

    /* a pool of exactly 8 blocks */
    kv_pool_stats st0;
    {
        CHECK(kv_pool_create(&s, 16, 1 << 20, &p, &err) == 0);
        st0 = kv_pool_get_stats(p);
        kv_pool_free(p);
        int64_t per_block = st0.block_bytes + 16;
        int64_t fixed = st0.bytes - (int64_t)st0.total * per_block;
        CHECK(kv_pool_create(&s, 16, fixed + 8 * per_block, &p, &err) == 0);
        CHECK(kv_pool_n_blocks(p) == 8);
    }
    kv_pool_set_evict_hook(p, on_evict, NULL);

    int32_t ids[8];
    for (int i = 0; i < 8; i++) {
        CHECK(kv_pool_alloc(p, &ids[i], &err) == 0);
        CHECK(ids[i] == i);
        CHECK(kv_pool_refs(p, ids[i]) == 1);
        /* blocks are distinct, aligned and writable */
        float *b = kv_pool_block(p, ids[i]);
        CHECK(((uintptr_t)b & 63) == 0);
        for (int64_t j = 0; j < kv_pool_block_floats(p); j++) b[j] = (float)i;
    }
    for (int i = 0; i < 8; i++) CHECK(kv_pool_block(p, i)[kv_pool_block_floats(p) - 1] == (float)i);
    kv_pool_stats st = kv_pool_get_stats(p);
    CHECK(st.used == 8 && st.free == 0 && st.cached == 0);

    /* exhaustion is an error, not a crash */
    int32_t extra = 12345;
    err.msg[0] = 0;
    CHECK(kv_pool_alloc(p, &extra, &err) == -1);
    CHECK(strstr(err.msg, "in use") != NULL);
    CHECK(extra == 12345);

    /* ref counts */
    kv_pool_ref(p, 3);
    CHECK(kv_pool_refs(p, 3) == 2);
    CHECK(kv_pool_unref(p, 3) == 1);
    CHECK(kv_pool_get_stats(p).used == 8);
    CHECK(kv_pool_unref(p, 3) == 0);
    st = kv_pool_get_stats(p);
    CHECK(st.used == 7 && st.free == 1);
    CHECK(kv_pool_alloc(p, &extra, &err) == 0 && extra == 3); /* LIFO free stack */

    /* all-or-nothing multi-alloc */
    CHECK(kv_pool_unref(p, 5) == 0);
    CHECK(kv_pool_unref(p, 6) == 0);
    int32_t three[3] = {-1, -1, -1};
    CHECK(kv_pool_alloc_n(p, 3, three, &err) == -1);
    CHECK(three[0] == -1 && kv_pool_get_stats(p).free == 2);
    CHECK(kv_pool_alloc_n(p, 2, three, &err) == 0);
    CHECK(kv_pool_get_stats(p).free == 0);

    /* cached blocks: released -> LRU (not free), evicted oldest first */
    kv_pool_mark_cached(p, 1);
    kv_pool_mark_cached(p, 2);
    kv_pool_mark_cached(p, 4);
    CHECK(kv_pool_unref(p, 2) == 0); /* oldest */
    CHECK(kv_pool_unref(p, 4) == 0);
    CHECK(kv_pool_unref(p, 1) == 0); /* newest */
    st = kv_pool_get_stats(p);
    CHECK(st.cached == 3 && st.free == 0 && st.used == 5 && stats_consistent(p));
    CHECK(kv_pool_available(p) == 3);
    CHECK(kv_pool_lru_oldest(p) == 2);
    /* a hit takes it off the LRU; its release puts it at the tail */
    kv_pool_ref(p, 2);
    CHECK(kv_pool_get_stats(p).cached == 2 && kv_pool_lru_oldest(p) == 4);
    CHECK(kv_pool_unref(p, 2) == 0);
    CHECK(kv_pool_lru_oldest(p) == 4);
    int32_t got;
    CHECK(kv_pool_alloc(p, &got, &err) == 0 && got == 4);
    CHECK(n_evicted == 1 && evicted[0] == 4);
    CHECK(!kv_pool_is_cached(p, 4));
    CHECK(kv_pool_alloc(p, &got, &err) == 0 && got == 1);
    CHECK(n_evicted == 2 && evicted[1] == 1);
    CHECK(kv_pool_get_stats(p).evictions == 2);
    /* unmark: an unreferenced cached block becomes free */
    kv_pool_unmark_cached(p, 2);
    st = kv_pool_get_stats(p);
    CHECK(st.cached == 0 && st.free == 1 && stats_consistent(p));

    /* release everything: back to all free */
    for (int i = 0; i < 8; i++)
        if (kv_pool_refs(p, i) > 0) CHECK(kv_pool_unref(p, i) == 0);
    st = kv_pool_get_stats(p);
    CHECK(st.free == 8 && st.used == 0 && st.cached == 0);
    kv_pool_free(p);
    kv_pool_free(NULL);
    return test_finish();
}
