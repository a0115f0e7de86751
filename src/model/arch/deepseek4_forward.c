/* deepseek4_forward.c - the deepseek4 forward pass over a ragged batch:
 * the context (scratch sized at creation, deepseek4_fwd.h), the block loop
 * with manifold-constrained hyper-connections (n residual streams; at each
 * attention and FFN site a pre-mix into one row, the sublayer, and a post-mix
 * with a Sinkhorn-normalized stream matrix) and the head, which collapses the
 * streams with its own gates before output_norm and the LM head. Each
 * token's result depends only on its own rows and its sequence's cache
 * (batch invariance). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch/deepseek4_fwd.h"
#include "model/arch/deepseek4_math.h"
#include "model/rowops.h"

static float *fbuf(int64_t n) { return malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }

void ds4_fwd_free(ds4_fwd *c) {
    if (!c) return;
    float *fs[] = {c->xs, c->xs_res, c->flat,   c->pre,      c->post,    c->comb,  c->y,       c->xa, c->out,
                   c->qr, c->q,      c->kv,     c->ck,       c->cg,      c->att,   c->grp,     c->oa, c->iq,
                   c->iw, c->cs_win, c->cs_cmp, c->crow_tmp, c->router,  c->rbias, c->rw,      c->xe, c->ge,
                   c->ue, c->ye,     c->sh_g,   c->sh_u,     c->mtp_cat, c->tap,   c->dsp_bias};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) free(fs[i]);
    free(c->rsel);
    free(c->exp_n);
    free(c->exp_tok);
    for (int i = 0; c->thr && i < c->n_thr; i++) {
        free(c->thr[i].keys);
        free(c->thr[i].s);
    }
    free(c->thr);
    ds4_index_free(c);
    ds4_moe_load_free(c);
    free(c->layer_off);
    free(c->ring_off);
    free(c->row);
    kern_ctx_destroy(c->kc);
    free(c);
}

/* Offsets of each main layer's packed rows in a block (groups: ratio 4,
 * 128) and of its state rows in a ring block (groups: ratio 0, 4, 128), in
 * the order of the kv_layout hook (deepseek4.c). */
static int layout_offsets(ds4_fwd *c) {
    const model_hparams *hp = &c->m->hp;
    int32_t blocks = hp->n_layer + hp->ds4_n_mtp;
    c->layer_off = calloc((size_t)blocks, sizeof *c->layer_off);
    c->ring_off = calloc((size_t)blocks, sizeof *c->ring_off);
    c->row = malloc((size_t)blocks * sizeof *c->row);
    if (!c->layer_off || !c->ring_off || !c->row) return -1;
    for (int l = 0; l < blocks; l++) c->row[l] = ds4_kv_row_of(hp, hp->ds4_ratio[l]);
    static const int32_t order[3] = {0, 4, 128};
    int64_t at = 0, ring = 0;
    for (int g = 0; g < 3; g++)
        for (int l = 0; l < hp->n_layer; l++) {
            if (hp->ds4_ratio[l] != order[g]) continue;
            if (order[g]) {
                c->layer_off[l] = at;
                at += (int64_t)c->row[l].rows * (c->bt / order[g]);
            }
            c->ring_off[l] = ring;
            ring += (int64_t)c->row[l].state * c->bt;
        }
    c->ring_block_floats = ring;
    return 0;
}

static int alloc_scratch(ds4_fwd *c) {
    const model_hparams *hp = &c->m->hp;
    int64_t T = c->max_tokens, E = hp->n_embd, n = hp->ds4_hc, H = hp->n_head, D = hp->head_dim;
    int64_t I = hp->ds4_index_dim, IH = hp->ds4_index_heads, X = hp->n_expert, K = hp->n_expert_used;
    int64_t FE = hp->n_ff_exp, FS = FE * (hp->n_expert_shared > 0 ? hp->n_expert_shared : 1);
    int64_t OR = (int64_t)hp->ds4_o_groups * hp->ds4_o_lora, M = (2 + n) * n;
    c->xs = fbuf(T * n * E), c->xs_res = fbuf(T * n * E), c->flat = fbuf(T * n * E);
    c->pre = fbuf(T * M), c->post = fbuf(T * n), c->comb = fbuf(T * n * n);
    c->y = fbuf(T * E), c->xa = fbuf(T * E), c->out = fbuf(T * E);
    c->qr = fbuf(T * hp->q_lora_rank), c->q = fbuf(T * H * D), c->kv = fbuf(T * D);
    c->ck = fbuf(T * 2 * (D > I ? D : I)), c->cg = fbuf(T * 2 * (D > I ? D : I));
    c->att = fbuf(T * H * D), c->grp = fbuf(T * H * D), c->oa = fbuf(T * OR);
    c->iq = fbuf(T * IH * I), c->iw = fbuf(T * IH);
    c->cs_win = fbuf(T * hp->rope_dim), c->cs_cmp = fbuf(T * hp->rope_dim);
    c->router = fbuf(T * X), c->rbias = fbuf(X), c->rw = fbuf(T * K);
    c->xe = fbuf(T * E), c->ge = fbuf(T * FE), c->ue = fbuf(T * FE), c->ye = fbuf(T * (E > OR ? E : OR));
    c->crow_tmp = fbuf((D > I ? D : I) + hp->rope_dim);
    c->sh_g = fbuf(T * FS), c->sh_u = fbuf(T * FS), c->mtp_cat = fbuf(hp->ds4_n_mtp ? T * 2 * E : 1);
    const ds4_dspark *ds = &ds4_w(c->m)->dspark;
    c->tap = fbuf(ds->block > 0 ? T * ds->n_taps * E : 1);
    c->dsp_bias = fbuf(ds->block > 0 ? hp->n_vocab : 1);
    c->rsel = malloc((size_t)(T * K) * sizeof *c->rsel);
    c->exp_n = malloc((size_t)X * sizeof *c->exp_n);
    c->exp_tok = malloc((size_t)(T * K) * sizeof *c->exp_tok);
    if (!c->xs || !c->xs_res || !c->flat || !c->pre || !c->post || !c->comb || !c->y || !c->xa || !c->out || !c->qr ||
        !c->q || !c->kv || !c->ck || !c->cg || !c->att || !c->grp || !c->oa || !c->iq || !c->iw || !c->cs_win ||
        !c->cs_cmp || !c->crow_tmp || !c->router || !c->rbias || !c->rw || !c->xe || !c->ge || !c->ue || !c->ye ||
        !c->sh_g || !c->sh_u || !c->mtp_cat || !c->tap || !c->dsp_bias || !c->rsel || !c->exp_n || !c->exp_tok)
        return -1;
    c->n_thr = pool_size(c->pool) > 0 ? pool_size(c->pool) : 1;
    c->thr = calloc((size_t)c->n_thr, sizeof *c->thr);
    if (!c->thr) return -1;
    /* compressed keys of a query: ratio 4, the indexer's top-k of at most max_ctx / 4 rows;
     * ratio 128, every finished row */
    int64_t rows4 = c->max_ctx / 4 + 1, rows128 = c->max_ctx / 128 + 1;
    int64_t topk = hp->ds4_index_topk < rows4 ? hp->ds4_index_topk : rows4;
    c->max_keys = hp->ds4_window + (int32_t)(topk > rows128 ? topk : rows128);
    for (int i = 0; i < c->n_thr; i++) {
        ds4_thr *t = &c->thr[i];
        t->keys = malloc((size_t)c->max_keys * sizeof *t->keys);
        t->s = fbuf((int64_t)hp->n_head * (c->max_keys + 2));
        if (!t->keys || !t->s) return -1;
    }
    return 0;
}

ds4_fwd *ds4_fwd_create(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx, int32_t block_tokens,
                        cf_err *err) {
    const model_hparams *hp = &m->hp;
    ds4_fwd *c = calloc(1, sizeof *c);
    if (!c) {
        cf_fail(err, "out of memory");
        return NULL;
    }
    c->m = m, c->pool = pool, c->max_tokens = max_tokens, c->max_ctx = max_ctx, c->bt = block_tokens;
    for (int32_t l = 0; l < hp->n_layer; l++)
        if (hp->ds4_ratio[l] && block_tokens % hp->ds4_ratio[l]) {
            cf_fail(err, "deepseek4: KV blocks of %d tokens must be a multiple of the compress ratio %d", block_tokens,
                    hp->ds4_ratio[l]);
            free(c);
            return NULL;
        }
    int64_t widest = (int64_t)hp->ds4_hc * hp->n_embd;
    int64_t ins[] = {(int64_t)hp->n_head * hp->head_dim,
                     hp->q_lora_rank,
                     (int64_t)hp->ds4_o_groups * hp->ds4_o_lora,
                     (int64_t)hp->n_ff_exp * (hp->n_expert_shared > 1 ? hp->n_expert_shared : 1),
                     2 * hp->n_embd,
                     (int64_t)ds4_w(m)->dspark.n_taps * hp->n_embd,
                     ds4_w(m)->dspark.rank};
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
        if (ins[i] > widest) widest = ins[i];
    c->kc = kern_ctx_create(pool, max_tokens, widest);
    if (!c->kc || layout_offsets(c) || alloc_scratch(c) || ds4_index_init(c) || ds4_moe_load_init(c)) {
        ds4_fwd_free(c);
        cf_fail(err, "out of memory creating the deepseek4 forward context");
        return NULL;
    }
    return c;
}

/* hc pre-mix of every token: c->y = sum_i pre_i xs_i, and post / comb for
 * the post-mix (mixes from the RMS-normalized flat streams). */
static void hc_pre(ds4_fwd *c, int32_t T, const float *fn, const float *scale, const float *base) {
    const model_hparams *hp = &c->m->hp;
    int n = hp->ds4_hc, M = (2 + n) * n;
    int64_t E = hp->n_embd, W = n * E;
    rows_rmsnorm(c->pool, hp->rms_eps, c->xs, W, NULL, c->flat, W, T, W);
    for (int32_t t = 0; t < T; t++) {
        float mixes[(2 + 16) * 16];
        for (int j = 0; j < M; j++) mixes[j] = kern_dot_f32(c->flat + t * W, fn + (int64_t)j * W, W);
        ds4_hc_split(mixes, scale, base, n, hp->ds4_sinkhorn, hp->ds4_hc_eps, c->pre + t * M, c->post + t * n,
                     c->comb + t * n * n);
        float *y = c->y + t * E;
        memset(y, 0, (size_t)E * sizeof *y);
        for (int i = 0; i < n; i++) kern_axpy_f32(c->pre[t * M + i], c->xs + t * W + i * E, y, E);
    }
}

/* xs[dst] = post[dst] * out + sum_src comb[src][dst] * xs_old[src]. */
static void hc_post(ds4_fwd *c, int32_t T) {
    const model_hparams *hp = &c->m->hp;
    int n = hp->ds4_hc;
    int64_t E = hp->n_embd, W = n * E;
    memcpy(c->xs_res, c->xs, (size_t)(T * W) * sizeof *c->xs);
    for (int32_t t = 0; t < T; t++)
        for (int d = 0; d < n; d++) {
            float *dst = c->xs + t * W + d * E;
            const float *o = c->out + t * E, *cm = c->comb + t * n * n;
            float p = c->post[t * n + d];
            for (int64_t k = 0; k < E; k++) dst[k] = p * o[k];
            for (int s = 0; s < n; s++) kern_axpy_f32(cm[s * n + d], c->xs_res + t * W + s * E, dst, E);
        }
}

/* The head's collapse of the out rows' streams into c->y rows 0..n_out. */
static void hc_head(ds4_fwd *c, const fwd_batch *b) {
    const model_hparams *hp = &c->m->hp;
    const ds4_weights *w = ds4_w(c->m);
    int n = hp->ds4_hc;
    int64_t E = hp->n_embd, W = n * E;
    for (int32_t i = 0; i < b->n_out; i++) {
        const float *x = c->xs + (int64_t)b->out_rows[i] * W;
        float ss = 0;
        for (int64_t k = 0; k < W; k++) ss += x[k] * x[k];
        float r = 1.0f / sqrtf(ss / (float)W + hp->rms_eps);
        float *y = c->y + i * E;
        memset(y, 0, (size_t)E * sizeof *y);
        for (int h = 0; h < n; h++) {
            float mix = kern_dot_f32(x, w->hc_head_fn + h * W, W) * r;
            float pre = 1.0f / (1.0f + expf(-(mix * w->hc_head_scale[0] + w->hc_head_base[h]))) + hp->ds4_hc_eps;
            kern_axpy_f32(pre, x + h * E, y, E);
        }
    }
}

/* The hidden-state export (fwd_batch.n_hidden): the asked rows' streams [hc][E]. */
static void export_streams(ds4_fwd *c, const fwd_batch *b) {
    int64_t W = (int64_t)c->m->hp.ds4_hc * c->m->hp.n_embd;
    for (int32_t i = 0; i < b->n_hidden; i++)
        memcpy(b->hidden + i * W, c->xs + (int64_t)b->hidden_rows[i] * W, (size_t)W * sizeof(float));
}

static void fill_rope_tables(ds4_fwd *c, const fwd_batch *b) {
    const model_hparams *hp = &c->m->hp;
    model_hparams win = *hp, cmp = *hp;
    win.rope_scaling = ROPE_SCALING_NONE;
    cmp.rope_base = hp->ds4_compress_rope_base;
    float af = 1.0f;
    if (cmp.rope_scaling == ROPE_SCALING_YARN) af = 1.0f / (1.0f + 0.1f * logf(hp->rope_factor));
    rope_fill_table(&win, NULL, 1.0f, b->pos, b->n_tokens, c->cs_win);
    rope_fill_table(&cmp, NULL, af, b->pos, b->n_tokens, c->cs_cmp);
}

/* One block (attention and FFN sites with their hyper-connections) on c->xs. */
static int run_block(ds4_fwd *c, const fwd_batch *b, int il, cf_err *err) {
    const model_hparams *hp = &c->m->hp;
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    int32_t T = b->n_tokens;
    int64_t E = hp->n_embd;
    hc_pre(c, T, L->hc_attn_fn, L->hc_attn_scale, L->hc_attn_base);
    rows_rmsnorm(c->pool, hp->rms_eps, c->y, E, L->attn_norm, c->xa, E, T, E);
    if (ds4_attention(c, b, il, err)) return -1;
    hc_post(c, T);
    hc_pre(c, T, L->hc_ffn_fn, L->hc_ffn_scale, L->hc_ffn_base);
    rows_rmsnorm(c->pool, hp->rms_eps, c->y, E, L->ffn_norm, c->xa, E, T, E);
    if (ds4_moe(c, b, il, err)) return -1;
    hc_post(c, T);
    return 0;
}

int ds4_forward(ds4_fwd *c, const fwd_batch *b, float *logits, cf_err *err) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    int32_t T = b->n_tokens;
    int n = hp->ds4_hc;
    int64_t E = hp->n_embd;
    if (T > c->max_tokens) return cf_fail(err, "batch of %d tokens exceeds the context's %d", T, c->max_tokens);
    model_embed(m, b->tokens, T, c->y);
    for (int32_t t = 0; t < T; t++)
        for (int i = 0; i < n; i++) memcpy(c->xs + (t * n + i) * E, c->y + t * E, (size_t)E * sizeof(float));
    fill_rope_tables(c, b);
    ds4_moe_step_begin(c);
    for (int il = 0; il < hp->n_layer; il++) {
        ds4_dspark_tap(c, b, il);
        if (run_block(c, b, il, err)) return -1;
    }
    ds4_dspark_tap(c, b, hp->n_layer);
    if (ds4_w(m)->dspark.block > 0) ds4_dspark_export(c, b); /* the DSpark stage's context */
    else export_streams(c, b);
    if (b->n_out == 0) return 0;
    hc_head(c, b);
    rows_rmsnorm(c->pool, hp->rms_eps, c->y, E, m->output_norm, c->xa, E, b->n_out, E);
    kern_matmul(c->kc, &m->output, c->xa, b->n_out, logits);
    return 0;
}

const float *ds4_fwd_streams(const ds4_fwd *c) { return c->xs; }

int ds4_mtp_forward(ds4_fwd *c, int mtp, const fwd_batch *b, const float *h, float *logits, cf_err *err) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    int32_t T = b->n_tokens, n = hp->ds4_hc, il = hp->n_layer + mtp;
    int64_t E = hp->n_embd, W = n * E;
    if (mtp < 0 || mtp >= hp->ds4_n_mtp) return cf_fail(err, "MTP block %d: the model has %d", mtp, hp->ds4_n_mtp);
    if (T > c->max_tokens) return cf_fail(err, "batch of %d tokens exceeds the context's %d", T, c->max_tokens);
    const ds4_layer *L = &ds4_w(m)->layer[il];
    model_embed(m, b->tokens, T, c->y);
    rows_rmsnorm(c->pool, hp->rms_eps, c->y, E, L->enorm, c->mtp_cat, 2 * E, T, E);
    for (int i = 0; i < n; i++) { /* stream i: eh_proj [enorm(e) | hnorm(h_i)] */
        rows_rmsnorm(c->pool, hp->rms_eps, h + i * E, W, L->hnorm, c->mtp_cat + E, 2 * E, T, E);
        kern_matmul(c->kc, &L->eh_proj, c->mtp_cat, T, c->out);
        for (int32_t t = 0; t < T; t++) memcpy(c->xs + t * W + i * E, c->out + t * E, (size_t)E * sizeof(float));
    }
    fill_rope_tables(c, b);
    if (run_block(c, b, il, err)) return -1;
    export_streams(c, b); /* the block's own streams: the next chained step's h */
    if (b->n_out == 0) return 0;
    hc_head(c, b);
    const float *norm = L->head_norm ? L->head_norm : m->output_norm;
    rows_rmsnorm(c->pool, hp->rms_eps, c->y, E, norm, c->xa, E, b->n_out, E);
    kern_matmul(c->kc, &m->output, c->xa, b->n_out, logits);
    return 0;
}
