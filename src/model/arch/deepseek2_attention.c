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
 * absorbed (the engine's only form; never materialises K/V): per head
 *   q_lat = W_K^T q_nope (W_K = the head's k_nope rows of attn_kv_b),
 *   s_j = scale·([q_lat | q_pe]·[c_kv_j | k_pe_j]), o_lat = softmax(s)·c_kv,
 *   o = W_V o_lat (W_V = the head's v rows). Three passes: the projections
 *   run one item per head over all tokens (each weight row read once per
 *   step); the attention is MQA over the cache rows (K = the whole row,
 *   V = its c_kv part, shared by all heads) through the tiled flash-attention
 *   kernel (tensor/attention.h, shared-row form), one call per item = (run of
 *   up to run_max consecutive tokens of one sequence, head range): each
 *   16-key tile is read once per item for all its rows, softmax online per
 *   128-key segment at fixed absolute positions, no score matrix.
 *
 * Every head's result is computed the same way whatever the item split and
 * the rest of the batch (batch invariance): the kernel's rows depend only on
 * their own query, position and keys. Expanded softmax: max, exp, sum in f32. */
#include <math.h>
#include <string.h>

#include "model/arch/deepseek2_fwd.h"
#include "tensor/attention.h"
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
    int32_t n_runs; /* attention runs: c->run_first[i] .. + c->run_len[i] (batch indices) */
} absorbed_job;

/* Tokens per block of the projections: a block's latent rows of one head
 * (PROJ_TOKENS x kv_lora_rank floats) and the head's weight rows stay in L2
 * while every weight row passes over them. Each output is one dot or axpy
 * chain in a fixed order, whatever the blocking. */
#define PROJ_TOKENS 64

/* qabs[t][h] = [W_K[h]^T q_nope[t][h] | q_pe[t][h]] for every listed token;
 * one item per head, so each weight row is read once per token block. */
static void qlat_task(void *ctx, int ith, int nth) {
    absorbed_job *j = ctx;
    ds2_fwd *c = j->c;
    const model_hparams *hp = &c->m->hp;
    const float *kvb = ds2_layers(c->m)[j->il].kv_b_f32;
    int64_t kvl = hp->kv_lora_rank, nope = hp->qk_nope_dim, qk = hp->head_dim, H = hp->n_head, rope = hp->rope_dim;
    int64_t hrows = nope + hp->v_head_dim, dk = kvl + rope;
    for (int64_t h = ith; h < H; h += nth)
        for (int32_t i0 = 0; i0 < j->n_tok; i0 += PROJ_TOKENS) {
            int32_t i1 = i0 + PROJ_TOKENS < j->n_tok ? i0 + PROJ_TOKENS : j->n_tok;
            for (int32_t i = i0; i < i1; i++) {
                int64_t t = c->grp_toks[i];
                float *qa = c->lat + (t * H + h) * dk;
                memset(qa, 0, (size_t)kvl * sizeof(float));
                memcpy(qa + kvl, c->q + (t * H + h) * qk + nope, (size_t)rope * sizeof(float));
            }
            for (int64_t d = 0; d < nope; d++) {
                const float *row = kvb + (h * hrows + d) * kvl;
                for (int32_t i = i0; i < i1; i++) {
                    int64_t t = c->grp_toks[i];
                    kern_axpy_f32(c->q[(t * H + h) * qk + d], row, c->lat + (t * H + h) * dk, kvl);
                }
            }
        }
}

/* out[t][h] = W_V[h] o_lat[t][h]; one item per head, token blocks as qlat_task. */
static void vout_task(void *ctx, int ith, int nth) {
    absorbed_job *j = ctx;
    ds2_fwd *c = j->c;
    const model_hparams *hp = &c->m->hp;
    const float *kvb = ds2_layers(c->m)[j->il].kv_b_f32;
    int64_t kvl = hp->kv_lora_rank, nope = hp->qk_nope_dim, vd = hp->v_head_dim, H = hp->n_head;
    for (int64_t h = ith; h < H; h += nth)
        for (int32_t i0 = 0; i0 < j->n_tok; i0 += PROJ_TOKENS) {
            int32_t i1 = i0 + PROJ_TOKENS < j->n_tok ? i0 + PROJ_TOKENS : j->n_tok;
            for (int64_t e = 0; e < vd; e++) {
                const float *row = kvb + (h * (nope + vd) + nope + e) * kvl;
                for (int32_t i = i0; i < i1; i++) {
                    int64_t t = c->grp_toks[i];
                    c->att[(t * H + h) * vd + e] = kern_dot_f32(row, c->olat + (t * H + h) * kvl, kvl);
                }
            }
        }
}

/* o_lat of one run of consecutive tokens and heads [h0, h1): MQA over the
 * latent cache rows (K = [c_kv | k_pe], V = c_kv) by the tiled kernel
 * (tensor/attention.h, shared-row form), which computes every row the same
 * way whatever the run, the head range and the rest of the batch. */
static void absorbed_item(ds2_fwd *c, const fwd_batch *b, int il, int32_t t0, int32_t n, int h0, int h1,
                          float *scratch) {
    const model_hparams *hp = &c->m->hp;
    int64_t kvl = hp->kv_lora_rank, dk = kvl + hp->rope_dim, H = hp->n_head;
    attn_args a = {
        .q = c->lat + ((int64_t)t0 * H + h0) * dk,
        .q_stride = H * dk,
        .out = c->olat + ((int64_t)t0 * H + h0) * kvl,
        .out_stride = H * kvl,
        .pos = b->pos + t0,
        .n_tok = n,
        .n_q = h1 - h0,
        .head_dim = (int)dk,
        .blocks = b->seqs[b->seq[t0]].blocks,
        .block_tokens = c->bt,
        .k_off = (int64_t)(il - c->kv_shift) * c->bt * dk,
        .row_stride = dk,
        .scale = c->scale,
        .v_dim = (int)kvl,
        .scratch = scratch,
    };
    a.v_off = a.k_off;
    kern_attention(&a);
}

static void absorbed_task(void *ctx, int ith, int nth) {
    absorbed_job *j = ctx;
    ds2_fwd *c = j->c;
    int H = c->m->hp.n_head, n_hg = (H + j->hg - 1) / j->hg;
    float *scratch = c->attn_scratch + (int64_t)ith * c->attn_scratch_per_thread;
    int64_t items = (int64_t)j->n_runs * n_hg;
    for (int64_t it = ith; it < items; it += nth) {
        int32_t r = (int32_t)(it / n_hg);
        int h0 = (int)(it % n_hg) * j->hg, h1 = h0 + j->hg < H ? h0 + j->hg : H;
        absorbed_item(c, j->b, j->il, c->run_first[r], c->run_len[r], h0, h1, scratch);
    }
}

/* Cuts the listed tokens into runs of at most c->run_max consecutive batch
 * indices of one sequence at consecutive positions (a kernel call each). */
static int32_t list_runs(ds2_fwd *c, const fwd_batch *b, int32_t n_tok) {
    int32_t n = 0;
    for (int32_t i = 0; i < n_tok; i++) {
        int32_t t = c->grp_toks[i];
        if (n > 0) {
            int32_t p = c->run_first[n - 1] + c->run_len[n - 1] - 1;
            if (p == t - 1 && b->seq[p] == b->seq[t] && b->pos[p] + 1 == b->pos[t] && c->run_len[n - 1] < c->run_max) {
                c->run_len[n - 1]++;
                continue;
            }
        }
        c->run_first[n] = t;
        c->run_len[n++] = 1;
    }
    return n;
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
    absorbed_job aj = {c, b, il, list_tokens(c, b, -1), hp->n_head, 0};
    if (aj.n_tok == 0) return;
    aj.n_runs = list_runs(c, b, aj.n_tok);
    /* an item for every thread: split heads when there are few runs (each item
     * transposes every K tile of its context once, so no more items than that) */
    while (aj.hg > 1 && (int64_t)aj.n_runs * ((hp->n_head + aj.hg - 1) / aj.hg) < c->n_threads) aj.hg = (aj.hg + 1) / 2;
    pool_run(c->pool, qlat_task, &aj);
    pool_run(c->pool, absorbed_task, &aj);
    pool_run(c->pool, vout_task, &aj);
}
