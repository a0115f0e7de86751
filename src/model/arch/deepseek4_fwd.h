/* deepseek4_fwd.h - the deepseek4 forward context shared by its parts:
 * deepseek4_forward.c (context, block loop, hyper-connections, head),
 * deepseek4_attn.c (queries, latent KV, compressors, indexer, window +
 * compressed attention, grouped output) and deepseek4_moe.c (routing,
 * experts). Not a public header.
 *
 * KV (model.h's contract; docs/deepseek4.md "KV"). Main layers: each
 * token's state (rotated latent, compressor and indexer inputs) goes to the
 * sequence's window ring, which keeps the last ds4_ring_window positions:
 * the window reads the last W latents, a finishing compressor row the
 * inputs of its group (and, for ratio 4, the previous group). The row a
 * group ends with goes to the paged block of its last token, packed one
 * per `ratio` tokens ([layer][block_tokens / ratio][rows]; block_tokens is a
 * multiple of every ratio). So chunked prefill may cut a group anywhere, a
 * row never depends on which batch computed it (batch invariance), and
 * prefix caching and the store see ordinary blocks of compressed rows.
 * Bounded replay (fwd_seq.replay_from / keep_below): ring rows below
 * replay_from are not the sequence's (window keys and compressor inputs
 * there are skipped), rows of groups ending below keep_below are cached and
 * not rewritten. MTP blocks keep state and rows in one slot per token of
 * their own one-layer blocks.
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
} ds4_thr;

/* The indexer's GEMM tiles (deepseek4_index.c): activation rows (queries x
 * indexer heads) and compressed rows per kern_matmul. */
#define DS4_IDX_ACT_ROWS 1024
#define DS4_IDX_ROW_TILE 1024

struct ds4_fwd {
    const model *m;
    thread_pool *pool;
    kern_ctx *kc;
    int32_t max_tokens, max_ctx, bt, n_thr, max_keys;
    int64_t *layer_off; /* per main layer: float offset of its packed rows in a block */
    int64_t *ring_off; /* per main layer: float offset of its state rows in a ring block */
    int64_t ring_block_floats; /* floats of one ring block (every layer, bt rows) */
    ds4_kv_row *row; /* per layer (MTP blocks included) */
    /* streams and mixing */
    float *xs, *xs_res, *flat, *pre, *post, *comb, *y, *xa, *out;
    /* attention */
    float *qr, *q, *kv, *ck, *cg, *att, *grp, *oa, *iq, *iw;
    float *crow_tmp; /* a pooled compressed row + its rope table */
    float *cs_win, *cs_cmp; /* rope tables at the batch positions: window-only / compressed layers */
    /* MoE */
    float *mtp_cat; /* MTP: [enorm(e) | hnorm(h)] rows */
    float *tap; /* DSpark: [max_tokens][n_taps * E] mean streams of the exported rows at the tapped layers */
    float *dsp_bias; /* DSpark: [n_vocab] one row's Markov bias */
    float *router, *rbias, *rw, *xe, *ge, *ue, *ye, *sh_g, *sh_u;
    int32_t *rsel, *exp_n, *exp_tok;
    /* expert load (deepseek4_moe_ep.c): ring of per-step counts, atomic window sums (main layers) */
    uint32_t *ring; /* [MOE_LOAD_WINDOW][n_layer][n_expert] */
    int32_t ring_pos;
    _Atomic uint64_t *load; /* [n_layer][n_expert] */
    /* expert parallelism: the executor (borrowed) and its pair rows [max_tokens * n_expert_used] */
    const cinfer_moe_executor *exec;
    float *pair_x, *pair_y;
    int32_t *pair_e, *pair_at; /* expert of pair slot i; slot of (token, pick) */
    ds4_thr *thr;
    /* indexer (deepseek4_index.c): queries per tile, rows per score line, selections per query */
    int32_t idx_qt, idx_rows, idx_k;
    kern_ctx *idx_kc; /* its own context: up to DS4_IDX_ACT_ROWS rows of ds4_index_dim */
    float *idx_keys; /* [DS4_IDX_ROW_TILE][I] gathered keys of a row tile */
    void *idx_packed; /* their packed copy (64-byte aligned; NULL when the ISA reads rows in place) */
    float *idx_dots; /* [idx_qt * IH][DS4_IDX_ROW_TILE] dot products of a tile */
    float *idx_score; /* [idx_qt][idx_rows] head-weighted scores of a query tile */
    int32_t *idx_sel, *idx_nsel; /* [max_tokens][idx_k] selected rows (highest first), their count */
    const fwd_batch *b; /* the batch being run (attention tasks) */
    int il; /* the layer being run (attention tasks) */
};

/* The state row of position `pos` of batch sequence `seq` in layer il
 * (main layers: its ring; MTP blocks: its slot). */
static inline float *ds4_state_row(const struct ds4_fwd *c, const fwd_batch *b, int32_t seq, int32_t pos, int il) {
    const fwd_seq *s = &b->seqs[seq];
    if (il >= c->m->hp.n_layer)
        return s->blocks[pos / c->bt] + (int64_t)(pos % c->bt) * (c->row[il].state + c->row[il].rows);
    return s->ring + (int64_t)((pos / c->bt) % s->ring_blocks) * c->ring_block_floats + c->ring_off[il] +
           (int64_t)(pos % c->bt) * c->row[il].state;
}

/* The rows group g of layer il (ratio r) ended with: the compressed row (D
 * floats), then for ratio 4 the indexer's (I). */
static inline float *ds4_group_rows(const struct ds4_fwd *c, const fwd_batch *b, int32_t seq, int32_t g, int il) {
    int32_t r = c->m->hp.ds4_ratio[il], end = (g + 1) * r - 1;
    float *blk = b->seqs[seq].blocks[end / c->bt];
    if (il >= c->m->hp.n_layer)
        return blk + (int64_t)(end % c->bt) * (c->row[il].state + c->row[il].rows) + c->row[il].state;
    return blk + c->layer_off[il] + (int64_t)((end % c->bt) / r) * c->row[il].rows;
}

/* deepseek4_attn.c: c->out = attention of layer il for c->xa; -1 only on an
 * internal error (err set). */
int ds4_attention(struct ds4_fwd *c, const fwd_batch *b, int il, cf_err *err);
/* deepseek4_index.c: scratch (sized at creation) and its release; the
 * indexer's top-k of every query of the batch into idx_sel / idx_nsel (layer
 * il of ratio 4; its compressed rows are finished and iq / iw projected). */
int ds4_index_init(struct ds4_fwd *c);
void ds4_index_free(struct ds4_fwd *c);
int ds4_index_select(struct ds4_fwd *c, const fwd_batch *b, int il, cf_err *err);
/* deepseek4_moe.c: c->out = MoE FFN (routed + shared) of layer il for c->xa;
 * -1 only if the expert executor failed. */
int ds4_moe(struct ds4_fwd *c, const fwd_batch *b, int il, cf_err *err);
/* deepseek4_moe.c: y[0..n) = routed expert e of layer il on x[0..n) (n <= max_tokens). */
void ds4_expert_rows(struct ds4_fwd *c, int il, int32_t e, const float *x, int32_t n, float *y);
/* deepseek4_moe_ep.c: the expert-load window and the executor path. */
int ds4_moe_load_init(struct ds4_fwd *c);
void ds4_moe_load_free(struct ds4_fwd *c);
void ds4_moe_step_begin(struct ds4_fwd *c);
void ds4_moe_count(struct ds4_fwd *c, int il, int32_t T);
int ds4_moe_run_executor(struct ds4_fwd *c, int il, int32_t T, cf_err *err);
/* deepseek4_dspark.c: the forward side. tap: before block il (il == n_layer: after the last), the exported rows'
 * mean streams for every tap of that layer; export: the exported rows' context (fc, enc norm) copied into each of
 * the hc streams of b->hidden. Both only for a model with DSpark tensors and b->n_hidden > 0. */
void ds4_dspark_tap(struct ds4_fwd *c, const fwd_batch *b, int il);
void ds4_dspark_export(struct ds4_fwd *c, const fwd_batch *b);

#endif
