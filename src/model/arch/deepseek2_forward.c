/* deepseek2_forward.c - the deepseek2 forward pass over a ragged batch
 * (llama.cpp's build_deepseek2):
 *
 *   x = E[token]
 *   per layer: h = rmsnorm(x)·w_attn
 *     q = Wq_b·rmsnorm(Wq_a h) (or Wq h): per head [q_nope | q_pe]
 *     [c_kv | k_pe] = Wkv_a h; c_kv = rmsnorm(c_kv)·w_kv_a; RoPE (NORM) on
 *     q_pe and k_pe (one rotary key shared by all heads)
 *     cache <- [c_kv | k_pe]; o = MLA attention (deepseek2_attention.c); x += Wo·o
 *     h = rmsnorm(x)·w_ffn; x += dense SwiGLU FFN (leading layers) or MoE
 *     (deepseek2_moe.c)
 *   logits = rmsnorm(x[out_rows])·w_out · Wout
 *
 * YaRN: RoPE as ggml's with attn_factor 1/(1 + 0.1 ln factor) (so the
 * rotation keeps unit scale), and kq scale = mscale^2/sqrt(head_dim) with
 * mscale = attn_factor·(1 + yarn_log_multiplier·ln factor).
 *
 * Matrices run over the whole batch (one weight read per step) and every
 * per-token result is independent of the other tokens in the batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch/deepseek2_fwd.h"
#include "model/rowops.h"
#include "tensor/attention.h"

void ds2_fwd_free(ds2_fwd *c) {
    if (!c) return;
    kern_ctx_destroy(c->kc);
    kern_ctx_destroy(c->kc_exp);
    void *bufs[] = {c->x,         c->h,        c->qa,         c->q,         c->ckv,     c->lat,
                    c->att,       c->ffa,      c->ffb,        c->ffo,       c->moe,     c->rope_cs,
                    c->scores,    c->ctx_lat,  c->ctx_kv,     c->tok_group, c->grp_seq, c->grp_n,
                    c->grp_last,  c->grp_toks, c->grp_expand, c->router,    c->rscore,  c->sel_w,
                    c->exp_w,     c->xe,       c->ge,         c->ue,        c->ye,      c->sel,
                    c->exp_n,     c->exp_off,  c->exp_tok,    c->moe_index, c->ring,    (void *)c->load,
                    c->pair_x,    c->pair_y,   c->pair_e,     c->mtp_cat,   c->olat,    c->attn_scratch,
                    c->run_first, c->run_len};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c);
}

static void *fmalloc(size_t n) { return malloc(n ? n * sizeof(float) : sizeof(float)); }

ds2_fwd *ds2_fwd_create(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx, int32_t block_tokens,
                        cf_err *err) {
    const model_hparams *hp = &m->hp;
    ds2_fwd *c = calloc(1, sizeof *c);
    if (!c) goto oom;
    c->m = m;
    c->pool = pool;
    c->max_tokens = max_tokens;
    c->max_ctx = max_ctx;
    c->bt = block_tokens;
    c->n_threads = pool_size(pool);
    c->expand_min = MLA_EXPAND_NEVER;
    c->exp_cap = max_ctx < MLA_EXPAND_MAX_CTX ? max_ctx : MLA_EXPAND_MAX_CTX;
    float freq_scale = hp->rope_scaling == ROPE_SCALING_NONE ? 1.0f : 1.0f / hp->rope_factor;
    float mscale = hp->yarn_attn_factor * (1.0f + hp->yarn_log_mul * logf(1.0f / freq_scale));
    c->scale = mscale * mscale / sqrtf((float)hp->head_dim);

    size_t T = (size_t)max_tokens, E = (size_t)hp->n_embd, H = (size_t)hp->n_head;
    size_t kvl = (size_t)hp->kv_lora_rank, rope = (size_t)hp->rope_dim, vd = (size_t)hp->v_head_dim;
    size_t qk = (size_t)hp->head_dim;
    size_t ffw = (size_t)hp->n_ff;
    size_t fs = (size_t)hp->n_ff_exp * (size_t)hp->n_expert_shared;
    if (fs > ffw) ffw = fs;
    size_t widest = E;
    size_t ins[] = {ffw, H * vd, (size_t)hp->q_lora_rank, kvl, (size_t)hp->n_ff_exp, hp->n_nextn ? 2 * E : E};
    for (size_t i = 0; i < sizeof ins / sizeof ins[0]; i++)
        if (ins[i] > widest) widest = ins[i];
    c->kc = kern_ctx_create(pool, max_tokens, (int64_t)widest);
    c->x = fmalloc(T * E);
    c->h = fmalloc(T * E);
    c->qa = fmalloc(T * (size_t)hp->q_lora_rank);
    c->q = fmalloc(T * H * qk);
    c->ckv = fmalloc(T * (kvl + rope));
    c->lat = fmalloc(T * H * (kvl + rope));
    c->olat = fmalloc(T * H * kvl);
    /* about 128 kernel rows (tokens x heads) per call: Q, scores and outputs stay in L2 */
    c->run_max = hp->n_head >= 128 ? 1 : 128 / hp->n_head;
    if (c->run_max > ATTN_MAX_CHUNK) c->run_max = ATTN_MAX_CHUNK;
    c->attn_scratch_per_thread = (int64_t)attn_scratch_floats(c->run_max, hp->n_head, (int)(kvl + rope));
    c->attn_scratch = fmalloc((size_t)c->n_threads * (size_t)c->attn_scratch_per_thread);
    c->run_first = malloc(T * sizeof(int32_t));
    c->run_len = malloc(T * sizeof(int32_t));
    c->att = fmalloc(T * H * vd);
    c->ffa = fmalloc(T * ffw);
    c->ffb = fmalloc(T * ffw);
    c->ffo = fmalloc(T * E);
    c->moe = fmalloc(T * E);
    c->rope_cs = fmalloc(T * rope);
    c->scores_per_thread = c->exp_cap; /* the expanded form: one head's scores per item */
    c->scores = fmalloc((size_t)c->n_threads * (size_t)c->scores_per_thread);
    c->tok_group = malloc(T * sizeof(int32_t));
    c->grp_seq = malloc(T * sizeof(int32_t));
    c->grp_n = malloc(T * sizeof(int32_t));
    c->grp_last = malloc(T * sizeof(int32_t));
    c->grp_toks = malloc(T * sizeof(int32_t));
    c->grp_expand = malloc(T);
    size_t ne = (size_t)hp->n_expert, k = (size_t)hp->n_expert_used;
    c->router = fmalloc(T * ne);
    c->rscore = fmalloc(ne);
    c->sel_w = fmalloc(T * k);
    c->exp_w = fmalloc(T * k);
    c->xe = fmalloc(T * E);
    c->ge = fmalloc(T * (size_t)hp->n_ff_exp);
    c->ue = fmalloc(T * 2 * (size_t)hp->n_ff_exp); /* stacked gate|up rows */
    c->ye = fmalloc(T * E);
    c->sel = malloc((T * k + 1) * sizeof(int32_t));
    c->exp_n = malloc((ne + 1) * sizeof(int32_t));
    c->exp_off = malloc((ne + 1) * sizeof(int32_t));
    c->exp_tok = malloc((T * k + 1) * sizeof(int32_t));
    c->moe_index = malloc((size_t)(hp->n_layer + hp->n_nextn) * sizeof(int32_t));
    if (hp->n_nextn && !(c->mtp_cat = fmalloc(T * 2 * E))) goto oom;
    if (!c->olat || !c->attn_scratch || !c->run_first || !c->run_len) goto oom;
    if (!c->kc || !c->x || !c->h || !c->qa || !c->q || !c->ckv || !c->lat || !c->att || !c->ffa || !c->ffb || !c->ffo ||
        !c->moe || !c->rope_cs || !c->scores || !c->tok_group || !c->grp_seq || !c->grp_n || !c->grp_last ||
        !c->grp_toks || !c->grp_expand || !c->router || !c->rscore || !c->sel_w || !c->exp_w || !c->xe || !c->ge ||
        !c->ue || !c->ye || !c->sel || !c->exp_n || !c->exp_off || !c->exp_tok || !c->moe_index)
        goto oom;
    for (int il = 0; il < hp->n_layer; il++) c->moe_index[il] = ds2_layers(m)[il].moe ? c->n_moe++ : -1;
    for (int il = hp->n_layer; il < hp->n_layer + hp->n_nextn; il++) c->moe_index[il] = -1;
    if (c->n_moe) {
        size_t cells = (size_t)c->n_moe * ne;
        c->ring = calloc((size_t)MOE_LOAD_WINDOW * cells, sizeof *c->ring);
        c->load = calloc(cells, sizeof *c->load);
        if (!c->ring || !c->load) goto oom;
        for (size_t i = 0; i < cells; i++) atomic_init(&c->load[i], 0);
    }
    return c;
oom:
    ds2_fwd_free(c);
    cf_fail(err, "out of memory creating the forward context (%d tokens, %d positions)", max_tokens, max_ctx);
    return NULL;
}

/* The expanded form's scratch (K/V of up to exp_cap positions) is allocated
 * when the form is first enabled; if that fails the context stays absorbed. */
void ds2_fwd_set_expand_min(ds2_fwd *c, int32_t min_tokens) {
    c->expand_min = min_tokens > 0 ? min_tokens : MLA_EXPAND_NEVER;
    if (c->expand_min == MLA_EXPAND_NEVER || c->ctx_kv) return;
    const model_hparams *hp = &c->m->hp;
    size_t rows = (size_t)c->exp_cap, kvl = (size_t)hp->kv_lora_rank;
    c->kc_exp = kern_ctx_create(c->pool, c->exp_cap, (int64_t)kvl);
    c->ctx_lat = fmalloc(rows * kvl);
    c->ctx_kv = fmalloc(rows * (size_t)hp->n_head * (size_t)(hp->qk_nope_dim + hp->v_head_dim));
    if (!c->kc_exp || !c->ctx_lat || !c->ctx_kv) {
        kern_ctx_destroy(c->kc_exp);
        free(c->ctx_lat);
        free(c->ctx_kv);
        c->kc_exp = NULL;
        c->ctx_lat = c->ctx_kv = NULL;
        c->expand_min = MLA_EXPAND_NEVER;
    }
}

/* Writes each token's [c_kv | k_pe] row into its block (model.h layout). */
static void kv_store(ds2_fwd *c, const fwd_batch *b, int il) {
    const model_hparams *hp = &c->m->hp;
    int64_t row = hp->kv_lora_rank + hp->rope_dim, bt = c->bt;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        const fwd_seq *s = &b->seqs[b->seq[t]];
        int32_t p = b->pos[t];
        float *dst = s->blocks[p / bt] + ((int64_t)(il - c->kv_shift) * bt + p % bt) * row;
        memcpy(dst, c->ckv + (int64_t)t * row, (size_t)row * sizeof(float));
    }
}

/* Groups the batch's tokens by sequence (tokens of a sequence keep batch
 * order) and picks each sequence's attention form. */
static void group_tokens(ds2_fwd *c, const fwd_batch *b) {
    c->n_grp = 0;
    int32_t last = -1;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        int32_t g = last >= 0 && c->grp_seq[last] == b->seq[t] ? last : -1;
        for (int32_t i = 0; g < 0 && i < c->n_grp; i++)
            if (c->grp_seq[i] == b->seq[t]) g = i;
        if (g < 0) {
            g = c->n_grp++;
            c->grp_seq[g] = b->seq[t];
            c->grp_n[g] = 0;
            c->grp_last[g] = 0;
        }
        c->tok_group[t] = g;
        c->grp_n[g]++;
        if (b->pos[t] > c->grp_last[g]) c->grp_last[g] = b->pos[t];
        last = g;
    }
    for (int32_t g = 0; g < c->n_grp; g++)
        c->grp_expand[g] = c->grp_n[g] >= c->expand_min && c->grp_last[g] < c->exp_cap;
}

static void dense_ffn(ds2_fwd *c, const ds2_layer *L, int32_t T, int64_t width, const kern_weight *g,
                      const kern_weight *u, const kern_weight *d, float *out) {
    kern_matmul(c->kc, g, c->h, T, c->ffa);
    kern_matmul(c->kc, u, c->h, T, c->ffb);
    rows_silu_mul(c->pool, c->ffa, c->ffb, T, width);
    kern_matmul(c->kc, d, c->ffa, T, out);
    (void)L;
}

/* One layer (attention, then the dense FFN or the MoE) on c->x. */
static int run_layer(ds2_fwd *c, const fwd_batch *b, int il, cf_err *err) {
    const model_hparams *hp = &c->m->hp;
    const ds2_layer *L = &ds2_layers(c->m)[il];
    int32_t T = b->n_tokens;
    int64_t E = hp->n_embd, H = hp->n_head, qk = hp->head_dim, kvl = hp->kv_lora_rank;
    int64_t ckv_w = kvl + hp->rope_dim;
    float eps = hp->rms_eps;
    rows_rmsnorm(c->pool, eps, c->x, E, L->attn_norm, c->h, E, T, E);
    if (hp->q_lora_rank > 0) {
        kern_matmul(c->kc, &L->wq_a, c->h, T, c->qa);
        rows_rmsnorm(c->pool, eps, c->qa, hp->q_lora_rank, L->q_a_norm, c->qa, hp->q_lora_rank, T, hp->q_lora_rank);
        kern_matmul(c->kc, &L->wq_b, c->qa, T, c->q);
    } else {
        kern_matmul(c->kc, &L->wq, c->h, T, c->q);
    }
    kern_matmul(c->kc, &L->wkv_a, c->h, T, c->ckv);
    rows_rmsnorm(c->pool, eps, c->ckv, ckv_w, L->kv_a_norm, c->ckv, ckv_w, T, kvl);
    rows_rope(c->rope_cs, hp->rope_dim, ROPE_NORM, c->q, T, (int)H, H * qk, qk, hp->qk_nope_dim);
    rows_rope(c->rope_cs, hp->rope_dim, ROPE_NORM, c->ckv, T, 1, ckv_w, 0, kvl);
    kv_store(c, b, il);
    ds2_attention(c, b, il);
    kern_matmul(c->kc, &L->wo, c->att, T, c->h);
    rows_add(c->pool, c->x, c->h, NULL, T, E);

    rows_rmsnorm(c->pool, eps, c->x, E, L->ffn_norm, c->h, E, T, E);
    if (!L->moe) {
        dense_ffn(c, L, T, hp->n_ff, &L->w_gate, &L->w_up, &L->w_down, c->ffo);
        rows_add(c->pool, c->x, c->ffo, NULL, T, E);
        return 0;
    }
    if (ds2_moe(c, b, il, err)) return -1; /* c->moe = routed experts */
    if (L->has_shared) {
        dense_ffn(c, L, T, (int64_t)hp->n_ff_exp * hp->n_expert_shared, &L->sg, &L->su, &L->sd, c->ffo);
        rows_add(c->pool, c->x, c->moe, c->ffo, T, E);
    } else {
        rows_add(c->pool, c->x, c->moe, NULL, T, E);
    }
    return 0;
}

/* The hidden-state export (fwd_batch.n_hidden): rmsnorm(x)·norm of each asked row. */
static void export_hidden(ds2_fwd *c, const fwd_batch *b, const float *norm) {
    int64_t E = c->m->hp.n_embd;
    for (int32_t i = 0; i < b->n_hidden; i++)
        rows_rmsnorm(c->pool, c->m->hp.rms_eps, c->x + (int64_t)b->hidden_rows[i] * E, E, norm, b->hidden + i * E, E, 1,
                     E);
}

static void begin_pass(ds2_fwd *c, const fwd_batch *b) {
    const model_hparams *hp = &c->m->hp;
    float rope_af = 1.0f;
    if (hp->rope_scaling != ROPE_SCALING_NONE) rope_af = 1.0f / (1.0f + 0.1f * logf(hp->rope_factor));
    rope_fill_table(hp, c->m->rope_freq_factors, rope_af, b->pos, b->n_tokens, c->rope_cs);
    group_tokens(c, b);
}

int ds2_forward(ds2_fwd *c, const fwd_batch *b, float *logits, cf_err *err) {
    const model *m = c->m;
    model_embed(m, b->tokens, b->n_tokens, c->x);
    begin_pass(c, b);
    ds2_moe_step_begin(c);
    c->kv_shift = 0;
    for (int il = 0; il < m->hp.n_layer; il++)
        if (run_layer(c, b, il, err)) return -1;
    if (b->n_hidden > 0) export_hidden(c, b, m->output_norm);
    if (b->n_out == 0) return 0;
    model_logits(m, c->kc, c->pool, c->x, b, c->h, c->ffo, logits);
    return 0;
}

/* Next-n layer (llama.cpp's graph_mtp, DeepSeek V3 MTP): x = eh_proj [enorm(embed t) | hnorm(h)], one
 * layer with its own KV (layer 0 of the batch's blocks), then the head: rmsnorm(x)·head_norm (exported as
 * the chained hidden state) times the head matrix. */
int ds2_mtp_forward(ds2_fwd *c, int32_t mtp, const fwd_batch *b, const float *h, float *logits, cf_err *err) {
    const model *m = c->m;
    const model_hparams *hp = &m->hp;
    int32_t T = b->n_tokens, il = hp->n_layer + mtp;
    int64_t E = hp->n_embd;
    const ds2_layer *L = &ds2_layers(m)[il];
    if (L->embed) {
        size_t row = dtype_row_bytes(L->embed->type, E);
        for (int32_t t = 0; t < T; t++)
            dtype_dequantize_row((dtype)L->embed->type, (const char *)L->embed->data + row * b->tokens[t], c->h + t * E,
                                 E);
    } else {
        model_embed(m, b->tokens, T, c->h);
    }
    rows_rmsnorm(c->pool, hp->rms_eps, c->h, E, L->enorm, c->mtp_cat, 2 * E, T, E);
    rows_rmsnorm(c->pool, hp->rms_eps, h, E, L->hnorm, c->mtp_cat + E, 2 * E, T, E);
    kern_matmul(c->kc, &L->eh_proj, c->mtp_cat, T, c->x);
    begin_pass(c, b);
    c->kv_shift = il;
    int rc = run_layer(c, b, il, err);
    c->kv_shift = 0;
    if (rc) return -1;
    const float *norm = L->head_norm ? L->head_norm : m->output_norm;
    if (b->n_hidden > 0) export_hidden(c, b, norm);
    if (b->n_out == 0) return 0;
    for (int32_t i = 0; i < b->n_out; i++)
        memcpy(c->h + i * E, c->x + (int64_t)b->out_rows[i] * E, (size_t)E * sizeof(float));
    rows_rmsnorm(c->pool, hp->rms_eps, c->h, E, norm, c->ffo, E, b->n_out, E);
    kern_matmul(c->kc, L->has_head ? &L->head : &m->output, c->ffo, b->n_out, logits);
    return 0;
}
