/* logits_util.h - helpers shared by the quantized-model tests (test_quantized_models.c,
 * test_kquant_model.c): every position's logits of a prompt through a model file, and argmax.
 * Header-only (static), included by test files; not a library. */
#ifndef CINFER_TESTS_LOGITS_UTIL_H
#define CINFER_TESTS_LOGITS_UTIL_H

#include <stdlib.h>

#include "engine/generate.h"
#include "model/model.h"
#include "testutil.h"

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static float *run_all(const char *path, const int32_t *ids, int n, int *n_vocab, thread_pool *pool) {
    cf_err err = {0};
    model *m;
    if (model_load(path, &m, &err)) {
        CHECKF(0, "%s", err.msg);
        return NULL;
    }
    *n_vocab = model_get_hparams(m)->n_vocab;
    gen_session g;
    float *all = malloc(sizeof(float) * (size_t)n * (size_t)*n_vocab);
    int rc = gen_init(&g, m, pool, n, 128, &err);
    if (rc == 0) rc = gen_feed(&g, ids, n, all, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (g.fc) gen_release(&g);
    model_free(m);
    if (rc) {
        free(all);
        return NULL;
    }
    return all;
}

#endif
