/* test_deepseek_fixtures.c - the deepseek2 forward pass (MLA + MoE) against
 * llama.cpp's reference outputs for tiny-deepseek2 (../shared/fixtures/
 * llama-cpp, README section 4; F32 weights, so 1e-4 absolute):
 *   - the prompt text tokenizes (our BPE) to the fixture's input ids;
 *   - per-position argmax and top-8 logits, all last-position logits, and the
 *     64-token greedy continuation, with the prompt prefilled in the expanded
 *     MLA form and decode in the absorbed form, and again with everything
 *     absorbed; the two runs' logits agree to 1e-4 of the row's largest
 *     logit;
 *   - the KV cache holds layers x (kv_lora_rank + rope_dim) floats per token;
 *   - through the engine (absorbed form throughout, see model.h): the three
 *     prompts alone and all at once plus two unrelated requests (chunked
 *     prefill: 40-token batches) give exactly the fixture's 64 greedy ids; the
 *     expert load counters saw the routed tokens;
 *   - the short prompt again on every other kernel ISA. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/engine_testlib.h"
#include "base/cpu.h"
#include "engine/generate.h"
#include "engine/kv_pool.h"
#include "model/model.h"
#include "testutil.h"
#include "text/tokenizer.h"

#define MODEL "models/tiny/tiny-deepseek2.gguf"
#define N_CASES 3
static const char *const jsons[N_CASES] = {"fixtures/llama-cpp/tiny-deepseek2.once.json",
                                           "fixtures/llama-cpp/tiny-deepseek2.repeat.json",
                                           "fixtures/llama-cpp/tiny-deepseek2.paragraph.json"};

typedef struct fixture {
    json_t *root;
    int32_t *ids, *greedy;
    int n_prompt, n_gen;
} fixture;

static double max_diff;

static void check_top(json_t *top, const float *logits, const char *what, int idx) {
    size_t i;
    json_t *pair;
    json_array_foreach(top, i, pair) {
        int id = (int)json_integer_value(json_array_get(pair, 0));
        double want = json_number_value(json_array_get(pair, 1));
        double d = fabs(logits[id] - want);
        if (d > max_diff) max_diff = d;
        CHECKF(d <= 1e-4, "%s %d: logit of %d is %.7f, want %.7f", what, idx, id, logits[id], want);
    }
}

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static int load_fixture(const char *path, fixture *f) {
    json_error_t jerr;
    memset(f, 0, sizeof *f);
    f->root = json_load_file(shared_path(path), 0, &jerr);
    CHECKF(f->root != NULL, "%s: %s", path, jerr.text);
    if (!f->root) return -1;
    json_t *jids = json_object_get(f->root, "input_ids"), *jg = json_object_get(f->root, "greedy_ids");
    f->n_prompt = (int)json_array_size(jids);
    f->n_gen = (int)json_array_size(jg);
    f->ids = malloc(sizeof(int32_t) * (size_t)f->n_prompt);
    f->greedy = malloc(sizeof(int32_t) * (size_t)f->n_gen);
    for (int i = 0; i < f->n_prompt; i++) f->ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));
    for (int i = 0; i < f->n_gen; i++) f->greedy[i] = (int32_t)json_integer_value(json_array_get(jg, (size_t)i));
    return 0;
}

static void free_fixture(fixture *f) {
    free(f->ids);
    free(f->greedy);
    json_decref(f->root);
}

/* Runs the fixture through a gen_session; keeps every logit of the prompt and
 * of each greedy step in *trace (n_prompt + n_gen rows) for comparing forms. */
static void run_gen(const model *m, thread_pool *pool, const fixture *f, const char *name, int32_t expand_min,
                    float *trace) {
    cf_err err = {0};
    const int n_vocab = model_get_hparams(m)->n_vocab;
    gen_session g;
    int rc = gen_init(&g, m, pool, f->n_prompt + f->n_gen, 512, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) return;
    fwd_ctx_set_mla_expand_min(g.fc, expand_min);
    max_diff = 0;
    if (gen_feed(&g, f->ids, f->n_prompt, trace, &err) == 0) {
        json_t *positions = json_object_get(f->root, "positions");
        for (int p = 0; p < f->n_prompt; p++) {
            json_t *jp = json_array_get(positions, (size_t)p);
            const float *lg = trace + (int64_t)p * n_vocab;
            int want = (int)json_integer_value(json_object_get(jp, "argmax"));
            CHECKF(argmax(lg, n_vocab) == want, "%s pos %d: argmax %d, want %d", name, p, argmax(lg, n_vocab), want);
            check_top(json_object_get(jp, "top"), lg, "position", p);
        }
        json_t *last = json_object_get(f->root, "last_logits");
        CHECK((int)json_array_size(last) == n_vocab);
        for (int v = 0; v < n_vocab && v < (int)json_array_size(last); v++) {
            double d = fabs(g.logits[v] - json_number_value(json_array_get(last, (size_t)v)));
            if (d > max_diff) max_diff = d;
            CHECKF(d <= 1e-4, "%s last_logits[%d] differs by %g", name, v, d);
        }
        json_t *steps = json_object_get(f->root, "greedy_steps");
        int mismatches = 0;
        for (int s = 0; s < f->n_gen; s++) {
            memcpy(trace + (int64_t)(f->n_prompt + s) * n_vocab, g.logits, sizeof(float) * (size_t)n_vocab);
            if (argmax(g.logits, n_vocab) != f->greedy[s]) mismatches++;
            check_top(json_object_get(json_array_get(steps, (size_t)s), "top"), g.logits, "step", s);
            if (s + 1 < f->n_gen && gen_feed(&g, &f->greedy[s], 1, NULL, &err)) {
                CHECKF(0, "%s", err.msg);
                break;
            }
        }
        CHECKF(mismatches == 0, "%s: %d greedy tokens differ", name, mismatches);
    } else {
        CHECKF(0, "%s: %s", name, err.msg);
    }
    fprintf(stderr, "%-48s [%s, expand_min %d] max |logit diff| %.2e\n", name, cpu_isa_name(cpu_isa_active()),
            expand_min, max_diff);
    gen_release(&g);
}

static void test_forward(const model *m, thread_pool *pool, fixture *fx) {
    const int n_vocab = model_get_hparams(m)->n_vocab;
    tokenizer *tk = NULL;
    cf_err terr = {0};
    CHECKF(tokenizer_load_gguf(model_get_gguf(m), &tk, &terr) == 0, "tokenizer: %s", terr.msg);
    for (int i = 0; i < N_CASES; i++) {
        fixture *f = &fx[i];
        /* our tokenizer gives the fixture's ids */
        const char *text = json_string_value(json_object_get(f->root, "prompt_text"));
        int32_t *enc = NULL;
        size_t n_enc = 0;
        cf_err err = {0};
        int rc = text && tk ? tokenizer_encode(tk, text, strlen(text), true, false, &enc, &n_enc, &err) : -1;
        CHECKF(rc == 0 && n_enc == (size_t)f->n_prompt && !memcmp(enc, f->ids, n_enc * sizeof(int32_t)),
               "%s: prompt ids differ", jsons[i]);
        free(enc);
        size_t rows = (size_t)(f->n_prompt + f->n_gen) * (size_t)n_vocab;
        float *expanded = malloc(rows * sizeof(float)), *absorbed = malloc(rows * sizeof(float));
        run_gen(m, pool, f, jsons[i], 2, expanded); /* prefill expanded, decode absorbed */
        run_gen(m, pool, f, jsons[i], INT32_MAX, absorbed); /* everything absorbed */
        /* relative to the row's largest logit */
        double worst = 0;
        for (size_t r = 0; r < rows / (size_t)n_vocab; r++) {
            const float *x = expanded + r * (size_t)n_vocab, *y = absorbed + r * (size_t)n_vocab;
            double scale = 0, d = 0;
            for (int v = 0; v < n_vocab; v++) {
                scale = fmax(scale, fabs(y[v]));
                d = fmax(d, fabs(x[v] - y[v]));
            }
            if (d / scale > worst) worst = d / scale;
        }
        CHECKF(worst <= 1e-4, "%s: expanded vs absorbed prefill: relative difference %.2e", jsons[i], worst);
        fprintf(stderr, "%-48s expanded vs absorbed: max relative diff %.2e\n", jsons[i], worst);
        free(expanded);
        free(absorbed);
    }
    tokenizer_free(tk);
}

static void test_kv_size(const model *m) {
    const model_hparams *hp = model_get_hparams(m);
    kv_spec layout;
    model_kv_layout(m, &layout);
    CHECK(layout.n_groups == 1 && layout.groups[0].kind == KV_LAYER_MLA && layout.groups[0].n_layers == 4);
    CHECK(hp->kv_lora_rank == 64 && hp->rope_dim == 16 && hp->n_layer == 4);
    CHECK(layout.groups[0].token_floats == 64 + 16);
    CHECK(model_kv_block_floats(m, 1) * (int64_t)sizeof(float) == 4 * (64 + 16) * 4);
    kv_spec spec;
    cf_err err = {0};
    CHECK(kv_spec_from_model(m, &spec, &err) == 0);
    CHECK(spec.n_groups == 1 && spec.groups[0].kind == KV_LAYER_MLA && spec.groups[0].token_floats == 80);
    CHECK(kv_spec_block_floats(&spec, 16) == model_kv_block_floats(m, 16));
}

static cinfer_request greedy_request(const fixture *f) {
    cinfer_request r = cinfer_request_default();
    r.prompt = f->ids;
    r.n_prompt = f->n_prompt;
    r.max_tokens = f->n_gen;
    r.ignore_eos = true;
    return r;
}

static void test_engine(const model *m, thread_pool *pool, fixture *fx) {
    /* alone, each prompt in one engine (max 40 tokens per step: chunked prefill) */
    cinfer_engine *e = tl_engine(m, pool, 64 << 20, 40, 8, 1024);
    CHECK(e != NULL);
    if (!e) return;
    static run_result res[N_CASES + 2];
    for (int i = 0; i < N_CASES; i++) {
        cinfer_request r = greedy_request(&fx[i]);
        CHECK(tl_run(e, &r, &res[i]) == 0);
        CHECKF(res[i].n_tokens == fx[i].n_gen &&
                   !memcmp(res[i].tokens, fx[i].greedy, sizeof(int32_t) * (size_t)fx[i].n_gen),
               "engine alone, %s: greedy ids differ", jsons[i]);
    }
    /* the load counters saw every routed token of the 3 MoE layers */
    uint64_t counts[8], sum = 0;
    CHECK(cinfer_engine_expert_load(e, 0, counts, 8) == 0); /* dense layer */
    int n = cinfer_engine_expert_load(e, 1, counts, 8);
    CHECK(n == 8);
    for (int k = 0; k < 8 && n == 8; k++) sum += counts[k];
    CHECKF(sum > 0 && sum % 2 == 0, "expert load of layer 1: %llu", (unsigned long long)sum);
    CHECK(cinfer_engine_expert_load(e, 99, counts, 8) == -1);
    cinfer_engine_destroy(e);

    /* all at once, with two other requests (sampled) */
    e = tl_engine(m, pool, 64 << 20, 40, 8, 1024);
    CHECK(e != NULL);
    if (!e) return;
    uint64_t ids[N_CASES + 2];
    int32_t other[2][30];
    for (int i = 0; i < N_CASES; i++) {
        cinfer_request r = greedy_request(&fx[i]);
        ids[i] = tl_submit(e, &r);
    }
    for (int k = 0; k < 2; k++) {
        for (int j = 0; j < 30; j++) other[k][j] = (int32_t)(tl_rand() % 8177);
        cinfer_request r = cinfer_request_default();
        r.prompt = other[k];
        r.n_prompt = 30;
        r.max_tokens = 50;
        r.ignore_eos = true;
        r.sampling.temperature = 0.8f;
        r.sampling.seed = 7 + (uint64_t)k;
        ids[N_CASES + k] = tl_submit(e, &r);
    }
    for (int i = 0; i < N_CASES + 2; i++) {
        memset(&res[i], 0, sizeof res[i]);
        CHECK(ids[i] && tl_collect(e, ids[i], &res[i]) == 0);
    }
    for (int i = 0; i < N_CASES; i++)
        CHECKF(res[i].n_tokens == fx[i].n_gen &&
                   !memcmp(res[i].tokens, fx[i].greedy, sizeof(int32_t) * (size_t)fx[i].n_gen),
               "engine batched, %s: greedy ids differ", jsons[i]);
    cinfer_engine_destroy(e);
}

int main(void) {
    thread_pool *pool = pool_create(2);
    cf_err err = {0};
    model *m = NULL;
    int rc = model_load(shared_path(MODEL), &m, &err);
    CHECKF(rc == 0, "%s", err.msg);
    fixture fx[N_CASES];
    int ok = rc == 0;
    for (int i = 0; i < N_CASES; i++) ok &= load_fixture(jsons[i], &fx[i]) == 0;
    if (ok) {
        test_kv_size(m);
        test_forward(m, pool, fx);
        test_engine(m, pool, fx);
    }
    model_free(m);
    /* every other kernel ISA on the short prompt (weights are prepared per ISA at load) */
    cpu_isa best = cpu_isa_active();
    for (int isa = 0; ok && isa < CPU_ISA_COUNT; isa++) {
        if ((cpu_isa)isa == best || !cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        model *mi = NULL;
        CHECKF(model_load(shared_path(MODEL), &mi, &err) == 0, "%s", err.msg);
        if (mi) {
            size_t rows = (size_t)(fx[0].n_prompt + fx[0].n_gen) * (size_t)model_get_hparams(mi)->n_vocab;
            float *trace = malloc(rows * sizeof(float));
            run_gen(mi, pool, &fx[0], jsons[0], 2, trace);
            free(trace);
        }
        model_free(mi);
    }
    cpu_isa_force(best);
    for (int i = 0; i < N_CASES; i++) free_fixture(&fx[i]);
    pool_destroy(pool);
    return test_finish();
}
