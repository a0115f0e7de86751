/* generate.c - see generate.h. */
#include "engine/generate.h"

#include <stdlib.h>
#include <string.h>

#define GEN_BLOCK_TOKENS 16

int gen_init(gen_session *g, const model *m, thread_pool *pool, int32_t ctx, int32_t batch, cf_err *err) {
    return gen_init_as(g, m, KV_DTYPE_F32, pool, ctx, batch, err);
}

int gen_init_as(gen_session *g, const model *m, kv_dtype dt, thread_pool *pool, int32_t ctx, int32_t batch,
                cf_err *err) {
    memset(g, 0, sizeof *g);
    g->m = m;
    g->ctx = ctx;
    g->batch = batch < ctx ? batch : ctx;
    if (g->batch <= 0) return cf_fail(err, "batch size must be positive");
    int32_t n_vocab = model_get_hparams(m)->n_vocab;
    int32_t bt = model_kv_block_tokens(m, GEN_BLOCK_TOKENS);
    if (seq_kv_init_as(&g->kv, m, dt, ctx, bt, g->batch, err)) return -1;
    g->fc = fwd_ctx_create_kv(m, pool, g->batch, ctx, bt, dt, err);
    if (g->fc)
        fwd_ctx_set_mla_expand_min(g->fc, MLA_EXPAND_MIN_PREFILL); /* one sequence: no batch to be invariant to */
    g->logits = malloc((size_t)g->batch * (size_t)n_vocab * sizeof(float));
    g->pos = malloc((size_t)g->batch * sizeof(int32_t));
    g->seq_idx = calloc((size_t)g->batch, sizeof(int32_t));
    g->rows = malloc((size_t)g->batch * sizeof(int32_t));
    if (!g->fc || !g->logits || !g->pos || !g->seq_idx || !g->rows) {
        gen_release(g);
        return err && err->msg[0] ? -1 : cf_fail(err, "out of memory");
    }
    return 0;
}

void gen_release(gen_session *g) {
    fwd_ctx_free(g->fc);
    seq_kv_release(&g->kv);
    free(g->logits);
    free(g->pos);
    free(g->seq_idx);
    free(g->rows);
    memset(g, 0, sizeof *g);
}

int gen_feed(gen_session *g, const int32_t *tokens, int32_t n, float *all_logits, cf_err *err) {
    if (n <= 0) return cf_fail(err, "nothing to feed");
    if (n > g->ctx - g->n_past)
        return cf_fail(err, "%d tokens do not fit in the context: %d of %d positions are used", n, g->n_past, g->ctx);
    int32_t n_vocab = model_get_hparams(g->m)->n_vocab;
    for (int32_t done = 0; done < n;) {
        int32_t chunk = n - done < g->batch ? n - done : g->batch;
        for (int32_t i = 0; i < chunk; i++) {
            g->pos[i] = g->n_past + i;
            g->rows[i] = i;
        }
        bool last = done + chunk == n;
        fwd_batch b = {
            .n_tokens = chunk,
            .tokens = tokens + done,
            .pos = g->pos,
            .seq = g->seq_idx,
            .seqs = &g->kv.seq,
            .n_seqs = 1,
            .n_out = all_logits ? chunk : (last ? 1 : 0),
            .out_rows = all_logits ? g->rows : g->rows + chunk - 1,
        };
        if (model_forward(g->fc, &b, g->logits, err)) return -1;
        if (all_logits) {
            memcpy(all_logits + (int64_t)done * n_vocab, g->logits, (size_t)chunk * n_vocab * sizeof(float));
            if (last) memmove(g->logits, g->logits + (int64_t)(chunk - 1) * n_vocab, (size_t)n_vocab * sizeof(float));
        }
        g->n_past += chunk;
        done += chunk;
    }
    return 0;
}

void gen_truncate(gen_session *g, int32_t n) {
    if (n >= 0 && n < g->n_past) g->n_past = n;
}
