/* deepseek4_attn.c - one deepseek4 attention layer over a ragged batch
 * (reference: DeepSeek's inference/model.py Attention, Compressor, Indexer):
 *   queries  q = wq_b(rmsnorm(wq_a x)), per-head RMS-normalized (no weight),
 *            rope on the last R dims of each head;
 *   latent   kv = rmsnorm(wkv x), rope on its last R dims: key = value;
 *   window   the last W latents of the sequence (this token included);
 *   ratio r  the compressor pools groups of r tokens (r = 4: overlapping,
 *            the previous group's first half-width with the current group's
 *            second) with a softmax over the learned gate + positional bias,
 *            per dim; then RMS norm and rope at position (row * r). Ratio 4
 *            layers attend to the indexer's top-k rows: scores sum over
 *            indexer heads of w_h * relu(q_h . k_row) (ties: lower row;
 *            deepseek4_index.c, GEMMs over the batch);
 *            ratio 128 layers to every finished row; ratio 0: window only.
 *   softmax  over the chosen keys with the head's sink in the denominator;
 *            the output's rope dims are rotated back (inverse rope at the
 *            query's position), then the grouped low-rank projection
 *            (group g: wo_a[g] of its heads' outputs) and wo_b.
 * Rope: window-only layers use rope.freq_base without scaling; compressed
 * layers (and their compressors and indexer) compress_rope_freq_base with
 * the file's YaRN scaling. */
#include <math.h>
#include <string.h>

#include "model/arch/deepseek4_fwd.h"
#include "model/arch/deepseek4_math.h"
#include "model/rowops.h"

/* Writes the token's latent and compressor inputs into its slot. */
static void store_token(ds4_fwd *c, const fwd_batch *b, int il, int32_t t) {
    const model_hparams *hp = &c->m->hp;
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    const ds4_kv_row *row = &c->row[il];
    int64_t D = hp->head_dim;
    int32_t pos = b->pos[t], r = L->ratio;
    float *slot = ds4_state_row(c, b, b->seq[t], pos, il);
    memcpy(slot + row->raw, c->kv + t * D, (size_t)D * sizeof(float));
    if (!r) return;
    int64_t cw = (r == 4 ? 2 : 1) * D;
    float *st = slot + row->cstate;
    memcpy(st, c->ck + t * cw, (size_t)cw * sizeof(float));
    const float *ape = L->comp.ape + (int64_t)(pos % r) * cw;
    for (int64_t k = 0; k < cw; k++) st[cw + k] = c->cg[t * cw + k] + ape[k];
}

static void store_indexer_token(ds4_fwd *c, const fwd_batch *b, int il, int32_t t) {
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    int64_t cw = 2 * (int64_t)c->m->hp.ds4_index_dim;
    int32_t pos = b->pos[t];
    float *st = ds4_state_row(c, b, b->seq[t], pos, il) + c->row[il].istate;
    memcpy(st, c->ck + t * cw, (size_t)cw * sizeof(float));
    const float *ape = L->icomp.ape + (int64_t)(pos % 4) * cw;
    for (int64_t k = 0; k < cw; k++) st[cw + k] = c->cg[t * cw + k] + ape[k];
}

/* Compressed row `g` of width w (ratio r) from the states of its tokens
 * (state at offset `state` of each state row: kv | score, each c*w wide),
 * normed and rotated, into out. Tokens below `floor` (bounded replay: not
 * this sequence's rows) take no part. */
static void compress_row(ds4_fwd *c, const fwd_batch *b, int il, int32_t seq, int32_t g, int32_t r, int64_t w,
                         int32_t state, const float *norm, float *out) {
    const model_hparams *hp = &c->m->hp;
    const float *kv[2 * 128], *sc[2 * 128];
    int32_t floor = il < hp->n_layer ? b->seqs[seq].replay_from : 0;
    int n = 0;
    if (r == 4) {
        for (int32_t j = 0; g > 0 && j < 4; j++) {
            if ((g - 1) * 4 + j < floor) continue;
            const float *st = ds4_state_row(c, b, seq, (g - 1) * 4 + j, il) + state;
            kv[n] = st, sc[n++] = st + 2 * w;
        }
        for (int32_t j = 0; j < 4; j++) {
            if (g * 4 + j < floor) continue;
            const float *st = ds4_state_row(c, b, seq, g * 4 + j, il) + state;
            kv[n] = st + w, sc[n++] = st + 3 * w;
        }
    } else {
        for (int32_t j = 0; j < r; j++) {
            if (g * r + j < floor) continue;
            const float *st = ds4_state_row(c, b, seq, g * r + j, il) + state;
            kv[n] = st, sc[n++] = st + w;
        }
    }
    float *pooled = c->crow_tmp, *cs = c->crow_tmp + w;
    ds4_softmax_pool(kv, sc, n, (int)w, pooled);
    rows_rmsnorm(c->pool, hp->rms_eps, pooled, w, norm, out, w, 1, w);
    model_hparams cmp = *hp;
    cmp.rope_base = hp->ds4_compress_rope_base;
    float af = cmp.rope_scaling == ROPE_SCALING_YARN ? 1.0f / (1.0f + 0.1f * logf(hp->rope_factor)) : 1.0f;
    int32_t p = g * r;
    rope_fill_table(&cmp, NULL, af, &p, 1, cs);
    ds4_rope_tail(out, (int)w, hp->rope_dim, cs, 0);
}

/* Rows finished by this batch's tokens: the token at the last position of
 * a group stores it (all states of the batch are stored first). Rows of
 * groups ending below keep_below (bounded replay) are cached: not rewritten. */
static void finish_rows(ds4_fwd *c, const fwd_batch *b, int il) {
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    const ds4_kv_row *row = &c->row[il];
    int32_t r = L->ratio;
    int64_t D = c->m->hp.head_dim;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        int32_t pos = b->pos[t], seq = b->seq[t];
        if ((pos + 1) % r || (il < c->m->hp.n_layer && pos < b->seqs[seq].keep_below)) continue;
        int32_t g = (pos + 1) / r - 1;
        float *rows = ds4_group_rows(c, b, seq, g, il);
        compress_row(c, b, il, seq, g, r, D, row->cstate, L->comp.norm, rows);
        if (r == 4) compress_row(c, b, il, seq, g, 4, c->m->hp.ds4_index_dim, row->istate, L->icomp.norm, rows + D);
    }
}

/* The compressed rows query t attends to (ratio 4: the indexer's top-k,
 * selected for the whole batch by ds4_index_select). */
static int pick_rows(ds4_fwd *c, const fwd_batch *b, int il, int32_t t, const float **keys) {
    const model_hparams *hp = &c->m->hp;
    int32_t r = hp->ds4_ratio[il], pos = b->pos[t], seq = b->seq[t], vis = (pos + 1) / r;
    if (r == 128) {
        for (int32_t j = 0; j < vis; j++) keys[j] = ds4_group_rows(c, b, seq, j, il);
        return vis;
    }
    const int32_t *sel = c->idx_sel + (int64_t)t * c->idx_k;
    int k = c->idx_nsel[t];
    for (int j = 0; j < k; j++) keys[j] = ds4_group_rows(c, b, seq, sel[j], il);
    return k;
}

static void attend_task(void *ctx, int ith, int nth) {
    ds4_fwd *c = ctx;
    const fwd_batch *b = c->b;
    int il = c->il;
    const model_hparams *hp = &c->m->hp;
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    ds4_thr *th = &c->thr[ith];
    int64_t H = hp->n_head, D = hp->head_dim;
    const float *cs_all = L->ratio ? c->cs_cmp : c->cs_win;
    float scale = 1.0f / sqrtf((float)D);
    long long t0, t1;
    pool_split(b->n_tokens, ith, nth, &t0, &t1);
    for (int32_t t = (int32_t)t0; t < (int32_t)t1; t++) {
        int32_t pos = b->pos[t], seq = b->seq[t], n = 0;
        int32_t first = pos - hp->ds4_window + 1 > 0 ? pos - hp->ds4_window + 1 : 0;
        if (il < hp->n_layer && first < b->seqs[seq].replay_from) first = b->seqs[seq].replay_from;
        for (int32_t p = first; p <= pos; p++) th->keys[n++] = ds4_state_row(c, b, seq, p, il) + c->row[il].raw;
        if (L->ratio) n += pick_rows(c, b, il, t, th->keys + n);
        ds4_attend_sink_heads(c->q + t * H * D, (int)H, th->keys, n, (int)D, scale, L->sinks, th->s,
                              c->att + t * H * D);
        for (int64_t h = 0; h < H; h++)
            ds4_rope_tail(c->att + (t * H + h) * D, (int)D, hp->rope_dim, cs_all + (int64_t)t * hp->rope_dim, 1);
    }
}

static void project_inputs(ds4_fwd *c, const fwd_batch *b, int il) {
    const model_hparams *hp = &c->m->hp;
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    int32_t T = b->n_tokens;
    int64_t H = hp->n_head, D = hp->head_dim, Q = hp->q_lora_rank, R = hp->rope_dim;
    const float *cs = L->ratio ? c->cs_cmp : c->cs_win;
    kern_matmul(c->kc, &L->wq_a, c->xa, T, c->qr);
    rows_rmsnorm(c->pool, hp->rms_eps, c->qr, Q, L->q_a_norm, c->qr, Q, T, Q);
    kern_matmul(c->kc, &L->wq_b, c->qr, T, c->q);
    rows_rmsnorm(c->pool, hp->rms_eps, c->q, D, NULL, c->q, D, T * (int32_t)H, D);
    rows_rope(cs, (int)R, ROPE_NORM, c->q, T, (int)H, H * D, D, D - R);
    kern_matmul(c->kc, &L->wkv, c->xa, T, c->kv);
    rows_rmsnorm(c->pool, hp->rms_eps, c->kv, D, L->kv_norm, c->kv, D, T, D);
    rows_rope(cs, (int)R, ROPE_NORM, c->kv, T, 1, D, D, D - R);
}

static void project_indexer(ds4_fwd *c, const fwd_batch *b, int il) {
    const model_hparams *hp = &c->m->hp;
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    int32_t T = b->n_tokens;
    int64_t I = hp->ds4_index_dim, IH = hp->ds4_index_heads, R = hp->rope_dim;
    kern_matmul(c->kc, &L->icomp.wkv, c->xa, T, c->ck);
    kern_matmul(c->kc, &L->icomp.wgate, c->xa, T, c->cg);
    for (int32_t t = 0; t < T; t++) store_indexer_token(c, b, il, t);
    kern_matmul(c->kc, &L->idx_q_b, c->qr, T, c->iq);
    rows_rope(c->cs_cmp, (int)R, ROPE_NORM, c->iq, T, (int)IH, IH * I, I, I - R);
    kern_matmul(c->kc, &L->idx_proj, c->xa, T, c->iw);
    float s = 1.0f / sqrtf((float)(I * IH));
    for (int64_t i = 0; i < T * IH; i++) c->iw[i] *= s;
}

/* Grouped low-rank output: oa[g] = wo_a[g] . (heads of group g), out = wo_b oa. */
static void project_output(ds4_fwd *c, const fwd_batch *b, int il) {
    const model_hparams *hp = &c->m->hp;
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    int32_t T = b->n_tokens;
    int64_t G = hp->ds4_o_groups, OR = hp->ds4_o_lora, HD = (int64_t)hp->n_head * hp->head_dim, GW = HD / G;
    for (int64_t g = 0; g < G; g++) {
        for (int32_t t = 0; t < T; t++) memcpy(c->grp + t * GW, c->att + t * HD + g * GW, (size_t)GW * sizeof(float));
        kern_matmul(c->kc, &L->wo_a[g], c->grp, T, c->ye);
        for (int32_t t = 0; t < T; t++) memcpy(c->oa + t * G * OR + g * OR, c->ye + t * OR, (size_t)OR * sizeof(float));
    }
    kern_matmul(c->kc, &L->wo_b, c->oa, T, c->out);
}

int ds4_attention(ds4_fwd *c, const fwd_batch *b, int il, cf_err *err) {
    const ds4_layer *L = &ds4_w(c->m)->layer[il];
    int32_t T = b->n_tokens;
    project_inputs(c, b, il);
    if (L->ratio) {
        kern_matmul(c->kc, &L->comp.wkv, c->xa, T, c->ck);
        kern_matmul(c->kc, &L->comp.wgate, c->xa, T, c->cg);
    }
    for (int32_t t = 0; t < T; t++) store_token(c, b, il, t);
    if (L->ratio == 4) project_indexer(c, b, il);
    if (L->ratio) finish_rows(c, b, il);
    if (L->ratio == 4 && ds4_index_select(c, b, il, err)) return -1;
    c->b = b;
    c->il = il;
    if (c->pool) pool_run(c->pool, attend_task, c);
    else attend_task(c, 0, 1);
    project_output(c, b, il);
    return 0;
}
