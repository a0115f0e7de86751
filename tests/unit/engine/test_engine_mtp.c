/* test_engine_mtp.c - the MTP drafter (CINFER_SPEC_MTP, engine_mtp.c) on
 * random-weight mkmodel models with stories260K's vocabulary: a deepseek2
 * model with one next-n layer (blk.N.nextn.*) and a deepseek4 model with one
 * MTP block.
 *  - model level (deepseek2): the target's exported hidden states feed the
 *    next-n layer; the prompt in one MTP batch and token by token (its own
 *    KV blocks) give the same logits and exported states (incremental =
 *    batched), and a model without next-n layers refuses an MTP pass;
 *  - lossless greedy, for both models: 12 requests give exactly their
 *    plain-decoding tokens with MTP drafts solo (sync), batched (async)
 *    together with requests that do not speculate and with n-gram ones, with
 *    a KV pool small enough to force preemption, with chunked prefill, and on
 *    a prefix-cache hit; drafts are made (stats), so the test fails if
 *    speculation never engaged; cancellation leaves no block in use;
 *  - confidence scheduling (spec_sched.h) on: solo requests still give their
 *    plain tokens (it only drops drafts); the other runs verify every draft;
 *  - sampling through the engine (temperature 1, top-k 50): the third
 *    generated token over 600 seeds has the same distribution with MTP
 *    drafts (q from the MTP head) as without (two-sample chi-square, alpha
 *    1e-3);
 *  - a model without an MTP block: the mtp drafter is refused at submit, and
 *    as the engine's default at create.
 * The same lossless runs and the sampled test run the DSpark block drafter
 * (CINFER_SPEC_DSPARK, engine_dspark.c) on a deepseek4 model made with
 * --dspark-block 5 (its MTP block is the stage), with the block cut by
 * confidence both off and on (the sampled test too); chained MTP is refused on that model, the
 * dspark drafter on the plain deepseek4 and llama models.
 * Acceptance is reported, not checked: random weights agree by chance only. */
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "engine_testlib.h"
#include "model/mkmodel.h"
#include "testutil_ds4.h"

#define NREQ 12

static const model *g_m;
static thread_pool *g_tp;
static int32_t g_bt;
static int32_t g_conf = -1; /* cinfer_engine_options.spec_confidence: -1 verifies every draft (the default tests) */
static int32_t g_drafter = CINFER_SPEC_MTP; /* the drafter under test: MTP or DSPARK */
static bool g_need_drafts = true; /* run_set fails when nothing was drafted */
static int g_hist_batch = 32; /* requests at once in the sampled test */

typedef struct req_spec {
    int32_t prompt[300];
    int32_t n_prompt, max_tokens;
} req_spec;

static req_spec specs[NREQ];
static run_result plain[NREQ], out[NREQ];

static model *make_model(const char *arch, const char *name) {
    mkmodel_opts ds2 = {.arch = "deepseek2",
                        .dim = 64,
                        .layers = 3,
                        .heads = 4,
                        .ffn = 128,
                        .kv_lora = 32,
                        .qk_nope = 16,
                        .qk_rope = 8,
                        .v_head = 16,
                        .q_lora = 32,
                        .experts = 8,
                        .experts_used = 2,
                        .expert_ffn = 32,
                        .shared_experts = 1,
                        .dense_layers = 1,
                        .mtp_layers = 1,
                        .type = DT_F32,
                        .seed = 21,
                        .vocab_from = shared_path("models/stories260K.gguf")};
    mkmodel_opts ds4 = tu_ds4_tiny(3, "4,4,128,0", 9); /* the MTP block (last) is window-only, as V4-Flash's */
    ds4.index_topk = 3;
    ds4.experts = 4;
    ds4.mtp_layers = 1;
    if (!strcmp(name, "mtp-dspark")) {
        ds4.dspark_block = 5;
        ds4.dspark_taps = "1,2,3";
        ds4.dspark_rank = 8;
    }
    char path[512];
    cf_err err = {0};
    model *m = NULL;
    CHECK(test_scratch_path(path, sizeof path, name));
    int rc = mkmodel_write(!strcmp(arch, "deepseek2") ? &ds2 : &ds4, path, &err);
    if (rc == 0) rc = model_load(path, &m, &err);
    CHECKF(rc == 0, "%s: %s", arch, err.msg);
    return rc ? NULL : m;
}

static cinfer_engine *make_engine(int64_t kv, int32_t max_batch, int32_t drafter, int32_t k, bool sync) {
    cinfer_engine_options o = {.block_tokens = g_bt,
                               .kv_memory_bytes = kv,
                               .max_batch_tokens = max_batch,
                               .max_seqs = 32,
                               .max_ctx = 512,
                               .sync_scheduling = sync,
                               .speculative = {.drafter = drafter, .k = k},
                               .spec_max_batch = 32,
                               .spec_confidence = g_conf};
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

/* Every third request does not speculate, every fourth drafts with n-grams; the rest use MTP. */
static cinfer_engine_stats run_set(const char *name, int32_t k, int64_t kv, int32_t max_batch, bool sync, bool mixed,
                                   bool expect_preempt) {
    cinfer_engine *e = make_engine(kv, max_batch, g_drafter, k, sync);
    CHECK(e != NULL);
    if (!e) return (cinfer_engine_stats){0};
    uint64_t ids[NREQ];
    int same = 0;
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = greedy(&specs[i]);
        if (mixed && i % 3 == 2) r.speculative.drafter = CINFER_SPEC_OFF;
        else if (mixed && i % 4 == 3) r.speculative.drafter = CINFER_SPEC_NGRAM;
        memset(&out[i], 0, sizeof out[i]);
        ids[i] = tl_submit(e, &r);
        if (sync) CHECK(tl_collect(e, ids[i], &out[i]) == 0); /* solo: one request at a time */
    }
    for (int i = 0; i < NREQ; i++) {
        if (!sync) CHECK(tl_collect(e, ids[i], &out[i]) == 0);
        bool ok = tl_same_tokens(&plain[i], &out[i]);
        same += ok;
        CHECKF(ok, "%s: request %d differs (%d vs %d tokens)", name, i, out[i].n_tokens, plain[i].n_tokens);
    }
    cinfer_engine_stats s = cinfer_engine_get_stats(e);
    uint64_t v = s.spec_verifies[g_drafter], d = s.spec_drafted[g_drafter];
    uint64_t a = s.spec_accepted[g_drafter];
    fprintf(stderr,
            "%s %s %s k=%d: %d/%d identical, %llu steps, %llu verifies, %llu drafted, %llu accepted (%.3f of drafts, "
            "%.2f per verify), %llu preemptions\n",
            model_get_hparams(g_m)->arch, cinfer_spec_drafter_name(g_drafter), name, k, same, NREQ,
            (unsigned long long)s.steps, (unsigned long long)v, (unsigned long long)d, (unsigned long long)a,
            d ? (double)a / (double)d : 0.0, v ? (double)a / (double)v : 0.0, (unsigned long long)s.preemptions);
    CHECK(a <= d && (!g_need_drafts || (v > 0 && d > 0)));
    if (g_conf >= 0)
        fprintf(stderr, "  %llu drafts dropped by confidence scheduling, %llu block rows cut\n",
                (unsigned long long)s.spec_conf_dropped, (unsigned long long)s.spec_block_cut);
    else CHECK(s.spec_conf_dropped == 0 && s.spec_block_cut == 0);
    if (expect_preempt) CHECK(s.preemptions > 0);
    CHECK(s.kv_blocks_used == 0);
    cinfer_engine_destroy(e);
    return s;
}

static void test_lossless(void) {
    for (int i = 0; i < NREQ; i++) {
        specs[i].n_prompt = 10 + (int32_t)(tl_rand() % 120);
        specs[i].max_tokens = 8 + (int32_t)(tl_rand() % 40);
        tl_prompt(specs[i].prompt, specs[i].n_prompt);
    }
    cinfer_engine *e = make_engine(64 << 20, 2048, CINFER_SPEC_OFF, 0, true);
    CHECK(e != NULL);
    if (!e) return;
    for (int i = 0; i < NREQ; i++) {
        cinfer_request r = greedy(&specs[i]);
        CHECK(tl_run(e, &r, &plain[i]) == 0 && plain[i].n_tokens == specs[i].max_tokens);
    }
    cinfer_engine_destroy(e);
    run_set("solo", 4, 64 << 20, 2048, true, false, false);
    run_set("batched", 3, 64 << 20, 2048, false, true, false);
    run_set("batched", 8, 64 << 20, 2048, false, false, false);
    int64_t per_block = (int64_t)model_kv_block_floats(g_m, g_bt) * 4;
    cinfer_engine *probe = make_engine(64 << 20, 2048, CINFER_SPEC_OFF, 0, false);
    int64_t ring = probe ? cinfer_engine_get_stats(probe).kv_ring_bytes : 0;
    cinfer_engine_destroy(probe);
    /* window models: 8 rings and 5 blocks (the longest request fits, 8 at once do not); else 24 blocks */
    run_set("preempting", 4, ring ? 8 * (ring + 64) + 5 * (per_block + 80) + 4096 : per_block * 24, 2048, false, true,
            true);
    run_set("chunked", 4, 64 << 20, 16, false, true, false);
    g_conf = 0; /* confidence scheduling on: drafts the step's measured cost does not pay for are dropped */
    run_set("confidence-scheduled", 8, 64 << 20, 2048, true, false, false);
    g_conf = -1;

    /* a prefix-cache hit, then a cancel mid-generation */
    e = make_engine(64 << 20, 2048, g_drafter, 4, false);
    CHECK(e != NULL);
    if (!e) return;
    static req_spec longp = {.n_prompt = 300, .max_tokens = 24};
    tl_prompt(longp.prompt, 300);
    cinfer_request r = greedy(&longp);
    static run_result a, b, c;
    cinfer_engine *ep = make_engine(64 << 20, 2048, CINFER_SPEC_OFF, 0, false);
    CHECK(ep && tl_run(ep, &r, &c) == 0);
    cinfer_engine_destroy(ep);
    CHECK(tl_run(e, &r, &a) == 0 && tl_run(e, &r, &b) == 0);
    CHECK(tl_same_tokens(&c, &a) && tl_same_tokens(&c, &b));
    CHECKF(b.usage.cached_tokens >= g_bt, "prefix hit: %d cached tokens", b.usage.cached_tokens);
    r.max_tokens = 300;
    uint64_t id = tl_submit(e, &r);
    cinfer_output o;
    memset(&o, 0, sizeof o);
    int32_t seen = 0;
    while (seen < 10 && cinfer_engine_read(e, id, &o, -1) == 1) seen += o.n_tokens;
    CHECK(cinfer_engine_cancel(e, id) == 0);
    while (o.finish == CINFER_FINISH_NONE && cinfer_engine_read(e, id, &o, -1) == 1) seen += o.n_tokens;
    CHECK(o.finish == CINFER_FINISH_CANCELLED || o.finish == CINFER_FINISH_LENGTH);
    cinfer_output_release(&o);
    CHECK(cinfer_engine_get_stats(e).kv_blocks_used == 0);
    cinfer_engine_destroy(e);
}

/* Histogram of the third generated token over n seeds with drafter d. */
static void third_token_hist(int32_t d, int n, int32_t *hist) {
    cinfer_engine *e = make_engine(64 << 20, 2048, CINFER_SPEC_OFF, 0, false);
    CHECK(e != NULL);
    if (!e) return;
    uint64_t ids[32];
    for (int base = 0; base < n; base += g_hist_batch) {
        int m = n - base < g_hist_batch ? n - base : g_hist_batch;
        for (int i = 0; i < m; i++) {
            cinfer_request r = greedy(&specs[0]);
            r.max_tokens = 3;
            r.sampling.temperature = 1.0f;
            r.sampling.top_k = 50;
            r.sampling.seed = 1000u + (uint64_t)(base + i) + (d == CINFER_SPEC_OFF ? 0 : 7777u);
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
    cinfer_engine_stats st = cinfer_engine_get_stats(e);
    if (d != CINFER_SPEC_OFF) {
        fprintf(stderr, "  sampled %s: %llu drafted, %llu accepted, %llu dropped, %llu cut by confidence\n",
                cinfer_spec_drafter_name(d), (unsigned long long)st.spec_drafted[d],
                (unsigned long long)st.spec_accepted[d], (unsigned long long)st.spec_conf_dropped,
                (unsigned long long)st.spec_block_cut);
        CHECK(st.spec_drafted[d] > 0); /* the distribution test means nothing without drafts */
    }
    cinfer_engine_destroy(e);
}

static void test_sampled(void) {
    enum { V = 512, NS = 600 };
    static int32_t plain_h[V], mtp_h[V];
    memset(plain_h, 0, sizeof plain_h);
    memset(mtp_h, 0, sizeof mtp_h);
    third_token_hist(CINFER_SPEC_OFF, NS, plain_h);
    third_token_hist(g_drafter, NS, mtp_h);
    double stat = 0;
    int32_t bins = 0, ra = 0, rb = 0;
    for (int32_t i = 0; i <= V; i++) {
        int32_t x = i < V ? plain_h[i] : ra, y = i < V ? mtp_h[i] : rb;
        if (i < V && x + y < 10) { /* sparse bins pooled */
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
    fprintf(stderr, "%s sampled third token, %s vs plain: chi2 %.1f, critical %.1f (df %d)\n",
            model_get_hparams(g_m)->arch, cinfer_spec_drafter_name(g_drafter), stat, crit, df);
    CHECK(stat <= crit);
}

/* deepseek2: the next-n layer runs incrementally exactly as batched, conditioned on the exported states. */
static void test_model_incremental(const model *m) {
    enum { T = 24, BT = 16 };
    const model_hparams *hp = model_get_hparams(m);
    model_mtp_info mi;
    model_mtp_info_get(m, BT, &mi);
    CHECK(mi.n_blocks == 1 && mi.hidden_floats == hp->n_embd);
    int64_t E = hp->n_embd, nv = hp->n_vocab;
    cf_err err = {0};
    fwd_ctx *c = fwd_ctx_create(m, g_tp, T, 64, BT, &err);
    CHECKF(c != NULL, "%s", err.msg);
    if (!c) return;
    int64_t tkv = model_kv_block_floats(m, BT);
    float *tk = calloc((size_t)(tkv * 4), sizeof(float)), *mk = calloc((size_t)(mi.block_floats * 4), sizeof(float));
    float *mk2 = calloc((size_t)(mi.block_floats * 4), sizeof(float));
    float *tb[4], *mb[4], *mb2[4];
    for (int i = 0; i < 4; i++)
        tb[i] = tk + tkv * i, mb[i] = mk + mi.block_floats * i, mb2[i] = mk2 + mi.block_floats * i;
    int32_t tok[T], pos[T], seq[T] = {0}, rows[T];
    for (int i = 0; i < T; i++) tok[i] = 3 + (i * 37) % 500, pos[i] = i, rows[i] = i;
    float *h = calloc((size_t)(T * E), sizeof(float)), *hin = calloc((size_t)(T * E), sizeof(float));
    float *tl = malloc(sizeof(float) * (size_t)(T * nv)), *all = malloc(sizeof(float) * (size_t)(T * nv));
    float *hall = malloc(sizeof(float) * (size_t)(T * E)), *one = malloc(sizeof(float) * (size_t)nv);
    float *hone = malloc(sizeof(float) * (size_t)E);
    fwd_seq ts = {.blocks = tb, .n_blocks = 4}, ms = {.blocks = mb, .n_blocks = 4},
            ms2 = {.blocks = mb2, .n_blocks = 4};
    fwd_batch b = {.n_tokens = T,
                   .tokens = tok,
                   .pos = pos,
                   .seq = seq,
                   .seqs = &ts,
                   .n_seqs = 1,
                   .n_out = T,
                   .out_rows = rows,
                   .n_hidden = T,
                   .hidden_rows = rows,
                   .hidden = h};
    CHECKF(model_forward(c, &b, tl, &err) == 0, "%s", err.msg);
    memcpy(hin + E, h, sizeof(float) * (size_t)((T - 1) * E)); /* entry p: h of p - 1; zeros for p = 0 */
    b.seqs = &ms;
    b.hidden = hall;
    CHECKF(model_mtp_forward(c, 0, &b, hin, all, &err) == 0, "%s", err.msg);
    double md = 0, hd = 0;
    int differ = 0;
    for (int p = 0; p < T; p++) {
        int32_t r0 = 0;
        fwd_batch ob = {.n_tokens = 1,
                        .tokens = tok + p,
                        .pos = pos + p,
                        .seq = seq,
                        .seqs = &ms2,
                        .n_seqs = 1,
                        .n_out = 1,
                        .out_rows = &r0,
                        .n_hidden = 1,
                        .hidden_rows = &r0,
                        .hidden = hone};
        CHECK(model_mtp_forward(c, 0, &ob, hin + p * E, one, &err) == 0);
        for (int64_t v = 0; v < nv; v++) {
            double dd = fabs(one[v] - all[p * nv + v]);
            if (dd > md) md = dd;
            differ += fabsf(all[p * nv + v] - tl[p * nv + v]) > 1e-3f;
        }
        for (int64_t j = 0; j < E; j++) {
            double dd = fabs(hone[j] - hall[p * E + j]);
            if (dd > hd) hd = dd;
        }
    }
    fprintf(stderr, "deepseek2 next-n layer: incremental vs batched max |diff| logits %.2g, states %.2g\n", md, hd);
    CHECK(md < 1e-4 && hd < 1e-4);
    CHECK(differ > 0); /* its own head, not the main one */
    CHECK(model_mtp_forward(c, 1, &b, hin, all, &err) != 0 && strstr(err.msg, "MTP block 1"));
    fwd_ctx_free(c);
    free(tk), free(mk), free(mk2), free(h), free(hin), free(tl), free(all), free(hall), free(one), free(hone);
}

/* A model without an MTP block: the drafter is refused (submit) and as the default (create). */
static void test_refused(const model *plain_model) {
    const model *keep = g_m;
    int32_t keep_bt = g_bt;
    g_m = plain_model;
    g_bt = 16;
    cinfer_engine *e = make_engine(64 << 20, 2048, CINFER_SPEC_OFF, 0, false);
    CHECK(e != NULL);
    cinfer_request r = greedy(&specs[0]);
    r.speculative.drafter = CINFER_SPEC_MTP;
    char msg[200] = "";
    CHECK(e && cinfer_engine_submit(e, &r, msg, sizeof msg) == 0 && strstr(msg, "MTP"));
    fprintf(stderr, "refused: %s\n", msg);
    cinfer_engine_destroy(e);
    cinfer_engine_options o = {.block_tokens = 16,
                               .kv_memory_bytes = 64 << 20,
                               .max_batch_tokens = 256,
                               .max_seqs = 4,
                               .max_ctx = 256,
                               .speculative = {.drafter = CINFER_SPEC_MTP}};
    e = NULL;
    CHECK(cinfer_engine_create(plain_model, g_tp, &o, &e, msg, sizeof msg) != 0 && strstr(msg, "MTP"));
    cinfer_engine_destroy(e);
    g_m = keep;
    g_bt = keep_bt;
}

/* The dspark drafter where it does not apply, and chained MTP on a model whose MTP block is a DSpark stage. */
static void test_dspark_refused(const model *m, int32_t drafter, const char *want) {
    const model *keep = g_m;
    int32_t keep_bt = g_bt;
    g_m = m;
    g_bt = model_kv_block_tokens(m, 16);
    cinfer_engine *e = make_engine(64 << 20, 2048, CINFER_SPEC_OFF, 0, false);
    CHECK(e != NULL);
    cinfer_request r = greedy(&specs[0]);
    r.speculative.drafter = drafter;
    char msg[240] = "";
    CHECK(e && cinfer_engine_submit(e, &r, msg, sizeof msg) == 0 && strstr(msg, want));
    fprintf(stderr, "refused (%s): %s\n", cinfer_spec_drafter_name(drafter), msg);
    cinfer_engine_destroy(e);
    cinfer_engine_options o = {.block_tokens = g_bt,
                               .kv_memory_bytes = 64 << 20,
                               .max_batch_tokens = 256,
                               .max_seqs = 4,
                               .max_ctx = 256,
                               .speculative = {.drafter = drafter}};
    e = NULL;
    CHECK(cinfer_engine_create(m, g_tp, &o, &e, msg, sizeof msg) != 0 && strstr(msg, want));
    cinfer_engine_destroy(e);
    g_m = keep;
    g_bt = keep_bt;
}

int main(void) {
    if (access(shared_path("models/stories260K.gguf"), R_OK)) return tu_missing_fixture("models/stories260K.gguf");
    g_tp = pool_create(1);
    model *ds2 = make_model("deepseek2", "mtp-ds2"), *ds4 = make_model("deepseek4", "mtp-ds4");
    model *dsp = make_model("deepseek4", "mtp-dspark");
    model *llama = NULL;
    cf_err err = {0};
    CHECKF(model_load(shared_path("models/stories260K.gguf"), &llama, &err) == 0, "%s", err.msg);
    if (ds2) {
        g_m = ds2;
        g_bt = model_kv_block_tokens(ds2, 16);
        test_model_incremental(ds2);
        test_lossless();
        test_sampled();
    }
    if (ds4) {
        g_m = ds4;
        g_bt = model_kv_block_tokens(ds4, 16);
        test_lossless();
    }
    if (dsp) {
        g_m = dsp;
        g_bt = model_kv_block_tokens(dsp, 16);
        g_drafter = CINFER_SPEC_DSPARK;
        test_lossless();
        test_sampled();
        /* the block cut by confidence (and the cost scheduling) on: lossless, and under load (all 12 requests
         * decoding at once: threshold 0.72) a larger share of the block rows is cut than solo (0.1) */
        g_conf = 0;
        g_hist_batch = 1; /* one at a time: the cut keeps some rows (32 decoding at once keep none) */
        test_sampled(); /* the cut reads only earlier drafts: the sampled distribution is unchanged */
        g_hist_batch = 32;
        cinfer_engine_stats so = run_set("confidence-cut solo", 8, 64 << 20, 2048, true, false, false);
        g_need_drafts = false;
        cinfer_engine_stats ba = run_set("confidence-cut batched", 8, 64 << 20, 2048, false, false, false);
        g_need_drafts = true;
        g_conf = -1;
        /* the cut's share of the block rows (the cost scheduling after it depends on timing: not compared) */
        double cs = (double)so.spec_block_cut /
                    (double)(so.spec_drafted[CINFER_SPEC_DSPARK] + so.spec_conf_dropped + so.spec_block_cut + 1e-9);
        double cb = (double)ba.spec_block_cut /
                    (double)(ba.spec_drafted[CINFER_SPEC_DSPARK] + ba.spec_conf_dropped + ba.spec_block_cut + 1e-9);
        fprintf(stderr, "dspark share of block rows cut by confidence: solo %.3f, batched %.3f\n", cs, cb);
        CHECK(so.spec_block_cut > 0 && ba.spec_block_cut > 0 && cb > cs);
        g_drafter = CINFER_SPEC_MTP;
        test_dspark_refused(dsp, CINFER_SPEC_MTP, "DSpark stages");
        if (ds4) test_dspark_refused(ds4, CINFER_SPEC_DSPARK, "no DSpark tensors");
    }
    if (llama) test_refused(llama);
    if (llama) test_dspark_refused(llama, CINFER_SPEC_DSPARK, "dspark");
    model_free(ds2);
    model_free(dsp);
    model_free(ds4);
    model_free(llama);
    pool_destroy(g_tp);
    return test_finish();
}
