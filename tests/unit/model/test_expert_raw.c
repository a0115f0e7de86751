/* test_expert_raw.c - routed-expert residency of a partial expert set
 * (model.h model_expert_acquire / _release and the byte moves of
 * --ep-weight-source peer: model_expert_raw_size / _read_raw /
 * _acquire_raw) for deepseek4 (mkmodel, f32 read in place and q8_0
 * repacked, hash layer included) and deepseek2 (tiny-deepseek2): an expert
 * made resident from bytes (which are then overwritten: the model keeps its
 * own copy) computes bit-identically to the same expert of a full load; a
 * non-resident expert fails with an error; wrong sizes are refused;
 * release gives back exactly the bytes acquire took. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/mkmodel.h"
#include "model/model.h"
#include "testutil.h"
#include "testutil_ds4.h"

#define ROWS 5

static bool keep_expert0(void *ctx, const model_hparams *hp, int32_t layer, int32_t expert) {
    (void)ctx, (void)hp, (void)layer;
    return expert == 0;
}

/* Expert e of layer on rows x: y (n_embd per row). */
static int ffn(fwd_ctx *c, int32_t layer, int32_t e, const float *x, float *y) {
    cf_err err = {0};
    return fwd_ctx_expert_ffn(c, layer, e, x, ROWS, y, &err);
}

static void check_model(const char *path, int32_t layer, const char *what) {
    cf_err err = {0};
    model *full = NULL, *part = NULL;
    model_load_opts lo = {.expert_keep = keep_expert0};
    int rc = model_load(path, &full, &err);
    if (!rc) rc = model_load_with(path, &lo, &part, &err);
    CHECKF(rc == 0, "%s: %s", what, err.msg);
    if (rc) {
        model_free(full);
        return;
    }
    int64_t E = model_get_hparams(full)->n_embd;
    thread_pool *pool = pool_create(1);
    fwd_ctx *cf = fwd_ctx_create(full, pool, 16, 128, 128, &err), *cp = fwd_ctx_create(part, pool, 16, 128, 128, &err);
    CHECKF(cf && cp, "%s: %s", what, err.msg);
    float *x = malloc((size_t)(ROWS * E) * sizeof *x), *y0 = calloc((size_t)(ROWS * E), sizeof *y0),
          *y1 = calloc((size_t)(ROWS * E), sizeof *y1);
    for (int64_t i = 0; i < ROWS * E; i++) x[i] = (float)((i * 7919) % 201 - 100) / 50.0f;
    size_t n = model_expert_raw_size(part, layer);
    char *raw = n ? malloc(n) : NULL;
    CHECKF(model_experts_partial(part) && n > 0 && raw, "%s: raw size %zu", what, n);
    CHECKF(model_expert_raw_size(full, layer) == 0, "%s: a full load offers no moves", what);
    if (cf && cp && raw) {
        CHECKF(model_expert_resident(part, layer, 0) && !model_expert_resident(part, layer, 3), "%s", what);
        CHECKF(ffn(cp, layer, 3, x, y1) != 0, "%s: a non-resident expert must fail", what);
        CHECK(model_expert_read_raw(part, layer, 3, raw, n - 1, &err) != 0);
        CHECKF(model_expert_read_raw(part, layer, 3, raw, n, &err) == 0, "%s: %s", what, err.msg);
        CHECK(model_expert_acquire_raw(part, layer, 3, raw, n - 1, &err) != 0);
        CHECK(!model_expert_resident(part, layer, 3));
        uint64_t before = model_expert_resident_bytes(part);
        CHECKF(model_expert_acquire_raw(part, layer, 3, raw, n, &err) == 0, "%s: %s", what, err.msg);
        uint64_t took = model_expert_resident_bytes(part) - before;
        CHECKF(model_expert_resident(part, layer, 3) && took > 0, "%s", what);
        memset(raw, 0x7f, n); /* the model must not read the sender's bytes again */
        CHECKF(ffn(cf, layer, 3, x, y0) == 0 && ffn(cp, layer, 3, x, y1) == 0, "%s", what);
        CHECKF(!memcmp(y0, y1, (size_t)(ROWS * E) * sizeof *y0), "%s: expert from bytes differs from the file's", what);
        model_expert_release(part, layer, 3);
        CHECKF(!model_expert_resident(part, layer, 3) && model_expert_resident_bytes(part) == before, "%s", what);
        memset(y1, 0, (size_t)(ROWS * E) * sizeof *y1);
        CHECKF(model_expert_acquire(part, layer, 3, &err) == 0, "%s: %s", what, err.msg);
        CHECKF(model_expert_resident_bytes(part) - before == took, "%s: file and bytes take the same", what);
        CHECKF(ffn(cp, layer, 3, x, y1) == 0 && !memcmp(y0, y1, (size_t)(ROWS * E) * sizeof *y0), "%s", what);
    }
    free(raw);
    free(x);
    free(y0);
    free(y1);
    fwd_ctx_free(cf);
    fwd_ctx_free(cp);
    pool_destroy(pool);
    model_free(part);
    model_free(full);
}

int main(void) {
    if (access(shared_path("models/stories260K.gguf"), R_OK)) return tu_missing_fixture("models/stories260K.gguf");
    const char *ds2 = shared_path("models/tiny/tiny-deepseek2.gguf");
    if (access(ds2, R_OK)) return tu_missing_fixture("models/tiny/tiny-deepseek2.gguf");
    dtype types[2] = {DT_F32, DT_Q8_0};
    for (int i = 0; i < 2; i++) {
        mkmodel_opts o = tu_ds4_tiny(2, "0,4", 5);
        o.type = types[i];
        char path[256];
        temp_path(path, sizeof path, i ? "ds4-raw-q8.gguf" : "ds4-raw-f32.gguf");
        cf_err err = {0};
        int rc = mkmodel_write(&o, path, &err);
        CHECKF(rc == 0, "%s", err.msg);
        if (rc) continue;
        check_model(path, 0, i ? "deepseek4 q8_0 hash layer" : "deepseek4 f32 hash layer");
        check_model(path, 1, i ? "deepseek4 q8_0" : "deepseek4 f32");
        unlink(path);
    }
    check_model(ds2, 1, "deepseek2");
    return test_finish();
}
