/* deepseek4_fwd.h - the deepseek4 forward context shared by its parts:
 * deepseek4_forward.c (context, block loop, hyper-connections, head),
 * deepseek4_attn.c (queries, latent KV, compressors, indexer, window +
 * compressed attention, grouped output) and deepseek4_moe.c (routing,
 * experts). Not a public header.
 *
 * KV (model.h's block contract; docs/deepseek4.md "KV"): a block is the
 * layout's groups in order (window-only, CSA, HCA layers), each layer
 * [token_in_block][ds4_kv_row floats]. Every token slot keeps the token's
 * rotated latent (the window reads the last W of them), its compressor
 * inputs (kv | gated score + ape), and, at the last token of each group of
 * `ratio`, the finished compressed row (and the indexer's): so chunked
 * prefill may cut a group anywhere, and every row lives in the block of the
 * tokens it summarizes (prefix caching and the store need nothing else).
 *
 * Scratch is sized at creation (T = max_tokens): nothing is allocated per
 * step. */
#ifndef CINFER_MODEL_DEEPSEEK4_FWD_H
#define CINFER_MODEL_DEEPSEEK4_FWD_H

#include "model/arch/deepseek4.h"

/* Per-thread attention scratch. */
typedef struct ds4_thr {
    const float **keys; /* window + compressed keys of one query */
    float *s; /* their scores */
    float *iscore; /* indexer scores of the visible compressed rows */
    int32_t *sel; /* selected rows */
} ds4_thr;

struct ds4_fwd {
    const model *m;
    thread_pool *pool;
    kern_ctx *kc;
    int32_t max_tokens, max_ctx, bt, n_thr, max_keys;
    int64_t *layer_off; /* per main layer: float offset of its rows in a block */
    ds4_kv_row *row; /* per main layer */
    /* streams and mixing */
    float *xs, *xs_res, *flat, *pre, *post, *comb, *y, *xa, *out;
    /* attention */
    float *qr, *q, *kv, *ck, *cg, *att, *grp, *oa, *iq, *iw;
    float *crow_tmp; /* a pooled compressed row + its rope table */
    float *cs_win, *cs_cmp; /* rope tables at the batch positions: window-only / compressed layers */
    /* MoE */
    float *mtp_cat; /* MTP: [enorm(e) | hnorm(h)] rows */
    float *router, *rbias, *rw, *xe, *ge, *ue, *ye, *sh_g, *sh_u;
    int32_t *rsel, *exp_n, *exp_tok;
    ds4_thr *thr;
    const fwd_batch *b; /* the batch being run (attention tasks) */
    int il; /* the layer being run (attention tasks) */
};

/* The slot of token `pos` of batch sequence `seq` in layer il. */
static inline float *ds4_slot(const struct ds4_fwd *c, const fwd_batch *b, int32_t seq, int32_t pos, int il) {
    return b->seqs[seq].blocks[pos / c->bt] + c->layer_off[il] + (int64_t)(pos % c->bt) * c->row[il].floats;
}

/* deepseek4_attn.c: c->out = attention of layer il for c->xa. */
void ds4_attention(struct ds4_fwd *c, const fwd_batch *b, int il);
/* deepseek4_moe.c: c->out = MoE FFN (routed + shared) of layer il for c->xa. */
void ds4_moe(struct ds4_fwd *c, const fwd_batch *b, int il);

#endif
