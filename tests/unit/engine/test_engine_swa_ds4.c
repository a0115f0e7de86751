/* test_engine_swa_ds4.c - the window-state tier and bounded replay on
 * deepseek4 (docs/deepseek4.md "KV", docs/engine.md "Window state"): the
 * same engine mechanism as gemma2, keyed on the KV_LAYER_WINDOW groups. Its
 * rings hold the window latents and the compressors' partial-group inputs,
 * so a snapshot at a block boundary is the whole per-sequence state.
 * On an mkmodel deepseek4 (ratios 0/4/128, window 16, blocks of 128 tokens),
 * greedy outputs equal a single-sequence no-cache reference (gen_session,
 * bit-identical tokens) when:
 *   - the same prompt runs twice and a second turn extends the first
 *     (exact resume from a snapshot: cached tokens reported);
 *   - the tier is off (exact recompute from the start, cached 0);
 *   - turns run chunked (16 tokens per step) and batched with other requests;
 * bounded replay (no tier, replay W = 128 = the ring window) reports
 * cached / replayed tokens, gives the same tokens alone one step at a time
 * (the single-sequence reference), batched and asynchronous, and equal to
 * the replay done by hand on a gen_session (replay_from / keep_below), which
 * never rewrites the cached compressed rows. The layout asks for bounded
 * replay by default (kv_spec.bounded_replay). Nothing is held afterwards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "engine/generate.h"
#include "engine_testlib.h"
#include "model/mkmodel.h"
#include "testutil_ds4.h"

#define BT 128
#define N_GEN 24
#define LEN1 300
#define LEN2 (LEN1 + N_GEN + 40)

#include "swa_turns.h"

/* replay: swa_replay_tokens (-1: exact mode); max_seqs 1 runs requests one at a time. */
static cinfer_engine *ds4_engine(const model *m, thread_pool *pool, int32_t max_batch, int64_t swa_bytes,
                                 int32_t replay, int32_t max_seqs) {
    cinfer_engine_options o = {.block_tokens = 16, /* rounded up to 128 by the engine (the layout's rows) */
                               .kv_memory_bytes = 64 << 20,
                               .max_batch_tokens = max_batch,
                               .max_seqs = max_seqs,
                               .max_ctx = 1024,
                               .swa_state_memory_bytes = swa_bytes,
                               .swa_replay_tokens = replay};
    cinfer_engine *e = NULL;
    char err[256];
    CHECKF(cinfer_engine_create(m, pool, &o, &e, err, sizeof err) == 0, "engine create: %s", err);
    return e;
}

static void check_idle(cinfer_engine *e, const char *what) {
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    CHECKF(st.kv_rings_used == 0 && st.kv_blocks_used == 0, "%s: %d rings, %d blocks still used", what,
           st.kv_rings_used, st.kv_blocks_used);
    CHECKF(st.swa_state_bytes <= st.swa_state_budget, "%s: tier holds %lld of %lld bytes", what,
           (long long)st.swa_state_bytes, (long long)st.swa_state_budget);
}

/* Exact resume: turn 1 computes LEN1 + N_GEN - 1 = 323 positions, 2 full blocks with snapshots. */
static void test_exact(const model *m, thread_pool *pool, int32_t max_batch, const char *what) {
    cinfer_engine *e = ds4_engine(m, pool, max_batch, 0, -1, 8);
    if (!e) return;
    CHECKF(turn(e, 1, what) == 0, "%s: first run cached tokens", what);
    int32_t again = turn(e, 1, what), second = turn(e, 2, what);
    CHECKF(again == 2 * BT && second == 2 * BT, "%s: cached %d and %d (want 256, 256)", what, again, second);
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    CHECKF(st.swa_state_hits >= 2 && st.swa_snapshots >= 2 && st.swa_replays == 0, "%s: hits %llu, snapshots %llu",
           what, (unsigned long long)st.swa_state_hits, (unsigned long long)st.swa_snapshots);
    fprintf(stderr, "%-24s hits %llu snapshots %llu entries %d (%lld B each)\n", what,
            (unsigned long long)st.swa_state_hits, (unsigned long long)st.swa_snapshots, st.swa_state_entries,
            st.swa_state_entries ? (long long)(st.swa_state_bytes / st.swa_state_entries) : 0LL);
    check_idle(e, what);
    cinfer_engine_destroy(e);
}

static void test_off(const model *m, thread_pool *pool) {
    cinfer_engine *e = ds4_engine(m, pool, 512, -1, -1, 8); /* no tier, exact: recompute from the start */
    if (!e) return;
    CHECKF(turn(e, 1, "off") == 0 && turn(e, 1, "off") == 0 && turn(e, 2, "off") == 0, "off: cached tokens");
    CHECK(cinfer_engine_get_stats(e).swa_snapshots == 0);
    check_idle(e, "off");
    cinfer_engine_destroy(e);
}

/* Turn 1 primes the tier; then turn 2, turn 1 and two unrelated requests run together. */
static void test_batched(const model *m, thread_pool *pool) {
    cinfer_engine *e = ds4_engine(m, pool, 512, 0, -1, 8);
    if (!e) return;
    CHECK(turn(e, 1, "batched") == 0);
    cinfer_request rs[4] = {greedy(p2, LEN2), greedy(p1, LEN1), greedy(p2 + 7, 200), greedy(p1 + 3, 140)};
    uint64_t ids[4];
    static run_result res[4];
    for (int i = 0; i < 4; i++) ids[i] = tl_submit(e, &rs[i]);
    for (int i = 0; i < 4; i++) {
        memset(&res[i], 0, sizeof res[i]);
        CHECK(ids[i] && tl_collect(e, ids[i], &res[i]) == 0 && res[i].n_tokens == N_GEN);
    }
    CHECKF(!memcmp(res[0].tokens, ref2, sizeof ref2) && res[0].usage.cached_tokens == 2 * BT,
           "batched: turn 2 (cached %d)", res[0].usage.cached_tokens);
    CHECKF(!memcmp(res[1].tokens, ref1, sizeof ref1) && res[1].usage.cached_tokens == 2 * BT,
           "batched: turn 1 (cached %d)", res[1].usage.cached_tokens);
    check_idle(e, "batched");
    cinfer_engine_destroy(e);
}

/* The replay by hand on one gen_session: the first `hit` positions exactly,
 * then the ring overwritten with junk (rows not this sequence's), then
 * [from, end) with replay_from / keep_below and greedy decoding. The cached
 * compressed rows below `hit` must not change. */
static void replay_by_hand(const model *m, thread_pool *pool, int32_t from, int32_t hit, int32_t *out) {
    int n_vocab = model_get_hparams(m)->n_vocab;
    gen_session g;
    cf_err err = {0};
    CHECKF(gen_init(&g, m, pool, LEN2 + N_GEN, 512, &err) == 0, "%s", err.msg);
    CHECKF(gen_feed(&g, p2, hit, NULL, &err) == 0, "%s", err.msg);
    size_t cached = (size_t)(hit / BT) * (size_t)model_kv_block_floats(m, BT) * sizeof(float);
    float *before = malloc(cached);
    CHECK(before != NULL);
    if (!before) return;
    memcpy(before, g.kv.mem, cached);
    for (int64_t i = 0; i < g.kv.ring_bytes / (int64_t)sizeof(float); i++) g.kv.ring[i] = 3.0f;
    g.kv.seq.replay_from = from;
    g.kv.seq.keep_below = hit;
    g.n_past = from;
    CHECKF(gen_feed(&g, p2 + from, LEN2 - from, NULL, &err) == 0, "%s", err.msg);
    for (int s = 0; s < N_GEN; s++) {
        out[s] = tl_argmax(g.logits, n_vocab);
        if (s + 1 < N_GEN) CHECKF(gen_feed(&g, &out[s], 1, NULL, &err) == 0, "%s", err.msg);
    }
    CHECKF(!memcmp(before, g.kv.mem, cached), "replay by hand: cached compressed rows were rewritten");
    free(before);
    gen_release(&g);
}

/* Bounded replay (no tier, W = 128): turn 2's hit of 256 replays [128, 256). */
static void test_replay(const model *m, thread_pool *pool) {
    int32_t got[3][N_GEN];
    static run_result res[4];
    for (int v = 0; v < 3; v++) {
        tl_sync_scheduling = v == 0;
        cinfer_engine *e = ds4_engine(m, pool, v == 0 ? 16 : 512, -1, 0, v == 0 ? 1 : 8);
        tl_sync_scheduling = false;
        if (!e) return;
        CHECK(turn(e, 1, "replay") == 0);
        cinfer_request rs[4] = {greedy(p2, LEN2), greedy(p1, LEN1), greedy(p2 + 7, 200), greedy(p1 + 3, 140)};
        int n = v == 1 ? 4 : 1;
        uint64_t ids[4];
        for (int i = 0; i < n; i++) ids[i] = tl_submit(e, &rs[i]);
        for (int i = 0; i < n; i++) {
            memset(&res[i], 0, sizeof res[i]);
            CHECK(ids[i] && tl_collect(e, ids[i], &res[i]) == 0 && res[i].n_tokens == N_GEN);
        }
        memcpy(got[v], res[0].tokens, sizeof got[v]);
        CHECKF(res[0].usage.cached_tokens == BT && res[0].usage.replayed_tokens == BT,
               "replay %d: cached %d replayed %d (want 128, 128)", v, res[0].usage.cached_tokens,
               res[0].usage.replayed_tokens);
        cinfer_engine_stats st = cinfer_engine_get_stats(e);
        CHECKF(st.swa_replays >= 1 && st.swa_replayed_tokens >= BT, "replay %d: %llu replays", v,
               (unsigned long long)st.swa_replays);
        cinfer_request ex = greedy(p2, LEN2); /* per request: exact, from the start (no tier) */
        ex.swa_exact = true;
        memset(&res[3], 0, sizeof res[3]);
        CHECK(tl_run(e, &ex, &res[3]) == 0);
        CHECKF(!memcmp(res[3].tokens, ref2, sizeof ref2) && res[3].usage.cached_tokens == 0 &&
                   res[3].usage.replayed_tokens == 0,
               "replay %d: swa_exact request differs or cached %d", v, res[3].usage.cached_tokens);
        check_idle(e, "replay");
        cinfer_engine_destroy(e);
    }
    CHECKF(!memcmp(got[0], got[1], sizeof got[0]), "replay: batched differs from the single-sequence run");
    CHECKF(!memcmp(got[0], got[2], sizeof got[0]), "replay: alone (async) differs from the single-sequence run");
    int32_t by_hand[N_GEN];
    replay_by_hand(m, pool, BT, 2 * BT, by_hand);
    CHECKF(!memcmp(got[0], by_hand, sizeof by_hand), "replay: the engine differs from the replay by hand");
    int agree = 0;
    for (int s = 0; s < N_GEN; s++) agree += got[0][s] == ref2[s];
    fprintf(stderr, "replay W=128: %d of %d greedy tokens equal the exact run\n", agree, N_GEN);
}

int main(void) {
    if (access(shared_path("models/stories260K.gguf"), R_OK)) return tu_missing_fixture("models/stories260K.gguf");
    char path[256];
    temp_path(path, sizeof path, "ds4-swa.gguf");
    mkmodel_opts o = tu_ds4_tiny(3, "0,4,128", 33);
    o.ctx = 1024;
    o.type = DT_Q8_0;
    cf_err err = {0};
    model *m = NULL;
    CHECKF(mkmodel_write(&o, path, &err) == 0 && model_load(path, &m, &err) == 0, "%s", err.msg);
    unlink(path);
    thread_pool *pool = pool_create(2);
    if (m) {
        kv_spec spec;
        model_kv_layout(m, &spec);
        CHECK(spec.bounded_replay && kv_spec_max_window(&spec) == 128);
        make_turns(m, pool);
        test_exact(m, pool, 512, "exact resume");
        test_exact(m, pool, 16, "exact, 16 per step");
        test_off(m, pool);
        test_batched(m, pool);
        test_replay(m, pool);
    }
    model_free(m);
    pool_destroy(pool);
    return test_finish();
}
