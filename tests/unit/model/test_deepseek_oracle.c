/* test_deepseek_oracle.c - DeepSeek-V3 group-limited routing (4 expert
 * groups, 2 used), sigmoid gating with exp_probs_b, normalized weights x 2.5,
 * q_lora, a shared expert and YaRN (factor 4) against Hugging Face
 * transformers' DeepseekV3ForCausalLM in float64: tests/data/deepseek/
 * v3_groups.json, written by tests/oracles/deepseek_v3_groups.py (which needs
 * torch; this test does not). The model is regenerated here with mkmodel
 * from the same options and seed as the script used, so the weights are the
 * oracle's. Checks, at 1e-4 absolute: per-position argmax and top-8 logits
 * (prompt prefilled in the expanded MLA form), all last-position logits, the
 * 32 greedy tokens with each step's top-8 (decode absorbed); then the same
 * greedy ids through the engine (absorbed throughout). */
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

static void check_top(json_t *top, const float *logits, const char *what, int idx) {
    size_t i;
    json_t *pair;
    json_array_foreach(top, i, pair) {
        int id = (int)json_integer_value(json_array_get(pair, 0));
        double d = fabs(logits[id] - json_number_value(json_array_get(pair, 1)));
        if (d > max_diff) max_diff = d;
        CHECKF(d <= 1e-4, "%s %d: logit of %d differs by %g", what, idx, id, d);
    }
}

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static void compare(const model *m, json_t *root, const int32_t *ids, int n_prompt, const int32_t *greedy, int n_gen) {
    thread_pool *pool = pool_create(2);
    const int n_vocab = model_get_hparams(m)->n_vocab;
    cf_err err = {0};
    gen_session g;
    int rc = gen_init(&g, m, pool, n_prompt + n_gen, 512, &err);
    CHECKF(rc == 0, "%s", err.msg);
    float *all = malloc(sizeof(float) * (size_t)n_prompt * (size_t)n_vocab);
    if (rc == 0 && gen_feed(&g, ids, n_prompt, all, &err) == 0) {
        json_t *positions = json_object_get(root, "positions");
        for (int p = 0; p < n_prompt; p++) {
            json_t *jp = json_array_get(positions, (size_t)p);
            const float *lg = all + (int64_t)p * n_vocab;
            int want = (int)json_integer_value(json_object_get(jp, "argmax"));
            CHECKF(argmax(lg, n_vocab) == want, "pos %d: argmax %d, want %d", p, argmax(lg, n_vocab), want);
            check_top(json_object_get(jp, "top"), lg, "position", p);
        }
        json_t *last = json_object_get(root, "last_logits");
        CHECK((int)json_array_size(last) == n_vocab);
        for (int v = 0; v < n_vocab && v < (int)json_array_size(last); v++) {
            double d = fabs(g.logits[v] - json_number_value(json_array_get(last, (size_t)v)));
            if (d > max_diff) max_diff = d;
            CHECKF(d <= 1e-4, "last_logits[%d] differs by %g", v, d);
        }
        json_t *steps = json_object_get(root, "greedy_steps");
        int mismatches = 0;
        for (int s = 0; s < n_gen; s++) {
            if (argmax(g.logits, n_vocab) != greedy[s]) mismatches++;
            check_top(json_object_get(json_array_get(steps, (size_t)s), "top"), g.logits, "step", s);
            if (s + 1 < n_gen && gen_feed(&g, &greedy[s], 1, NULL, &err)) {
                CHECKF(0, "%s", err.msg);
                break;
            }
        }
        CHECKF(mismatches == 0, "%d greedy tokens differ", mismatches);
    } else {
        CHECKF(0, "%s", err.msg);
    }
    fprintf(stderr, "deepseek-v3 groups vs transformers: max |logit diff| %.2e\n", max_diff);
    free(all);
    if (rc == 0) gen_release(&g);

    cinfer_engine *e = tl_engine(m, pool, 32 << 20, 24, 4, 256);
    CHECK(e != NULL);
    if (e) {
        cinfer_request r = cinfer_request_default();
        r.prompt = ids;
        r.n_prompt = n_prompt;
        r.max_tokens = n_gen;
        r.ignore_eos = true;
        static run_result res;
        CHECK(tl_run(e, &r, &res) == 0);
        CHECKF(res.n_tokens == n_gen && !memcmp(res.tokens, greedy, sizeof(int32_t) * (size_t)n_gen),
               "engine: greedy ids differ");
        cinfer_engine_destroy(e);
    }
    pool_destroy(pool);
}

int main(void) {
    json_error_t jerr;
    json_t *root = json_load_file(source_path("tests/data/deepseek/v3_groups.json"), 0, &jerr);
    CHECKF(root != NULL, "v3_groups.json: %s", jerr.text);
    if (!root) return test_finish();
    /* the options of MKMODEL in tests/oracles/deepseek_v3_groups.py */
    mkmodel_opts o = {.arch = "deepseek2",
                      .dim = 128,
                      .layers = 3,
                      .heads = 4,
                      .kv_heads = 4,
                      .ffn = 256,
                      .q_lora = 64,
                      .kv_lora = 64,
                      .qk_nope = 32,
                      .qk_rope = 16,
                      .v_head = 32,
                      .experts = 16,
                      .experts_used = 3,
                      .expert_ffn = 64,
                      .shared_experts = 1,
                      .dense_layers = 1,
                      .groups = 4,
                      .groups_used = 2,
                      .softmax_gating = false,
                      .expert_scale = 2.5f,
                      .yarn_factor = 4.0f,
                      .yarn_orig_ctx = 512,
                      .ctx = 2048,
                      .type = DT_F32,
                      .seed = 42,
                      .vocab_from = shared_path("fixtures/vocab/derived-vocab-tiny-deepseek2.gguf")};
    char path[256];
    temp_path(path, sizeof path, "v3groups.gguf");
    cf_err err = {0};
    int rc = mkmodel_write(&o, path, &err);
    CHECKF(rc == 0, "%s", err.msg);
    model *m = NULL;
    if (rc == 0) {
        rc = model_load(path, &m, &err);
        CHECKF(rc == 0, "%s", err.msg);
    }
    if (rc == 0) {
        const model_hparams *hp = model_get_hparams(m);
        CHECK(hp->n_expert_group == 4 && hp->n_group_used == 2 && hp->rope_scaling == ROPE_SCALING_YARN);
        json_t *jids = json_object_get(root, "input_ids"), *jg = json_object_get(root, "greedy_ids");
        int n_prompt = (int)json_array_size(jids), n_gen = (int)json_array_size(jg);
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)(n_prompt + n_gen));
        for (int i = 0; i < n_prompt; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
        for (int i = 0; i < n_gen; i++) ids[n_prompt + i] = (int32_t)json_integer_value(json_array_get(jg, (size_t)i));
        compare(m, root, ids, n_prompt, ids + n_prompt, n_gen);
        free(ids);
    }
    model_free(m);
    unlink(path);
    json_decref(root);
    return test_finish();
}
