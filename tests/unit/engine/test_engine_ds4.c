/* test_engine_ds4.c - the engine on deepseek4 (mHC, window + CSA/HCA
 * attention, hash-routed MoE; a Q8_0 mkmodel model with a 16-token window
 * and ratios 0/4/128): 16 requests of 5..260 prompt tokens (so HCA groups of
 * 128 complete, and CSA groups are cut by chunks and blocks anywhere)
 * submitted at once (greedy) give exactly the tokens each gives alone;
 * again with max_batch_tokens 16 (chunked prefill across compressor group
 * boundaries) and with a KV budget small enough to force preemption. Prefix
 * caching serves deepseek4 blocks (same tokens as a cold run). The pool's
 * KV accounting matches the compact layout's arithmetic. */
#include <stdio.h>
#include <unistd.h>

#include "engine_testlib.h"
#include "model/mkmodel.h"
#include "testutil_ds4.h"

#define NREQ 16
#define CTX 600

typedef struct req_spec {
    int32_t prompt[272];
    int32_t n_prompt, max_tokens;
} req_spec;

static req_spec specs[NREQ];
static run_result alone[NREQ], together[NREQ];

static cinfer_request greedy(const req_spec *s) {
    cinfer_request r = cinfer_request_default();
    r.prompt = s->prompt;
    r.n_prompt = s->n_prompt;
    r.max_tokens = s->max_tokens;
    r.ignore_eos = true;
    return r;
}

static void run_batch(const model *m, thread_pool *tp, const char *name, int64_t kv_bytes, int32_t max_batch,
                      bool expect_preempt) {
    cinfer_engine *e = tl_engine(m, tp, kv_bytes, max_batch, 32, CTX);
    CHECK(e != NULL);
    if (!e) return;
    uint64_t ids[NREQ];
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = greedy(&specs[i]);
        ids[i] = tl_submit(e, &r);
        memset(&together[i], 0, sizeof together[i]);
    }
    int same = 0;
    for (int i = 0; i < NREQ; i++) {
        CHECK(ids[i] && tl_collect(e, ids[i], &together[i]) == 0);
        same += tl_same_tokens(&alone[i], &together[i]);
        CHECKF(tl_same_tokens(&alone[i], &together[i]), "%s: request %d differs", name, i);
    }
    cinfer_engine_stats s = cinfer_engine_get_stats(e);
    fprintf(stderr, "%s: %d/%d identical, %llu steps, %llu preemptions\n", name, same, NREQ,
            (unsigned long long)s.steps, (unsigned long long)s.preemptions);
    if (expect_preempt) CHECK(s.preemptions > 0);
    CHECK(s.kv_blocks_used == 0);
    cinfer_engine_destroy(e);
}

/* Prefix caching over deepseek4 blocks: a request sharing 256 prompt tokens
 * (two HCA groups) with a finished one is served >= 240 of them from the
 * cache and gives the tokens of a cold run. */
static void test_prefix(const model *m, thread_pool *tp) {
    static req_spec a, b;
    a.n_prompt = 270;
    b.n_prompt = 262;
    a.max_tokens = b.max_tokens = 12;
    for (int j = 0; j < a.n_prompt; j++) a.prompt[j] = specs[j % NREQ].prompt[j % specs[j % NREQ].n_prompt];
    memcpy(b.prompt, a.prompt, 256 * sizeof(int32_t));
    for (int j = 256; j < b.n_prompt; j++) b.prompt[j] = (a.prompt[j] + 1) % 512;
    static run_result ra, rb, cold;
    cinfer_engine *e = tl_engine(m, tp, 64 << 20, 2048, 8, CTX);
    CHECK(e != NULL);
    if (!e) return;
    cinfer_request r = greedy(&a);
    CHECK(tl_run(e, &r, &ra) == 0);
    r = greedy(&b);
    CHECK(tl_run(e, &r, &rb) == 0);
    CHECKF(rb.usage.cached_tokens >= 240, "cached %d of 256 shared tokens", rb.usage.cached_tokens);
    cinfer_engine_destroy(e);
    e = tl_engine(m, tp, 64 << 20, 2048, 8, CTX);
    CHECK(e != NULL);
    if (!e) return;
    CHECK(tl_run(e, &r, &cold) == 0);
    CHECK(cold.usage.cached_tokens == 0);
    CHECKF(tl_same_tokens(&rb, &cold), "prefix-cached run differs from the cold run");
    fprintf(stderr, "prefix: %d cached tokens, same tokens as cold: %d\n", rb.usage.cached_tokens,
            tl_same_tokens(&rb, &cold));
    cinfer_engine_destroy(e);
}

/* KV bytes per token from the pool's accounting = the shape's arithmetic
 * (docs/deepseek4.md "KV"): paged, per CSA layer (D + I) / 4 floats and per
 * HCA layer D / 128 (blocks of 128 tokens); per sequence, a ring of 256 rows
 * (window 128 + chunk 128) of D (window-only), D + 4D + 4I (CSA: latent,
 * overlapping compressor kv | score, indexer's) and D + 2D (HCA) floats. */
static void test_kv_accounting(const model *m, thread_pool *tp) {
    const model_hparams *hp = model_get_hparams(m);
    int64_t D = hp->head_dim, I = hp->ds4_index_dim, n4 = 0, n128 = 0, n0 = 0;
    for (int l = 0; l < hp->n_layer; l++) {
        n4 += hp->ds4_ratio[l] == 4;
        n128 += hp->ds4_ratio[l] == 128;
        n0 += hp->ds4_ratio[l] == 0;
    }
    int64_t block_bytes = 4 * (n4 * (D + I) * (128 / 4) + n128 * D); /* 128 tokens */
    int64_t ring_bytes = 4 * 256 * (n0 * D + n4 * (5 * D + 4 * I) + n128 * 3 * D);
    cinfer_engine *e = tl_engine(m, tp, 64 << 20, 2048, 32, CTX);
    CHECK(e != NULL);
    if (!e) return;
    cinfer_engine_stats s = cinfer_engine_get_stats(e);
    int64_t rings = (int64_t)s.kv_rings_total * (s.kv_ring_bytes + 4);
    int64_t per_block = (s.kv_bytes - rings) / s.kv_blocks_total; /* + 16 bytes of metadata per block */
    CHECKF(per_block == block_bytes + 16, "pool: %lld bytes per block, the shape gives %lld + 16", (long long)per_block,
           (long long)block_bytes);
    CHECKF(s.kv_ring_bytes == ring_bytes && s.kv_ring_tokens == 256, "ring %lld bytes of %d rows, the shape gives %lld",
           (long long)s.kv_ring_bytes, s.kv_ring_tokens, (long long)ring_bytes);
    fprintf(stderr, "kv: %.2f bytes per token in blocks, %lld bytes of ring per sequence\n", block_bytes / 128.0,
            (long long)s.kv_ring_bytes);
    cinfer_engine_destroy(e);
}

static void test_model(const char *path, int32_t vocab) {
    cf_err err = {0};
    model *m = NULL;
    int rc = model_load(path, &m, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) return;
    thread_pool *tp = pool_create(2);
    test_kv_accounting(m, tp);
    for (int i = 0; i < NREQ; i++) {
        specs[i].n_prompt = 5 + (int32_t)(tl_rand() % 256);
        specs[i].max_tokens = 4 + (int32_t)(tl_rand() % 40);
        for (int j = 0; j < specs[i].n_prompt; j++) specs[i].prompt[j] = (int32_t)(tl_rand() % (uint32_t)vocab);
    }
    cinfer_engine *e = tl_engine(m, tp, 64 << 20, 2048, 32, CTX);
    CHECK(e != NULL);
    if (!e) goto out;
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = greedy(&specs[i]);
        CHECK(tl_run(e, &r, &alone[i]) == 0);
        CHECK(alone[i].n_tokens == specs[i].max_tokens);
    }
    cinfer_engine_destroy(e);
    run_batch(m, tp, "batched", 64 << 20, 2048, false);
    run_batch(m, tp, "chunked", 64 << 20, 16, false);
    /* 8 window rings and 7 blocks of 128 tokens: the longest request fits, 8 at once do not */
    cinfer_engine *probe = tl_engine(m, tp, 64 << 20, 2048, 32, CTX);
    int64_t ring = probe ? cinfer_engine_get_stats(probe).kv_ring_bytes : 0;
    cinfer_engine_destroy(probe);
    run_batch(m, tp, "preempting", 8 * (ring + 64) + 7 * (model_kv_block_floats(m, 128) * 4 + 80) + 4096, 2048, true);
    test_prefix(m, tp);
out:
    pool_destroy(tp);
    model_free(m);
}

int main(void) {
    if (access(shared_path("models/stories260K.gguf"), R_OK)) return tu_missing_fixture("models/stories260K.gguf");
    char path[256];
    temp_path(path, sizeof path, "ds4.gguf");
    mkmodel_opts o = tu_ds4_tiny(3, "0,4,128", 21);
    o.expert_scale = 2.5f;
    o.ctx = 1024;
    o.type = DT_Q8_0;
    cf_err err = {0};
    int rc = mkmodel_write(&o, path, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc == 0) test_model(path, 512);
    unlink(path);
    return test_finish();
}
