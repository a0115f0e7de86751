/* kv_rows.h - where one full-attention or window layer's K and V rows live
 * inside a block (or ring block) of block_tokens tokens, for every KV element
 * type (tensor/kv_dtype.h), and the attention kernel's addressing of them.
 *
 * A layer's slot is [K part][V part], each part block_tokens rows of `units`
 * 4-byte units (model.h "KV layout"):
 *   f32     K dimension-major ([kvd][token]: 16-key tiles read in place),
 *           V token-major ([token][kvd]); units = kvd
 *   others  K and V both token-major encoded rows (kv_dtype_encode_row),
 *           units = kv_dtype_row_units(dt, kvd); the attention kernels
 *           decode them per segment (attention.h)
 * so a slot is 2 * block_tokens * units units: what model_kv_layout_as
 * counts per layer. Used by the forward passes of the families that store
 * non-f32 caches (llama, gemma2). */
#ifndef CINFER_MODEL_KV_ROWS_H
#define CINFER_MODEL_KV_ROWS_H

#include <stdint.h>

#include "tensor/attention.h"
#include "tensor/kv_dtype.h"

typedef struct kv_rows {
    kv_dtype dt;
    int64_t block_tokens, kvd; /* kvd = n_head_kv * head_dim elements per K (or V) row */
    int64_t units; /* 4-byte units per stored K (or V) row */
} kv_rows;

kv_rows kv_rows_make(kv_dtype dt, int64_t block_tokens, int64_t kvd);
/* Writes one token's K and V (kvd floats each) into layer slot `slot` of
 * blk, at row `row` (< block_tokens). */
void kv_rows_write(const kv_rows *r, float *blk, int64_t slot, int64_t row, const float *k, const float *v);
/* The K/V addressing fields of attn_args (block_tokens, k_off, v_off,
 * row_stride, kv_dtype, head_bytes) for KV head g of layer slot `slot`. */
void kv_rows_attn(const kv_rows *r, int64_t slot, int g, int head_dim, attn_args *a);

#endif
