/* test_engine_grammar.c - constrained decoding in the engine (cinfer_request.grammar,
 * engine_grammar.c) on stories260K with regular-expression grammars (checked again with POSIX
 * regexec on the text):
 *  - greedy, sync and async scheduling: the text matches, finish STOP (EOS only where the grammar
 *    can end: it is forced there, so the stats count a forced token);
 *  - 64 requests sampled at temperature 1 (distinct seeds), batched: every text matches;
 *  - max_tokens before the grammar can end: finish LENGTH, the text a prefix of a match;
 *  - batch invariance (greedy): unconstrained and constrained requests batched together (async,
 *    and with a KV pool small enough to preempt) give their solo tokens; the masks of the batched
 *    run were computed while forward passes ran (grammar_masks_overlapped);
 *  - a lazy grammar (grammar_trigger "e", grammar [0-9]{3}): free text where every "e" is followed by
 *    three digits, greedy and sampled;
 *  - submit refuses ignore_eos with a grammar, and the caller keeps its matcher then. */
#include <regex.h>
#include <stdio.h>

#include "engine_testlib.h"

#define CTX 512

static const model *g_m;
static thread_pool *g_tp;

static cinfer_grammar *compile_regex(const char *re) {
    cinfer_grammar_spec spec = {.kind = CINFER_GRAMMAR_REGEX, .text = re, .len = strlen(re)};
    cinfer_grammar_error err = {0};
    cinfer_grammar *g = cinfer_grammar_compile(&spec, NULL, &err);
    if (!g) fprintf(stderr, "compile %s: %s\n", re, err.msg);
    return g;
}

static bool full_match(const char *posix_re, const char *text) {
    regex_t rx;
    if (regcomp(&rx, posix_re, REG_EXTENDED | REG_NOSUB)) return false;
    bool ok = regexec(&rx, text, 0, NULL, 0) == 0;
    regfree(&rx);
    return ok;
}

static cinfer_request req(const int32_t *p, int32_t n, int32_t max_tokens, cinfer_grammar *g, cinfer_engine *e) {
    cinfer_request r = cinfer_request_default();
    r.prompt = p;
    r.n_prompt = n;
    r.max_tokens = max_tokens;
    r.grammar = g ? cinfer_grammar_matcher_new(g, cinfer_engine_grammar_vocab(e), NULL) : NULL;
    return r;
}

static const char *const RE_YESNO = "(yes|no), [0-9]{2,4}";
static const char *const PX_YESNO = "^(yes|no), [0-9]{2,4}$";

static void test_greedy(bool sync) {
    tl_sync_scheduling = sync;
    cinfer_engine *e = tl_engine(g_m, g_tp, 8 << 20, 256, 8, CTX);
    cinfer_grammar *g = compile_regex(RE_YESNO);
    CHECK(e && g);
    if (!e || !g) return;
    int32_t prompt[12];
    tl_prompt(prompt, 12);
    cinfer_request r = req(prompt, 12, 64, g, e);
    run_result res;
    CHECK(tl_run(e, &r, &res) == 0);
    CHECKF(res.finish == CINFER_FINISH_STOP && full_match(PX_YESNO, res.text), "sync %d: finish %d text '%s'", sync,
           res.finish, res.text);
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    CHECKF(st.grammar_tokens >= (uint64_t)res.n_tokens && st.grammar_forced_tokens >= 1,
           "grammar tokens %llu forced %llu", (unsigned long long)st.grammar_tokens,
           (unsigned long long)st.grammar_forced_tokens);
    cinfer_grammar_release(g);
    cinfer_engine_destroy(e);
}

static void test_sampled(void) {
    tl_sync_scheduling = false;
    cinfer_engine *e = tl_engine(g_m, g_tp, 16 << 20, 512, 16, CTX);
    const char *re = "[a-z]{1,8}( [a-z]{1,8}){0,3}\\.";
    cinfer_grammar *g = compile_regex(re);
    CHECK(e && g);
    if (!e || !g) return;
    enum { N = 64 };
    int32_t prompt[N][8];
    uint64_t ids[N];
    for (int i = 0; i < N; i++) {
        tl_prompt(prompt[i], 8);
        cinfer_request r = req(prompt[i], 8, 80, g, e);
        r.sampling.temperature = 1.0f;
        r.sampling.seed = 1000 + (uint64_t)i;
        ids[i] = tl_submit(e, &r);
        CHECK(ids[i] != 0);
    }
    int ok = 0;
    for (int i = 0; i < N; i++) {
        run_result res;
        memset(&res, 0, sizeof res);
        if (!ids[i] || tl_collect(e, ids[i], &res)) continue;
        bool good = res.finish == CINFER_FINISH_STOP && full_match("^[a-z]{1,8}( [a-z]{1,8}){0,3}\\.$", res.text);
        CHECKF(good, "request %d: finish %d text '%s'", i, res.finish, res.text);
        ok += good;
    }
    CHECKF(ok == N, "%d of %d sampled outputs match", ok, N);
    cinfer_grammar_release(g);
    cinfer_engine_destroy(e);
}

static void test_length(void) {
    tl_sync_scheduling = false;
    cinfer_engine *e = tl_engine(g_m, g_tp, 8 << 20, 256, 8, CTX);
    cinfer_grammar *g = compile_regex("x{40}");
    CHECK(e && g);
    if (!e || !g) return;
    int32_t prompt[6];
    tl_prompt(prompt, 6);
    cinfer_request r = req(prompt, 6, 5, g, e);
    run_result res;
    CHECK(tl_run(e, &r, &res) == 0);
    CHECKF(res.finish == CINFER_FINISH_LENGTH && res.n_tokens == 5 && full_match("^x{1,40}$", res.text),
           "finish %d, %d tokens, '%s'", res.finish, res.n_tokens, res.text);
    cinfer_grammar_release(g);
    cinfer_engine_destroy(e);
}

/* n requests, every other one constrained: solo runs (sync) vs all at once (async). */
static void test_batch(int64_t kv_bytes, const char *what) {
    enum { N = 12 };
    cinfer_grammar *g = compile_regex(RE_YESNO);
    CHECK(g != NULL);
    if (!g) return;
    int32_t prompt[N][40];
    static run_result solo[N], batch[N];
    tl_sync_scheduling = true;
    cinfer_engine *e = tl_engine(g_m, g_tp, 16 << 20, 512, 16, CTX);
    for (int i = 0; i < N && e; i++) {
        tl_prompt(prompt[i], 40);
        cinfer_request r = req(prompt[i], 40, 48, i % 2 ? g : NULL, e);
        CHECK(tl_run(e, &r, &solo[i]) == 0);
    }
    cinfer_engine_destroy(e);
    tl_sync_scheduling = false;
    e = tl_engine(g_m, g_tp, kv_bytes, 512, 16, CTX);
    uint64_t ids[N];
    for (int i = 0; i < N && e; i++) {
        cinfer_request r = req(prompt[i], 40, 48, i % 2 ? g : NULL, e);
        ids[i] = tl_submit(e, &r);
    }
    for (int i = 0; i < N && e; i++) {
        memset(&batch[i], 0, sizeof batch[i]);
        CHECK(ids[i] && tl_collect(e, ids[i], &batch[i]) == 0);
        CHECKF(tl_same_tokens(&solo[i], &batch[i]), "%s: request %d (%s) differs batched", what, i,
               i % 2 ? "constrained" : "free");
        if (i % 2) CHECKF(full_match(PX_YESNO, batch[i].text), "%s: '%s'", what, batch[i].text);
    }
    if (e) {
        cinfer_engine_stats st = cinfer_engine_get_stats(e);
        CHECKF(st.grammar_masks_overlapped > 0, "%s: no mask overlapped a forward pass", what);
        if (kv_bytes < (1 << 20)) CHECKF(st.preemptions > 0, "%s: no preemption", what);
    }
    cinfer_engine_destroy(e);
    cinfer_grammar_release(g);
}

/* A lazy grammar: free text, but every "e" the model writes is followed by three digits. */
static void test_trigger(void) {
    tl_sync_scheduling = false;
    cinfer_engine *e = tl_engine(g_m, g_tp, 16 << 20, 512, 16, CTX);
    cinfer_grammar *g = compile_regex("[0-9]{3}");
    CHECK(e && g);
    if (!e || !g) return;
    enum { N = 16 };
    int32_t prompt[N][8];
    uint64_t ids[N];
    for (int i = 0; i < N; i++) {
        tl_prompt(prompt[i], 8);
        cinfer_request r = req(prompt[i], 8, 60, g, e);
        r.grammar_trigger = "e";
        r.grammar_trigger_len = 1;
        r.sampling.temperature = i ? 1.0f : 0.0f;
        r.sampling.seed = 77 + (uint64_t)i;
        ids[i] = tl_submit(e, &r);
    }
    int triggered = 0;
    for (int i = 0; i < N; i++) {
        run_result res;
        memset(&res, 0, sizeof res);
        CHECK(ids[i] && tl_collect(e, ids[i], &res) == 0);
        const char *px =
            res.finish == CINFER_FINISH_LENGTH ? "^([^e]|e[0-9]{3})*(e[0-9]{0,2})?$" : "^([^e]|e[0-9]{3})*$";
        CHECKF(full_match(px, res.text), "request %d (finish %d): '%s'", i, res.finish, res.text);
        triggered += strchr(res.text, 'e') != NULL;
    }
    CHECKF(triggered > N / 2, "only %d outputs wrote the trigger", triggered);
    cinfer_grammar_release(g);
    cinfer_engine_destroy(e);
}

static void test_invalid(void) {
    cinfer_engine *e = tl_engine(g_m, g_tp, 8 << 20, 256, 8, CTX);
    cinfer_grammar *g = compile_regex(RE_YESNO);
    CHECK(e && g);
    if (!e || !g) return;
    int32_t prompt[4] = {1, 5, 6, 7};
    cinfer_request r = req(prompt, 4, 8, g, e);
    r.ignore_eos = true;
    char err[200] = "";
    CHECK(cinfer_engine_submit(e, &r, err, sizeof err) == 0 && strstr(err, "EOS"));
    cinfer_grammar_matcher_free(r.grammar); /* still the caller's */
    cinfer_grammar_release(g);
    cinfer_engine_destroy(e);
}

int main(void) {
    model *m;
    cf_err err = {0};
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) return tu_missing_fixture(err.msg);
    g_m = m;
    g_tp = pool_create(1);
    test_greedy(true);
    test_greedy(false);
    test_sampled();
    test_length();
    test_batch(16 << 20, "plain");
    test_batch(160 << 10, "preempting");
    test_trigger();
    test_invalid();
    pool_destroy(g_tp);
    model_free(m);
    return test_finish();
}
