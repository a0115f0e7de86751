/* test_ds4_oracle.c - deepseek4 against llama.cpp: tests/data/deepseek4/
 * <shape>.json, written by tests/oracles/ds4_llama_oracle.py (llama.cpp's
 * deepseek4, F32 weights and KV cache; this test needs neither). Each model is
 * regenerated here with mkmodel from the fixture's options, so the weights are
 * the oracle's. Checks, at 1e-4 absolute: per-position argmax and top-32
 * logits of the prompt in one batch, all last-position logits, the 64 greedy
 * tokens with each step's top-8; the same prompt prefilled in chunks of 7
 * tokens (cutting compressor groups anywhere) gives the same per-position
 * logits; the engine (16-token KV blocks, 24-token batches) gives the same
 * greedy ids. Shapes: a CSA/HCA/window mix with the 128-token window and a
 * prompt over two HCA groups, a 16-token window with YaRN, top-k 2 with MTP
 * and two hash layers, window-only layers without SwiGLU clamp. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../engine/engine_testlib.h"
#include "engine/generate.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "testutil.h"

static double max_diff;

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static int check_top(json_t *top, const float *logits, const char *what, const char *shape, int idx) {
    size_t i;
    json_t *pair;
    int bad = 0;
    json_array_foreach(top, i, pair) {
        int id = (int)json_integer_value(json_array_get(pair, 0));
        double d = fabs(logits[id] - json_number_value(json_array_get(pair, 1)));
        if (d > max_diff) max_diff = d;
        if (d > 1e-4 && !bad++) CHECKF(0, "%s: %s %d: logit of %d differs by %g", shape, what, idx, id, d);
    }
    return bad;
}

static int geti(json_t *o, const char *k) { return (int)json_integer_value(json_object_get(o, k)); }
static float getf(json_t *o, const char *k) { return (float)json_number_value(json_object_get(o, k)); }

static void opts_from(json_t *j, mkmodel_opts *o) {
    *o = (mkmodel_opts){.arch = "deepseek4", .type = DT_F32, .vocab_from = shared_path("models/stories260K.gguf")};
    o->dim = geti(j, "dim"), o->layers = geti(j, "layers"), o->heads = geti(j, "heads"), o->ffn = geti(j, "ffn");
    o->head_dim = geti(j, "head_dim"), o->qk_rope = geti(j, "qk_rope"), o->q_lora = geti(j, "q_lora");
    o->o_groups = geti(j, "o_groups"), o->o_lora = geti(j, "o_lora"), o->window = geti(j, "window");
    o->ratios = json_string_value(json_object_get(j, "ratios"));
    o->index_heads = geti(j, "index_heads"), o->index_dim = geti(j, "index_dim");
    o->index_topk = geti(j, "index_topk"), o->sinkhorn = geti(j, "sinkhorn"), o->hc = geti(j, "hc");
    o->experts = geti(j, "experts"), o->experts_used = geti(j, "experts_used");
    o->expert_ffn = geti(j, "expert_ffn"), o->shared_experts = geti(j, "shared_experts");
    o->hash_layers = geti(j, "hash_layers"), o->mtp_layers = geti(j, "mtp_layers");
    o->swiglu_limit = getf(j, "swiglu_limit"), o->expert_scale = getf(j, "expert_scale");
    o->yarn_factor = getf(j, "yarn_factor"), o->yarn_orig_ctx = geti(j, "yarn_orig_ctx");
    o->compress_rope_base = getf(j, "compress_rope_base");
    o->seed = (uint64_t)geti(j, "seed");
}

/* The prompt in chunks of `chunk`; per-position top logits as the fixture's. */
static void check_prompt(const model *m, thread_pool *pool, json_t *root, const char *shape, const int32_t *ids,
                         int n_prompt, int chunk) {
    int n_vocab = model_get_hparams(m)->n_vocab;
    cf_err err = {0};
    gen_session g;
    if (gen_init(&g, m, pool, n_prompt + 8, chunk, &err)) {
        CHECKF(0, "%s: %s", shape, err.msg);
        return;
    }
    float *all = malloc(sizeof(float) * (size_t)n_prompt * (size_t)n_vocab);
    int bad = 0;
    if (gen_feed(&g, ids, n_prompt, all, &err) == 0) {
        json_t *positions = json_object_get(root, "positions");
        for (int p = 0; p < n_prompt && bad < 3; p++) {
            json_t *jp = json_array_get(positions, (size_t)p);
            const float *lg = all + (int64_t)p * n_vocab;
            int want = geti(jp, "argmax");
            if (argmax(lg, n_vocab) != want) {
                CHECKF(0, "%s (chunks of %d): pos %d: argmax %d, want %d", shape, chunk, p, argmax(lg, n_vocab), want);
                bad++;
            }
            bad += check_top(json_object_get(jp, "top"), lg, "position", shape, p);
        }
    } else {
        CHECKF(0, "%s: %s", shape, err.msg);
    }
    free(all);
    gen_release(&g);
}

static void check_greedy(const model *m, thread_pool *pool, json_t *root, const char *shape, const int32_t *ids,
                         int n_prompt, const int32_t *greedy, int n_gen) {
    int n_vocab = model_get_hparams(m)->n_vocab;
    cf_err err = {0};
    gen_session g;
    if (gen_init(&g, m, pool, n_prompt + n_gen, 512, &err) || gen_feed(&g, ids, n_prompt, NULL, &err)) {
        CHECKF(0, "%s: %s", shape, err.msg);
        return;
    }
    json_t *last = json_object_get(root, "last_logits");
    CHECK((int)json_array_size(last) == n_vocab);
    for (int v = 0; v < n_vocab && v < (int)json_array_size(last); v++) {
        double d = fabs(g.logits[v] - json_number_value(json_array_get(last, (size_t)v)));
        if (d > max_diff) max_diff = d;
        CHECKF(d <= 1e-4, "%s: last_logits[%d] differs by %g", shape, v, d);
    }
    json_t *steps = json_object_get(root, "greedy_steps");
    int mismatches = 0;
    for (int s = 0; s < n_gen; s++) {
        if (argmax(g.logits, n_vocab) != greedy[s]) mismatches++;
        check_top(json_object_get(json_array_get(steps, (size_t)s), "top"), g.logits, "step", shape, s);
        if (s + 1 < n_gen && gen_feed(&g, &greedy[s], 1, NULL, &err)) {
            CHECKF(0, "%s: %s", shape, err.msg);
            break;
        }
    }
    CHECKF(mismatches == 0, "%s: %d greedy tokens differ", shape, mismatches);
    gen_release(&g);
}

static void check_engine(const model *m, thread_pool *pool, const char *shape, const int32_t *ids, int n_prompt,
                         const int32_t *greedy, int n_gen) {
    cinfer_engine *e = tl_engine(m, pool, 64 << 20, 24, 4, 512);
    CHECK(e != NULL);
    if (!e) return;
    cinfer_request r = cinfer_request_default();
    r.prompt = ids;
    r.n_prompt = n_prompt;
    r.max_tokens = n_gen;
    r.ignore_eos = true;
    static run_result res;
    CHECK(tl_run(e, &r, &res) == 0);
    CHECKF(res.n_tokens == n_gen && !memcmp(res.tokens, greedy, sizeof(int32_t) * (size_t)n_gen),
           "%s: engine greedy ids differ", shape);
    cinfer_engine_destroy(e);
}

static void run_shape(const char *shape, thread_pool *pool) {
    char rel[128], path[256];
    snprintf(rel, sizeof rel, "tests/data/deepseek4/%s.json", shape);
    json_error_t jerr;
    json_t *root = json_load_file(source_path(rel), 0, &jerr);
    CHECKF(root != NULL, "%s: %s", rel, jerr.text);
    if (!root) return;
    mkmodel_opts o;
    opts_from(json_object_get(root, "mkmodel"), &o);
    temp_path(path, sizeof path, shape);
    cf_err err = {0};
    model *m = NULL;
    int rc = mkmodel_write(&o, path, &err);
    if (rc == 0) rc = model_load(path, &m, &err);
    CHECKF(rc == 0, "%s: %s", shape, err.msg);
    if (rc == 0) {
        json_t *jids = json_object_get(root, "prompt"), *jg = json_object_get(root, "greedy");
        int n_prompt = (int)json_array_size(jids), n_gen = (int)json_array_size(jg);
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n_prompt + n_gen));
        for (int i = 0; i < n_prompt; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
        for (int i = 0; i < n_gen; i++) ids[n_prompt + i] = (int32_t)json_integer_value(json_array_get(jg, (size_t)i));
        check_prompt(m, pool, root, shape, ids, n_prompt, 512);
        check_prompt(m, pool, root, shape, ids, n_prompt, 7);
        check_greedy(m, pool, root, shape, ids, n_prompt, ids + n_prompt, n_gen);
        check_engine(m, pool, shape, ids, n_prompt, ids + n_prompt, n_gen);
        free(ids);
    }
    model_free(m);
    unlink(path);
    json_decref(root);
}

int main(void) {
    if (access(shared_path("models/stories260K.gguf"), R_OK)) return tu_missing_fixture("models/stories260K.gguf");
    thread_pool *pool = pool_create(2);
    const char *shapes[] = {"mix", "window16_yarn", "csa_topk2", "window_heavy"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) run_shape(shapes[i], pool);
    fprintf(stderr, "deepseek4 vs llama.cpp: max |logit diff| %.2e\n", max_diff);
    pool_destroy(pool);
    return test_finish();
}
