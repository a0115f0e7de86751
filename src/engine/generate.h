/* generate.h - one sequence through the model: chunked prefill and decode
 * steps over a private KV cache. Used by `cinfer run`, `cinfer bench latency`
 * and the forward-pass tests; the serving engine batches many sequences
 * through model_forward directly.
 * MLA models (deepseek2) prefill chunks of >= MLA_EXPAND_MIN_PREFILL tokens
 * in the expanded attention form while the context is below 512 positions
 * (model.h; longer contexts run the tiled absorbed kernel).
 * Owns its forward context, KV memory and logits buffer. */
#ifndef CINFER_ENGINE_GENERATE_H
#define CINFER_ENGINE_GENERATE_H

#include <stdbool.h>

#include "engine/seq_kv.h"
#include "model/model.h"

typedef struct gen_session {
    const model *m;
    fwd_ctx *fc;
    seq_kv kv;
    int32_t ctx; /* positions available */
    int32_t batch; /* max tokens per forward call (prefill chunk) */
    int32_t n_past; /* positions filled */
    float *logits; /* n_vocab: logits after the last token */
    int32_t *pos, *seq_idx, *rows; /* per-chunk scratch */
} gen_session;

int gen_init(gen_session *g, const model *m, thread_pool *pool, int32_t ctx, int32_t batch, cf_err *err);
/* gen_init with K/V stored as dt (`--kv-dtype`; gen_init: f32). */
int gen_init_as(gen_session *g, const model *m, kv_dtype dt, thread_pool *pool, int32_t ctx, int32_t batch,
                cf_err *err);
void gen_release(gen_session *g);
/* Appends n tokens. If all_logits is non-NULL it receives n x n_vocab logits
 * (one row per token); g->logits always ends with the last token's logits.
 * Fails (nothing done) if the tokens do not fit in the context. */
int gen_feed(gen_session *g, const int32_t *tokens, int32_t n, float *all_logits, cf_err *err);
/* Forgets every position from n on (n <= n_past): later feeds overwrite
 * their KV. g->logits is stale until the next feed. */
void gen_truncate(gen_session *g, int32_t n);

#endif
