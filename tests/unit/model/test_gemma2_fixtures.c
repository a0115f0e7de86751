/* test_gemma2_fixtures.c - the gemma2 forward pass (embedding scale, window /
 * global layer alternation, attention and final soft-caps, post-norms,
 * GeGLU) against llama.cpp's reference outputs for tiny-gemma2
 * (../shared/fixtures/llama-cpp, README sections 4-5: 26 layers, window 32,
 * caps 0.1 / 2.0, F32 weights):
 *   - the prompt text tokenizes to the fixture's input ids;
 *   - per-position argmax and top-8 logits, all last-position logits and the
 *     64-token greedy continuation against the exact-GELU files within 1e-4
 *     and against llama.cpp's default files (f16 GELU table) within 2e-3,
 *     the prompt in one pass and again in 7-token chunks (the window ring
 *     wraps inside chunks; logits bit-identical to the one-pass run);
 *   - the KV layout: 13 global layers in blocks, 13 window layers in a ring;
 *   - the short prompt again on every other kernel ISA. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "engine/generate.h"
#include "engine/kv_pool.h"
#include "kv_dtype_util.h"
#include "model/model.h"
#include "testutil.h"
#include "text/tokenizer.h"

#define MODEL "models/tiny/tiny-gemma2.gguf"
#define N_CASES 3
static const char *const names[N_CASES] = {"once", "repeat", "paragraph"};

typedef struct fixture {
    json_t *root;
    int32_t *ids, *greedy;
    int n_prompt, n_gen;
    char path[128];
} fixture;

static double max_diff;

static void check_top(json_t *top, const float *logits, double tol, const char *what, int idx) {
    size_t i;
    json_t *pair;
    json_array_foreach(top, i, pair) {
        int id = (int)json_integer_value(json_array_get(pair, 0));
        double d = fabs(logits[id] - json_number_value(json_array_get(pair, 1)));
        if (d > max_diff) max_diff = d;
        CHECKF(d <= tol, "%s %d: logit of %d is %.7f, off by %g", what, idx, id, logits[id], d);
    }
}

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static int load_fixture(const char *name, const char *variant, fixture *f) {
    json_error_t jerr;
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "fixtures/llama-cpp/tiny-gemma2.%s%s.json", name, variant);
    f->root = json_load_file(shared_path(f->path), 0, &jerr);
    CHECKF(f->root != NULL, "%s: %s", f->path, jerr.text);
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

/* Prompt in chunks of `batch`, then the greedy continuation one token at a
 * time; every logit row goes to trace (n_prompt + n_gen rows). */
static void run_gen(const model *m, thread_pool *pool, const fixture *f, int32_t batch, double tol, float *trace) {
    cf_err err = {0};
    const int n_vocab = model_get_hparams(m)->n_vocab;
    gen_session g;
    kv_dtype dt = test_kv_dtype();
    tol = kv_fixture_tol(dt, MODEL, tol);
    int rc = gen_init_as(&g, m, dt, pool, f->n_prompt + f->n_gen, batch, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) return;
    max_diff = 0;
    if (gen_feed(&g, f->ids, f->n_prompt, trace, &err) == 0) {
        json_t *positions = json_object_get(f->root, "positions");
        for (int p = 0; p < f->n_prompt; p++) {
            json_t *jp = json_array_get(positions, (size_t)p);
            const float *lg = trace + (int64_t)p * n_vocab;
            int want = (int)json_integer_value(json_object_get(jp, "argmax"));
            CHECKF(argmax(lg, n_vocab) == want || !kv_argmax_binding(dt, json_object_get(jp, "top"), tol),
                   "%s pos %d: argmax %d, want %d", f->path, p, argmax(lg, n_vocab), want);
            check_top(json_object_get(jp, "top"), lg, tol, "position", p);
        }
        json_t *last = json_object_get(f->root, "last_logits");
        CHECK((int)json_array_size(last) == n_vocab);
        for (int v = 0; v < n_vocab && v < (int)json_array_size(last); v++) {
            double d = fabs(g.logits[v] - json_number_value(json_array_get(last, (size_t)v)));
            if (d > max_diff) max_diff = d;
            CHECKF(d <= tol, "%s last_logits[%d] differs by %g", f->path, v, d);
        }
        json_t *steps = json_object_get(f->root, "greedy_steps");
        int mismatches = 0;
        for (int s = 0; s < f->n_gen; s++) {
            memcpy(trace + (int64_t)(f->n_prompt + s) * n_vocab, g.logits, sizeof(float) * (size_t)n_vocab);
            if (argmax(g.logits, n_vocab) != f->greedy[s] &&
                kv_argmax_binding(dt, json_object_get(json_array_get(steps, (size_t)s), "top"), tol))
                mismatches++;
            check_top(json_object_get(json_array_get(steps, (size_t)s), "top"), g.logits, tol, "step", s);
            if (s + 1 < f->n_gen && gen_feed(&g, &f->greedy[s], 1, NULL, &err)) {
                CHECKF(0, "%s", err.msg);
                break;
            }
        }
        CHECKF(mismatches == 0, "%s: %d greedy tokens differ", f->path, mismatches);
    } else {
        CHECKF(0, "%s: %s", f->path, err.msg);
    }
    fprintf(stderr, "%-56s [%s, KV %s, batch %3d] max |logit diff| %.2e\n", f->path, cpu_isa_name(cpu_isa_active()),
            kv_dtype_name(dt), batch, max_diff);
    gen_release(&g);
}

static void test_forward(const model *m, thread_pool *pool, fixture *fx, double tol, bool chunked) {
    const int n_vocab = model_get_hparams(m)->n_vocab;
    tokenizer *tk = NULL;
    cf_err terr = {0};
    CHECKF(tokenizer_load_gguf(model_get_gguf(m), &tk, &terr) == 0, "tokenizer: %s", terr.msg);
    for (int i = 0; i < N_CASES; i++) {
        fixture *f = &fx[i];
        const char *text = json_string_value(json_object_get(f->root, "prompt_text"));
        int32_t *enc = NULL;
        size_t n_enc = 0;
        cf_err err = {0};
        int rc = text && tk ? tokenizer_encode(tk, text, strlen(text), true, false, &enc, &n_enc, &err) : -1;
        CHECKF(rc == 0 && n_enc == (size_t)f->n_prompt && !memcmp(enc, f->ids, n_enc * sizeof(int32_t)),
               "%s: prompt ids differ", f->path);
        free(enc);
        size_t rows = (size_t)(f->n_prompt + f->n_gen) * (size_t)n_vocab;
        float *one = malloc(rows * sizeof(float)), *chunks = malloc(rows * sizeof(float));
        run_gen(m, pool, f, 512, tol, one);
        if (chunked) {
            run_gen(m, pool, f, 7, tol, chunks);
            CHECKF(!memcmp(one, chunks, rows * sizeof(float)), "%s: 7-token chunks change the logits", f->path);
        }
        free(one);
        free(chunks);
    }
    tokenizer_free(tk);
}

static void test_kv_layout(const model *m) {
    kv_spec s;
    cf_err err = {0};
    CHECK(kv_spec_from_model(m, &s, &err) == 0);
    CHECK(s.n_groups == 2 && s.groups[0].kind == KV_LAYER_FULL && s.groups[0].n_layers == 13);
    CHECK(s.groups[1].kind == KV_LAYER_WINDOW && s.groups[1].n_layers == 13 && s.groups[1].window == 32);
    CHECK(s.groups[0].token_floats == 2 * 4 * 32 && s.groups[1].token_floats == 2 * 4 * 32);
    CHECK(model_kv_block_floats(m, 1) == 13 * 256 && kv_spec_ring_row_floats(&s) == 13 * 256);
    const model_hparams *hp = model_get_hparams(m);
    CHECK(hp->n_swa == 32 && hp->attn_softcap == 0.1f && hp->final_softcap == 2.0f);
    CHECK(fabsf(hp->q_scale - 1.0f / sqrtf(32.0f)) < 1e-7f);
}

int main(void) {
    FILE *probe = fopen(shared_path(MODEL), "rb");
    if (!probe) return tu_missing_fixture(shared_path(MODEL));
    fclose(probe);
    thread_pool *pool = pool_create(2);
    cf_err err = {0};
    model *m = NULL;
    int rc = model_load(shared_path(MODEL), &m, &err);
    CHECKF(rc == 0, "%s", err.msg);
    fixture exact[N_CASES], dflt[N_CASES];
    int ok = rc == 0;
    for (int i = 0; i < N_CASES; i++) {
        ok &= load_fixture(names[i], ".exactgelu", &exact[i]) == 0;
        ok &= load_fixture(names[i], "", &dflt[i]) == 0;
    }
    if (ok) {
        test_kv_layout(m);
        test_forward(m, pool, exact, 1e-4, true);
        test_forward(m, pool, dflt, 2e-3, false);
    }
    model_free(m);
    cpu_isa best = cpu_isa_active();
    for (int isa = 0; ok && isa < CPU_ISA_COUNT; isa++) {
        if ((cpu_isa)isa == best || !cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        model *mi = NULL;
        CHECKF(model_load(shared_path(MODEL), &mi, &err) == 0, "%s", err.msg);
        if (mi) {
            size_t rows = (size_t)(exact[0].n_prompt + exact[0].n_gen) * (size_t)model_get_hparams(mi)->n_vocab;
            float *trace = malloc(rows * sizeof(float));
            run_gen(mi, pool, &exact[0], 7, 1e-4, trace);
            free(trace);
        }
        model_free(mi);
    }
    cpu_isa_force(best);
    for (int i = 0; i < N_CASES; i++) {
        free_fixture(&exact[i]);
        free_fixture(&dflt[i]);
    }
    pool_destroy(pool);
    return test_finish();
}
