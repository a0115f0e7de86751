/* engine_testlib.h - helpers shared by the engine tests (header-only, static):
 * load stories260K, make engines, random prompts, run a request to its end
 * collecting ids and text, the greedy single-sequence reference. */
#ifndef CINFER_TEST_ENGINE_TESTLIB_H
#define CINFER_TEST_ENGINE_TESTLIB_H

#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "cinfer/engine.h"
#include "engine/generate.h"
#include "model/model.h"
#include "testutil.h"

typedef struct run_result {
    int32_t tokens[2048];
    int32_t n_tokens;
    char text[16384];
    size_t text_len;
    cinfer_finish finish;
    int32_t stop_string; /* cinfer_output.stop_string of the final read */
    cinfer_usage usage;
} run_result;

/* Index of the largest of v[0..n) (the first on ties). */
static inline int tl_argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

/* The greedy continuation of p[0..n) computed on one gen_session, token by
 * token (the single-sequence reference engine runs are compared with):
 * n_gen tokens into out. */
static inline void tl_greedy(const model *m, thread_pool *pool, const int32_t *p, int32_t n, int32_t n_gen,
                             int32_t *out) {
    int n_vocab = model_get_hparams(m)->n_vocab;
    gen_session g;
    cf_err err = {0};
    CHECKF(gen_init(&g, m, pool, n + n_gen, 512, &err) == 0, "%s", err.msg);
    CHECKF(gen_feed(&g, p, n, NULL, &err) == 0, "%s", err.msg);
    for (int s = 0; s < n_gen; s++) {
        out[s] = tl_argmax(g.logits, n_vocab);
        if (s + 1 < n_gen) CHECKF(gen_feed(&g, &out[s], 1, NULL, &err) == 0, "%s", err.msg);
    }
    gen_release(&g);
}

static uint64_t tl_rng = 0x9E3779B97F4A7C15ull;
static inline uint32_t tl_rand(void) {
    tl_rng ^= tl_rng << 13;
    tl_rng ^= tl_rng >> 7;
    tl_rng ^= tl_rng << 17;
    return (uint32_t)(tl_rng >> 11);
}

/* Random non-special tokens of stories260K (ids 3..511). */
static inline void tl_prompt(int32_t *p, int32_t n) {
    for (int32_t i = 0; i < n; i++) p[i] = 3 + (int32_t)(tl_rand() % 509);
}

/* Engines made by tl_engine plan, compute and publish one after another when
 * set (cinfer_engine_options.sync_scheduling); default: asynchronous. */
static bool tl_sync_scheduling = false;
/* cinfer_engine_options.attn_precision of engines made by tl_engine (default: F32, the option's zero value). */
static int32_t tl_attn_precision = CINFER_ATTN_F32;

static inline cinfer_engine *tl_engine(const model *m, thread_pool *tp, int64_t kv_bytes, int32_t max_batch,
                                       int32_t max_seqs, int32_t max_ctx) {
    cinfer_engine_options o = {.block_tokens = 16,
                               .kv_memory_bytes = kv_bytes,
                               .max_batch_tokens = max_batch,
                               .max_seqs = max_seqs,
                               .max_ctx = max_ctx,
                               .sync_scheduling = tl_sync_scheduling,
                               .attn_precision = tl_attn_precision,
                               .kv_dtype = tu_kv_dtype() ? cinfer_kv_dtype_parse(tu_kv_dtype()) : 0};
    cinfer_engine *e = NULL;
    char err[256];
    if (cinfer_engine_create(m, tp, &o, &e, err, sizeof err)) fprintf(stderr, "engine create: %s\n", err);
    return e;
}

/* Reads a request until it finishes, appending into *res. Returns 0 or -1. */
static inline int tl_collect(cinfer_engine *e, uint64_t id, run_result *res) {
    cinfer_output o;
    memset(&o, 0, sizeof o);
    for (;;) {
        int rc = cinfer_engine_read(e, id, &o, -1);
        if (rc < 0) {
            cinfer_output_release(&o);
            return -1;
        }
        if (o.finish == CINFER_FINISH_NONE && o.stop_string != -1) {
            cinfer_output_release(&o);
            return -1; /* stop_string is -1 while running */
        }
        for (int32_t i = 0; i < o.n_tokens && res->n_tokens < 2048; i++) res->tokens[res->n_tokens++] = o.tokens[i];
        if (res->text_len + o.text_len < sizeof res->text) {
            memcpy(res->text + res->text_len, o.text, o.text_len);
            res->text_len += o.text_len;
            res->text[res->text_len] = 0;
        }
        if (o.finish != CINFER_FINISH_NONE) {
            res->finish = o.finish;
            res->stop_string = o.stop_string;
            res->usage = o.usage;
            cinfer_output_release(&o);
            return 0;
        }
    }
}

static inline uint64_t tl_submit(cinfer_engine *e, const cinfer_request *r) {
    char err[256];
    uint64_t id = cinfer_engine_submit(e, r, err, sizeof err);
    if (!id) fprintf(stderr, "submit: %s\n", err);
    return id;
}

static inline int tl_run(cinfer_engine *e, const cinfer_request *r, run_result *res) {
    memset(res, 0, sizeof *res);
    uint64_t id = tl_submit(e, r);
    return id ? tl_collect(e, id, res) : -1;
}

static inline bool tl_same_tokens(const run_result *a, const run_result *b) {
    return a->n_tokens == b->n_tokens && !memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof(int32_t));
}

#endif
