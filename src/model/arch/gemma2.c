/* gemma2.c - the 'gemma2' architecture family: Gemma 2 GGUF files as
 * llama.cpp's converter writes them (keys gemma2.*, its gemma2 graph):
 *
 *   x = E[token] * sqrt(n_embd)
 *   per layer: h = rmsnorm(x)·w_attn; q,k,v = h·Wq,Wk,Wv; RoPE NEOX (q, k);
 *              K/V -> cache; s = cap_a(q_scale * q.k), cap(x) = c*tanh(x/c);
 *              o = softmax(s)·V over all earlier positions (global layers)
 *              or the last `sliding_window` ones (window layers);
 *              x += rmsnorm(o·Wo)·w_post_attn;
 *              h = rmsnorm(x)·w_ffn; x += rmsnorm((gelu(h·Wg) * (h·Wu))·Wd)·w_post_ffw
 *   logits = cap_f(rmsnorm(x[out_rows])·w_out · E)      (the LM head is token_embd)
 *
 * Facts from llama.cpp (src/models/gemma2.cpp, llama-hparams.cpp): norm
 * weights are used as stored (the converter already added Gemma's +1); gelu
 * is the tanh approximation; window layers are those with
 * il % pattern < pattern - 1 for attention.sliding_window_pattern (default
 * 2: the even layers), or the per-layer booleans when the key is an array;
 * the window defaults to 4096, the caps to 50 (attention) and 30 (final);
 * the query scale is 1/sqrt(n_embd / n_head) for the 46-layer (27B) shape and
 * 1/sqrt(head_dim) otherwise (Gemma's query_pre_attn_scalar; llama.cpp reads
 * no key for it); rope.freq_base_swa (default rope.freq_base) for window
 * layers. Files whose layers are all window layers are refused (the KV pool
 * needs one paged group).
 *
 * KV layout: global layers form a KV_LAYER_FULL group in the blocks, window
 * layers a KV_LAYER_WINDOW group in the sequence's ring (model.h "KV
 * layout"); per layer both use the llama layout (K dimension-major, V
 * token-major). A window layer attends through a wrapping block table over
 * the ring (vtab), so the shared attention kernel reads the ring in place.
 * Scratch lives in g2_fwd, sized at creation: no allocation per step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch/arch.h"
#include "model/kv_rows.h"
#include "model/rowops.h"
#include "tensor/attention.h"

typedef struct g2_layer {
    const float *attn_norm, *post_attn_norm, *ffn_norm, *post_ffw_norm; /* f32 (model weight buffers or the file) */
    kern_weight wq, wk, wv, wo, w_gate, w_up, w_down;
    bool window; /* sliding-window layer */
    int32_t slot; /* index within its KV group (full or window) */
} g2_layer;

static bool g2_is_window(const model_hparams *hp, int il) { return (hp->swa_layers[il / 64] >> (il % 64)) & 1; }

/* ---- hyper-parameters ---- */

static int g2_read_pattern(const gguf_file *f, model_hparams *hp, cf_err *err) {
    const char *key = "gemma2.attention.sliding_window_pattern";
    int64_t ki = gguf_find_key(f, key);
    memset(hp->swa_layers, 0, sizeof hp->swa_layers);
    if (ki >= 0 && gguf_kv_type(f, ki) == GGUF_ARRAY) {
        int64_t *v = NULL;
        uint64_t n = 0;
        if (gguf_get_arr_i64(f, key, &v, &n, err)) return -1;
        if (n != (uint64_t)hp->n_layer) {
            free(v);
            return cf_fail(err, "%s has %llu entries, block_count is %d", key, (unsigned long long)n, hp->n_layer);
        }
        for (int il = 0; il < hp->n_layer; il++)
            if (v[il]) hp->swa_layers[il / 64] |= 1ull << (il % 64);
        free(v);
        return 0;
    }
    int32_t pattern = 2;
    if (model_key_i32(f, hp->arch, "attention.sliding_window_pattern", &pattern, false, err)) return -1;
    for (int il = 0; il < hp->n_layer; il++)
        if (pattern == 0 || il % pattern < pattern - 1) hp->swa_layers[il / 64] |= 1ull << (il % 64);
    return 0;
}

static int g2_read_hparams(const gguf_file *f, model_hparams *hp, cf_err *err) {
    if (hp->v_head_dim != hp->head_dim)
        return cf_fail(err, "gemma2: key_length (%d) and value_length (%d) must be equal", hp->head_dim,
                       hp->v_head_dim);
    if (hp->n_layer > MODEL_MAX_SWA_LAYERS)
        return cf_fail(err, "gemma2: block_count %d is above %d", hp->n_layer, MODEL_MAX_SWA_LAYERS);
    hp->v_head_dim = 0;
    hp->rope_mode = ROPE_NEOX;
    hp->n_swa = 4096;
    hp->attn_softcap = 50.0f;
    hp->final_softcap = 30.0f;
    hp->swa_rope_base = hp->rope_base;
    if (model_key_i32(f, hp->arch, "attention.sliding_window", &hp->n_swa, false, err) ||
        model_key_f32(f, hp->arch, "attn_logit_softcapping", &hp->attn_softcap, err) ||
        model_key_f32(f, hp->arch, "final_logit_softcapping", &hp->final_softcap, err) ||
        model_key_f32(f, hp->arch, "rope.freq_base_swa", &hp->swa_rope_base, err) || g2_read_pattern(f, hp, err))
        return -1;
    if (hp->n_swa <= 0) return cf_fail(err, "gemma2.attention.sliding_window (%d) must be positive", hp->n_swa);
    if (!(hp->attn_softcap > 0)) return cf_fail(err, "gemma2.attn_logit_softcapping must be positive");
    if (!(hp->final_softcap > 0)) return cf_fail(err, "gemma2.final_logit_softcapping must be positive");
    if (!(hp->swa_rope_base > 0)) return cf_fail(err, "gemma2.rope.freq_base_swa must be positive");
    int n_window = 0;
    for (int il = 0; il < hp->n_layer; il++) n_window += g2_is_window(hp, il);
    if (n_window == hp->n_layer)
        return cf_fail(err, "gemma2.attention.sliding_window_pattern: every layer is a window layer; cinfer needs "
                            "at least one global layer");
    int32_t qpas = hp->n_layer == 46 ? hp->n_embd / hp->n_head : hp->head_dim;
    hp->q_scale = 1.0f / sqrtf((float)qpas);
    return 0;
}

static int g2_fingerprint(const model_hparams *hp, model_fp_writer *w) {
    int ok = model_fp_u32(w, (uint32_t)hp->n_swa) && model_fp_f32(w, hp->attn_softcap) &&
             model_fp_f32(w, hp->final_softcap) && model_fp_f32(w, hp->q_scale) && model_fp_f32(w, hp->swa_rope_base);
    for (int i = 0; ok && i < MODEL_MAX_SWA_LAYERS / 64; i++)
        ok = model_fp_u32(w, (uint32_t)hp->swa_layers[i]) && model_fp_u32(w, (uint32_t)(hp->swa_layers[i] >> 32));
    return ok;
}

/* ---- weights ---- */

static int g2_load_layer(model *m, int il, int32_t slot, cf_err *err) {
    const model_hparams *hp = &m->hp;
    g2_layer *L = (g2_layer *)m->layers + il;
    int64_t qd = (int64_t)hp->n_head * hp->head_dim, kvd = (int64_t)hp->n_head_kv * hp->head_dim, E = hp->n_embd;
    L->window = g2_is_window(hp, il);
    L->slot = slot;
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d." s, il), n)
    if (model_load_vector(m, NAME("attn_norm.weight"), E, true, &L->attn_norm, err) ||
        model_load_vector(m, NAME("post_attention_norm.weight"), E, true, &L->post_attn_norm, err) ||
        model_load_vector(m, NAME("ffn_norm.weight"), E, true, &L->ffn_norm, err) ||
        model_load_vector(m, NAME("post_ffw_norm.weight"), E, true, &L->post_ffw_norm, err) ||
        model_load_matrix(m, NAME("attn_q.weight"), E, qd, &L->wq, err) ||
        model_load_matrix(m, NAME("attn_k.weight"), E, kvd, &L->wk, err) ||
        model_load_matrix(m, NAME("attn_v.weight"), E, kvd, &L->wv, err) ||
        model_load_matrix(m, NAME("attn_output.weight"), qd, E, &L->wo, err) ||
        model_load_matrix(m, NAME("ffn_gate.weight"), E, hp->n_ff, &L->w_gate, err) ||
        model_load_matrix(m, NAME("ffn_up.weight"), E, hp->n_ff, &L->w_up, err) ||
        model_load_matrix(m, NAME("ffn_down.weight"), hp->n_ff, E, &L->w_down, err))
        return -1;
#undef NAME
    return 0;
}

static int g2_load(model *m, cf_err *err) {
    const model_hparams *hp = &m->hp;
    if (!hp->tied_output) return cf_fail(err, "gemma2: unexpected output.weight (the LM head is token_embd)");
    m->layers = calloc((size_t)hp->n_layer, sizeof(g2_layer));
    if (!m->layers) return cf_fail(err, "out of memory");
    int32_t n_full = 0, n_window = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        int32_t slot = g2_is_window(hp, il) ? n_window++ : n_full++;
        if (g2_load_layer(m, il, slot, err)) return -1;
        if (m->progress) m->progress(m->progress_ctx, MODEL_LOAD_LAYERS, il + 1, hp->n_layer);
    }
    m->active_bytes = m->weight_bytes;
    m->active_params = m->n_params;
    return 0;
}

static void g2_release(model *m) {
    g2_layer *layers = m->layers;
    if (!layers) return;
    for (int il = 0; il < m->hp.n_layer; il++) {
        g2_layer *L = &layers[il];
        kern_weight *ws[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) kern_weight_release(ws[i]);
    }
    free(layers);
    m->layers = NULL;
}

/* ---- KV layout ---- */

static int32_t g2_n_window(const model_hparams *hp) {
    int32_t n = 0;
    for (int il = 0; il < hp->n_layer; il++) n += g2_is_window(hp, il);
    return n;
}

static void g2_kv_layout(const model *m, kv_spec *out) {
    const model_hparams *hp = &m->hp;
    int32_t n_window = g2_n_window(hp), tf = 2 * hp->n_head_kv * hp->head_dim;
    out->n_groups = 0;
    out->groups[out->n_groups++] =
        (kv_group_spec){.kind = KV_LAYER_FULL, .n_layers = hp->n_layer - n_window, .token_floats = tf};
    if (n_window > 0)
        out->groups[out->n_groups++] =
            (kv_group_spec){.kind = KV_LAYER_WINDOW, .n_layers = n_window, .token_floats = tf, .window = hp->n_swa};
}

static void g2_kv_describe(const model *m, char *buf, size_t n) {
    const model_hparams *hp = &m->hp;
    int32_t n_window = g2_n_window(hp);
    snprintf(buf, n,
             "(%d global layers x 2 x %d KV heads x %d x 4 B; plus a ring per sequence: %d window layers x %d+ "
             "rows x %d B)",
             hp->n_layer - n_window, hp->n_head_kv, hp->head_dim, n_window, hp->n_swa,
             2 * hp->n_head_kv * hp->head_dim * 4);
}

/* ---- forward context ---- */

typedef struct g2_fwd {
    const model *m;
    thread_pool *pool;
    kern_ctx *kc;
    int32_t max_tokens, max_ctx, block_tokens, max_blocks;
    float *x, *h, *q, *k, *v, *att, *gate, *up, *xo;
    float *rope_cs, *rope_cs_swa; /* per batch token: rope_dim/2 (cos, sin) pairs; swa: NULL when the bases agree */
    float *scores; /* attention scratch per thread: scores_per_thread floats (attn_scratch_floats) */
    int64_t scores_per_thread;
    int32_t *chunk_begin; /* max_tokens + 1 */
    float **vtab; /* per sequence: max_blocks pointers, the ring as a wrapping block table */
    int n_threads;
    kv_rows rows; /* how K/V rows are stored (the cache's element type) */
    attn_prec prec; /* fwd_ctx_set_attn_prec */
} g2_fwd;

static void g2_fwd_free(void *fc) {
    g2_fwd *c = fc;
    if (!c) return;
    kern_ctx_destroy(c->kc);
    float *bufs[] = {c->x,    c->h,  c->q,  c->k,      c->v,       c->att,
                     c->gate, c->up, c->xo, c->scores, c->rope_cs, c->rope_cs_swa};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c->chunk_begin);
    free(c->vtab);
    free(c);
}

static void *g2_fwd_create(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx, int32_t block_tokens,
                           cf_err *err) {
    const model_hparams *hp = &m->hp;
    g2_fwd *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    *c = (g2_fwd){.m = m, .pool = pool, .max_tokens = max_tokens, .max_ctx = max_ctx, .block_tokens = block_tokens};
    c->max_blocks = (max_ctx + block_tokens - 1) / block_tokens;
    c->n_threads = pool_size(pool);
    c->rows = kv_rows_make(KV_DTYPE_F32, block_tokens, (int64_t)hp->n_head_kv * hp->head_dim);
    size_t T = (size_t)max_tokens, E = (size_t)hp->n_embd, F = (size_t)hp->n_ff;
    size_t qd = (size_t)hp->n_head * hp->head_dim, kvd = (size_t)hp->n_head_kv * hp->head_dim;
    size_t widest = E > F ? E : F;
    if (qd > widest) widest = qd;
    c->kc = kern_ctx_create(pool, max_tokens, (int64_t)widest);
    c->x = malloc(T * E * sizeof(float));
    c->h = malloc(T * E * sizeof(float));
    c->xo = malloc(T * E * sizeof(float));
    c->q = malloc(T * qd * sizeof(float));
    c->att = malloc(T * qd * sizeof(float));
    c->k = malloc(T * kvd * sizeof(float));
    c->v = malloc(T * kvd * sizeof(float));
    c->gate = malloc(T * F * sizeof(float));
    c->up = malloc(T * F * sizeof(float));
    c->rope_cs = malloc(T * hp->rope_dim * sizeof(float));
    if (hp->swa_rope_base != hp->rope_base) c->rope_cs_swa = malloc(T * hp->rope_dim * sizeof(float));
    c->scores_per_thread = (int64_t)attn_scratch_floats(ATTN_MAX_CHUNK, hp->n_head / hp->n_head_kv, hp->head_dim);
    c->scores = malloc((size_t)c->n_threads * (size_t)c->scores_per_thread * sizeof(float));
    c->chunk_begin = malloc((T + 1) * sizeof(int32_t));
    c->vtab = malloc(T * (size_t)c->max_blocks * sizeof(float *));
    if (!c->kc || !c->x || !c->h || !c->xo || !c->q || !c->att || !c->k || !c->v || !c->gate || !c->up || !c->rope_cs ||
        (hp->swa_rope_base != hp->rope_base && !c->rope_cs_swa) || !c->scores || !c->chunk_begin || !c->vtab)
        goto oom;
    return c;
oom:
    g2_fwd_free(c);
    cf_fail(err, "out of memory creating the forward context (%d tokens)", max_tokens);
    return NULL;
}

/* ---- attention ---- */

/* Floats of one ring block (all window layers, block_tokens rows). */
static int64_t g2_ring_block_floats(const g2_fwd *c) {
    return (int64_t)g2_n_window(&c->m->hp) * 2 * c->rows.units * c->block_tokens;
}

/* Block tables over the rings: vtab[s][i] = ring block i % ring_blocks of sequence s. */
static void g2_fill_vtab(g2_fwd *c, const fwd_batch *b) {
    int64_t rbf = g2_ring_block_floats(c);
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const fwd_seq *fs = &b->seqs[s];
        float **vt = c->vtab + (int64_t)s * c->max_blocks;
        for (int32_t i = 0; fs->ring && i < c->max_blocks; i++) vt[i] = fs->ring + (i % fs->ring_blocks) * rbf;
    }
}

/* K and V of the batch into the layer's slot of the blocks (global layer)
 * or ring (window layer), in the model/kv_rows.h layout. */
static void g2_kv_store(g2_fwd *c, const fwd_batch *b, const g2_layer *L) {
    int64_t kvd = c->rows.kvd, bt = c->block_tokens;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        int32_t p = b->pos[t];
        if (!L->window && p < b->seqs[b->seq[t]].keep_below) continue; /* bounded replay: cached rows stay */
        float *blk =
            L->window ? c->vtab[(int64_t)b->seq[t] * c->max_blocks + p / bt] : b->seqs[b->seq[t]].blocks[p / bt];
        kv_rows_write(&c->rows, blk, L->slot, p % bt, c->k + (int64_t)t * kvd, c->v + (int64_t)t * kvd);
    }
}

static int32_t g2_make_chunks(g2_fwd *c, const fwd_batch *b) {
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

typedef struct g2_attn_job {
    g2_fwd *c;
    const fwd_batch *b;
    const g2_layer *L;
    int32_t n_chunks;
} g2_attn_job;

static void g2_attn_task(void *ctx, int ith, int nth) {
    g2_attn_job *j = ctx;
    g2_fwd *c = j->c;
    const fwd_batch *b = j->b;
    const model_hparams *hp = &c->m->hp;
    int group = hp->n_head / hp->n_head_kv, hd = hp->head_dim;
    int64_t qd = (int64_t)hp->n_head * hd;
    int64_t n_items = (int64_t)j->n_chunks * hp->n_head_kv;
    float *scores = c->scores + (int64_t)ith * c->scores_per_thread;
    for (int64_t it = ith; it < n_items; it += nth) {
        int32_t ch = (int32_t)(it / hp->n_head_kv);
        int g = (int)(it % hp->n_head_kv);
        int32_t t0 = c->chunk_begin[ch], t1 = c->chunk_begin[ch + 1];
        float *const *blocks =
            j->L->window ? c->vtab + (int64_t)b->seq[t0] * c->max_blocks : b->seqs[b->seq[t0]].blocks;
        attn_args a = {
            .q = c->q + (int64_t)t0 * qd + (int64_t)g * group * hd,
            .q_stride = qd,
            .out = c->att + (int64_t)t0 * qd + (int64_t)g * group * hd,
            .out_stride = qd,
            .pos = b->pos + t0,
            .n_tok = t1 - t0,
            .n_q = group,
            .head_dim = hd,
            .blocks = blocks,
            .window = j->L->window ? hp->n_swa : 0,
            .floor = j->L->window ? b->seqs[b->seq[t0]].replay_from : 0,
            .scale = hp->q_scale,
            .softcap = hp->attn_softcap,
            .prec = c->prec,
            .scratch = scores,
        };
        kv_rows_attn(&c->rows, j->L->slot, g, hd, &a);
        kern_attention(&a);
    }
}

/* ---- the pass ---- */

static void g2_layer_forward(g2_fwd *c, const fwd_batch *b, const g2_layer *L, int32_t n_chunks) {
    const model_hparams *hp = &c->m->hp;
    int32_t T = b->n_tokens;
    int64_t E = hp->n_embd;
    float eps = hp->rms_eps;
    rows_rmsnorm(c->pool, eps, c->x, E, L->attn_norm, c->h, E, T, E);
    kern_matmul(c->kc, &L->wq, c->h, T, c->q);
    kern_matmul(c->kc, &L->wk, c->h, T, c->k);
    kern_matmul(c->kc, &L->wv, c->h, T, c->v);
    const float *cs = L->window && c->rope_cs_swa ? c->rope_cs_swa : c->rope_cs;
    rows_rope(cs, hp->rope_dim, hp->rope_mode, c->q, T, hp->n_head, (int64_t)hp->n_head * hp->head_dim, hp->head_dim,
              0);
    rows_rope(cs, hp->rope_dim, hp->rope_mode, c->k, T, hp->n_head_kv, (int64_t)hp->n_head_kv * hp->head_dim,
              hp->head_dim, 0);
    g2_kv_store(c, b, L);
    g2_attn_job aj = {c, b, L, n_chunks};
    pool_run(c->pool, g2_attn_task, &aj);
    kern_matmul(c->kc, &L->wo, c->att, T, c->h);
    rows_rmsnorm(c->pool, eps, c->h, E, L->post_attn_norm, c->xo, E, T, E);
    rows_add(c->pool, c->x, c->xo, NULL, T, E);

    rows_rmsnorm(c->pool, eps, c->x, E, L->ffn_norm, c->h, E, T, E);
    kern_matmul(c->kc, &L->w_gate, c->h, T, c->gate);
    kern_matmul(c->kc, &L->w_up, c->h, T, c->up);
    rows_gelu_mul(c->pool, c->gate, c->up, T, hp->n_ff);
    kern_matmul(c->kc, &L->w_down, c->gate, T, c->h);
    rows_rmsnorm(c->pool, eps, c->h, E, L->post_ffw_norm, c->xo, E, T, E);
    rows_add(c->pool, c->x, c->xo, NULL, T, E);
}

static int g2_forward(void *fc, const fwd_batch *b, float *logits, cf_err *err) {
    (void)err;
    g2_fwd *c = fc;
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    int32_t T = b->n_tokens;
    int64_t E = hp->n_embd;
    model_embed(m, b->tokens, T, c->x);
    float emb_scale = sqrtf((float)E);
    for (int64_t i = 0; i < (int64_t)T * E; i++) c->x[i] *= emb_scale;
    float mscale = hp->rope_scaling == ROPE_SCALING_YARN ? hp->yarn_attn_factor : 1.0f;
    rope_fill_table(hp, m->rope_freq_factors, mscale, b->pos, T, c->rope_cs);
    if (c->rope_cs_swa) {
        model_hparams swa = *hp;
        swa.rope_base = hp->swa_rope_base;
        rope_fill_table(&swa, m->rope_freq_factors, mscale, b->pos, T, c->rope_cs_swa);
    }
    g2_fill_vtab(c, b);
    int32_t n_chunks = g2_make_chunks(c, b);
    for (int il = 0; il < hp->n_layer; il++) g2_layer_forward(c, b, (const g2_layer *)m->layers + il, n_chunks);
    if (b->n_out == 0) return 0;
    model_logits(m, c->kc, c->pool, c->x, b, c->h, c->xo, logits);
    float cap = hp->final_softcap;
    for (int64_t i = 0; i < (int64_t)b->n_out * hp->n_vocab; i++) logits[i] = cap * tanhf(logits[i] / cap);
    return 0;
}

static void g2_fwd_set_kv_dtype(void *fc, kv_dtype dt) {
    g2_fwd *c = fc;
    c->rows = kv_rows_make(dt, c->rows.block_tokens, c->rows.kvd);
}

static void g2_set_attn_prec(void *fc, attn_prec prec) { ((g2_fwd *)fc)->prec = prec; }

const model_arch model_arch_gemma2 = {
    .names = {"gemma2", NULL},
    .read_hparams = g2_read_hparams,
    .load = g2_load,
    .release = g2_release,
    .kv_layout = g2_kv_layout,
    .kv_describe = g2_kv_describe,
    .fingerprint = g2_fingerprint,
    .fwd_create = g2_fwd_create,
    .fwd_free = g2_fwd_free,
    .forward = g2_forward,
    .kv_dtypes = 1u << KV_DTYPE_BF16 | 1u << KV_DTYPE_F16 | 1u << KV_DTYPE_Q8_0,
    .fwd_set_kv_dtype = g2_fwd_set_kv_dtype,
    .fwd_set_attn_prec = g2_set_attn_prec,
};
