/* forward.c - the generic forward context (model.h's fwd_ctx): checks the
 * batch, then hands it to the architecture's forward hook (arch/arch.h),
 * whose own context it owns; plus the embedding lookup and the output head
 * every family shares.
 *
 * Invariants: a fwd_ctx belongs to one model and holds the family context
 * made by that model's fwd_create (freed by its fwd_free); nothing here
 * allocates after creation; input errors return -1 before any work. */
#include <stdlib.h>
#include <string.h>

#include "model/arch/arch.h"
#include "model/rowops.h"

struct fwd_ctx {
    const model *m;
    const model_arch *arch;
    void *impl; /* the family's context */
    int32_t max_tokens, max_ctx, block_tokens;
    int32_t window; /* largest window of a window group; 0: none (no ring needed) */
    int32_t *first_pos; /* max_tokens: per sequence, its first position in the batch (ring check) */
};

fwd_ctx *fwd_ctx_create(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx, int32_t block_tokens,
                        cf_err *err) {
    if (max_tokens <= 0 || max_ctx <= 0 || block_tokens <= 0) {
        cf_fail(err, "forward context: sizes must be positive");
        return NULL;
    }
    fwd_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        cf_fail(err, "out of memory creating the forward context (%d tokens)", max_tokens);
        return NULL;
    }
    *c = (fwd_ctx){.m = m, .arch = m->arch, .max_tokens = max_tokens, .max_ctx = max_ctx, .block_tokens = block_tokens};
    kv_spec spec;
    model_kv_layout(m, &spec);
    c->window = kv_spec_max_window(&spec);
    c->first_pos = malloc((size_t)max_tokens * sizeof(int32_t));
    c->impl = c->first_pos ? c->arch->fwd_create(m, pool, max_tokens, max_ctx, block_tokens, err) : NULL;
    if (!c->impl) {
        if (!c->first_pos) cf_fail(err, "out of memory creating the forward context (%d tokens)", max_tokens);
        free(c->first_pos);
        free(c);
        return NULL;
    }
    return c;
}

fwd_ctx *fwd_ctx_create_kv(const model *m, thread_pool *pool, int32_t max_tokens, int32_t max_ctx, int32_t block_tokens,
                           kv_dtype dt, cf_err *err) {
    if (model_kv_dtype_check(m, dt, err)) return NULL;
    fwd_ctx *c = fwd_ctx_create(m, pool, max_tokens, max_ctx, block_tokens, err);
    if (c && dt != KV_DTYPE_F32) c->arch->fwd_set_kv_dtype(c->impl, dt);
    return c;
}

void fwd_ctx_free(fwd_ctx *c) {
    if (!c) return;
    c->arch->fwd_free(c->impl);
    free(c->first_pos);
    free(c);
}

/* Window models: every sequence has a ring large enough for this pass
 * (model.h "KV layout": ring rows >= window + last - first position). */
static int check_rings(const fwd_ctx *c, const fwd_batch *b, cf_err *err) {
    if (b->n_seqs > c->max_tokens) return cf_fail(err, "batch of %d sequences (at most %d)", b->n_seqs, c->max_tokens);
    for (int32_t s = 0; s < b->n_seqs; s++) c->first_pos[s] = INT32_MAX;
    for (int32_t t = 0; t < b->n_tokens; t++)
        if (b->pos[t] < c->first_pos[b->seq[t]]) c->first_pos[b->seq[t]] = b->pos[t];
    for (int32_t t = 0; t < b->n_tokens; t++) {
        const fwd_seq *s = &b->seqs[b->seq[t]];
        int64_t need = (int64_t)c->window + b->pos[t] - c->first_pos[b->seq[t]];
        if (!s->ring || s->ring_blocks <= 0 || (int64_t)s->ring_blocks * c->block_tokens < need)
            return cf_fail(err, "sequence %d: its window ring (%d rows) cannot hold %lld rows", b->seq[t],
                           s->ring ? s->ring_blocks * c->block_tokens : 0, (long long)need);
    }
    return 0;
}

/* Output and hidden-export row lists: ascending batch indices; an export only where the model has one. */
static int check_rows(const fwd_ctx *c, const fwd_batch *b, cf_err *err) {
    for (int32_t i = 0; i < b->n_out; i++)
        if (b->out_rows[i] < 0 || b->out_rows[i] >= b->n_tokens || (i && b->out_rows[i] <= b->out_rows[i - 1]))
            return cf_fail(err, "bad output row list");
    if (b->n_hidden <= 0) return 0;
    model_mtp_info mi;
    model_mtp_info_get(c->m, c->block_tokens, &mi);
    if (mi.hidden_floats <= 0 || !b->hidden || !b->hidden_rows)
        return cf_fail(err, "hidden-state export: architecture %s has none", c->m->hp.arch);
    for (int32_t i = 0; i < b->n_hidden; i++)
        if (b->hidden_rows[i] < 0 || b->hidden_rows[i] >= b->n_tokens ||
            (i && b->hidden_rows[i] <= b->hidden_rows[i - 1]))
            return cf_fail(err, "bad hidden-state row list");
    return 0;
}

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
    if (c->window > 0 && check_rings(c, b, err)) return -1;
    for (int32_t t = 0; t < b->n_tokens; t++) {
        const fwd_seq *s = &b->seqs[b->seq[t]];
        if ((s->replay_from || s->keep_below) && (c->window <= 0 || s->replay_from < 0 || b->pos[t] < s->replay_from))
            return cf_fail(err, "sequence %d: bounded replay from %d at position %d (window model only)", b->seq[t],
                           s->replay_from, b->pos[t]);
    }
    return check_rows(c, b, err);
}

int model_forward(fwd_ctx *c, const fwd_batch *b, float *logits, cf_err *err) {
    if (check_batch(c, b, err)) return -1;
    return c->arch->forward(c->impl, b, logits, err);
}

void model_mtp_info_get(const model *m, int32_t block_tokens, model_mtp_info *out) {
    *out = (model_mtp_info){0};
    if (m->arch->mtp_info) m->arch->mtp_info(m, block_tokens, out);
}

void model_dspark_info_get(const model *m, model_dspark_info *out) {
    *out = (model_dspark_info){0};
    if (m->arch->dspark_info) m->arch->dspark_info(m, out);
}

int model_dspark_head(fwd_ctx *c, const float *state, int32_t prev, float *logits, float *conf, cf_err *err) {
    model_dspark_info di;
    model_dspark_info_get(c->m, &di);
    if (di.block_size <= 0 || !c->arch->dspark_head) return cf_fail(err, "the model has no DSpark drafter");
    if (prev < 0 || prev >= c->m->hp.n_vocab)
        return cf_fail(err, "DSpark head: token %d is outside the vocabulary", prev);
    c->arch->dspark_head(c->impl, state, prev, logits, conf);
    return 0;
}

/* An MTP batch: tokens, positions inside each sequence's (MTP) block table, rows; no rings. */
int model_mtp_forward(fwd_ctx *c, int32_t mtp, const fwd_batch *b, const float *h, float *logits, cf_err *err) {
    model_mtp_info mi;
    model_mtp_info_get(c->m, c->block_tokens, &mi);
    if (!c->arch->mtp_forward || mtp < 0 || mtp >= mi.n_blocks)
        return cf_fail(err, "MTP block %d: the model has %d", mtp, mi.n_blocks);
    if (b->n_tokens <= 0 || b->n_tokens > c->max_tokens || !h)
        return cf_fail(err, "MTP batch of %d tokens (1..%d allowed)", b->n_tokens, c->max_tokens);
    for (int32_t t = 0; t < b->n_tokens; t++) {
        if (b->tokens[t] < 0 || b->tokens[t] >= c->m->hp.n_vocab)
            return cf_fail(err, "token id %d is outside the vocabulary (0..%d)", b->tokens[t], c->m->hp.n_vocab - 1);
        if (b->seq[t] < 0 || b->seq[t] >= b->n_seqs) return cf_fail(err, "token %d: bad sequence index", t);
        int32_t p = b->pos[t];
        if (p < 0 || p >= c->max_ctx || p / c->block_tokens >= b->seqs[b->seq[t]].n_blocks)
            return cf_fail(err, "position %d is beyond the MTP block table", p);
    }
    if (check_rows(c, b, err)) return -1;
    return c->arch->mtp_forward(c->impl, mtp, b, h, logits, err);
}

void fwd_ctx_set_mla_expand_min(fwd_ctx *c, int32_t min_tokens) {
    if (c->arch->fwd_set_expand_min) c->arch->fwd_set_expand_min(c->impl, min_tokens);
}

void fwd_ctx_set_attn_prec(fwd_ctx *c, attn_prec prec) {
    if (c->arch->fwd_set_attn_prec) c->arch->fwd_set_attn_prec(c->impl, prec);
}

int fwd_ctx_expert_load(const fwd_ctx *c, int32_t layer, uint64_t *counts, int32_t n) {
    if (c->arch->expert_load) return c->arch->expert_load(c->impl, layer, counts, n);
    return layer >= 0 && layer < c->m->hp.n_layer ? 0 : -1;
}

int fwd_ctx_set_moe_executor(fwd_ctx *c, const cinfer_moe_executor *x, cf_err *err) {
    if (!c->arch->fwd_set_moe_executor)
        return cf_fail(err, "expert parallelism: architecture %s has no MoE executor hook", c->m->hp.arch);
    return c->arch->fwd_set_moe_executor(c->impl, x, err);
}

int fwd_ctx_expert_ffn(fwd_ctx *c, int32_t layer, int32_t expert, const float *x, int32_t n, float *y, cf_err *err) {
    if (!c->arch->expert_ffn)
        return cf_fail(err, "expert parallelism: architecture %s has no expert FFN hook", c->m->hp.arch);
    return c->arch->expert_ffn(c->impl, layer, expert, x, n, y, err);
}

/* ---- shared by the families ---- */

void model_embed(const model *m, const int32_t *tokens, int32_t n, float *x) {
    int64_t E = m->hp.n_embd;
    size_t emb_row = dtype_row_bytes(m->tok_embd->type, E);
    for (int32_t t = 0; t < n; t++)
        dtype_dequantize_row((dtype)m->tok_embd->type, (const char *)m->tok_embd->data + emb_row * tokens[t], x + t * E,
                             E);
}

void model_logits(const model *m, kern_ctx *kc, thread_pool *pool, const float *x, const fwd_batch *b, float *tmp,
                  float *tmp2, float *logits) {
    int64_t E = m->hp.n_embd;
    for (int32_t i = 0; i < b->n_out; i++) memcpy(tmp + i * E, x + (int64_t)b->out_rows[i] * E, (size_t)E * 4);
    rows_rmsnorm(pool, m->hp.rms_eps, tmp, E, m->output_norm, tmp2, E, b->n_out, E);
    kern_matmul(kc, &m->output, tmp2, b->n_out, logits);
}
