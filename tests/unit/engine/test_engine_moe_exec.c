/* test_engine_moe_exec.c - the expert-parallelism seam (cinfer_moe_executor):
 * an engine whose routed experts run through an executor gives exactly the
 * tokens of the in-process engine, on a tiny deepseek2 model and on an
 * mkmodel deepseek4 (score and hash-routed layers, a shared expert, clamped
 * SwiGLU, 128-token blocks). The executor
 * here is in-process but works the way the MPI one does: it computes each
 * expert's rows on a separate forward context with a 5-row scratch (so rows
 * are batched differently than in-process), in reverse expert order, and
 * counts what it ran; an executor that fails makes the request fail with its
 * message instead of hanging. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "engine_testlib.h"
#include "model/mkmodel.h"
#include "testutil_ds4.h"

#define NREQ 12

typedef struct test_exec {
    fwd_ctx *fc; /* max_tokens 5 */
    int64_t pairs, calls;
    bool fail;
} test_exec;

static int exec_run(void *self, int32_t layer, int32_t n_pairs, const int32_t *expert, const float *x, int64_t n_embd,
                    float *y, char *err, size_t err_len) {
    test_exec *t = self;
    if (t->fail) {
        snprintf(err, err_len, "rank 1 is gone");
        return -1;
    }
    t->calls++;
    t->pairs += n_pairs;
    for (int32_t end = n_pairs; end > 0;) { /* runs of one expert, last expert first */
        int32_t start = end - 1;
        while (start > 0 && expert[start - 1] == expert[end - 1]) start--;
        cf_err ce = {0};
        if (fwd_ctx_expert_ffn(t->fc, layer, expert[start], x + start * n_embd, end - start, y + start * n_embd, &ce)) {
            snprintf(err, err_len, "%s", ce.msg);
            return -1;
        }
        end = start;
    }
    return 0;
}

/* Same tokens in-process and through the executor, batched; a failing executor fails the request. */
static void check_model(model *m, thread_pool *tp, int32_t block_tokens, const char *name) {
    cf_err err = {0};
    test_exec t = {.fc = fwd_ctx_create(m, tp, 5, 512, block_tokens, &err)};
    CHECKF(t.fc != NULL, "%s: %s", name, err.msg);
    if (!t.fc) return;
    cinfer_moe_executor x = {.self = &t, .run = exec_run};
    int32_t prompts[NREQ][96];
    cinfer_request reqs[NREQ];
    run_result local[NREQ], remote[NREQ];
    int32_t n_vocab = model_get_hparams(m)->n_vocab;
    for (int i = 0; i < NREQ; i++) {
        reqs[i] = cinfer_request_default();
        reqs[i].n_prompt = 4 + (int32_t)(tl_rand() % 90);
        for (int j = 0; j < reqs[i].n_prompt; j++) prompts[i][j] = (int32_t)(tl_rand() % (uint32_t)n_vocab);
        reqs[i].prompt = prompts[i];
        reqs[i].max_tokens = 3 + (int32_t)(tl_rand() % 20);
        reqs[i].ignore_eos = true;
        memset(&local[i], 0, sizeof local[i]);
        memset(&remote[i], 0, sizeof remote[i]);
    }
    cinfer_engine_options o = {.block_tokens = block_tokens,
                               .kv_memory_bytes = 64 << 20,
                               .max_batch_tokens = 64,
                               .max_seqs = 32,
                               .max_ctx = 512};
    char msg[256] = "";
    cinfer_engine *e = NULL;
    CHECKF(cinfer_engine_create(m, tp, &o, &e, msg, sizeof msg) == 0, "%s: %s", name, msg);
    for (int i = 0; e && i < NREQ; i++) CHECK(tl_run(e, &reqs[i], &local[i]) == 0);
    cinfer_engine_destroy(e);

    o.moe_executor = &x;
    e = NULL;
    CHECKF(cinfer_engine_create(m, tp, &o, &e, msg, sizeof msg) == 0, "%s: %s", name, msg);
    uint64_t ids[NREQ];
    for (int i = 0; e && i < NREQ; i++) ids[i] = tl_submit(e, &reqs[i]);
    int same = 0;
    for (int i = 0; e && i < NREQ; i++) {
        CHECK(tl_collect(e, ids[i], &remote[i]) == 0);
        same += tl_same_tokens(&local[i], &remote[i]);
        CHECKF(tl_same_tokens(&local[i], &remote[i]), "%s: request %d differs through the executor", name, i);
    }
    fprintf(stderr, "%s executor: %d/%d identical, %lld calls, %lld expert rows\n", name, same, NREQ,
            (long long)t.calls, (long long)t.pairs);
    CHECK(t.calls > 0 && t.pairs > 0);
    /* the executor saw every routed row: the engine's load counters agree with it */
    uint64_t counted = 0, counts[64];
    for (int32_t il = 0; il < model_get_hparams(m)->n_layer; il++) {
        int32_t n = e ? cinfer_engine_expert_load(e, il, counts, 64) : 0;
        for (int32_t k = 0; k < n && k < 64; k++) counted += counts[k];
    }
    CHECKF(counted > 0, "%s: no expert load counted", name);
    /* a failing executor fails the request, with its message */
    t.fail = true;
    run_result bad = {0};
    if (e) {
        uint64_t id = tl_submit(e, &reqs[0]);
        int rc = id ? tl_collect(e, id, &bad) : -1;
        CHECKF(id != 0 && (rc != 0 || bad.finish == CINFER_FINISH_ERROR), "%s: a failing executor: rc %d finish %d",
               name, rc, (int)bad.finish);
    }
    cinfer_engine_destroy(e);
    fwd_ctx_free(t.fc);
}

static void check_deepseek4(thread_pool *tp) {
    char path[256];
    temp_path(path, sizeof path, "moe-exec-ds4.gguf");
    mkmodel_opts o = tu_ds4_tiny(3, "0,4,128", 21);
    o.expert_scale = 2.5f;
    o.ctx = 1024;
    o.type = DT_Q8_0;
    cf_err err = {0};
    model *m = NULL;
    CHECKF(mkmodel_write(&o, path, &err) == 0, "%s", err.msg);
    CHECKF(model_load(path, &m, &err) == 0, "%s", err.msg);
    if (m) check_model(m, tp, 128, "deepseek4");
    model_free(m);
    unlink(path);
}

int main(void) {
    const char *path = shared_path("models/tiny/tiny-deepseek2.gguf");
    if (access(path, R_OK)) return tu_missing_fixture(path);
    if (access(shared_path("models/stories260K.gguf"), R_OK)) return tu_missing_fixture("models/stories260K.gguf");
    cf_err err = {0};
    model *m = NULL;
    CHECKF(model_load(path, &m, &err) == 0, "%s", err.msg);
    if (!m) return test_finish();
    thread_pool *tp = pool_create(2);
    check_model(m, tp, 16, "deepseek2");
    check_deepseek4(tp);
    cinfer_engine_options o = {
        .block_tokens = 16, .kv_memory_bytes = 64 << 20, .max_batch_tokens = 64, .max_seqs = 32, .max_ctx = 512};
    test_exec t = {0};
    cinfer_moe_executor x = {.self = &t, .run = exec_run};
    o.moe_executor = &x;
    char msg[256] = "";
    cinfer_engine *e = NULL;
    /* a model without the hook (llama) refuses an executor at create */
    model *ml = NULL;
    const char *lp = shared_path("models/tiny/tiny-llama.gguf");
    if (access(lp, R_OK) == 0 && model_load(lp, &ml, &err) == 0) {
        e = NULL;
        CHECK(cinfer_engine_create(ml, tp, &o, &e, msg, sizeof msg) == -1 && strstr(msg, "executor"));
        model_free(ml);
    }
    pool_destroy(tp);
    model_free(m);
    return test_finish();
}
