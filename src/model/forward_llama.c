/* forward_llama.c - the Llama-family forward pass over a ragged batch, and
 * the fwd_ctx entry points (a deepseek2 model's context wraps ds2_fwd,
 * forward_deepseek2.c).
 *
 *   x = E[token]
 *   per layer: h = rmsnorm(x)·w_attn; q,k,v = h·Wq,Wk,Wv (+bias); RoPE(q,k);
 *              K/V -> cache; o = attention(q, cache) (GQA: head h reads KV
 *              head h / (n_head/n_head_kv)); x += o·Wo;
 *              h = rmsnorm(x)·w_ffn; x += (silu(h·Wg) * (h·Wu))·Wd
 *   logits = rmsnorm(x[out_rows])·w_out · Wout
 *
 * All matrices run over the whole batch at once (one weight read per step).
 * Scratch lives in fwd_ctx, sized at creation: no allocation per step.
 * Element-wise work and attention are split over the thread pool. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_deepseek2.h"
#include "model/rope.h"
#include "tensor/attention.h"
#include "tensor/vecmath.h"

struct fwd_ctx {
    const model *m;
    thread_pool *pool;
    kern_ctx *kc;
    int32_t max_tokens, max_ctx, block_tokens;
    float *x, *h, *q, *k, *v, *att, *gate, *up, *xo;
    float *stack;       /* output of stacked matmuls: T x max(qd + 2 kvd, 2 n_ff) */
    float *rope_cs;     /* per batch token: rope_dim/2 (cos, sin) pairs */
    float *scores;      /* per thread: scores_per_thread floats */
    int64_t scores_per_thread; /* ATTN_MAX_CHUNK * group * max_ctx */
    int32_t *chunk_begin; /* max_tokens + 1 */
    int n_threads;
    ds2_fwd *ds2;       /* deepseek2: its own pass (forward_deepseek2.c); the rest unused */
};

void fwd_ctx_free(fwd_ctx *c) {
    if (!c) return;
    ds2_fwd_free(c->ds2);
    kern_ctx_destroy(c->kc);
    float *bufs[] = {c->x, c->h, c->q, c->k, c->v, c->att, c->gate, c->up, c->xo, c->rope_cs, c->scores, c->stack};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c->chunk_begin);
    free(c);
}

fwd_ctx *fwd_ctx_create(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx,
                        int32_t block_tokens, cf_err *err) {
    const model_hparams *hp = &m->hp;
    if (max_tokens <= 0 || max_ctx <= 0 || block_tokens <= 0) {
        cf_fail(err, "forward context: sizes must be positive");
        return NULL;
    }
    fwd_ctx *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    c->m = m;
    c->pool = pool;
    c->max_tokens = max_tokens;
    c->max_ctx = max_ctx;
    c->block_tokens = block_tokens;
    c->n_threads = pool_size(pool);
    if (m->is_ds2) {
        c->ds2 = ds2_fwd_create(m, pool, max_tokens, max_ctx, block_tokens, err);
        if (!c->ds2) {
            free(c);
            return NULL;
        }
        return c;
    }
    size_t T = (size_t)max_tokens;
    size_t qd = (size_t)hp->n_head * hp->head_dim, kvd = (size_t)hp->n_head_kv * hp->head_dim;
    size_t widest_in = (size_t)hp->n_embd;
    if ((size_t)hp->n_ff > widest_in) widest_in = (size_t)hp->n_ff;
    if (qd > widest_in) widest_in = qd;
    c->kc = kern_ctx_create(pool, max_tokens, (int64_t)widest_in);
    c->x = malloc(T * hp->n_embd * sizeof(float));
    c->h = malloc(T * hp->n_embd * sizeof(float));
    c->q = malloc(T * qd * sizeof(float));
    c->k = malloc(T * kvd * sizeof(float));
    c->v = malloc(T * kvd * sizeof(float));
    c->att = malloc(T * qd * sizeof(float));
    c->gate = malloc(T * hp->n_ff * sizeof(float));
    c->up = malloc(T * hp->n_ff * sizeof(float));
    c->xo = malloc(T * hp->n_embd * sizeof(float));
    size_t stack_w = qd + 2 * kvd > 2 * (size_t)hp->n_ff ? qd + 2 * kvd : 2 * (size_t)hp->n_ff;
    c->stack = malloc(T * stack_w * sizeof(float));
    c->rope_cs = malloc(T * hp->rope_dim * sizeof(float));
    int group = hp->n_head / hp->n_head_kv;
    c->scores_per_thread = (int64_t)ATTN_MAX_CHUNK * group * max_ctx;
    c->scores = malloc((size_t)c->n_threads * (size_t)c->scores_per_thread * sizeof(float));
    c->chunk_begin = malloc(((size_t)max_tokens + 1) * sizeof(int32_t));
    if (!c->kc || !c->x || !c->h || !c->q || !c->k || !c->v || !c->att || !c->gate || !c->up || !c->xo ||
        !c->rope_cs || !c->scores || !c->chunk_begin || !c->stack)
        goto oom;
    return c;
oom:
    fwd_ctx_free(c);
    cf_fail(err, "out of memory creating the forward context (%d tokens)", max_tokens);
    return NULL;
}

/* ---- element-wise ops, split over rows ---- */

typedef struct rows_job {
    fwd_ctx *c;
    int32_t n_rows;
    void (*row_fn)(struct rows_job *j, int32_t r);
    const float *w;
    float *dst;
    const float *src;
    const float *bias;
    int64_t width;
} rows_job;

static void rows_task(void *ctx, int ith, int nth) {
    rows_job *j = ctx;
    long long b, e;
    pool_split(j->n_rows, ith, nth, &b, &e);
    for (long long r = b; r < e; r++) j->row_fn(j, (int32_t)r);
}

static void run_rows(rows_job *j) {
    if (j->n_rows * j->width < 32768) rows_task(j, 0, 1);
    else pool_run(j->c->pool, rows_task, j);
}

static void rmsnorm_row(rows_job *j, int32_t r) {
    const float *x = j->src + (int64_t)r * j->width;
    float *y = j->dst + (int64_t)r * j->width;
    double ss = 0.0;
    for (int64_t i = 0; i < j->width; i++) ss += (double)x[i] * x[i];
    float scale = 1.0f / sqrtf((float)(ss / (double)j->width) + j->c->m->hp.rms_eps);
    for (int64_t i = 0; i < j->width; i++) y[i] = x[i] * scale * j->w[i];
}

static void rmsnorm_rows(fwd_ctx *c, const float *src, const float *w, float *dst, int32_t n, int64_t width) {
    rows_job j = {.c = c, .n_rows = n, .row_fn = rmsnorm_row, .w = w, .dst = dst, .src = src, .width = width};
    run_rows(&j);
}

static void swiglu_row(rows_job *j, int32_t r) {
    float *g = j->dst + (int64_t)r * j->width;
    const float *u = j->src + (int64_t)r * j->width;
    kern_silu_mul(g, u, j->width);
}

/* dst row = silu(gate) * up where src row = [gate | up] (stacked matmul output) */
static void swiglu_stacked_row(rows_job *j, int32_t r) {
    float *g = j->dst + (int64_t)r * j->width;
    const float *gu = j->src + (int64_t)r * 2 * j->width;
    memcpy(g, gu, (size_t)j->width * sizeof(float));
    kern_silu_mul(g, gu + j->width, j->width);
}

static void add_row(rows_job *j, int32_t r) {
    float *y = j->dst + (int64_t)r * j->width;
    const float *x = j->src + (int64_t)r * j->width;
    for (int64_t i = 0; i < j->width; i++) y[i] += x[i];
}

static void add_rows(fwd_ctx *c, float *dst, const float *src, int32_t n, int64_t width) {
    rows_job j = {.c = c, .n_rows = n, .row_fn = add_row, .dst = dst, .src = src, .width = width};
    run_rows(&j);
}

static void add_bias(float *y, const float *bias, int32_t n, int64_t width) {
    if (!bias) return;
    for (int32_t r = 0; r < n; r++)
        for (int64_t i = 0; i < width; i++) y[(int64_t)r * width + i] += bias[i];
}

/* ---- RoPE ---- */

/* Fills c->rope_cs with the (cos, sin) of every rotated pair of every token. */
static void rope_tables(fwd_ctx *c, const fwd_batch *b) {
    const model_hparams *hp = &c->m->hp;
    float mscale = hp->rope_scaling == ROPE_SCALING_YARN ? hp->yarn_attn_factor : 1.0f;
    rope_fill_table(hp, c->m->rope_freq_factors, mscale, b->pos, b->n_tokens, c->rope_cs);
}

/* Rotates n_heads heads of each token's row (row width = n_heads*head_dim). */
static void rope_apply(fwd_ctx *c, float *x, int32_t n_tokens, int n_heads) {
    const model_hparams *hp = &c->m->hp;
    int hd = hp->head_dim, half = hp->rope_dim / 2;
    for (int32_t t = 0; t < n_tokens; t++) {
        const float *cs = c->rope_cs + (int64_t)t * hp->rope_dim;
        for (int h = 0; h < n_heads; h++) {
            float *v = x + ((int64_t)t * n_heads + h) * hd;
            for (int i = 0; i < half; i++) {
                int i0 = hp->rope_mode == ROPE_NEOX ? i : 2 * i;
                int i1 = hp->rope_mode == ROPE_NEOX ? i + half : 2 * i + 1;
                float a = v[i0], bb = v[i1], co = cs[2 * i], si = cs[2 * i + 1];
                v[i0] = a * co - bb * si;
                v[i1] = a * si + bb * co;
            }
        }
    }
}

/* ---- attention ---- */

typedef struct attn_job {
    fwd_ctx *c;
    const fwd_batch *b;
    int layer;
    int32_t n_chunks;
} attn_job;

/* Writes the batch's K and V into the blocks: K dimension-major
 * ([kv_dim][token] per layer, so attention reads 16-key tiles in place), V
 * token-major ([token][kv_dim]). See model.h. */
static void kv_store(fwd_ctx *c, const fwd_batch *b, int layer) {
    const model_hparams *hp = &c->m->hp;
    int64_t kvd = (int64_t)hp->n_head_kv * hp->head_dim, bt = c->block_tokens;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        const fwd_seq *s = &b->seqs[b->seq[t]];
        int32_t p = b->pos[t];
        float *blk = s->blocks[p / bt];
        int64_t row = p % bt;
        float *kb = blk + (int64_t)(layer * 2 + 0) * bt * kvd + row;
        const float *k = c->k + (int64_t)t * kvd;
        for (int64_t d = 0; d < kvd; d++) kb[d * bt] = k[d];
        memcpy(blk + ((int64_t)(layer * 2 + 1) * bt + row) * kvd, c->v + (int64_t)t * kvd, (size_t)kvd * 4);
    }
}

/* Query chunks: maximal runs of consecutive batch tokens of one sequence,
 * at most ATTN_MAX_CHUNK long; each chunk x KV head is one work item. */
static int32_t make_chunks(fwd_ctx *c, const fwd_batch *b) {
    int32_t n = 0;
    for (int32_t t = 0; t < b->n_tokens;) {
        int32_t e = t + 1;
        while (e < b->n_tokens && e - t < ATTN_MAX_CHUNK && b->seq[e] == b->seq[t] && b->pos[e] == b->pos[e - 1] + 1)
            e++;
        c->chunk_begin[n++] = t;
        t = e;
    }
    c->chunk_begin[n] = b->n_tokens;
    return n;
}

static void attn_task(void *ctx, int ith, int nth) {
    attn_job *j = ctx;
    fwd_ctx *c = j->c;
    const fwd_batch *b = j->b;
    const model_hparams *hp = &c->m->hp;
    int group = hp->n_head / hp->n_head_kv, hd = hp->head_dim;
    int64_t kvd = (int64_t)hp->n_head_kv * hd, bt = c->block_tokens, qd = (int64_t)hp->n_head * hd;
    int64_t n_items = (int64_t)j->n_chunks * hp->n_head_kv;
    float *scores = c->scores + (int64_t)ith * c->scores_per_thread;
    /* interleaved so that long (late) and short (early) chunks spread evenly */
    for (int64_t it = ith; it < n_items; it += nth) {
        int32_t ch = (int32_t)(it / hp->n_head_kv);
        int g = (int)(it % hp->n_head_kv);
        int32_t t0 = c->chunk_begin[ch], t1 = c->chunk_begin[ch + 1];
        const fwd_seq *s = &b->seqs[b->seq[t0]];
        attn_args a = {
            .q = c->q + (int64_t)t0 * qd + (int64_t)g * group * hd,
            .q_stride = qd,
            .out = c->att + (int64_t)t0 * qd + (int64_t)g * group * hd,
            .out_stride = qd,
            .pos = b->pos + t0,
            .n_tok = t1 - t0,
            .n_q = group,
            .head_dim = hd,
            .blocks = s->blocks,
            .block_tokens = (int)bt,
            .k_off = (int64_t)(j->layer * 2 + 0) * bt * kvd + (int64_t)g * hd * bt,
            .v_off = (int64_t)(j->layer * 2 + 1) * bt * kvd + (int64_t)g * hd,
            .row_stride = kvd,
            .window = 0,
            .scale = 1.0f / sqrtf((float)hd),
            .softcap = 0.0f,
            .scores = scores,
        };
        kern_attention(&a);
    }
}

/* ---- the pass ---- */

static int check_batch(const fwd_ctx *c, const fwd_batch *b, cf_err *err) {
    const model_hparams *hp = &c->m->hp;
    if (b->n_tokens <= 0 || b->n_tokens > c->max_tokens)
        return cf_fail(err, "batch of %d tokens (1..%d allowed)", b->n_tokens, c->max_tokens);
    for (int32_t t = 0; t < b->n_tokens; t++) {
        if (b->tokens[t] < 0 || b->tokens[t] >= hp->n_vocab)
            return cf_fail(err, "token id %d is outside the vocabulary (0..%d)", b->tokens[t], hp->n_vocab - 1);
        if (b->seq[t] < 0 || b->seq[t] >= b->n_seqs) return cf_fail(err, "token %d: bad sequence index", t);
        int32_t p = b->pos[t];
        if (p < 0 || p >= c->max_ctx || p / c->block_tokens >= b->seqs[b->seq[t]].n_blocks)
            return cf_fail(err, "position %d is beyond the context (%d)", p, c->max_ctx);
    }
    for (int32_t i = 0; i < b->n_out; i++)
        if (b->out_rows[i] < 0 || b->out_rows[i] >= b->n_tokens || (i && b->out_rows[i] <= b->out_rows[i - 1]))
            return cf_fail(err, "bad output row list");
    return 0;
}

int model_forward(fwd_ctx *c, const fwd_batch *b, float *logits, cf_err *err) {
    if (check_batch(c, b, err)) return -1;
    if (c->ds2) return ds2_forward(c->ds2, b, logits, err);
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    int32_t T = b->n_tokens;
    int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    size_t emb_row = dtype_row_bytes(m->tok_embd->type, E);
    for (int32_t t = 0; t < T; t++)
        dtype_dequantize_row((dtype)m->tok_embd->type, (const char *)m->tok_embd->data + emb_row * b->tokens[t],
                             c->x + t * E, E);
    rope_tables(c, b);
    int32_t n_chunks = make_chunks(c, b);

    for (int il = 0; il < hp->n_layer; il++) {
        const layer_weights *L = &m->layers[il];
        rmsnorm_rows(c, c->x, L->attn_norm, c->h, T, E);
        if (L->qkv_fused) {
            int64_t w = qd + 2 * kvd;
            kern_matmul(c->kc, &L->wqkv, c->h, T, c->stack);
            for (int32_t t = 0; t < T; t++) {
                const float *r = c->stack + (int64_t)t * w;
                memcpy(c->q + (int64_t)t * qd, r, (size_t)qd * 4);
                memcpy(c->k + (int64_t)t * kvd, r + qd, (size_t)kvd * 4);
                memcpy(c->v + (int64_t)t * kvd, r + qd + kvd, (size_t)kvd * 4);
            }
        } else {
            kern_matmul(c->kc, &L->wq, c->h, T, c->q);
            kern_matmul(c->kc, &L->wk, c->h, T, c->k);
            kern_matmul(c->kc, &L->wv, c->h, T, c->v);
        }
        add_bias(c->q, L->bq, T, qd);
        add_bias(c->k, L->bk, T, kvd);
        add_bias(c->v, L->bv, T, kvd);
        rope_apply(c, c->q, T, hp->n_head);
        rope_apply(c, c->k, T, hp->n_head_kv);
        kv_store(c, b, il);
        attn_job aj = {c, b, il, n_chunks};
        pool_run(c->pool, attn_task, &aj);
        kern_matmul(c->kc, &L->wo, c->att, T, c->h);
        add_rows(c, c->x, c->h, T, E);

        rmsnorm_rows(c, c->x, L->ffn_norm, c->h, T, E);
        if (L->gu_fused) {
            kern_matmul(c->kc, &L->w_gu, c->h, T, c->stack);
            rows_job sj = {.c = c, .n_rows = T, .row_fn = swiglu_stacked_row, .dst = c->gate, .src = c->stack,
                           .width = hp->n_ff};
            run_rows(&sj);
        } else {
            kern_matmul(c->kc, &L->w_gate, c->h, T, c->gate);
            kern_matmul(c->kc, &L->w_up, c->h, T, c->up);
            rows_job sj = {.c = c, .n_rows = T, .row_fn = swiglu_row, .dst = c->gate, .src = c->up, .width = hp->n_ff};
            run_rows(&sj);
        }
        kern_matmul(c->kc, &L->w_down, c->gate, T, c->h);
        add_rows(c, c->x, c->h, T, E);
    }
    if (b->n_out == 0) return 0;
    for (int32_t i = 0; i < b->n_out; i++) memcpy(c->h + i * E, c->x + (int64_t)b->out_rows[i] * E, (size_t)E * 4);
    rmsnorm_rows(c, c->h, m->output_norm, c->xo, b->n_out, E);
    kern_matmul(c->kc, &m->output, c->xo, b->n_out, logits);
    return 0;
}

void fwd_ctx_set_mla_expand_min(fwd_ctx *c, int32_t min_tokens) {
    if (c->ds2) ds2_fwd_set_expand_min(c->ds2, min_tokens);
}

int fwd_ctx_expert_load(const fwd_ctx *c, int32_t layer, uint64_t *counts, int32_t n) {
    if (c->ds2) return ds2_fwd_expert_load(c->ds2, layer, counts, n);
    return layer >= 0 && layer < c->m->hp.n_layer ? 0 : -1;
}
