/* test_engine_top_logprobs.c - top-k log-probabilities (cinfer_request.top_logprobs):
 *  - eng_top_logprobs on a hand-made row: order, ties (lower id first), values
 *    equal to log-softmax, k clipped to the vocabulary;
 *  - through the engine on stories260K (greedy): every token's alternatives
 *    are in descending order, the first is the chosen token with the chosen
 *    token's logprob, the log-probabilities sum to at most 1; a request
 *    without top_logprobs reports n_top 0; k above the maximum is clipped. */
#include <math.h>
#include <stdio.h>

#include "engine/engine_internal.h"
#include "engine_testlib.h"

static void test_row(void) {
    const float row[6] = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 0.5f};
    int32_t ids[6];
    float lps[6];
    eng_top_logprobs(row, 6, 3, ids, lps);
    CHECK(ids[0] == 1 && ids[1] == 3 && ids[2] == 2);
    double sum = 0;
    for (int i = 0; i < 6; i++) sum += exp((double)row[i]);
    CHECK(fabs(lps[0] - (3.0 - log(sum))) < 1e-5);
    CHECK(fabs(lps[2] - (2.0 - log(sum))) < 1e-5);
    eng_top_logprobs(row, 6, 9, ids, lps); /* k > n: all six */
    CHECK(ids[5] == 4);
}

static void test_engine(const model *m, thread_pool *tp) {
    cinfer_engine *e = tl_engine(m, tp, 64ll << 20, 256, 8, 256);
    CHECK(e != NULL);
    if (!e) return;
    int32_t prompt[8] = {1, 403, 407, 261, 378, 29, 30, 31};
    cinfer_request r = cinfer_request_default();
    r.prompt = prompt;
    r.n_prompt = 8;
    r.max_tokens = 12;
    r.ignore_eos = true;
    r.want_logprobs = true;
    r.top_logprobs = 5;
    uint64_t id = tl_submit(e, &r);
    r.top_logprobs = 100; /* clipped to CINFER_MAX_TOP_LOGPROBS */
    uint64_t id_big = tl_submit(e, &r);
    r.top_logprobs = 0;
    uint64_t id_none = tl_submit(e, &r);
    cinfer_output o = {0};
    int n_seen = 0;
    for (;;) {
        int rc = cinfer_engine_read(e, id, &o, 5000);
        CHECK(rc == 1);
        if (rc != 1) break;
        for (int32_t t = 0; t < o.n_tokens; t++, n_seen++) {
            CHECK(o.n_top == 5);
            const int32_t *ti = o.top_ids + t * 5;
            const float *tl = o.top_logprobs + t * 5;
            CHECKF(ti[0] == o.tokens[t], "greedy token %d is not the best alternative %d", o.tokens[t], ti[0]);
            CHECK(fabsf(tl[0] - o.logprobs[t]) < 1e-5f);
            double p = 0;
            for (int a = 0; a < 5; a++) {
                p += exp(tl[a]);
                if (a) CHECK(tl[a] <= tl[a - 1]);
            }
            CHECK(p <= 1.0 + 1e-4);
        }
        if (o.finish != CINFER_FINISH_NONE) break;
    }
    CHECK(n_seen == 12);
    int32_t n_big = 0, n_none_top = -1;
    for (;;) {
        if (cinfer_engine_read(e, id_big, &o, 5000) != 1) break;
        if (o.n_tokens) n_big = o.n_top;
        if (o.finish != CINFER_FINISH_NONE) break;
    }
    CHECK(n_big == CINFER_MAX_TOP_LOGPROBS);
    for (;;) {
        if (cinfer_engine_read(e, id_none, &o, 5000) != 1) break;
        if (o.n_tokens) n_none_top = o.n_top;
        if (o.finish != CINFER_FINISH_NONE) break;
    }
    CHECK(n_none_top == 0);
    cinfer_output_release(&o);
    cinfer_engine_destroy(e);
}

int main(void) {
    test_row();
    cf_err err = {0};
    model *m;
    if (model_load(shared_path("models/stories260K.gguf"), &m, &err)) return tu_missing_fixture(err.msg);
    thread_pool *tp = pool_create(1);
    test_engine(m, tp);
    pool_destroy(tp);
    model_free(m);
    return test_finish();
}
