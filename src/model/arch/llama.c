/* llama.c - the 'llama' architecture family: llama, qwen2 (Q/K/V biases
 * when present, NEOX rope) and qwen3 (NEOX rope, per-head RMS norm of Q and K
 * before RoPE: attn_q_norm / attn_k_norm of head_dim, required) GGUF files as
 * llama.cpp writes them. Hyper-
 * parameters beyond the shared ones, every layer's tensors, the KV layout
 * (one full-attention group), the fingerprint contribution and the forward
 * pass over a ragged batch:
 *
 *   x = E[token]
 *   per layer: h = rmsnorm(x)·w_attn; q,k,v = h·Wq,Wk,Wv (+bias);
 *              (qwen3: q,k = rmsnorm per head ·w_q_norm, ·w_k_norm); RoPE(q,k);
 *              K/V -> cache; o = attention(q, cache) (GQA: head h reads KV
 *              head h / (n_head/n_head_kv)); x += o·Wo;
 *              h = rmsnorm(x)·w_ffn; x += (silu(h·Wg) * (h·Wu))·Wd
 *   logits = rmsnorm(x[out_rows])·w_out · Wout
 *
 * All matrices run over the whole batch at once (one weight read per step).
 * Scratch lives in llama_fwd, sized at creation: no allocation per step.
 * Element-wise work (rowops.c) and attention are split over the thread pool.
 * KV block layout: model.h (K dimension-major, V token-major, per layer). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch/arch.h"
#include "model/kv_rows.h"
#include "model/rowops.h"
#include "tensor/attention.h"

typedef struct layer_weights {
    const float *attn_norm, *ffn_norm; /* f32 (model weight buffers or the file's f32 tensors) */
    const float *bq, *bk, *bv; /* optional biases (qwen2), f32 likewise */
    const float *q_norm, *k_norm; /* per-head Q/K RMS norm weights [head_dim] (qwen3), else NULL */
    kern_weight wq, wk, wv, wo;
    kern_weight w_gate, w_up, w_down;
    /* When Q/K/V (and gate/up) share a type they are also stacked into one
     * matrix (rows of Q, then K, then V; gate then up), so one matmul reads
     * the layer input once and feeds both threads a bigger, better balanced
     * product. Then the separate weights above are unused (zeroed). */
    bool qkv_fused, gu_fused;
    kern_weight wqkv, w_gu;
} layer_weights;

/* ---- hyper-parameters ---- */

static int llama_read_hparams(const gguf_file *f, model_hparams *hp, cf_err *err) {
    (void)f;
    if (hp->v_head_dim != hp->head_dim)
        return cf_fail(err, "%s: key_length (%d) and value_length (%d) must be equal and positive", hp->arch,
                       hp->head_dim, hp->v_head_dim);
    hp->v_head_dim = 0; /* a deepseek2 field (model.h): 0 here */
    hp->rope_mode = !strcmp(hp->arch, "qwen2") || !strcmp(hp->arch, "qwen3") ? ROPE_NEOX : ROPE_NORM;
    return 0;
}

/* Fingerprint v1 (prefix_cache.c) reserved 13 words and 2 floats after the
 * shared hyper-parameters for deepseek2's; this family has none of them and
 * writes zeros there so that keys (and store objects) stay readable. */
static int llama_fingerprint(const model_hparams *hp, model_fp_writer *w) {
    (void)hp;
    int ok = 1;
    for (int i = 0; ok && i < 13; i++) ok = model_fp_u32(w, 0);
    return ok && model_fp_f32(w, 0.0f) && model_fp_f32(w, 0.0f);
}

/* ---- weights ---- */

/* Loads `count` matrices with the same input width; if they share a type,
 * stacks their rows into one prepared matrix (*fused) instead of preparing
 * each one into out[i]. */
static int load_stacked(model *m, const char *const *names, const int64_t *rows, int count, int64_t in,
                        kern_weight *const *out, kern_weight *fused, bool *is_fused, cf_err *err) {
    const gguf_tensor *t[4];
    int64_t total = 0;
    bool same = true;
    for (int i = 0; i < count; i++) {
        int failed = 0;
        t[i] = model_need_tensor(m->gguf, names[i], in, rows[i], true, err, &failed);
        if (failed) return -1;
        same = same && t[i]->type == t[0]->type;
        total += rows[i];
    }
    if (!same || t[0]->type == DT_F8_B128) { /* FP8: each matrix has its own block scales, kept apart */
        for (int i = 0; i < count; i++)
            if (model_load_matrix(m, names[i], in, rows[i], out[i], err)) return -1;
        return 0;
    }
    const void *parts[4];
    size_t part_bytes[4];
    for (int i = 0; i < count; i++) {
        parts[i] = t[i]->data;
        part_bytes[i] = t[i]->nbytes;
        m->weight_bytes += t[i]->nbytes;
        m->n_params += (uint64_t)(in * rows[i]);
    }
    if (model_prepare_stacked(m, names[0], fused, (dtype)t[0]->type, parts, part_bytes, count, total, in, err))
        return cf_prefix(err, "tensor %s", names[0]);
    *is_fused = true;
    for (int i = 0; i < count; i++) model_mem_copied(m, t[i]); /* the file bytes are not read again */
    return 0;
}

static int load_layer(model *m, int il, cf_err *err) {
    const model_hparams *hp = &m->hp;
    layer_weights *L = (layer_weights *)m->layers + il;
    int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    bool qk_norm = !strcmp(hp->arch, "qwen3");
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if (model_load_vector(m, NAME("attn_norm.weight"), hp->n_embd, true, &L->attn_norm, err) ||
        model_load_vector(m, NAME("ffn_norm.weight"), hp->n_embd, true, &L->ffn_norm, err) ||
        model_load_vector(m, NAME("attn_q.bias"), qd, false, &L->bq, err) ||
        model_load_vector(m, NAME("attn_k.bias"), kvd, false, &L->bk, err) ||
        model_load_vector(m, NAME("attn_v.bias"), kvd, false, &L->bv, err) ||
        model_load_vector(m, NAME("attn_q_norm.weight"), hp->head_dim, qk_norm, &L->q_norm, err) ||
        model_load_vector(m, NAME("attn_k_norm.weight"), hp->head_dim, qk_norm, &L->k_norm, err) ||
        model_load_matrix(m, NAME("attn_output.weight"), qd, hp->n_embd, &L->wo, err) ||
        model_load_matrix(m, NAME("ffn_down.weight"), hp->n_ff, hp->n_embd, &L->w_down, err))
        return -1;
#undef NAME
    char qn[3][96], gn[2][96];
    snprintf(qn[0], 96, "blk.%d.attn_q.weight", il);
    snprintf(qn[1], 96, "blk.%d.attn_k.weight", il);
    snprintf(qn[2], 96, "blk.%d.attn_v.weight", il);
    snprintf(gn[0], 96, "blk.%d.ffn_gate.weight", il);
    snprintf(gn[1], 96, "blk.%d.ffn_up.weight", il);
    const char *qnames[3] = {qn[0], qn[1], qn[2]}, *gnames[2] = {gn[0], gn[1]};
    const int64_t qrows[3] = {qd, kvd, kvd}, grows[2] = {hp->n_ff, hp->n_ff};
    kern_weight *qout[3] = {&L->wq, &L->wk, &L->wv}, *gout[2] = {&L->w_gate, &L->w_up};
    if (load_stacked(m, qnames, qrows, 3, hp->n_embd, qout, &L->wqkv, &L->qkv_fused, err) ||
        load_stacked(m, gnames, grows, 2, hp->n_embd, gout, &L->w_gu, &L->gu_fused, err))
        return -1;
    return 0;
}

static int llama_load(model *m, cf_err *err) {
    const model_hparams *hp = &m->hp;
    m->layers = calloc((size_t)hp->n_layer, sizeof(layer_weights));
    if (!m->layers) return cf_fail(err, "out of memory");
    for (int il = 0; il < hp->n_layer; il++) {
        if (load_layer(m, il, err)) return -1;
        if (m->progress) m->progress(m->progress_ctx, MODEL_LOAD_LAYERS, il + 1, hp->n_layer);
    }
    m->active_bytes = m->weight_bytes;
    m->active_params = m->n_params;
    return 0;
}

static void llama_release(model *m) {
    layer_weights *layers = m->layers;
    if (!layers) return;
    for (int il = 0; il < m->hp.n_layer; il++) {
        layer_weights *L = &layers[il]; /* the vectors and repacked copies are the model's (model_wbuf) */
        kern_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down, &L->wqkv, &L->w_gu};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) kern_weight_release(ws[i]);
    }
    free(layers);
    m->layers = NULL;
}

/* ---- KV layout ---- */

static void llama_kv_layout(const model *m, kv_spec *out) {
    out->n_groups = 1;
    out->groups[0] = (kv_group_spec){
        .kind = KV_LAYER_FULL, .n_layers = m->hp.n_layer, .token_floats = 2 * m->hp.n_head_kv * m->hp.head_dim};
}

static void llama_kv_describe(const model *m, char *buf, size_t n) {
    snprintf(buf, n, "(%d layers x 2 x %d KV heads x %d x 4 B)", m->hp.n_layer, m->hp.n_head_kv, m->hp.head_dim);
}

/* ---- forward context ---- */

/* One attention work item: a query chunk x KV head, either whole (seg < 0)
 * or one KV segment of it whose partial state goes to parts + part_off. For
 * a merge entry, part_off is where the chunk's first segment partial is. */
typedef struct attn_item {
    int32_t chunk;
    int32_t kv_head;
    int32_t seg;
    int64_t part_off;
} attn_item;

/* Split-KV decode: when a step has fewer than LLAMA_SPLIT_ITEMS_PER_THREAD
 * (chunk, KV head) items per thread, chunks of at most LLAMA_SPLIT_MAX_TOK
 * tokens are split into KV segments across the pool, within a partial-state
 * budget of LLAMA_SPLIT_PART_FLOATS floats. Splitting never changes results
 * (see attention.h), only how the work spreads over threads. */
#define LLAMA_SPLIT_ITEMS_PER_THREAD 4
#define LLAMA_SPLIT_MAX_TOK 4
#define LLAMA_SPLIT_PART_FLOATS ((int64_t)4 << 20)

typedef struct llama_fwd {
    const model *m;
    thread_pool *pool;
    kern_ctx *kc;
    int32_t max_tokens, max_ctx, block_tokens;
    float *x, *h, *q, *k, *v, *att, *gate, *up, *xo;
    float *stack; /* output of stacked matmuls: T x max(qd + 2 kvd, 2 n_ff) */
    float *rope_cs; /* per batch token: rope_dim/2 (cos, sin) pairs */
    float *scratch; /* per thread: scratch_per_thread floats */
    int64_t scratch_per_thread; /* attn_scratch_floats(ATTN_MAX_CHUNK, group, head_dim) */
    int32_t *chunk_begin; /* max_tokens + 1 */
    /* Attention work of a step (the same for every layer): items is the
     * list run by attn_task, merges the (chunk, KV head) pairs whose
     * segments were split across items. parts holds the split partials. */
    attn_item *items, *merges;
    int32_t n_items, n_merges, max_items;
    float *parts;
    int64_t parts_cap; /* floats in parts */
    int n_threads;
    kv_rows rows; /* how K/V rows are stored (the cache's element type) */
    attn_prec prec; /* fwd_ctx_set_attn_prec */
} llama_fwd;

static void llama_fwd_free(void *fc) {
    llama_fwd *c = fc;
    if (!c) return;
    kern_ctx_destroy(c->kc);
    float *bufs[] = {c->x,  c->h,  c->q,       c->k,       c->v,     c->att,  c->gate,
                     c->up, c->xo, c->rope_cs, c->scratch, c->stack, c->parts};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c->chunk_begin);
    free(c->items);
    free(c->merges);
    free(c);
}

static void *llama_fwd_create(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx,
                              int32_t block_tokens, cf_err *err) {
    const model_hparams *hp = &m->hp;
    llama_fwd *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    c->m = m;
    c->pool = pool;
    c->max_tokens = max_tokens;
    c->max_ctx = max_ctx;
    c->block_tokens = block_tokens;
    c->n_threads = pool_size(pool);
    c->rows = kv_rows_make(KV_DTYPE_F32, block_tokens, (int64_t)hp->n_head_kv * hp->head_dim);
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
    c->scratch_per_thread = (int64_t)attn_scratch_floats(ATTN_MAX_CHUNK, group, hp->head_dim);
    c->scratch = malloc((size_t)c->n_threads * (size_t)c->scratch_per_thread * sizeof(float));
    c->chunk_begin = malloc(((size_t)max_tokens + 1) * sizeof(int32_t));
    /* split partials: at most what decode tokens of max_ctx could use, within the budget */
    int64_t min_part = (int64_t)attn_part_floats(1, group, hp->head_dim);
    int64_t dec_tokens = max_tokens < 64 ? max_tokens : 64;
    c->parts_cap = dec_tokens * LLAMA_SPLIT_MAX_TOK * hp->n_head_kv * ((int64_t)max_ctx / ATTN_SEG + 1) * min_part;
    if (c->parts_cap > LLAMA_SPLIT_PART_FLOATS) c->parts_cap = LLAMA_SPLIT_PART_FLOATS;
    c->max_items = (int32_t)((int64_t)max_tokens * hp->n_head_kv + c->parts_cap / min_part + 1);
    c->items = malloc((size_t)c->max_items * sizeof(attn_item));
    c->merges = malloc((size_t)max_tokens * (size_t)hp->n_head_kv * sizeof(attn_item));
    c->parts = malloc((size_t)c->parts_cap * sizeof(float));
    if (!c->kc || !c->x || !c->h || !c->q || !c->k || !c->v || !c->att || !c->gate || !c->up || !c->xo || !c->rope_cs ||
        !c->scratch || !c->chunk_begin || !c->stack || !c->items || !c->merges || !c->parts)
        goto oom;
    return c;
oom:
    llama_fwd_free(c);
    cf_fail(err, "out of memory creating the forward context (%d tokens)", max_tokens);
    return NULL;
}

/* ---- RoPE ---- */

/* Fills c->rope_cs with the (cos, sin) of every rotated pair of every token. */
static void rope_tables(llama_fwd *c, const fwd_batch *b) {
    const model_hparams *hp = &c->m->hp;
    float mscale = hp->rope_scaling == ROPE_SCALING_YARN ? hp->yarn_attn_factor : 1.0f;
    rope_fill_table(hp, c->m->rope_freq_factors, mscale, b->pos, b->n_tokens, c->rope_cs);
}

/* Rotates n_heads heads of each token's row (row width = n_heads*head_dim). */
static void rope_apply(llama_fwd *c, float *x, int32_t n_tokens, int n_heads) {
    const model_hparams *hp = &c->m->hp;
    rows_rope(c->rope_cs, hp->rope_dim, hp->rope_mode, x, n_tokens, n_heads, (int64_t)n_heads * hp->head_dim,
              hp->head_dim, 0);
}

/* ---- attention ---- */

/* Writes the batch's K and V into the blocks (model/kv_rows.h layout). */
static void kv_store(llama_fwd *c, const fwd_batch *b, int layer) {
    int64_t kvd = c->rows.kvd, bt = c->block_tokens;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        const fwd_seq *s = &b->seqs[b->seq[t]];
        int32_t p = b->pos[t];
        kv_rows_write(&c->rows, s->blocks[p / bt], layer, p % bt, c->k + (int64_t)t * kvd, c->v + (int64_t)t * kvd);
    }
}

/* Query chunks: maximal runs of consecutive batch tokens of one sequence,
 * at most ATTN_MAX_CHUNK long; each chunk x KV head is one work item. */
static int32_t make_chunks(llama_fwd *c, const fwd_batch *b) {
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

/* The kernel arguments of (chunk, KV head g) at layer il. */
static attn_args chunk_args(const llama_fwd *c, const fwd_batch *b, int il, int32_t ch, int g, float *scratch) {
    const model_hparams *hp = &c->m->hp;
    int group = hp->n_head / hp->n_head_kv, hd = hp->head_dim;
    int64_t qd = (int64_t)hp->n_head * hd;
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
        .window = 0,
        .scale = 1.0f / sqrtf((float)hd),
        .softcap = 0.0f,
        .sinks = NULL,
        .prec = c->prec,
        .scratch = scratch,
    };
    kv_rows_attn(&c->rows, il, g, hd, &a);
    return a;
}

/* Builds the step's attention items: every chunk x KV head whole, except,
 * in a step with few items, short (decode) chunks over more than one KV
 * segment, which are split into one item per segment while the partial
 * budget lasts. */
static void plan_attention(llama_fwd *c, const fwd_batch *b, int32_t n_chunks) {
    const model_hparams *hp = &c->m->hp;
    int group = hp->n_head / hp->n_head_kv;
    int64_t used = 0;
    c->n_items = c->n_merges = 0;
    /* enough whole items to keep the pool busy: splitting would only add merges */
    bool few = (int64_t)n_chunks * hp->n_head_kv < (int64_t)LLAMA_SPLIT_ITEMS_PER_THREAD * c->n_threads;
    for (int32_t ch = 0; ch < n_chunks; ch++) {
        attn_args a = chunk_args(c, b, 0, ch, 0, NULL);
        int first, end;
        attn_segments(&a, &first, &end);
        int64_t pf = (int64_t)attn_part_floats(a.n_tok, group, hp->head_dim);
        int64_t need = pf * (end - first) * hp->n_head_kv;
        bool split = few && a.n_tok <= LLAMA_SPLIT_MAX_TOK && end - first > 1 && used + need <= c->parts_cap &&
                     c->n_items + (int64_t)(end - first) * hp->n_head_kv <= c->max_items;
        for (int g = 0; g < hp->n_head_kv; g++) {
            if (!split) {
                c->items[c->n_items++] = (attn_item){ch, g, -1, 0};
                continue;
            }
            c->merges[c->n_merges++] = (attn_item){ch, g, first, used};
            for (int sg = first; sg < end; sg++, used += pf) c->items[c->n_items++] = (attn_item){ch, g, sg, used};
        }
    }
}

typedef struct attn_job {
    llama_fwd *c;
    const fwd_batch *b;
    int layer;
} attn_job;

static void attn_task(void *ctx, int ith, int nth) {
    attn_job *j = ctx;
    llama_fwd *c = j->c;
    float *scratch = c->scratch + (int64_t)ith * c->scratch_per_thread;
    /* interleaved so that long (late) and short (early) items spread evenly; a split step's items (KV
     * head-major, segments ascending) in contiguous runs instead, so that a thread's next item is
     * the next segment, whose first encoded rows the non-f32 load step has begun to prefetch */
    int32_t it0 = ith, it1 = c->n_items, step = nth;
    if (c->n_merges > 0) {
        it0 = (int32_t)((int64_t)c->n_items * ith / nth);
        it1 = (int32_t)((int64_t)c->n_items * (ith + 1) / nth);
        step = 1;
    }
    for (int32_t it = it0; it < it1; it += step) {
        const attn_item *w = &c->items[it];
        attn_args a = chunk_args(c, j->b, j->layer, w->chunk, w->kv_head, scratch);
        if (w->seg < 0) kern_attention(&a);
        else kern_attention_part(&a, w->seg, c->parts + w->part_off);
    }
}

static void attn_merge_task(void *ctx, int ith, int nth) {
    attn_job *j = ctx;
    llama_fwd *c = j->c;
    const model_hparams *hp = &c->m->hp;
    float *scratch = c->scratch + (int64_t)ith * c->scratch_per_thread;
    for (int32_t it = ith; it < c->n_merges; it += nth) {
        const attn_item *w = &c->merges[it];
        attn_args a = chunk_args(c, j->b, j->layer, w->chunk, w->kv_head, scratch);
        int64_t pf = (int64_t)attn_part_floats(a.n_tok, hp->n_head / hp->n_head_kv, hp->head_dim);
        kern_attention_merge(&a, c->parts + w->part_off, pf);
    }
}

/* ---- the pass ---- */

static int llama_forward(void *fc, const fwd_batch *b, float *logits, cf_err *err) {
    (void)err;
    llama_fwd *c = fc;
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    int32_t T = b->n_tokens;
    int64_t E = hp->n_embd, qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim;
    int64_t hd = hp->head_dim;
    float eps = hp->rms_eps;
    model_embed(m, b->tokens, T, c->x);
    rope_tables(c, b);
    plan_attention(c, b, make_chunks(c, b));

    for (int il = 0; il < hp->n_layer; il++) {
        const layer_weights *L = (const layer_weights *)m->layers + il;
        rows_rmsnorm(c->pool, eps, c->x, E, L->attn_norm, c->h, E, T, E);
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
        rows_add_bias(c->q, L->bq, T, qd);
        rows_add_bias(c->k, L->bk, T, kvd);
        rows_add_bias(c->v, L->bv, T, kvd);
        if (L->q_norm) rows_rmsnorm(c->pool, eps, c->q, hd, L->q_norm, c->q, hd, T * hp->n_head, hd);
        if (L->k_norm) rows_rmsnorm(c->pool, eps, c->k, hd, L->k_norm, c->k, hd, T * hp->n_head_kv, hd);
        rope_apply(c, c->q, T, hp->n_head);
        rope_apply(c, c->k, T, hp->n_head_kv);
        kv_store(c, b, il);
        attn_job aj = {c, b, il};
        pool_run(c->pool, attn_task, &aj);
        if (c->n_merges) pool_run(c->pool, attn_merge_task, &aj);
        kern_matmul(c->kc, &L->wo, c->att, T, c->h);
        rows_add(c->pool, c->x, c->h, NULL, T, E);

        rows_rmsnorm(c->pool, eps, c->x, E, L->ffn_norm, c->h, E, T, E);
        if (L->gu_fused) {
            kern_matmul(c->kc, &L->w_gu, c->h, T, c->stack);
            rows_swiglu_stacked(c->pool, c->gate, c->stack, T, hp->n_ff);
        } else {
            kern_matmul(c->kc, &L->w_gate, c->h, T, c->gate);
            kern_matmul(c->kc, &L->w_up, c->h, T, c->up);
            rows_silu_mul(c->pool, c->gate, c->up, T, hp->n_ff);
        }
        kern_matmul(c->kc, &L->w_down, c->gate, T, c->h);
        rows_add(c->pool, c->x, c->h, NULL, T, E);
    }
    if (b->n_out == 0) return 0;
    model_logits(m, c->kc, c->pool, c->x, b, c->h, c->xo, logits);
    return 0;
}

static void llama_fwd_set_kv_dtype(void *fc, kv_dtype dt) {
    llama_fwd *c = fc;
    c->rows = kv_rows_make(dt, c->rows.block_tokens, c->rows.kvd);
}

static void llama_set_attn_prec(void *fc, attn_prec prec) { ((llama_fwd *)fc)->prec = prec; }

const model_arch model_arch_llama = {
    .names = {"llama", "qwen2", "qwen3", NULL},
    .read_hparams = llama_read_hparams,
    .load = llama_load,
    .release = llama_release,
    .kv_layout = llama_kv_layout,
    .kv_describe = llama_kv_describe,
    .fingerprint = llama_fingerprint,
    .fwd_create = llama_fwd_create,
    .fwd_free = llama_fwd_free,
    .forward = llama_forward,
    .kv_dtypes = 1u << KV_DTYPE_BF16 | 1u << KV_DTYPE_F16 | 1u << KV_DTYPE_Q8_0,
    .fwd_set_kv_dtype = llama_fwd_set_kv_dtype,
    .fwd_set_attn_prec = llama_set_attn_prec,
};
