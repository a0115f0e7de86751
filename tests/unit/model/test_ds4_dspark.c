/* test_ds4_dspark.c - the model side of the DSpark block drafter
 * (deepseek4_dspark.c) against the formulas of docs/deepseek4.md "DSpark",
 * computed here from the GGUF tensors:
 *  - two mkmodel models of the same seed, one plain and one with DSpark
 *    tensors tapping the final block boundary twice (taps "2,2": fc reads
 *    both halves): the plain model's export is the final streams S, the
 *    DSpark model's export is main_norm(fc([mean_hc S | mean_hc S])) in
 *    every stream (1e-4), for every row of a 24-token prompt;
 *  - the head: markov_w2 . markov_w1[prev] added to the logits and the
 *    confidence sigmoid(conf_proj . [mean_hc state | markov_w1[prev]] + b)
 *    for random states and several prev tokens (1e-4);
 *  - info: block size, noise token (the last id), rank, one stage; a model
 *    without DSpark tensors reports none and refuses the head; a token
 *    outside the vocabulary is refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/seq_kv.h"
#include "format/gguf.h"
#include "model/mkmodel.h"
#include "model/model.h"
#include "testutil.h"
#include "testutil_ds4.h"

#define T 24
#define BT 128

static const float *tensor(const gguf_file *f, const char *name) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    CHECKF(t && t->type == DT_F32, "tensor %s", name);
    return t && t->type == DT_F32 ? (const float *)t->data : NULL;
}

static model *make(mkmodel_opts *o, const char *name, char *path, size_t cap) {
    temp_path(path, cap, name);
    cf_err err = {0};
    model *m = NULL;
    int rc = mkmodel_write(o, path, &err);
    if (rc == 0) rc = model_load(path, &m, &err);
    CHECKF(rc == 0, "%s: %s", name, err.msg);
    return m;
}

/* The exported hidden state of every prompt row. */
static int export_rows(const model *m, thread_pool *pool, const int32_t *tok, float *h) {
    cf_err err = {0};
    fwd_ctx *c = fwd_ctx_create(m, pool, T, T, BT, &err);
    seq_kv kv;
    int rc = !c || seq_kv_init(&kv, m, T, BT, T, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) return -1;
    int32_t pos[T], seq[T] = {0}, rows[T];
    for (int i = 0; i < T; i++) pos[i] = i, rows[i] = i;
    int32_t last = T - 1;
    float *logits = malloc(sizeof(float) * (size_t)model_get_hparams(m)->n_vocab);
    fwd_batch b = {.n_tokens = T,
                   .tokens = tok,
                   .pos = pos,
                   .seq = seq,
                   .seqs = &kv.seq,
                   .n_seqs = 1,
                   .n_out = 1,
                   .out_rows = &last,
                   .n_hidden = T,
                   .hidden_rows = rows,
                   .hidden = h};
    rc = model_forward(c, &b, logits, &err);
    CHECKF(rc == 0, "%s", err.msg);
    free(logits);
    seq_kv_release(&kv);
    fwd_ctx_free(c);
    return rc;
}

int main(void) {
    if (access(shared_path("models/stories260K.gguf"), R_OK)) return tu_missing_fixture("models/stories260K.gguf");
    mkmodel_opts o = tu_ds4_tiny(2, "4,128,0", 9);
    o.index_topk = 3;
    o.experts = 4;
    o.mtp_layers = 1;
    char pp[256], dp[256];
    model *plain = make(&o, "ds4-dspark-plain.gguf", pp, sizeof pp);
    o.dspark_block = 4;
    o.dspark_taps = "2,2";
    o.dspark_rank = 8;
    model *ds = make(&o, "ds4-dspark.gguf", dp, sizeof dp);
    gguf_file *f = NULL;
    cf_err err = {0};
    CHECKF(gguf_open(dp, &f, &err) == 0, "%s", err.msg);
    if (!plain || !ds || !f) return test_finish();
    const model_hparams *hp = model_get_hparams(ds);
    int64_t E = hp->n_embd, n = hp->ds4_hc, W = n * E, V = hp->n_vocab, R = 8;
    model_dspark_info di, none;
    model_dspark_info_get(ds, &di);
    model_dspark_info_get(plain, &none);
    CHECK(di.block_size == 4 && di.noise_token == V - 1 && di.rank == R && di.n_stages == 1);
    CHECK(none.block_size == 0);

    thread_pool *pool = pool_create(2);
    int32_t tok[T];
    for (int i = 0; i < T; i++) tok[i] = 3 + (i * 37) % 500;
    float *s = malloc(sizeof(float) * (size_t)(T * W)), *x = malloc(sizeof(float) * (size_t)(T * W));
    CHECK(export_rows(plain, pool, tok, s) == 0 && export_rows(ds, pool, tok, x) == 0);
    const float *fc = tensor(f, "dspark.fc.weight"), *nw = tensor(f, "dspark.enc.output_norm.weight");
    const float *w1 = tensor(f, "dspark.markov_w1.weight"), *w2 = tensor(f, "dspark.markov_w2.weight");
    const float *cw = tensor(f, "dspark.conf_proj.weight"), *cb = tensor(f, "dspark.conf_proj.bias");
    if (!fc || !nw || !w1 || !w2 || !cw || !cb) return test_finish();
    double worst = 0;
    float *mean = malloc(sizeof(float) * (size_t)E), *ctx = malloc(sizeof(float) * (size_t)E);
    for (int t = 0; t < T; t++) {
        for (int64_t k = 0; k < E; k++) {
            double a = 0;
            for (int64_t h = 0; h < n; h++) a += s[t * W + h * E + k];
            mean[k] = (float)(a / (double)n);
        }
        double ss = 0;
        for (int64_t o2 = 0; o2 < E; o2++) { /* fc row o2 over [mean | mean] */
            double a = 0;
            for (int64_t i = 0; i < 2 * E; i++) a += (double)fc[o2 * 2 * E + i] * mean[i % E];
            ctx[o2] = (float)a;
            ss += a * a;
        }
        double r = 1.0 / sqrt(ss / (double)E + hp->rms_eps);
        for (int64_t h = 0; h < n; h++)
            for (int64_t k = 0; k < E; k++) worst = fmax(worst, fabs(x[t * W + h * E + k] - ctx[k] * r * nw[k]));
    }
    CHECKF(worst < 1e-4, "DSpark context export vs formula: %g", worst);
    fprintf(stderr, "context export vs formula: max |diff| %.2e\n", worst);

    fwd_ctx *c = fwd_ctx_create(ds, pool, T, T, BT, &err);
    fwd_ctx *cp = fwd_ctx_create(plain, pool, T, T, BT, &err);
    CHECK(c && cp);
    float *lg = malloc(sizeof(float) * (size_t)V), *state = x + 5 * W, conf = 0;
    double wl = 0, wc = 0;
    for (int32_t prev = 0; c && prev < V; prev += 97) {
        for (int64_t v = 0; v < V; v++) lg[v] = (float)(v % 7) * 0.25f;
        CHECK(model_dspark_head(c, state, prev, lg, &conf, &err) == 0);
        for (int64_t v = 0; v < V; v++) {
            double b = 0;
            for (int64_t k = 0; k < R; k++) b += (double)w2[v * R + k] * w1[prev * R + k];
            wl = fmax(wl, fabs(lg[v] - ((double)(v % 7) * 0.25 + b)));
        }
        double z = cb[0];
        for (int64_t k = 0; k < R; k++) z += (double)cw[E + k] * w1[prev * R + k];
        double sx = 0;
        for (int64_t h = 0; h < n; h++)
            for (int64_t k = 0; k < E; k++) sx += (double)cw[k] * state[h * E + k];
        z += sx / (double)n;
        wc = fmax(wc, fabs(conf - 1.0 / (1.0 + exp(-z))));
    }
    CHECKF(wl < 1e-4 && wc < 1e-5, "head vs formula: logits %g, confidence %g", wl, wc);
    fprintf(stderr, "head vs formula: logits %.2e, confidence %.2e\n", wl, wc);
    CHECK(c && model_dspark_head(c, state, (int32_t)V, lg, &conf, &err) != 0 && strstr(err.msg, "vocabulary"));
    CHECK(cp && model_dspark_head(cp, state, 1, lg, &conf, &err) != 0 && strstr(err.msg, "no DSpark"));
    fwd_ctx_free(c);
    fwd_ctx_free(cp);
    gguf_close(f);
    free(s), free(x), free(mean), free(ctx), free(lg);
    pool_destroy(pool);
    model_free(plain);
    model_free(ds);
    unlink(pp);
    unlink(dp);
    return test_finish();
}
