/* deepseek4_dspark.c - the model side of the DSpark-style block drafter
 * (docs/deepseek4.md "DSpark"; model.h "DSpark"): its tensors and keys, the
 * context the target pass exports for it, and the Markov and confidence
 * heads of one block row.
 *
 * Owns ds4_dspark (in ds4_weights). Invariants: the drafter is present
 * (block > 0) only with every tensor and key checked, at least one MTP block
 * (its stage), taps in 1..n_layer, the noise token inside the vocabulary;
 * a file with some but not all of the dspark.* tensors fails to load with the
 * name of the first one missing. The forward side reads only rows the batch
 * exports (fwd_batch.hidden_rows) and allocates nothing (c->tap and the head's
 * c->dsp_bias are sized at context creation).
 *
 * Context of a target row: main_norm(fc([s_1 | ... | s_T])), s_j the mean
 * over the hc streams entering block taps[j], copied into each of the hc
 * streams of the exported state (so the MTP stage's input has the width of
 * the final streams it takes on a model without DSpark).
 * Heads of block row k (prev = the block token before it: the anchor for row
 * 0, else draft k - 1): logits += markov_w2 . markov_w1[prev]; confidence =
 * sigmoid(conf_proj . [mean over hc of the row's stage streams |
 * markov_w1[prev]] + bias). Neither reads the row's own draft, so cutting a
 * block by confidence keeps verification lossless. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch/deepseek4_fwd.h"
#include "model/model_internal.h"
#include "model/rowops.h"
#include "tensor/kernels.h"

static const char *const dspark_tensors[] = {"dspark.fc.weight",        "dspark.enc.output_norm.weight",
                                             "dspark.markov_w1.weight", "dspark.markov_w2.weight",
                                             "dspark.conf_proj.weight", "dspark.conf_proj.bias"};

static int read_taps(model *m, ds4_dspark *d, cf_err *err) {
    int64_t *v = NULL;
    uint64_t n = 0;
    int rc = gguf_get_arr_i64(m->gguf, "deepseek4.dspark.target_layers", &v, &n, err);
    if (rc < 0) return -1;
    if (rc == 1) return cf_fail(err, "missing key deepseek4.dspark.target_layers (the DSpark tensors are present)");
    if (n == 0 || n > DS4_DSPARK_MAX_TAPS) {
        free(v);
        return cf_fail(err, "deepseek4.dspark.target_layers has %llu entries (1..%d)", (unsigned long long)n,
                       DS4_DSPARK_MAX_TAPS);
    }
    for (uint64_t i = 0; i < n; i++) {
        if (v[i] < 1 || v[i] > m->hp.n_layer) {
            int64_t bad = v[i];
            free(v);
            return cf_fail(err, "deepseek4.dspark.target_layers: %lld is not a main block boundary (1..%d)",
                           (long long)bad, m->hp.n_layer);
        }
        d->taps[i] = (int32_t)v[i];
    }
    d->n_taps = (int32_t)n;
    free(v);
    return 0;
}

static int read_keys(model *m, ds4_dspark *d, cf_err *err) {
    const model_hparams *hp = &m->hp;
    if (hp->ds4_n_mtp < 1) return cf_fail(err, "DSpark tensors without an MTP block (deepseek4.nextn_predict_layers)");
    if (model_key_i32(m->gguf, "deepseek4", "dspark.block_size", &d->block, true, err)) return -1;
    if (d->block < 2 || d->block > DS4_DSPARK_MAX_BLOCK)
        return cf_fail(err, "deepseek4.dspark.block_size = %d (must be 2..%d)", d->block, DS4_DSPARK_MAX_BLOCK);
    d->noise = -1;
    if (model_key_i32(m->gguf, "deepseek4", "dspark.noise_token_id", &d->noise, false, err)) return -1;
    if (d->noise < 0) {
        int64_t v = -1;
        int rc = gguf_get_int(m->gguf, "tokenizer.ggml.mask_token_id", &v, err);
        if (rc < 0) return -1;
        if (rc == 1)
            return cf_fail(err, "missing key deepseek4.dspark.noise_token_id (or tokenizer.ggml.mask_token_id)");
        d->noise = v >= 0 && v < hp->n_vocab ? (int32_t)v : -2;
    }
    if (d->noise < 0 || d->noise >= hp->n_vocab) return cf_fail(err, "DSpark noise token is outside the vocabulary");
    return read_taps(m, d, err);
}

int ds4_dspark_load(model *m, ds4_dspark *d, cf_err *err) {
    const model_hparams *hp = &m->hp;
    int present = 0;
    size_t nt = sizeof dspark_tensors / sizeof dspark_tensors[0];
    for (size_t i = 0; i < nt; i++) present += gguf_find_tensor(m->gguf, dspark_tensors[i]) != NULL;
    memset(d, 0, sizeof *d);
    if (present == 0) return 0;
    if (present != (int)nt)
        for (size_t i = 0; i < nt; i++)
            if (!gguf_find_tensor(m->gguf, dspark_tensors[i]))
                return cf_fail(err, "missing tensor %s (the other DSpark tensors are present)", dspark_tensors[i]);
    if (read_keys(m, d, err)) return -1;
    const gguf_tensor *w1 = gguf_find_tensor(m->gguf, "dspark.markov_w1.weight");
    d->rank = (int32_t)w1->ne[0];
    if (d->rank <= 0 || d->rank > 65536) return cf_fail(err, "dspark.markov_w1.weight: rank %d", d->rank);
    int64_t E = hp->n_embd, V = hp->n_vocab, R = d->rank;
    int32_t block = d->block;
    d->block = 0; /* until everything loaded */
    if (model_load_matrix(m, "dspark.fc.weight", (int64_t)d->n_taps * E, E, &d->fc, err) ||
        ds4_load_f32(m, "dspark.enc.output_norm.weight", E, 0, true, &d->enc_norm, err) ||
        ds4_load_f32(m, "dspark.markov_w1.weight", R, V, true, &d->w1, err) ||
        model_load_matrix(m, "dspark.markov_w2.weight", R, V, &d->w2, err) ||
        ds4_load_f32(m, "dspark.conf_proj.weight", E + R, 1, true, &d->conf_w, err) ||
        ds4_load_f32(m, "dspark.conf_proj.bias", 1, 0, true, &d->conf_b, err))
        return -1;
    d->block = block;
    return 0;
}

void ds4_dspark_release(ds4_dspark *d) {
    kern_weight_release(&d->fc);
    free(d->enc_norm);
    free(d->w1);
    kern_weight_release(&d->w2);
    free(d->conf_w);
    free(d->conf_b);
    memset(d, 0, sizeof *d);
}

void ds4_dspark_info(const model *m, model_dspark_info *out) {
    const ds4_dspark *d = &ds4_w(m)->dspark;
    *out = (model_dspark_info){0};
    if (d->block <= 0) return;
    *out = (model_dspark_info){
        .block_size = d->block, .noise_token = d->noise, .rank = d->rank, .n_stages = m->hp.ds4_n_mtp};
}

void ds4_dspark_head(void *fc, const float *state, int32_t prev, float *logits, float *conf) {
    ds4_fwd *c = fc;
    const model *m = c->m;
    const ds4_dspark *d = &ds4_w(m)->dspark;
    int64_t E = m->hp.n_embd, R = d->rank;
    int n = m->hp.ds4_hc;
    const float *e = d->w1 + (int64_t)prev * R;
    kern_matmul(c->kc, &d->w2, e, 1, c->dsp_bias); /* on the context's threads */
    for (int32_t v = 0; v < m->hp.n_vocab; v++) logits[v] += c->dsp_bias[v];
    float s = d->conf_b[0] + kern_dot_f32(d->conf_w + E, e, R), x = 0;
    for (int i = 0; i < n; i++) x += kern_dot_f32(d->conf_w, state + (int64_t)i * E, E);
    s += x / (float)n;
    *conf = 1.0f / (1.0f + expf(-s));
}

void ds4_dspark_tap(struct ds4_fwd *c, const fwd_batch *b, int il) {
    const ds4_dspark *d = &ds4_w(c->m)->dspark;
    if (d->block <= 0 || b->n_hidden <= 0) return;
    int n = c->m->hp.ds4_hc;
    int64_t E = c->m->hp.n_embd, W = n * E, TW = (int64_t)d->n_taps * E;
    for (int32_t j = 0; j < d->n_taps; j++) {
        if (d->taps[j] != il) continue;
        for (int32_t i = 0; i < b->n_hidden; i++) {
            const float *x = c->xs + (int64_t)b->hidden_rows[i] * W;
            float *t = c->tap + i * TW + j * E;
            for (int64_t k = 0; k < E; k++) {
                float s = 0;
                for (int h = 0; h < n; h++) s += x[h * E + k];
                t[k] = s / (float)n;
            }
        }
    }
}

void ds4_dspark_export(struct ds4_fwd *c, const fwd_batch *b) {
    const ds4_dspark *d = &ds4_w(c->m)->dspark;
    if (d->block <= 0 || b->n_hidden <= 0) return;
    const model_hparams *hp = &c->m->hp;
    int64_t E = hp->n_embd, W = (int64_t)hp->ds4_hc * E;
    kern_matmul(c->kc, &d->fc, c->tap, b->n_hidden, c->out);
    for (int i = 0; i < hp->ds4_hc; i++)
        rows_rmsnorm(c->pool, hp->rms_eps, c->out, E, d->enc_norm, b->hidden + i * E, W, b->n_hidden, E);
}
