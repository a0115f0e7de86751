/* test_engine_moe.c - batch invariance of the engine on MoE + MLA models
 * (deepseek2): 16 requests of different prompt lengths and max_tokens
 * submitted at once (greedy) give exactly the tokens each gives alone; again
 * with max_batch_tokens 16 (chunked prefill: absorbed instead of expanded
 * attention for the prompt) and with a KV budget small enough to force
 * preemption. Models: tiny-deepseek2 (F32, sigmoid gating with exp_probs_b,
 * q_lora) and a Q8_0 model written by mkmodel with softmax gating, no q_lora,
 * 2 shared experts and group-limited routing (4 groups, 2 used). Also checks
 * that the expert load counters add up to tokens x experts_used, and that
 * prefix caching serves MLA blocks (same tokens as a cold run). */
#include <stdio.h>
#include <unistd.h>

#include "engine_testlib.h"
#include "model/mkmodel.h"

#define NREQ 16
#define CTX 512

typedef struct req_spec {
    int32_t prompt[128];
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

/* Prefix caching over MLA blocks: a request sharing 96 prompt tokens with a
 * finished one is served >= 80 of them from the cache and gives the tokens
 * of a cold run. */
static void test_prefix(const model *m, thread_pool *tp) {
    static req_spec a, b;
    a.n_prompt = 110;
    b.n_prompt = 104;
    a.max_tokens = b.max_tokens = 12;
    for (int j = 0; j < a.n_prompt; j++) a.prompt[j] = specs[j % NREQ].prompt[j % specs[j % NREQ].n_prompt];
    memcpy(b.prompt, a.prompt, 96 * sizeof(int32_t));
    for (int j = 96; j < b.n_prompt; j++) b.prompt[j] = (a.prompt[j] + 1) % 8000;
    static run_result ra, rb, cold;
    cinfer_engine *e = tl_engine(m, tp, 64 << 20, 2048, 8, CTX);
    CHECK(e != NULL);
    if (!e) return;
    cinfer_request r = greedy(&a);
    CHECK(tl_run(e, &r, &ra) == 0);
    r = greedy(&b);
    CHECK(tl_run(e, &r, &rb) == 0);
    CHECKF(rb.usage.cached_tokens >= 80, "cached %d of 96 shared tokens", rb.usage.cached_tokens);
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

static void test_model(const char *path, int32_t vocab) {
    cf_err err = {0};
    model *m = NULL;
    int rc = model_load(path, &m, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) return;
    thread_pool *tp = pool_create(2);
    const model_hparams *hp = model_get_hparams(m);
    for (int i = 0; i < NREQ; i++) {
        specs[i].n_prompt = 5 + (int32_t)(tl_rand() % 100);
        specs[i].max_tokens = 4 + (int32_t)(tl_rand() % 40);
        for (int j = 0; j < specs[i].n_prompt; j++) specs[i].prompt[j] = (int32_t)(tl_rand() % (uint32_t)vocab);
    }
    cinfer_engine *e = tl_engine(m, tp, 64 << 20, 2048, 32, CTX);
    CHECK(e != NULL);
    if (!e) goto out;
    int64_t tokens = 0;
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = greedy(&specs[i]);
        CHECK(tl_run(e, &r, &alone[i]) == 0);
        CHECK(alone[i].n_tokens == specs[i].max_tokens);
        tokens += specs[i].n_prompt + specs[i].max_tokens - 1; /* the last token is never fed back */
    }
    /* fewer than 64 steps so far: the window holds them all */
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    uint64_t counts[64];
    int n = cinfer_engine_expert_load(e, hp->n_layer - 1, counts, 64);
    CHECK(n == hp->n_expert);
    uint64_t sum = 0;
    for (int k = 0; k < n && k < 64; k++) sum += counts[k];
    if (st.steps <= 64)
        CHECKF(sum == (uint64_t)tokens * (uint64_t)hp->n_expert_used, "expert load %llu, want %lld x %d",
               (unsigned long long)sum, (long long)tokens, hp->n_expert_used);
    cinfer_engine_destroy(e);
    run_batch(m, tp, "batched", 64 << 20, 2048, false);
    run_batch(m, tp, "chunked", 64 << 20, 16, false);
    /* 12 blocks of 16 tokens: far less than 16 requests need at once */
    run_batch(m, tp, "preempting", 12 * model_kv_block_floats(m, 16) * 4 + 4096, 2048, true);
    test_prefix(m, tp);
out:
    pool_destroy(tp);
    model_free(m);
}

int main(void) {
    test_model(shared_path("models/tiny/tiny-deepseek2.gguf"), 8177);
    char path[256];
    temp_path(path, sizeof path, "moe.gguf");
    mkmodel_opts o = {.arch = "deepseek2",
                      .dim = 128,
                      .layers = 3,
                      .heads = 4,
                      .kv_heads = 4,
                      .ffn = 256,
                      .vocab_from = shared_path("fixtures/vocab/derived-vocab-tiny-deepseek2.gguf"),
                      .type = DT_Q8_0,
                      .seed = 11,
                      .ctx = 1024,
                      .kv_lora = 64,
                      .qk_nope = 32,
                      .qk_rope = 16,
                      .v_head = 32,
                      .experts = 16,
                      .experts_used = 3,
                      .shared_experts = 2,
                      .expert_ffn = 64,
                      .dense_layers = 1,
                      .groups = 4,
                      .groups_used = 2,
                      .softmax_gating = true,
                      .expert_scale = 1.5f};
    cf_err err = {0};
    int rc = mkmodel_write(&o, path, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc == 0) test_model(path, 8177);
    unlink(path);
    return test_finish();
}
