/* test_llama_fixtures.c - the Llama forward pass against llama.cpp's reference
 * outputs (../shared/fixtures/llama-cpp, see its README): for every prompt the
 * input ids, the per-position argmax and top-8 logits, all last-position
 * logits, and the 64-token greedy continuation (ids and the logits of each
 * chosen token). stories260K (real F32 weights) and tiny-llama against its
 * exact-F32 references at 1e-4; tiny-llama against llama.cpp's default (F16
 * activations for the F16 LM head) at 2e-3. Runs on every kernel ISA for the
 * small model, and every case again with BF16 attention where the CPU has it
 * (looser logits, near-tie argmax flips allowed, greedy tokens exact). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cpu.h"
#include "engine/generate.h"
#include "kv_dtype_util.h"
#include "model/model.h"
#include "testutil.h"
#include "text/tokenizer.h"

typedef struct fixture_case {
    const char *model;
    const char *json;
    double tol, bf16_tol; /* logit tolerances: F32 attention, BF16 attention */
} fixture_case;

static double max_diff;

/* The reference logit of token id at a position (its "top" list), or -inf
 * when the token is not among them. */
static double ref_logit(json_t *top, int id) {
    size_t i;
    json_t *pair;
    json_array_foreach(top, i, pair) if ((int)json_integer_value(json_array_get(pair, 0)) ==
                                         id) return json_number_value(json_array_get(pair, 1));
    return -INFINITY;
}

static void check_top(json_t *top, const float *logits, double tol, const char *what, int idx) {
    size_t i;
    json_t *pair;
    json_array_foreach(top, i, pair) {
        int id = (int)json_integer_value(json_array_get(pair, 0));
        double want = json_number_value(json_array_get(pair, 1));
        double d = fabs(logits[id] - want);
        if (d > max_diff) max_diff = d;
        CHECKF(d <= tol, "%s %d: logit of %d is %.7f, want %.7f", what, idx, id, logits[id], want);
    }
}

static int argmax(const float *v, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

/* tol: the logit tolerance (the case's, or BF16_TOL under BF16 attention) */
static void run_case(const fixture_case *fc, thread_pool *pool, attn_prec prec, double tol) {
    json_error_t jerr;
    json_t *root = json_load_file(shared_path(fc->json), 0, &jerr);
    CHECKF(root != NULL, "%s: %s", fc->json, jerr.text);
    if (!root) return;
    cf_err err = {0};
    model *m = NULL;
    int rc = model_load(shared_path(fc->model), &m, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) {
        json_decref(root);
        return;
    }
    const int n_vocab = model_get_hparams(m)->n_vocab;
    json_t *jids = json_object_get(root, "input_ids");
    json_t *jgreedy = json_object_get(root, "greedy_ids");
    int n_prompt = (int)json_array_size(jids), n_gen = (int)json_array_size(jgreedy);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n_prompt);
    for (int i = 0; i < n_prompt; i++) ids[i] = (int32_t)json_integer_value(json_array_get(jids, (size_t)i));

    /* tokenizer: the prompt text encodes to the same ids */
    const char *text = json_string_value(json_object_get(root, "prompt_text"));
    int32_t *enc = NULL;
    size_t n_enc = 0;
    tokenizer *tk = NULL;
    if (text && tokenizer_load_gguf(model_get_gguf(m), &tk, &err) == 0 &&
        tokenizer_encode(tk, text, strlen(text), true, false, &enc, &n_enc, &err) == 0) {
        CHECKF(n_enc == (size_t)n_prompt && !memcmp(enc, ids, n_enc * sizeof(int32_t)), "%s: prompt ids differ",
               fc->json);
        free(enc);
    }
    tokenizer_free(tk);

    gen_session g;
    kv_dtype dt = test_kv_dtype();
    tol = kv_fixture_tol(dt, fc->model, tol);
    if (model_kv_dtype_check(m, dt, &err)) { /* e.g. q8_0 on stories260K's head_dim 8 */
        fprintf(stderr, "%-40s not run with this KV type: %s\n", fc->json, err.msg);
        free(ids);
        model_free(m);
        json_decref(root);
        return;
    }
    rc = gen_init_as(&g, m, dt, pool, n_prompt + n_gen, 512, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc == 0) fwd_ctx_set_attn_prec(g.fc, prec);
    float *all = malloc(sizeof(float) * (size_t)n_prompt * (size_t)n_vocab);
    max_diff = 0;
    if (rc == 0 && gen_feed(&g, ids, n_prompt, all, &err) == 0) {
        json_t *positions = json_object_get(root, "positions");
        for (int p = 0; p < n_prompt; p++) {
            json_t *jp = json_array_get(positions, (size_t)p);
            const float *lg = all + (int64_t)p * n_vocab;
            int want = (int)json_integer_value(json_object_get(jp, "argmax")), got = argmax(lg, n_vocab);
            /* BF16 may flip a near tie: the reference logits of the two tokens within 2 x tol */
            double gap = got == want
                             ? 0
                             : ref_logit(json_object_get(jp, "top"), want) - ref_logit(json_object_get(jp, "top"), got);
            CHECKF(got == want || (prec == ATTN_PREC_BF16 && gap <= 2 * tol) ||
                       !kv_argmax_binding(dt, json_object_get(jp, "top"), tol),
                   "%s pos %d: argmax %d, want %d (gap %g)", fc->json, p, got, want, gap);
            if (got != want)
                fprintf(stderr, "  pos %d: argmax %d, want %d: a near tie (%g apart)\n", p, got, want, gap);
            check_top(json_object_get(jp, "top"), lg, tol, "position", p);
        }
        json_t *last = json_object_get(root, "last_logits");
        CHECK((int)json_array_size(last) == n_vocab);
        for (int v = 0; v < n_vocab && v < (int)json_array_size(last); v++) {
            double d = fabs(g.logits[v] - json_number_value(json_array_get(last, (size_t)v)));
            if (d > max_diff) max_diff = d;
            CHECKF(d <= tol, "%s last_logits[%d] differs by %g", fc->json, v, d);
        }
        /* greedy continuation */
        json_t *steps = json_object_get(root, "greedy_steps");
        int mismatches = 0;
        for (int s = 0; s < n_gen; s++) {
            int32_t next = argmax(g.logits, n_vocab);
            int32_t want = (int32_t)json_integer_value(json_array_get(jgreedy, (size_t)s));
            if (next != want && kv_argmax_binding(dt, json_object_get(json_array_get(steps, (size_t)s), "top"), tol))
                mismatches++;
            check_top(json_object_get(json_array_get(steps, (size_t)s), "top"), g.logits, tol, "step", s);
            if (s + 1 < n_gen && gen_feed(&g, &want, 1, NULL, &err)) {
                CHECKF(0, "%s", err.msg);
                break;
            }
        }
        CHECKF(mismatches == 0, "%s: %d greedy tokens differ", fc->json, mismatches);
    } else {
        CHECKF(0, "%s: %s", fc->json, err.msg);
    }
    fprintf(stderr, "%-40s [%s, attention %s, KV %s] max |logit diff| %.2e\n", fc->json, cpu_isa_name(cpu_isa_active()),
            attn_prec_describe(prec), kv_dtype_name(dt), max_diff);
    free(all);
    if (rc == 0) gen_release(&g);
    free(ids);
    model_free(m);
    json_decref(root);
}

int main(void) {
    const fixture_case cases[] = {
        {"models/stories260K.gguf", "fixtures/llama-cpp/stories260K.once.json", 1e-4, 0.75},
        {"models/stories260K.gguf", "fixtures/llama-cpp/stories260K.repeat.json", 1e-4, 0.75},
        {"models/stories260K.gguf", "fixtures/llama-cpp/stories260K.paragraph.json", 1e-4, 0.75},
        {"models/stories260K.gguf", "fixtures/llama-cpp/stories260K.bos-only.json", 1e-4, 0.75},
        {"models/tiny/tiny-llama.gguf", "fixtures/llama-cpp/tiny-llama.once.f32ref.json", 1e-4, 1e-2},
        {"models/tiny/tiny-llama.gguf", "fixtures/llama-cpp/tiny-llama.repeat.f32ref.json", 1e-4, 1e-2},
        {"models/tiny/tiny-llama.gguf", "fixtures/llama-cpp/tiny-llama.paragraph.f32ref.json", 1e-4, 1e-2},
        {"models/tiny/tiny-llama.gguf", "fixtures/llama-cpp/tiny-llama.once.json", 2e-3, 1e-2},
        {"models/tiny/tiny-llama.gguf", "fixtures/llama-cpp/tiny-llama.paragraph.json", 2e-3, 1e-2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) /* skip (or fail under CI) when missing */
        if (access(shared_path(cases[i].model), R_OK) || access(shared_path(cases[i].json), R_OK))
            return tu_missing_fixture(access(shared_path(cases[i].model), R_OK) ? cases[i].model : cases[i].json);
    thread_pool *pool = pool_create(2);
    cpu_isa best = cpu_isa_active();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], pool, ATTN_PREC_F32, cases[i].tol);
    /* BF16 attention (where the CPU has it): the same 64 greedy tokens, logits within bf16_tol (measured:
     * 0.46 on stories260K, whose logits are large, 4e-3 on tiny-llama), prompt argmaxes the same except
     * near ties (2 x bf16_tol apart in the reference: 7 positions of stories260K.paragraph, 4 of
     * tiny-llama.paragraph flip) */
    if (attn_prec_native(ATTN_PREC_BF16))
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run_case(&cases[i], pool, ATTN_PREC_BF16, cases[i].bf16_tol);
    /* every other ISA on the small model */
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if ((cpu_isa)isa == best || !cpu_isa_supported((cpu_isa)isa)) continue;
        cpu_isa_force((cpu_isa)isa);
        run_case(&cases[0], pool, ATTN_PREC_F32, cases[0].tol);
        run_case(&cases[2], pool, ATTN_PREC_F32, cases[2].tol);
    }
    cpu_isa_force(best);
    pool_destroy(pool);
    return test_finish();
}
