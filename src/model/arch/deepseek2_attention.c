/* deepseek2_attention.c - MLA attention of a deepseek2 layer against the latent
 * cache (per token and layer: [c_kv (kv_lora_rank) | k_pe (rope_dim)], see
 * model.h). Two forms, equal up to rounding:
 *
 * expanded (a sequence with >= expand_min tokens in the batch, i.e. a long
 *   prompt chunk, and a context below MLA_EXPAND_MAX_CTX; see model.h for who
 *   enables it): the sequence's cached latents are
 *   multiplied by attn_kv_b once, giving per head k_nope and v for every
 *   position; then s_j = scale·(q_nope·k_nope_j + q_pe·k_pe_j),
 *   o = softmax(s)·v. Work items: (token, head).
 * absorbed (decode and short chunks; never materialises K/V): per head
 *   q_lat = W_K^T q_nope (W_K = the head's k_nope rows of attn_kv_b),
 *   s_j = scale·(q_lat·c_kv_j + q_pe·k_pe_j), o_lat = softmax(s)·c_kv,
 *   o = W_V o_lat (W_V = the head's v rows). Three passes: the projections
 *   run one item per head over all tokens (each weight row read once per
 *   step), the attention one item per (token, head range), reading each
 *   cache row once per item for all its heads.
 *
 * Every head's result is computed the same way whatever the item split and
 * the rest of the batch (batch invariance). Softmax: max, exp, sum in f32. */
#include <math.h>
#include <string.h>

#include "model/arch/deepseek2_fwd.h"
#include "tensor/vecmath.h"

static inline const float *cache_row(const ds2_fwd *c, const fwd_seq *s, int il, int32_t j) {
    int64_t row = c->m->hp.kv_lora_rank + c->m->hp.rope_dim, bt = c->bt;
    return s->blocks[j / bt] + ((int64_t)(il - c->kv_shift) * bt + j % bt) * row;
}

static void softmax(float *s, int32_t n) {
    float mx = s[0];
    for (int32_t j = 1; j < n; j++)
        if (s[j] > mx) mx = s[j];
    float sum = kern_exp_sub_sum(s, n, mx);
    float inv = 1.0f / sum;
    for (int32_t j = 0; j < n; j++) s[j] *= inv;
}

/* ---- absorbed ---- */

typedef struct absorbed_job {
    ds2_fwd *c;
    const fwd_batch *b;
    int il;
    int32_t n_tok, hg; /* tokens listed in c->grp_toks; heads per attention item */
} absorbed_job;

/* q_lat[t][h] = W_K[h]^T q_nope[t][h] for every listed token; one item per
 * head, so each weight row is read once per step and reused for all tokens. */
static void qlat_task(void *ctx, int ith, int nth) {
    absorbed_job *j = ctx;
    ds2_fwd *c = j->c;
    const model_hparams *hp = &c->m->hp;
    const float *kvb = ds2_layers(c->m)[j->il].kv_b_f32;
    int64_t kvl = hp->kv_lora_rank, nope = hp->qk_nope_dim, qk = hp->head_dim, H = hp->n_head;
    int64_t hrows = nope + hp->v_head_dim;
    for (int64_t h = ith; h < H; h += nth) {
        for (int32_t i = 0; i < j->n_tok; i++)
            memset(c->lat + ((int64_t)c->grp_toks[i] * H + h) * kvl, 0, (size_t)kvl * sizeof(float));
        for (int64_t d = 0; d < nope; d++) {
            const float *row = kvb + (h * hrows + d) * kvl;
            for (int32_t i = 0; i < j->n_tok; i++) {
                int64_t t = c->grp_toks[i];
                kern_axpy_f32(c->q[(t * H + h) * qk + d], row, c->lat + (t * H + h) * kvl, kvl);
            }
        }
    }
}

/* out[t][h] = W_V[h] o_lat[t][h]; one item per head, as qlat_task. */
static void vout_task(void *ctx, int ith, int nth) {
    absorbed_job *j = ctx;
    ds2_fwd *c = j->c;
    const model_hparams *hp = &c->m->hp;
    const float *kvb = ds2_layers(c->m)[j->il].kv_b_f32;
    int64_t kvl = hp->kv_lora_rank, nope = hp->qk_nope_dim, vd = hp->v_head_dim, H = hp->n_head;
    for (int64_t h = ith; h < H; h += nth)
        for (int64_t e = 0; e < vd; e++) {
            const float *row = kvb + (h * (nope + vd) + nope + e) * kvl;
            for (int32_t i = 0; i < j->n_tok; i++) {
                int64_t t = c->grp_toks[i];
                c->att[(t * H + h) * vd + e] = kern_dot_f32(row, c->lat + (t * H + h) * kvl, kvl);
            }
        }
}

/* Scores against the latent cache and o_lat (over q_lat in c->lat) for one
 * token and heads [h0, h1). */
static void absorbed_item(ds2_fwd *c, const fwd_batch *b, int il, int32_t t, int h0, int h1, float *sc) {
    const model_hparams *hp = &c->m->hp;
    int64_t kvl = hp->kv_lora_rank, nope = hp->qk_nope_dim, qk = hp->head_dim, H = hp->n_head, rope = hp->rope_dim;
    const fwd_seq *s = &b->seqs[b->seq[t]];
    int32_t n = b->pos[t] + 1;
    const float *qt = c->q + (int64_t)t * H * qk;
    float *lat = c->lat + (int64_t)t * H * kvl;
    for (int32_t j = 0; j < n; j++) {
        const float *r = cache_row(c, s, il, j);
        for (int h = h0; h < h1; h++)
            sc[(int64_t)(h - h0) * n + j] =
                (kern_dot_f32(lat + h * kvl, r, kvl) + kern_dot_f32(qt + h * qk + nope, r + kvl, rope)) * c->scale;
    }
    for (int h = h0; h < h1; h++) {
        softmax(sc + (int64_t)(h - h0) * n, n);
        memset(lat + h * kvl, 0, (size_t)kvl * sizeof(float));
    }
    for (int32_t j = 0; j < n; j++) {
        const float *r = cache_row(c, s, il, j);
        for (int h = h0; h < h1; h++) kern_axpy_f32(sc[(int64_t)(h - h0) * n + j], r, lat + h * kvl, kvl);
    }
}

static void absorbed_task(void *ctx, int ith, int nth) {
    absorbed_job *j = ctx;
    ds2_fwd *c = j->c;
    int H = c->m->hp.n_head, n_hg = (H + j->hg - 1) / j->hg;
    float *sc = c->scores + (int64_t)ith * c->scores_per_thread;
    int64_t items = (int64_t)j->n_tok * n_hg;
    for (int64_t it = ith; it < items; it += nth) {
        int32_t t = c->grp_toks[it / n_hg];
        int h0 = (int)(it % n_hg) * j->hg, h1 = h0 + j->hg < H ? h0 + j->hg : H;
        absorbed_item(c, j->b, j->il, t, h0, h1, sc);
    }
}

/* ---- expanded ---- */

typedef struct expanded_job {
    ds2_fwd *c;
    const fwd_batch *b;
    int il;
    int32_t n_tok; /* tokens of one sequence listed in c->grp_toks */
} expanded_job;

static void expanded_task(void *ctx, int ith, int nth) {
    expanded_job *j = ctx;
    ds2_fwd *c = j->c;
    const model_hparams *hp = &c->m->hp;
    int64_t kvl = hp->kv_lora_rank, nope = hp->qk_nope_dim, vd = hp->v_head_dim, qk = hp->head_dim;
    int64_t H = hp->n_head, rope = hp->rope_dim, hrows = nope + vd;
    float *sc = c->scores + (int64_t)ith * c->scores_per_thread;
    int64_t items = (int64_t)j->n_tok * H;
    for (int64_t it = ith; it < items; it += nth) {
        int32_t t = c->grp_toks[it / H];
        int64_t h = it % H;
        const fwd_seq *s = &j->b->seqs[j->b->seq[t]];
        int32_t n = j->b->pos[t] + 1;
        const float *qn = c->q + (int64_t)t * H * qk + h * qk;
        for (int32_t k = 0; k < n; k++) {
            const float *kv = c->ctx_kv + (int64_t)k * H * hrows + h * hrows;
            sc[k] = (kern_dot_f32(qn, kv, nope) + kern_dot_f32(qn + nope, cache_row(c, s, j->il, k) + kvl, rope)) *
                    c->scale;
        }
        softmax(sc, n);
        float *out = c->att + (int64_t)t * H * vd + h * vd;
        memset(out, 0, (size_t)vd * sizeof(float));
        for (int32_t k = 0; k < n; k++)
            kern_axpy_f32(sc[k], c->ctx_kv + (int64_t)k * H * hrows + h * hrows + nope, out, vd);
    }
}

/* Lists the batch tokens of group g (or of every absorbed group when g < 0). */
static int32_t list_tokens(ds2_fwd *c, const fwd_batch *b, int32_t g) {
    int32_t n = 0;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        int32_t tg = c->tok_group[t];
        if (g >= 0 ? tg == g : !c->grp_expand[tg]) c->grp_toks[n++] = t;
    }
    return n;
}

void ds2_attention(ds2_fwd *c, const fwd_batch *b, int il) {
    const model_hparams *hp = &c->m->hp;
    const ds2_layer *L = &ds2_layers(c->m)[il];
    int64_t kvl = hp->kv_lora_rank;
    for (int32_t g = 0; g < c->n_grp; g++) {
        if (!c->grp_expand[g]) continue;
        const fwd_seq *s = &b->seqs[c->grp_seq[g]];
        int32_t n = c->grp_last[g] + 1;
        for (int32_t j = 0; j < n; j++)
            memcpy(c->ctx_lat + (int64_t)j * kvl, cache_row(c, s, il, j), (size_t)kvl * sizeof(float));
        kern_matmul(c->kc_exp, &L->wkv_b, c->ctx_lat, n, c->ctx_kv);
        expanded_job ej = {c, b, il, list_tokens(c, b, g)};
        pool_run(c->pool, expanded_task, &ej);
    }
    absorbed_job aj = {c, b, il, list_tokens(c, b, -1), hp->n_head};
    if (aj.n_tok == 0) return;
    /* enough items for every thread: split heads when there are few tokens */
    while (aj.hg > 1 && (int64_t)aj.n_tok * ((hp->n_head + aj.hg - 1) / aj.hg) < 2 * c->n_threads)
        aj.hg = (aj.hg + 1) / 2;
    pool_run(c->pool, qlat_task, &aj);
    pool_run(c->pool, absorbed_task, &aj);
    pool_run(c->pool, vout_task, &aj);
}
