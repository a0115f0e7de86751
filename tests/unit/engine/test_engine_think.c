/* test_engine_think.c - reasoning budgets (cinfer_request.think_*, engine_think.c) on
 * stories260K, greedy. The end marker E = [e0, e1] is two tokens the model does not pick
 * (second-best alternatives), so every forced token is visible and its logprob checkable:
 *  - a block opened by the prompt (think_open), budget k: the first k tokens are the model's
 *    own (a run without budget), then e0, e1 with the logprobs the model gives them there
 *    (top-20 alternatives of reference runs), then exactly what the model writes after
 *    prompt + those tokens; budget 0 closes at once; a budget never reached and no budget
 *    change nothing; the stats count the forced tokens;
 *  - a block opened by a generated start marker: k tokens after it, then E; a block reopened
 *    after the budget is spent closes at once;
 *  - 32 mixed requests (no budget, prompt-opened, generation-opened, budget 0, multi-block)
 *    batched with asynchronous scheduling give their solo (synchronous) tokens: plain, with a KV
 *    pool small enough to preempt (recomputation keeps the counters), and chunked;
 *  - invalid marker arrays are refused at submit.
 * The single-request checks run with synchronous and asynchronous scheduling. */
#include <math.h>
#include <stdio.h>

#include "engine_testlib.h"

#define CTX 1024
#define TOPK 20

static const model *g_m;
static thread_pool *g_tp;

typedef struct lp_run {
    int32_t tokens[512];
    float lps[512];
    int32_t top_ids[512][TOPK];
    float top_lps[512][TOPK];
    int32_t n;
    cinfer_finish finish;
} lp_run;

static cinfer_request greedy(const int32_t *p, int32_t n, int32_t max_tokens) {
    cinfer_request r = cinfer_request_default();
    r.prompt = p;
    r.n_prompt = n;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    return r;
}

/* Runs r with logprobs and top-20 alternatives. */
static int run_lp(cinfer_engine *e, cinfer_request r, lp_run *out) {
    memset(out, 0, sizeof *out);
    r.want_logprobs = true;
    r.top_logprobs = TOPK;
    uint64_t id = tl_submit(e, &r);
    if (!id) return -1;
    cinfer_output o = {0};
    for (;;) {
        if (cinfer_engine_read(e, id, &o, -1) != 1) break;
        for (int32_t t = 0; t < o.n_tokens && out->n < 512; t++, out->n++) {
            out->tokens[out->n] = o.tokens[t];
            out->lps[out->n] = o.logprobs[t];
            memcpy(out->top_ids[out->n], o.top_ids + t * TOPK, sizeof out->top_ids[0]);
            memcpy(out->top_lps[out->n], o.top_logprobs + t * TOPK, sizeof out->top_lps[0]);
        }
        if (o.finish != CINFER_FINISH_NONE) break;
    }
    out->finish = o.finish;
    cinfer_output_release(&o);
    return out->finish == CINFER_FINISH_NONE ? -1 : 0;
}

static bool contains(const int32_t *a, int32_t n, int32_t t) {
    for (int32_t i = 0; i < n; i++)
        if (a[i] == t) return true;
    return false;
}

/* The best alternative at position pos of run that is not chosen there and not in avoid[0..n). */
static int32_t alt_at(const lp_run *run, int32_t pos, const int32_t *avoid, int32_t n, float *lp) {
    for (int a = 1; a < TOPK; a++) {
        int32_t t = run->top_ids[pos][a];
        if (t != run->tokens[pos] && t > 2 && !contains(avoid, n, t)) {
            *lp = run->top_lps[pos][a];
            return t;
        }
    }
    return -1;
}

static int32_t g_prompt[64], g_np = 24;
static int32_t g_end[2]; /* E = [e0, e1] */

static void set_think(cinfer_request *r, int32_t budget, bool open, const int32_t *start, int32_t n_start) {
    r->think_budget = budget;
    r->think_open = open;
    r->think_start = start;
    r->n_think_start = n_start;
    r->think_end = g_end;
    r->n_think_end = 2;
}

static void test_prompt_open(bool sync) {
    tl_sync_scheduling = sync;
    cinfer_engine *e = tl_engine(g_m, g_tp, 64 << 20, 2048, 64, CTX);
    CHECK(e != NULL);
    if (!e) return;
    static lp_run ref, ref2, ref3, got;
    CHECK(run_lp(e, greedy(g_prompt, g_np, 60), &ref) == 0);
    const int32_t k = 7;
    /* e0: an alternative at position k absent from the first k + 1 tokens (no partial marker
     * inside the block); e1: an alternative after prompt + ref[0..k) + e0 */
    float lp0 = 0, lp1 = 0;
    g_end[0] = alt_at(&ref, k, ref.tokens, k + 1, &lp0);
    CHECK(g_end[0] >= 0);
    static int32_t p2[128];
    memcpy(p2, g_prompt, (size_t)g_np * sizeof(int32_t));
    memcpy(p2 + g_np, ref.tokens, (size_t)k * sizeof(int32_t));
    p2[g_np + k] = g_end[0];
    CHECK(run_lp(e, greedy(p2, g_np + k + 1, 8), &ref2) == 0);
    g_end[1] = alt_at(&ref2, 0, ref.tokens, k + 1, &lp1);
    CHECK(g_end[1] >= 0 && g_end[1] != g_end[0]);
    p2[g_np + k + 1] = g_end[1];
    CHECK(run_lp(e, greedy(p2, g_np + k + 2, 30), &ref3) == 0);
    fprintf(stderr, "think (%s): end marker [%d, %d], logprobs %.3f %.3f\n", sync ? "sync" : "async", g_end[0],
            g_end[1], lp0, lp1);

    cinfer_engine_stats s0 = cinfer_engine_get_stats(e);
    cinfer_request r = greedy(g_prompt, g_np, k + 2 + 30);
    set_think(&r, k, true, NULL, 0);
    CHECK(run_lp(e, r, &got) == 0);
    CHECK(got.n == k + 2 + 30 && got.finish == CINFER_FINISH_LENGTH);
    CHECKF(!memcmp(got.tokens, ref.tokens, (size_t)k * sizeof(int32_t)), "the first %d tokens are the model's", k);
    CHECKF(got.tokens[k] == g_end[0] && got.tokens[k + 1] == g_end[1], "forced [%d, %d], got [%d, %d]", g_end[0],
           g_end[1], got.tokens[k], got.tokens[k + 1]);
    CHECKF(fabsf(got.lps[k] - lp0) < 1e-3f && fabsf(got.lps[k + 1] - lp1) < 1e-3f,
           "forced logprobs %.4f %.4f, the model's %.4f %.4f", got.lps[k], got.lps[k + 1], lp0, lp1);
    CHECK(got.lps[k] < ref.lps[k]); /* not the greedy choice: its real (lower) logprob */
    CHECK(got.top_ids[k][0] == ref.tokens[k]); /* alternatives: the model's distribution there */
    CHECKF(!memcmp(got.tokens + k + 2, ref3.tokens, 30 * sizeof(int32_t)), "after the block: the model's continuation");
    cinfer_engine_stats s1 = cinfer_engine_get_stats(e);
    CHECK(s1.think_forced_tokens - s0.think_forced_tokens == 2);

    /* budget 0: the block closes at once */
    static lp_run ref0;
    memcpy(p2 + g_np, g_end, sizeof g_end);
    CHECK(run_lp(e, greedy(p2, g_np + 2, 20), &ref0) == 0);
    r.think_budget = 0;
    r.max_tokens = 22;
    CHECK(run_lp(e, r, &got) == 0);
    CHECK(got.n == 22 && got.tokens[0] == g_end[0] && got.tokens[1] == g_end[1]);
    CHECK(!memcmp(got.tokens + 2, ref0.tokens, 20 * sizeof(int32_t)));

    /* a budget never reached, no budget with markers, markers without think_open: unchanged */
    r.max_tokens = 60;
    r.think_budget = 1000;
    CHECK(run_lp(e, r, &got) == 0);
    CHECK(got.n == 60 && !memcmp(got.tokens, ref.tokens, 60 * sizeof(int32_t)));
    r.think_budget = -1;
    CHECK(run_lp(e, r, &got) == 0);
    CHECK(got.n == 60 && !memcmp(got.tokens, ref.tokens, 60 * sizeof(int32_t)));
    r.think_budget = 0;
    r.think_open = false;
    CHECK(run_lp(e, r, &got) == 0);
    CHECK(got.n == 60 && !memcmp(got.tokens, ref.tokens, 60 * sizeof(int32_t)));

    /* max_tokens ends the request between the two forced tokens: finish length */
    r.think_open = true;
    r.think_budget = k;
    r.max_tokens = k + 1;
    CHECK(run_lp(e, r, &got) == 0);
    CHECK(got.n == k + 1 && got.tokens[k] == g_end[0] && got.finish == CINFER_FINISH_LENGTH);
    cinfer_engine_destroy(e);
}

static void test_generated_open(bool sync) {
    tl_sync_scheduling = sync;
    cinfer_engine *e = tl_engine(g_m, g_tp, 64 << 20, 2048, 64, CTX);
    CHECK(e != NULL);
    if (!e) return;
    static lp_run ref, cont, got;
    CHECK(run_lp(e, greedy(g_prompt, g_np, 60), &ref) == 0);
    /* the start marker: the first token of ref that did not occur before it, from position 3 */
    int32_t j = 3;
    while (j < 40 && contains(ref.tokens, j, ref.tokens[j])) j++;
    CHECK(j < 40);
    int32_t start = ref.tokens[j], k = 5;
    CHECK(!contains(ref.tokens + j + 1, k, g_end[0])); /* no partial end marker inside */
    static int32_t p2[160];
    int32_t n2 = g_np + j + 1 + k;
    memcpy(p2, g_prompt, (size_t)g_np * sizeof(int32_t));
    memcpy(p2 + g_np, ref.tokens, (size_t)(j + 1 + k) * sizeof(int32_t));
    memcpy(p2 + n2, g_end, sizeof g_end);
    CHECK(run_lp(e, greedy(p2, n2 + 2, 40), &cont) == 0);
    cinfer_request r = greedy(g_prompt, g_np, j + 1 + k + 2 + 40);
    set_think(&r, k, false, &start, 1);
    CHECK(run_lp(e, r, &got) == 0);
    CHECK(got.n == j + 1 + k + 2 + 40);
    CHECKF(!memcmp(got.tokens, ref.tokens, (size_t)(j + 1 + k) * sizeof(int32_t)),
           "start marker %d at %d, then %d of the model's tokens", start, j, k);
    CHECK(got.tokens[j + 1 + k] == g_end[0] && got.tokens[j + 2 + k] == g_end[1]);
    /* after the block: the model's tokens up to a new start marker; the budget is spent, so a new
     * block is closed at once */
    int32_t at = j + 3 + k, c = 0;
    while (c < 40 && cont.tokens[c] != start) c++;
    CHECK(!memcmp(got.tokens + at, cont.tokens, (size_t)(c < 40 ? c + 1 : 40) * sizeof(int32_t)));
    if (c + 2 < 40) CHECK(got.tokens[at + c + 1] == g_end[0] && got.tokens[at + c + 2] == g_end[1]);
    fprintf(stderr, "think (%s): start marker %d at %d, block of %d, reopened after %d more: %s\n",
            sync ? "sync" : "async", start, j, k, c, c < 40 ? "closed at once" : "never");
    cinfer_engine_destroy(e);
}

/* ---- batch invariance ---- */

#define NB 32

typedef struct bspec {
    int32_t prompt[128];
    int32_t n_prompt, max_tokens, budget, start;
    bool open;
} bspec;

static bspec bs[NB];
static run_result solo[NB], batch[NB];
static uint64_t solo_forced;

static cinfer_request bspec_request(const bspec *b) {
    cinfer_request r = greedy(b->prompt, b->n_prompt, b->max_tokens);
    if (b->budget >= -1) set_think(&r, b->budget, b->open, b->start >= 0 ? &b->start : NULL, b->start >= 0);
    return r;
}

static void run_think_batch(const char *name, int64_t kv_bytes, int32_t max_batch, bool expect_preempt) {
    cinfer_engine *e = tl_engine(g_m, g_tp, kv_bytes, max_batch, 64, CTX);
    CHECK(e != NULL);
    if (!e) return;
    uint64_t ids[NB];
    for (int i = 0; i < NB; i++) {
        cinfer_request r = bspec_request(&bs[i]);
        ids[i] = tl_submit(e, &r);
        memset(&batch[i], 0, sizeof batch[i]);
    }
    int same = 0;
    for (int i = 0; i < NB; i++) {
        CHECK(tl_collect(e, ids[i], &batch[i]) == 0);
        same += tl_same_tokens(&solo[i], &batch[i]);
        CHECKF(tl_same_tokens(&solo[i], &batch[i]), "%s: request %d differs", name, i);
    }
    cinfer_engine_stats s = cinfer_engine_get_stats(e);
    fprintf(stderr, "think %s: %d/%d identical, %llu forced (solo %llu), %llu preemptions\n", name, same, NB,
            (unsigned long long)s.think_forced_tokens, (unsigned long long)solo_forced,
            (unsigned long long)s.preemptions);
    CHECK(s.think_forced_tokens == solo_forced);
    if (expect_preempt) CHECK(s.preemptions > 0);
    CHECK(s.kv_blocks_used == 0);
    cinfer_engine_destroy(e);
}

static void test_batch(void) {
    for (int i = 0; i < NB; i++) {
        bspec *b = &bs[i];
        b->n_prompt = 5 + (int32_t)(tl_rand() % 100);
        b->max_tokens = 20 + (int32_t)(tl_rand() % 50);
        tl_prompt(b->prompt, b->n_prompt);
        b->budget = -2; /* no think fields */
        b->start = -1;
        switch (i % 5) {
        case 0: break;
        case 1: b->budget = 1 + (int32_t)(tl_rand() % 15), b->open = true; break;
        case 2: b->budget = 0, b->open = true; break;
        case 3: b->budget = 2 + (int32_t)(tl_rand() % 6), b->start = -3; break; /* set from the solo run */
        case 4: b->budget = 3, b->open = true, b->start = g_end[1]; break; /* closing does not reopen */
        }
    }
    tl_sync_scheduling = true;
    cinfer_engine *e = tl_engine(g_m, g_tp, 64 << 20, 2048, 64, CTX);
    tl_sync_scheduling = false;
    CHECK(e != NULL);
    if (!e) return;
    int32_t n_forced_req = 0;
    for (int i = 0; i < NB; i++) {
        bspec *b = &bs[i];
        if (b->start == -3) { /* start marker: the solo run's 3rd token */
            static run_result plain;
            cinfer_request r = greedy(b->prompt, b->n_prompt, b->max_tokens);
            CHECK(tl_run(e, &r, &plain) == 0);
            b->start = plain.tokens[2];
        }
        cinfer_request r = bspec_request(b);
        uint64_t before = cinfer_engine_get_stats(e).think_forced_tokens;
        CHECK(tl_run(e, &r, &solo[i]) == 0);
        CHECK(solo[i].n_tokens == b->max_tokens);
        n_forced_req += cinfer_engine_get_stats(e).think_forced_tokens > before;
    }
    solo_forced = cinfer_engine_get_stats(e).think_forced_tokens;
    cinfer_engine_destroy(e);
    CHECK(n_forced_req >= NB / 2); /* most requests with a budget were forced */
    run_think_batch("batched", 64 << 20, 2048, false);
    run_think_batch("preempting", 24 * 20 * 1024 + 4096, 2048, true);
    run_think_batch("chunked", 64 << 20, 16, false);
}

static void test_invalid(void) {
    cinfer_engine *e = tl_engine(g_m, g_tp, 16 << 20, 256, 8, CTX);
    CHECK(e != NULL);
    if (!e) return;
    char err[200];
    int32_t big[CINFER_MAX_THINK_MARKER + 1] = {0}, bad = 512;
    cinfer_request r = greedy(g_prompt, g_np, 4);
    r.think_budget = 3;
    r.think_end = big;
    r.n_think_end = CINFER_MAX_THINK_MARKER + 1;
    CHECK(cinfer_engine_submit(e, &r, err, sizeof err) == 0 && strstr(err, "think"));
    r.n_think_end = 1;
    r.think_end = &bad;
    CHECK(cinfer_engine_submit(e, &r, err, sizeof err) == 0 && strstr(err, "think_end"));
    r.think_end = NULL;
    CHECK(cinfer_engine_submit(e, &r, err, sizeof err) == 0);
    r.think_end = g_end;
    r.think_start = NULL;
    r.n_think_start = 1;
    CHECK(cinfer_engine_submit(e, &r, err, sizeof err) == 0);
    cinfer_engine_destroy(e);
}

int main(void) {
    model *m;
    cf_err err = {0};
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) return tu_missing_fixture(err.msg);
    g_m = m;
    g_tp = pool_create(1);
    tl_prompt(g_prompt, g_np);
    test_prompt_open(true);
    test_prompt_open(false);
    test_generated_open(true);
    test_generated_open(false);
    test_batch();
    test_invalid();
    pool_destroy(g_tp);
    model_free(m);
    return test_finish();
}
