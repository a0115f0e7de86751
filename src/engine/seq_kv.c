/* seq_kv.c - see seq_kv.h. */
#include "engine/seq_kv.h"

#include <stdlib.h>
#include <string.h>

int seq_kv_init(seq_kv *kv, const model *m, int32_t ctx, int32_t block_tokens, int32_t max_chunk, cf_err *err) {
    return seq_kv_init_as(kv, m, KV_DTYPE_F32, ctx, block_tokens, max_chunk, err);
}

int seq_kv_init_as(seq_kv *kv, const model *m, kv_dtype dt, int32_t ctx, int32_t block_tokens, int32_t max_chunk,
                   cf_err *err) {
    memset(kv, 0, sizeof *kv);
    if (ctx <= 0 || block_tokens <= 0) return cf_fail(err, "context and block size must be positive");
    int32_t n_blocks = (ctx + block_tokens - 1) / block_tokens;
    if (model_kv_dtype_check(m, dt, err)) return -1;
    int64_t per = model_kv_block_floats_as(m, dt, block_tokens);
    kv->mem = malloc((size_t)n_blocks * (size_t)per * sizeof(float));
    kv->table = malloc((size_t)n_blocks * sizeof *kv->table);
    if (!kv->mem || !kv->table) {
        seq_kv_release(kv);
        return cf_fail(err, "out of memory for a KV cache of %d tokens (%.1f MiB)", ctx,
                       (double)n_blocks * (double)per * 4.0 / (1 << 20));
    }
    for (int32_t i = 0; i < n_blocks; i++) kv->table[i] = kv->mem + (int64_t)i * per;
    kv->seq.blocks = kv->table;
    kv->seq.n_blocks = n_blocks;
    kv_spec spec;
    model_kv_layout_as(m, dt, &spec);
    int32_t ring_tokens = kv_ring_tokens(kv_spec_max_window(&spec), max_chunk, block_tokens);
    if (ring_tokens > 0) {
        size_t floats = (size_t)kv_spec_ring_row_floats(&spec) * (size_t)ring_tokens;
        kv->ring = calloc(floats, sizeof(float));
        if (!kv->ring) {
            seq_kv_release(kv);
            return cf_fail(err, "out of memory for a window ring of %d tokens", ring_tokens);
        }
        kv->seq.ring = kv->ring;
        kv->ring_tokens = ring_tokens;
        kv->ring_bytes = (int64_t)(floats * sizeof(float));
        kv->seq.ring_blocks = ring_tokens / block_tokens;
    }
    return 0;
}

void seq_kv_release(seq_kv *kv) {
    free(kv->mem);
    free(kv->ring);
    free(kv->table);
    memset(kv, 0, sizeof *kv);
}
