/* test_engine_window.c - the engine on a model with sliding-window layers
 * (tiny-gemma2: 13 window layers, window 32, in per-sequence rings; 13 global
 * layers in paged blocks). Greedy outputs of 6 prompts (5..150 tokens, 40
 * generated; most wrap the ring several times) equal a single-sequence
 * reference (gen_session, whole prompt in one pass) when run:
 *   - alone, one engine per request (3 of the prompts);
 *   - all together with two sampled requests (batched), async and sync;
 *   - with max_batch_tokens 16 (chunked prefill: each chunk crosses ring
 *     slots written by the previous one);
 *   - with a pool so small that requests are preempted (ring freed, then
 *     recomputed from the start);
 *   - with a budget that holds only 3 rings next to one full-context request
 *     (so 3 requests run at once);
 *   - twice in one engine (a prefix-cache hit resumed from the window-state
 *     tier: the second run reports cached tokens and the same tokens; more in
 *     test_engine_swa);
 * and a request cancelled mid-generation leaves no block and no ring in use.
 * The same again (less sync and the 3-ring budget) on a model written by
 * mkmodel: window 20 (not a multiple of the 16-token block), two window
 * layers per global one, head_dim 24.
 * The invariant checker (sanitizer builds) checks ring ownership every step.
 * Fixture: models/tiny/tiny-gemma2.gguf (missing: skip, or fail under CI). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "engine/generate.h"
#include "engine_testlib.h"
#include "model/mkmodel.h"

#define MODEL "models/tiny/tiny-gemma2.gguf"
#define VOCAB "fixtures/vocab/derived-vocab-tiny-gemma2.gguf"
#define N_REQ 6
#define N_GEN 40

static const int32_t lens[N_REQ] = {5, 31, 33, 64, 97, 150};
static int32_t prompts[N_REQ][160];
static int32_t ref[N_REQ][N_GEN];

/* The KV type of the engines (tl_engine: CINFER_TEST_KV_DTYPE) and so of the references. */
static kv_dtype test_kv_type(void) {
    kv_dtype dt = KV_DTYPE_F32;
    if (tu_kv_dtype() && kv_dtype_parse(tu_kv_dtype(), &dt)) dt = KV_DTYPE_F32;
    return dt;
}

static void make_refs(const model *m, thread_pool *pool) {
    int n_vocab = model_get_hparams(m)->n_vocab;
    for (int i = 0; i < N_REQ; i++) {
        for (int j = 0; j < lens[i]; j++) prompts[i][j] = 3 + (int32_t)(tl_rand() % (uint32_t)(n_vocab - 3));
        gen_session g;
        cf_err err = {0};
        CHECKF(gen_init_as(&g, m, test_kv_type(), pool, lens[i] + N_GEN, 512, &err) == 0, "%s", err.msg);
        CHECKF(gen_feed(&g, prompts[i], lens[i], NULL, &err) == 0, "%s", err.msg);
        for (int s = 0; s < N_GEN; s++) {
            ref[i][s] = tl_argmax(g.logits, n_vocab);
            if (s + 1 < N_GEN) CHECKF(gen_feed(&g, &ref[i][s], 1, NULL, &err) == 0, "%s", err.msg);
        }
        gen_release(&g);
    }
}

static cinfer_request greedy(int i) {
    cinfer_request r = cinfer_request_default();
    r.prompt = prompts[i];
    r.n_prompt = lens[i];
    r.max_tokens = N_GEN;
    r.ignore_eos = true;
    return r;
}

static bool matches(const run_result *res, int i) {
    return res->n_tokens == N_GEN && !memcmp(res->tokens, ref[i], sizeof ref[i]);
}

/* Every prompt (plus two sampled requests) submitted at once; returns the stats. */
static cinfer_engine_stats run_batched(const model *m, thread_pool *pool, int64_t kv, int32_t max_batch,
                                       int32_t max_ctx, int32_t rings, const char *what) {
    cinfer_engine_stats st = {0};
    cinfer_engine *e = tl_engine(m, pool, kv, max_batch, 8, max_ctx);
    CHECKF(e != NULL, "%s: engine", what);
    if (!e) return st;
    uint64_t ids[N_REQ + 2];
    static run_result res[N_REQ + 2];
    int32_t other[2][50];
    for (int i = 0; i < N_REQ; i++) {
        cinfer_request r = greedy(i);
        ids[i] = tl_submit(e, &r);
    }
    for (int k = 0; k < 2; k++) {
        for (int j = 0; j < 50; j++) other[k][j] = 3 + (int32_t)(tl_rand() % 30000);
        cinfer_request r = cinfer_request_default();
        r.prompt = other[k];
        r.n_prompt = 50;
        r.max_tokens = 30;
        r.ignore_eos = true;
        r.sampling.temperature = 0.8f;
        r.sampling.seed = 11 + (uint64_t)k;
        ids[N_REQ + k] = tl_submit(e, &r);
    }
    for (int i = 0; i < N_REQ + 2; i++) {
        memset(&res[i], 0, sizeof res[i]);
        CHECK(ids[i] && tl_collect(e, ids[i], &res[i]) == 0);
    }
    for (int i = 0; i < N_REQ; i++) CHECKF(matches(&res[i], i), "%s: request %d (%d tokens) differs", what, i, lens[i]);
    st = cinfer_engine_get_stats(e);
    CHECKF(st.kv_rings_total == rings && st.kv_rings_used == 0 && st.kv_blocks_used == 0, "%s: rings %d/%d, blocks %d",
           what, st.kv_rings_used, st.kv_rings_total, st.kv_blocks_used);
    fprintf(stderr, "%-34s steps %llu, preemptions %llu, ring %d rows (%lld B)\n", what, (unsigned long long)st.steps,
            (unsigned long long)st.preemptions, st.kv_ring_tokens, (long long)st.kv_ring_bytes);
    cinfer_engine_destroy(e);
    return st;
}

static void test_alone(const model *m, thread_pool *pool) {
    for (int i = 1; i < N_REQ; i += 2) { /* 31, 64 and 150 tokens */
        cinfer_engine *e = tl_engine(m, pool, 32 << 20, 512, 8, 512);
        CHECK(e != NULL);
        if (!e) return;
        static run_result res;
        cinfer_request r = greedy(i);
        CHECK(tl_run(e, &r, &res) == 0);
        CHECKF(matches(&res, i), "alone: request %d (%d tokens) differs", i, lens[i]);
        /* again in the same engine: its blocks are cached and the window-state tier has the rings at every
         * block boundary: it resumes at the last full block before the last prompt token (exact) */
        static run_result again;
        CHECK(tl_run(e, &r, &again) == 0);
        CHECKF(matches(&again, i) && again.usage.cached_tokens == (lens[i] - 1) / 16 * 16,
               "prefix hit: request %d: cached %d", i, again.usage.cached_tokens);
        cinfer_engine_destroy(e);
    }
}

static void test_cancel(const model *m, thread_pool *pool) {
    cinfer_engine *e = tl_engine(m, pool, 32 << 20, 512, 8, 512);
    CHECK(e != NULL);
    if (!e) return;
    cinfer_request r = greedy(5);
    r.max_tokens = 300;
    uint64_t id = tl_submit(e, &r);
    cinfer_output o;
    memset(&o, 0, sizeof o);
    CHECK(id && cinfer_engine_read(e, id, &o, -1) >= 0);
    CHECK(cinfer_engine_cancel(e, id) == 0);
    static run_result res;
    CHECK(tl_collect(e, id, &res) == 0 && res.finish == CINFER_FINISH_CANCELLED);
    cinfer_output_release(&o);
    /* a later request still gets the reference tokens, and nothing is held at the end */
    cinfer_request r2 = greedy(3);
    CHECK(tl_run(e, &r2, &res) == 0 && matches(&res, 3));
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    CHECKF(st.kv_rings_used == 0 && st.kv_blocks_used == 0, "after cancel: %d rings, %d blocks used", st.kv_rings_used,
           st.kv_blocks_used);
    cinfer_engine_destroy(e);
}

/* Every check on one model whose window groups have window `window`. */
static void test_model(const model *m, thread_pool *pool, int32_t window, bool all) {
    make_refs(m, pool);
    test_alone(m, pool);
    cinfer_engine_stats full = run_batched(m, pool, 32 << 20, 512, 512, 8, "batched (async)");
    CHECK(full.kv_ring_tokens == kv_ring_tokens(window, (window + 15) / 16 * 16, 16)); /* chunk cap: window */
    if (all) {
        tl_sync_scheduling = true;
        run_batched(m, pool, 32 << 20, 512, 512, 8, "batched (sync)");
        tl_sync_scheduling = false;
    }
    cinfer_engine_stats st = run_batched(m, pool, 32 << 20, 16, 512, 8, "chunked (16 tokens per step)");
    CHECK(st.kv_ring_tokens == kv_ring_tokens(window, 16, 16)); /* window + the per-request chunk cap */
    /* 8 rings + 16 blocks: the 8 requests need ~50 blocks */
    int64_t block_bytes = model_kv_block_floats_as(m, test_kv_type(), 16) * 4; /* as the engine's KV type */
    int64_t kv = 8 * (int64_t)(full.kv_ring_bytes + 4) + 16 * (block_bytes + 16) + 1024;
    st = run_batched(m, pool, kv, 512, 192, 8, "preempting (16 blocks)");
    CHECKF(st.preemptions > 0 && st.kv_blocks_total == 16, "%llu preemptions with %d blocks",
           (unsigned long long)st.preemptions, st.kv_blocks_total);
    if (all) { /* a budget with room for 3 rings next to one 512-token request (32 blocks): 3 run at once */
        kv = 3 * (int64_t)(full.kv_ring_bytes + 64) + 33 * (block_bytes + 80);
        run_batched(m, pool, kv, 512, 512, 3, "3 rings (budget)");
    }
    test_cancel(m, pool);
}

int main(void) {
    FILE *probe = fopen(shared_path(MODEL), "rb");
    if (!probe) return tu_missing_fixture(shared_path(MODEL));
    fclose(probe);
    thread_pool *pool = pool_create(2);
    cf_err err = {0};
    model *m = NULL;
    CHECKF(model_load(shared_path(MODEL), &m, &err) == 0, "%s", err.msg);
    if (m) test_model(m, pool, 32, true);
    model_free(m);
    /* a window that is not a multiple of the block, 2 window layers per global one, head_dim != dim / heads */
    char path[256];
    temp_path(path, sizeof path, "gemma2-w20.gguf");
    mkmodel_opts o = {.arch = "gemma2",
                      .dim = 64,
                      .layers = 6,
                      .heads = 4,
                      .kv_heads = 2,
                      .ffn = 128,
                      .head_dim = 24,
                      .window = 20,
                      .swa_pattern = 3,
                      .attn_softcap = 0.5f,
                      .final_softcap = 3.0f,
                      .vocab_from = shared_path(VOCAB),
                      .type = DT_F32,
                      .seed = 5};
    m = NULL;
    CHECKF(mkmodel_write(&o, path, &err) == 0 && model_load(path, &m, &err) == 0, "%s", err.msg);
    unlink(path);
    if (m) {
        fprintf(stderr, "-- mkmodel gemma2: window 20, pattern 3, head_dim 24\n");
        test_model(m, pool, 20, false);
    }
    model_free(m);
    pool_destroy(pool);
    return test_finish();
}
