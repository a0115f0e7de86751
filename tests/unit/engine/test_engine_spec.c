/* test_engine_spec.c - speculative decoding in the engine on stories260K:
 *  - lossless greedy: 24 requests (prompts with repeated phrases, so the
 *    n-gram drafter finds matches; plus random ones) give exactly their
 *    plain-decoding tokens with the n-gram drafter at k = 1, 4, 8 and 16,
 *    solo (sync scheduling) and batched (async) together with requests that
 *    do not speculate, with a KV pool small enough to force preemption, and
 *    with chunked prefill; drafts are accepted (stats), so the test fails if
 *    speculation never engaged;
 *  - stops and extras under speculation: max_tokens, a stop token id, a stop
 *    string, logprobs and top logprobs of the target equal the plain run's,
 *    usage counts accepted drafts;
 *  - prefix-cache hits during speculation, cancellation mid-generation (no
 *    block left in use), per-request off and invalid options refused;
 *  - the draft-model drafter, with the target itself as its draft model
 *    (every greedy draft accepted) and with a random model of stories260K's
 *    vocabulary made by mkmodel (mostly rejected): greedy tokens equal the
 *    plain run's, solo and batched with preemption; a draft model with
 *    another vocabulary is refused at create;
 *  - sampling through the engine (temperature 1, top-k 50): the third
 *    generated token of a fixed prompt over 600 seeds has the same
 *    distribution with the draft drafter (q from the draft model) and the
 *    n-gram drafter as without speculation (two-sample chi-square, alpha
 *    1e-3; the exact-distribution test with many drafters and k is
 *    test_spec_sampling). */
#include <math.h>
#include <stdio.h>

#include "engine_testlib.h"
#include "model/mkmodel.h"

#define NREQ 24
#define CTX 1024

static const model *g_m;
static thread_pool *g_tp;

typedef struct req_spec {
    int32_t prompt[160];
    int32_t n_prompt, max_tokens;
} req_spec;

static req_spec specs[NREQ];
static run_result plain[NREQ], spec[NREQ];

static const model *g_draft; /* the draft model make_engine passes (NULL: none) */

static cinfer_engine *make_engine(int64_t kv, int32_t max_batch, int32_t drafter, int32_t k, bool sync) {
    cinfer_engine_options o = {.block_tokens = 16,
                               .kv_memory_bytes = kv,
                               .max_batch_tokens = max_batch,
                               .max_seqs = 64,
                               .max_ctx = CTX,
                               .sync_scheduling = sync,
                               .speculative = {.drafter = drafter, .k = k},
                               .spec_max_batch = 64,
                               .draft_model = g_draft};
    cinfer_engine *e = NULL;
    char err[256];
    if (cinfer_engine_create(g_m, g_tp, &o, &e, err, sizeof err)) fprintf(stderr, "engine create: %s\n", err);
    return e;
}

static cinfer_request greedy(const req_spec *s) {
    cinfer_request r = cinfer_request_default();
    r.prompt = s->prompt;
    r.n_prompt = s->n_prompt;
    r.max_tokens = s->max_tokens;
    r.ignore_eos = true;
    return r;
}

/* A prompt made of a few random phrases repeated in random order (text with repetitions, like code
 * edits), or fully random tokens for every fourth request. */
static void make_prompt(req_spec *s, int i) {
    s->n_prompt = 20 + (int32_t)(tl_rand() % 130);
    s->max_tokens = 8 + (int32_t)(tl_rand() % 90);
    if (i % 4 == 3) {
        tl_prompt(s->prompt, s->n_prompt);
        return;
    }
    int32_t phrases[4][6];
    for (int p = 0; p < 4; p++) tl_prompt(phrases[p], 6);
    for (int32_t n = 0; n < s->n_prompt; n += 6) {
        int p = (int)(tl_rand() % 4);
        for (int j = 0; j < 6 && n + j < s->n_prompt; j++) s->prompt[n + j] = phrases[p][j];
    }
}

/* All requests at once; every third one does not speculate (request option off). */
static int32_t g_drafter = CINFER_SPEC_NGRAM;
static bool g_expect_accept = true; /* false: a drafter that is (almost) always wrong */
static void run_batch(const char *name, int32_t k, int64_t kv, int32_t max_batch, bool expect_preempt) {
    cinfer_engine *e = make_engine(kv, max_batch, g_drafter, k, false);
    CHECK(e != NULL);
    if (!e) return;
    uint64_t ids[NREQ];
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = greedy(&specs[i]);
        if (i % 3 == 2) r.speculative.drafter = CINFER_SPEC_OFF;
        ids[i] = tl_submit(e, &r);
        memset(&spec[i], 0, sizeof spec[i]);
    }
    int same = 0;
    int64_t accepted_usage = 0;
    for (int i = 0; i < NREQ; i++) {
        CHECK(tl_collect(e, ids[i], &spec[i]) == 0);
        bool ok = tl_same_tokens(&plain[i], &spec[i]);
        same += ok;
        CHECKF(ok, "%s: request %d differs (%d vs %d tokens)", name, i, spec[i].n_tokens, plain[i].n_tokens);
        CHECK(spec[i].usage.completion_tokens == plain[i].usage.completion_tokens);
        accepted_usage += spec[i].usage.accepted_draft_tokens;
        if (i % 3 == 2) CHECK(spec[i].usage.accepted_draft_tokens == 0);
    }
    cinfer_engine_stats s = cinfer_engine_get_stats(e);
    uint64_t v = s.spec_verifies[g_drafter], d = s.spec_drafted[g_drafter], a = s.spec_accepted[g_drafter];
    fprintf(stderr,
            "%s k=%d: %d/%d identical, %llu steps, %llu verifies, %llu drafted, %llu accepted (%.2f per verify), "
            "%llu preemptions\n",
            name, k, same, NREQ, (unsigned long long)s.steps, (unsigned long long)v, (unsigned long long)d,
            (unsigned long long)a, v ? (double)a / (double)v : 0.0, (unsigned long long)s.preemptions);
    CHECK(v > 0 && (a > 0 || !g_expect_accept));
    CHECK(a <= d);
    CHECK((uint64_t)accepted_usage <= a); /* verifies of requests later preempted / stopped count in stats only */
    uint64_t hist = 0;
    for (int j = 0; j <= CINFER_SPEC_MAX_K; j++) hist += s.spec_accept_len[j];
    CHECK(hist == v);
    if (expect_preempt) CHECK(s.preemptions > 0);
    CHECK(s.kv_blocks_used == 0);
    cinfer_engine_destroy(e);
}

static void test_greedy_lossless(void) {
    for (int i = 0; i < NREQ; i++) make_prompt(&specs[i], i);
    cinfer_engine *e = make_engine(64 << 20, 2048, CINFER_SPEC_OFF, 0, true);
    CHECK(e != NULL);
    if (!e) return;
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = greedy(&specs[i]);
        CHECK(tl_run(e, &r, &plain[i]) == 0);
        CHECK(plain[i].n_tokens == specs[i].max_tokens);
        CHECK(plain[i].usage.accepted_draft_tokens == 0);
    }
    CHECK(cinfer_engine_get_stats(e).spec_verifies[CINFER_SPEC_NGRAM] == 0);
    cinfer_engine_destroy(e);
    /* solo, synchronous, with speculation */
    e = make_engine(64 << 20, 2048, CINFER_SPEC_NGRAM, 8, true);
    CHECK(e != NULL);
    if (!e) return;
    int same = 0;
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = greedy(&specs[i]);
        CHECK(tl_run(e, &r, &spec[i]) == 0);
        same += tl_same_tokens(&plain[i], &spec[i]);
        CHECKF(tl_same_tokens(&plain[i], &spec[i]), "solo: request %d differs", i);
    }
    cinfer_engine_stats s = cinfer_engine_get_stats(e);
    fprintf(stderr, "solo k=8: %d/%d identical, %llu steps for %d requests, %llu accepted\n", same, NREQ,
            (unsigned long long)s.steps, NREQ, (unsigned long long)s.spec_accepted[CINFER_SPEC_NGRAM]);
    CHECK(s.spec_accepted[CINFER_SPEC_NGRAM] > 0);
    cinfer_engine_destroy(e);
    run_batch("batched", 1, 64 << 20, 2048, false);
    run_batch("batched", 4, 64 << 20, 2048, false);
    run_batch("batched", 16, 64 << 20, 2048, false);
    run_batch("preempting", 8, 24 * 20 * 1024 + 4096, 2048, true);
    run_batch("chunked", 8, 64 << 20, 16, false);
}

/* Stops, logprobs and usage: the speculating run equals the plain one. */
static void test_stops_extras(void) {
    static int32_t p[64];
    for (int i = 0; i < 64; i += 8) tl_prompt(p + i, 8);
    for (int i = 8; i < 64; i++) p[i] = p[i % 8]; /* a loop the drafter continues */
    cinfer_engine *ep = make_engine(64 << 20, 2048, CINFER_SPEC_OFF, 0, false);
    cinfer_engine *es = make_engine(64 << 20, 2048, CINFER_SPEC_NGRAM, 8, false);
    CHECK(ep && es);
    if (!ep || !es) return;
    static run_result a, b;
    req_spec rs = {.n_prompt = 64, .max_tokens = 60};
    memcpy(rs.prompt, p, sizeof p);
    cinfer_request r = greedy(&rs);
    CHECK(tl_run(ep, &r, &a) == 0);
    CHECK(tl_run(es, &r, &b) == 0);
    CHECK(tl_same_tokens(&a, &b) && !strcmp(a.text, b.text));
    CHECK(b.usage.accepted_draft_tokens > 0);
    fprintf(stderr, "loop prompt: %d tokens, %d accepted drafts\n", b.n_tokens, b.usage.accepted_draft_tokens);
    /* a stop token id in the middle of what was generated, and a stop string from the middle of the text */
    if (a.n_tokens > 20) {
        int32_t stop_id = a.tokens[17];
        r.stop_tokens = &stop_id;
        r.n_stop_tokens = 1;
        static run_result c, d;
        CHECK(tl_run(ep, &r, &c) == 0);
        CHECK(tl_run(es, &r, &d) == 0);
        CHECK(tl_same_tokens(&c, &d) && c.finish == CINFER_FINISH_STOP && d.finish == CINFER_FINISH_STOP);
        CHECK(c.usage.completion_tokens == d.usage.completion_tokens);
        r.stop_tokens = NULL;
        r.n_stop_tokens = 0;
    }
    if (a.text_len > 30) {
        char stop[4] = {a.text[a.text_len / 2], a.text[a.text_len / 2 + 1], a.text[a.text_len / 2 + 2], 0};
        const char *stops[1] = {stop};
        r.stop_strings = stops;
        r.n_stop_strings = 1;
        static run_result c, d;
        CHECK(tl_run(ep, &r, &c) == 0);
        CHECK(tl_run(es, &r, &d) == 0);
        CHECK(tl_same_tokens(&c, &d) && !strcmp(c.text, d.text) && c.finish == d.finish);
        CHECKF(c.usage.completion_tokens == d.usage.completion_tokens, "stop string: %d vs %d completion tokens",
               c.usage.completion_tokens, d.usage.completion_tokens);
        CHECK(d.usage.accepted_draft_tokens < d.usage.completion_tokens);
        r.stop_strings = NULL;
        r.n_stop_strings = 0;
    }
    /* logprobs and top logprobs of the target at every position */
    r.want_logprobs = true;
    r.top_logprobs = 3;
    uint64_t ia = tl_submit(ep, &r), ib = tl_submit(es, &r);
    cinfer_output oa, ob;
    memset(&oa, 0, sizeof oa);
    memset(&ob, 0, sizeof ob);
    static float la[128], lb[128], ta[384], tb[384];
    int32_t na = 0, nb = 0;
    while (oa.finish == CINFER_FINISH_NONE && cinfer_engine_read(ep, ia, &oa, -1) == 1)
        for (int32_t i = 0; i < oa.n_tokens && na < 128; i++, na++) {
            la[na] = oa.logprobs[i];
            memcpy(ta + na * 3, oa.top_logprobs + i * 3, 3 * sizeof(float));
        }
    while (ob.finish == CINFER_FINISH_NONE && cinfer_engine_read(es, ib, &ob, -1) == 1)
        for (int32_t i = 0; i < ob.n_tokens && nb < 128; i++, nb++) {
            lb[nb] = ob.logprobs[i];
            memcpy(tb + nb * 3, ob.top_logprobs + i * 3, 3 * sizeof(float));
        }
    CHECK(na == nb && na == 60);
    int lp_same = 0;
    for (int32_t i = 0; i < na && i < nb; i++)
        lp_same += fabsf(la[i] - lb[i]) < 1e-4f && fabsf(ta[3 * i] - tb[3 * i]) < 1e-4f &&
                   fabsf(ta[3 * i + 2] - tb[3 * i + 2]) < 1e-4f;
    CHECKF(lp_same == na, "logprobs: %d of %d positions agree", lp_same, na);
    cinfer_output_release(&oa);
    cinfer_output_release(&ob);
    r.want_logprobs = false;
    r.top_logprobs = 0;

    /* prefix-cache hit while speculating: the second run reuses the first's blocks */
    static run_result c;
    CHECK(tl_run(es, &r, &c) == 0);
    CHECK(c.usage.cached_tokens >= 48 && tl_same_tokens(&a, &c));
    /* cancel mid-generation */
    r.max_tokens = 900;
    uint64_t id = tl_submit(es, &r);
    cinfer_output o;
    memset(&o, 0, sizeof o);
    int32_t seen = 0;
    while (seen < 20 && cinfer_engine_read(es, id, &o, -1) == 1) seen += o.n_tokens;
    CHECK(cinfer_engine_cancel(es, id) == 0);
    while (o.finish == CINFER_FINISH_NONE && cinfer_engine_read(es, id, &o, -1) == 1) seen += o.n_tokens;
    CHECK(o.finish == CINFER_FINISH_CANCELLED || o.finish == CINFER_FINISH_LENGTH);
    CHECK(cinfer_engine_get_stats(es).kv_blocks_used == 0);
    cinfer_output_release(&o);
    /* invalid options are refused at submit */
    char err[160];
    r.speculative.drafter = 99;
    CHECK(cinfer_engine_submit(es, &r, err, sizeof err) == 0);
    r.speculative.drafter = CINFER_SPEC_NGRAM;
    r.speculative.k = CINFER_SPEC_MAX_K + 1;
    CHECK(cinfer_engine_submit(es, &r, err, sizeof err) == 0);
    cinfer_engine_destroy(ep);
    cinfer_engine_destroy(es);
}

/* The draft-model drafter: draft = the target (all greedy drafts accepted), then a random model. */
static void test_draft_model(void) {
    g_draft = g_m;
    g_drafter = CINFER_SPEC_DRAFT;
    cinfer_engine *e = make_engine(64 << 20, 2048, CINFER_SPEC_DRAFT, 6, true);
    CHECK(e != NULL);
    if (!e) return;
    int same = 0;
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = greedy(&specs[i]);
        CHECK(tl_run(e, &r, &spec[i]) == 0);
        same += tl_same_tokens(&plain[i], &spec[i]);
    }
    cinfer_engine_stats s = cinfer_engine_get_stats(e);
    uint64_t d = s.spec_drafted[CINFER_SPEC_DRAFT], a = s.spec_accepted[CINFER_SPEC_DRAFT];
    fprintf(stderr, "draft = target, solo k=6: %d/%d identical, %llu steps, %llu drafted, %llu accepted\n", same, NREQ,
            (unsigned long long)s.steps, (unsigned long long)d, (unsigned long long)a);
    CHECK(same == NREQ);
    CHECK(d > 0 && a == d); /* the same model agrees with itself on every greedy draft */
    cinfer_engine_destroy(e);
    run_batch("draft=target batched", 4, 64 << 20, 2048, false);
    run_batch("draft=target preempting", 8, 24 * 20 * 1024 + 4096, 2048, true);

    /* a random model with the same vocabulary: smaller, mostly wrong */
    char path[512];
    cf_err err = {0};
    mkmodel_opts o = {.arch = "llama",
                      .dim = 32,
                      .layers = 2,
                      .heads = 4,
                      .kv_heads = 2,
                      .ffn = 64,
                      .vocab_from = shared_path("models/stories260K.gguf"),
                      .type = DT_F32,
                      .seed = 7,
                      .ctx = CTX};
    model *rm = NULL;
    if (!test_scratch_path(path, sizeof path, "spec-draft") || mkmodel_write(&o, path, &err) ||
        model_load(path, &rm, &err)) {
        CHECKF(0, "random draft model: %s", err.msg);
        g_draft = NULL;
        return;
    }
    g_draft = rm;
    g_expect_accept = false;
    run_batch("draft=random batched", 4, 64 << 20, 2048, false);
    run_batch("draft=random chunked", 8, 64 << 20, 16, false);
    g_expect_accept = true;
    model_free(rm);
    test_scratch_remove(path);
    /* another vocabulary: refused at create */
    model *other = NULL;
    mkmodel_opts ov = o;
    ov.vocab_from = shared_path("fixtures/vocab/ggml-vocab-llama-spm.gguf");
    if (test_scratch_path(path, sizeof path, "spec-draft2") && !mkmodel_write(&ov, path, &err) &&
        !model_load(path, &other, &err)) {
        g_draft = other;
        cinfer_engine_options eo = {.max_ctx = CTX, .draft_model = other};
        cinfer_engine *bad = NULL;
        char msg[256] = "";
        CHECK(cinfer_engine_create(g_m, g_tp, &eo, &bad, msg, sizeof msg) != 0 && bad == NULL);
        fprintf(stderr, "other vocabulary: %s\n", msg);
        CHECK(strstr(msg, "vocabular") != NULL);
        model_free(other);
    } else CHECKF(0, "second draft model: %s", err.msg);
    test_scratch_remove(path);
    g_draft = NULL;
    g_drafter = CINFER_SPEC_NGRAM;
    /* the draft drafter without a draft model: refused at submit */
    e = make_engine(64 << 20, 2048, CINFER_SPEC_OFF, 0, false);
    cinfer_request r = greedy(&specs[0]);
    r.speculative.drafter = CINFER_SPEC_DRAFT;
    char msg[160];
    CHECK(e && cinfer_engine_submit(e, &r, msg, sizeof msg) == 0);
    cinfer_engine_destroy(e);
}

/* Histogram of the third generated token over n seeds with drafter d (draft model g_draft). */
static void third_token_hist(int32_t d, int n, int32_t *hist) {
    cinfer_engine *e = make_engine(64 << 20, 2048, CINFER_SPEC_OFF, 0, false);
    CHECK(e != NULL);
    if (!e) return;
    static int32_t p[40];
    for (int i = 0; i < 40; i++) p[i] = specs[0].prompt[i % 6]; /* a repeated phrase: n-gram drafts */
    uint64_t ids[64];
    for (int base = 0; base < n; base += 64) {
        int m = n - base < 64 ? n - base : 64;
        for (int i = 0; i < m; i++) {
            cinfer_request r = cinfer_request_default();
            r.prompt = p;
            r.n_prompt = 40;
            r.max_tokens = 3;
            r.ignore_eos = true;
            r.sampling.temperature = 1.0f;
            r.sampling.top_k = 50;
            r.sampling.seed = 1000u + (uint64_t)(base + i) + (d == CINFER_SPEC_OFF ? 0 : 7777u * (uint64_t)d);
            r.speculative.drafter = d;
            r.speculative.k = 2;
            ids[i] = tl_submit(e, &r);
        }
        for (int i = 0; i < m; i++) {
            static run_result res;
            memset(&res, 0, sizeof res);
            CHECK(tl_collect(e, ids[i], &res) == 0 && res.n_tokens == 3);
            if (res.n_tokens == 3) hist[res.tokens[2]]++;
        }
    }
    cinfer_engine_destroy(e);
}

static void test_sampled_engine(void) {
    enum { V = 512, NS = 600 };
    static int32_t plain_h[V], draft_h[V], ngram_h[V];
    g_draft = g_m;
    third_token_hist(CINFER_SPEC_OFF, NS, plain_h);
    third_token_hist(CINFER_SPEC_DRAFT, NS, draft_h);
    third_token_hist(CINFER_SPEC_NGRAM, NS, ngram_h);
    g_draft = NULL;
    const int32_t *other[2] = {draft_h, ngram_h};
    for (int o = 0; o < 2; o++) {
        double stat = 0;
        int32_t bins = 0, ra = 0, rb = 0;
        for (int32_t i = 0; i <= V; i++) {
            int32_t x = i < V ? plain_h[i] : ra, y = i < V ? other[o][i] : rb;
            if (i < V && x + y < 10) {
                ra += x;
                rb += y;
                continue;
            }
            if (x + y == 0) continue;
            stat += (double)(x - y) * (x - y) / (x + y); /* equal sample sizes */
            bins++;
        }
        int32_t df = bins - 1 > 0 ? bins - 1 : 1;
        double h = 2.0 / (9.0 * df), crit = df * pow(1 - h + 3.09 * sqrt(h), 3); /* alpha 1e-3 */
        fprintf(stderr, "sampled third token, %s vs plain: chi2 %.1f, critical %.1f (df %d)\n",
                o == 0 ? "draft" : "ngram", stat, crit, df);
        CHECK(stat <= crit);
    }
}

int main(void) {
    model *m;
    cf_err err = {0};
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) return tu_missing_fixture(err.msg);
    g_m = m;
    g_tp = pool_create(1);
    test_greedy_lossless();
    test_stops_extras();
    test_draft_model();
    test_sampled_engine();
    pool_destroy(g_tp);
    model_free(m);
    return test_finish();
}
