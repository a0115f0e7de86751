/* test_long_context.c - the llama forward pass over a context of several
 * attention segments (tiny-llama, 400 positions = 4 segments, GQA 8:2) computes every
 * position's logits bit for bit the same however it is cut: the whole
 * prompt in one call, in calls of 37 tokens, and a prompt of 200 fed
 * in calls of 16 followed by one token per call (the decode path, whose KV
 * segments are split across the pool and merged), each with 1 and 3
 * threads, under F32 attention and (where the CPU has it) BF16 attention
 * (AMX or AVX-512 BF16). This is the attention half of batch invariance at long contexts
 * (tests/unit/engine/test_engine.c checks the engine's tokens). Run for
 * every KV cache type (CINFER_TEST_KV_DTYPE: the *_kv_<type> variants). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/threadpool.h"
#include "engine/generate.h"
#include "kv_dtype_util.h"
#include "model/model.h"
#include "testutil.h"

#define N_POS 400

/* All logits of ids fed `first` tokens in calls of up to `batch`, then one
 * per call. NULL on failure (reported). */
static float *feed(const model *m, thread_pool *pool, const int32_t *ids, int32_t batch, int32_t first,
                   attn_prec prec) {
    cf_err err = {0};
    int32_t nv = model_get_hparams(m)->n_vocab;
    float *all = malloc(sizeof(float) * (size_t)N_POS * (size_t)nv);
    gen_session g;
    int rc = all ? gen_init_as(&g, m, test_kv_dtype(), pool, N_POS, batch, &err) : -1;
    if (rc == 0) {
        fwd_ctx_set_attn_prec(g.fc, prec);
        rc = gen_feed(&g, ids, first, all, &err);
        for (int32_t p = first; rc == 0 && p < N_POS; p++) rc = gen_feed(&g, ids + p, 1, all + (int64_t)p * nv, &err);
        gen_release(&g);
    }
    CHECKF(rc == 0, "batch %d first %d: %s", batch, first, err.msg);
    if (rc) {
        free(all);
        return NULL;
    }
    return all;
}

int main(void) {
    const char *path = shared_path("models/tiny/tiny-llama.gguf");
    if (access(path, R_OK) != 0) return tu_missing_fixture(path);
    cf_err err = {0};
    model *m;
    if (model_load(path, &m, &err)) {
        CHECKF(0, "%s", err.msg);
        return test_finish();
    }
    int32_t nv = model_get_hparams(m)->n_vocab;
    int32_t ids[N_POS];
    uint32_t x = 99;
    for (int i = 0; i < N_POS; i++) {
        x = x * 1103515245u + 12345u;
        ids[i] = 3 + (int32_t)((x >> 8) % (uint32_t)(nv - 3));
    }
    thread_pool *one = pool_create(1);
    const struct { int32_t batch, first; } cuts[] = {{37, N_POS}, {16, 200}};
    for (int pi = 0; pi < 2; pi++) {
        attn_prec prec = pi ? ATTN_PREC_BF16 : ATTN_PREC_F32;
        if (!attn_prec_native(prec)) continue;
        float *ref = feed(m, one, ids, N_POS, N_POS, prec);
        for (int threads = 1; ref && threads <= 3; threads += 2) {
            thread_pool *pool = pool_create(threads);
            for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
                float *got = feed(m, pool, ids, cuts[c].batch, cuts[c].first, prec);
                if (!got) continue;
                int bad = -1;
                for (int p = 0; p < N_POS && bad < 0; p++)
                    if (memcmp(ref + (int64_t)p * nv, got + (int64_t)p * nv, sizeof(float) * (size_t)nv)) bad = p;
                CHECKF(bad < 0,
                       "%s, %d threads, calls of %d after %d: logits at position %d differ from the whole "
                       "prompt's",
                       attn_prec_describe(prec), threads, cuts[c].batch, cuts[c].first, bad);
                free(got);
            }
            pool_destroy(pool);
        }
        free(ref);
    }
    pool_destroy(one);
    model_free(m);
    return test_finish();
}
