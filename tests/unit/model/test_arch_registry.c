/* test_arch_registry.c - the architecture registry (src/model/arch/): every
 * table has its required hooks and unique names, lookups by name, the
 * unsupported-architecture message lists every served name, the KV layout
 * each family describes sizes the blocks, and the model fingerprint bytes of
 * the fixture models are pinned (stored prefix blocks are keyed by them: a
 * change here orphans every store written before).
 *
 * Fixtures: models/stories260K.gguf, models/tiny/tiny-llama.gguf,
 * models/tiny/tiny-deepseek2.gguf, models/tiny/tiny-gemma2.gguf. Missing: fails under CI=true, else exit 77. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/prefix_cache.h"
#include "model/arch/arch.h"
#include "testutil.h"

static void test_tables(void) {
    const model_arch *all[] = {&model_arch_llama, &model_arch_deepseek2, &model_arch_gemma2, &model_arch_deepseek4};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const model_arch *a = all[i];
        CHECK(a->names[0] != NULL);
        CHECK(a->read_hparams && a->load && a->release && a->kv_layout && a->kv_describe && a->fingerprint);
        CHECK(a->fwd_create && a->fwd_free && a->forward);
        for (const char *const *n = a->names; *n; n++) CHECKF(model_arch_find(*n) == a, "%s", *n);
    }
    CHECK(model_arch_find("qwen2") == &model_arch_llama);
    CHECK(model_arch_find("gemma2") == &model_arch_gemma2);
    CHECK(model_arch_find("gemma3") == NULL);
    CHECK(model_arch_find("") == NULL);
    char list[128];
    model_arch_list(list, sizeof list);
    CHECKF(strcmp(list, "llama, qwen2, qwen3, deepseek2, gemma2, deepseek4") == 0, "%s", list);
    char tiny[8];
    model_arch_list(tiny, sizeof tiny); /* truncates, stays terminated */
    CHECK(strlen(tiny) < sizeof tiny);
}

static void hex(const uint8_t *b, char *out) {
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static void test_model(const char *rel, kv_layer_kind kind, int32_t token_floats, const char *fp_hex) {
    cf_err err = {{0}};
    model *m = NULL;
    if (model_load(shared_path(rel), &m, &err)) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    const model_hparams *hp = model_get_hparams(m);
    kv_spec s;
    model_kv_layout(m, &s);
    CHECK(s.n_groups == 1 && s.groups[0].kind == kind && s.groups[0].n_layers == hp->n_layer);
    CHECKF(s.groups[0].token_floats == token_floats, "%s: %d floats", rel, s.groups[0].token_floats);
    CHECK(model_kv_block_floats(m, 16) == (int64_t)16 * hp->n_layer * token_floats);
    char words[160];
    model_kv_describe(m, words, sizeof words);
    CHECKF(words[0] == '(' && strstr(words, "x 4 B") != NULL, "%s", words);
    /* no expert counters without experts; a bad layer is an error either way */
    thread_pool *tp = pool_create(1);
    CHECK(tp != NULL);
    fwd_ctx *fc = tp ? fwd_ctx_create(m, tp, 4, 64, 16, &err) : NULL;
    CHECK(fc != NULL);
    if (fc) {
        uint64_t counts[64];
        int n = fwd_ctx_expert_load(fc, 0, counts, 64);
        CHECK(kind == KV_LAYER_MLA ? n >= 0 : n == 0);
        CHECK(fwd_ctx_expert_load(fc, hp->n_layer, counts, 64) == -1);
        fwd_ctx_set_mla_expand_min(fc, MLA_EXPAND_MIN_PREFILL); /* no-op where unsupported */
        fwd_ctx_free(fc);
    }
    pool_destroy(tp);
    uint8_t fp[32];
    char got[65];
    CHECK(prefix_cache_model_fingerprint(m, fp, &err) == 0);
    hex(fp, got);
    CHECKF(strcmp(got, fp_hex) == 0, "%s: fingerprint %s, pinned %s", rel, got, fp_hex);
    model_free(m);
}

/* gemma2: two groups (global layers in blocks, window layers in rings) and a pinned fingerprint. */
static void test_gemma2(const char *fp_hex) {
    cf_err err = {{0}};
    model *m = NULL;
    if (access(shared_path("models/tiny/tiny-gemma2.gguf"), R_OK) != 0) {
        tu_missing_fixture(shared_path("models/tiny/tiny-gemma2.gguf"));
        return;
    }
    if (model_load(shared_path("models/tiny/tiny-gemma2.gguf"), &m, &err)) {
        CHECKF(0, "%s", err.msg);
        return;
    }
    kv_spec s;
    model_kv_layout(m, &s);
    CHECK(s.n_groups == 2 && s.groups[0].kind == KV_LAYER_FULL && s.groups[1].kind == KV_LAYER_WINDOW);
    CHECK(model_kv_block_floats(m, 16) == (int64_t)16 * 13 * 256);
    uint8_t fp[32];
    char got[65];
    CHECK(prefix_cache_model_fingerprint(m, fp, &err) == 0);
    hex(fp, got);
    CHECKF(strcmp(got, fp_hex) == 0, "tiny-gemma2: fingerprint %s, pinned %s", got, fp_hex);
    model_free(m);
}

int main(void) {
    test_tables();
    const char *need[] = {"models/stories260K.gguf", "models/tiny/tiny-llama.gguf", "models/tiny/tiny-deepseek2.gguf"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (access(shared_path(need[i]), R_OK) != 0) {
            const char *ci = getenv("CI");
            fprintf(stderr, "missing fixture %s\n", shared_path(need[i]));
            if (ci && !strcmp(ci, "true")) return 1;
            return test_failures ? test_finish() : 77;
        }
    test_model("models/stories260K.gguf", KV_LAYER_FULL, 2 * 4 * 8,
               "636a47bc540b82913a8a114177a63263f83101cae533e123706f47496cbfbfb7");
    test_model("models/tiny/tiny-llama.gguf", KV_LAYER_FULL, 2 * 2 * 32,
               "b9dbf8962edcc4268e0d0a5286f7ecbe522c58eb9e29b9ad84b9db4207bc30bf");
    test_model("models/tiny/tiny-deepseek2.gguf", KV_LAYER_MLA, 64 + 16,
               "d70bceaffa0e0063c4ace5754e3e0b5a35ed154984e332a5746dfebc9e73e58a");
    test_gemma2("93f11a9c10f80b6b7c799b58c5ad6fb2dc94d40a9be57c059f7fe2903fdfa2d3");
    return test_finish();
}
