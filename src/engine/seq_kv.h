/* seq_kv.h - KV memory for one standalone sequence (CLI `run`, benchmarks):
 * enough blocks for `ctx` positions, allocated once, in the model's block
 * layout (model.h), plus, for a model with window groups, one window ring
 * for forward passes of up to max_chunk tokens (model.h "KV layout"). The
 * engine's shared block pool replaces this for serving; both hand the forward
 * pass a block table (and ring). */
#ifndef CINFER_ENGINE_SEQ_KV_H
#define CINFER_ENGINE_SEQ_KV_H

#include "model/model.h"

typedef struct seq_kv {
    float *mem; /* owned: n_blocks * block floats */
    float *ring; /* owned: the window ring, NULL without window groups */
    int32_t ring_tokens; /* its rows (0: none) */
    int64_t ring_bytes;
    float **table; /* owned: block pointers into mem */
    fwd_seq seq; /* view handed to model_forward */
} seq_kv;

int seq_kv_init(seq_kv *kv, const model *m, int32_t ctx, int32_t block_tokens, int32_t max_chunk, cf_err *err);
/* The same with K/V stored as dt (model_kv_layout_as); fails with
 * model_kv_dtype_check's reason. seq_kv_init is the f32 form. */
int seq_kv_init_as(seq_kv *kv, const model *m, kv_dtype dt, int32_t ctx, int32_t block_tokens, int32_t max_chunk,
                   cf_err *err);
void seq_kv_release(seq_kv *kv);

#endif
