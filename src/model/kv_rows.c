/* kv_rows.c - the K/V row addressing of a layer slot in a block, per KV
 * element type (kv_rows.h). */
#include "model/kv_rows.h"

#include <string.h>

kv_rows kv_rows_make(kv_dtype dt, int64_t block_tokens, int64_t kvd) {
    int64_t units = dt == KV_DTYPE_F32 ? kvd : kv_dtype_row_units(dt, kvd);
    return (kv_rows){.dt = dt, .block_tokens = block_tokens, .kvd = kvd, .units = units};
}

void kv_rows_write(const kv_rows *r, float *blk, int64_t slot, int64_t row, const float *k, const float *v) {
    int64_t bt = r->block_tokens, part = bt * r->units;
    float *kp = blk + slot * 2 * part, *vp = kp + part;
    if (r->dt == KV_DTYPE_F32) {
        float *kb = kp + row;
        for (int64_t d = 0; d < r->kvd; d++) kb[d * bt] = k[d];
        memcpy(vp + row * r->kvd, v, (size_t)r->kvd * sizeof(float));
        return;
    }
    kv_dtype_encode_row(r->dt, k, kp + row * r->units, r->kvd);
    kv_dtype_encode_row(r->dt, v, vp + row * r->units, r->kvd);
}

void kv_rows_attn(const kv_rows *r, int64_t slot, int g, int head_dim, attn_args *a) {
    int64_t bt = r->block_tokens, part = bt * r->units;
    a->block_tokens = (int)bt;
    a->kv_dtype = (int)r->dt;
    a->row_stride = r->units;
    if (r->dt == KV_DTYPE_F32) {
        a->k_off = slot * 2 * part + (int64_t)g * head_dim * bt;
        a->v_off = slot * 2 * part + part + (int64_t)g * head_dim;
        a->head_bytes = 0;
        return;
    }
    a->k_off = slot * 2 * part;
    a->v_off = slot * 2 * part + part;
    a->head_bytes = kv_dtype_bytes(r->dt, (int64_t)g * head_dim);
}
