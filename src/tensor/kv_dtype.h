/* kv_dtype.h - the element type of the KV cache (`--kv-dtype`): how K and V
 * rows are stored in the paged blocks and window rings.
 *
 *   f32   4 B / element (the reference: the layouts model.h documents)
 *   bf16  2 B / element (upper half of the f32, round to nearest even)
 *   f16   2 B / element (IEEE half, round to nearest even; llama.cpp's default)
 *   q8_0  34 B / 32 elements: GGUF's Q8_0 block { fp16 d; int8 q[32] },
 *         x = d * q, blocks running along the head dimension (so head_dim
 *         must be a multiple of 32)
 *
 * Rows of a non-f32 cache are encoded whole (kv_dtype_encode_row) and padded
 * to a multiple of 4 bytes, so a block stays an array of 4-byte units (what
 * the pool, the store and the handoff count: model.h "floats"). Decoding for
 * attention happens in the attention kernels' load step (attention.h). */
#ifndef CINFER_TENSOR_KV_DTYPE_H
#define CINFER_TENSOR_KV_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum kv_dtype {
    KV_DTYPE_F32 = 0,
    KV_DTYPE_BF16 = 1,
    KV_DTYPE_F16 = 2,
    KV_DTYPE_Q8_0 = 3,
} kv_dtype;
#define KV_DTYPE_COUNT 4

/* "f32", "bf16", "f16", "q8_0" ("?" for an out-of-range value). */
const char *kv_dtype_name(kv_dtype t);
/* Parses one of the names above (exact); -1 otherwise. */
int kv_dtype_parse(const char *s, kv_dtype *out);
/* Can a row of n elements be stored in t? (q8_0: n a multiple of 32). */
bool kv_dtype_fits(kv_dtype t, int64_t n);
/* Bytes of the encoded elements [0, n) of a row (n allowed by kv_dtype_fits):
 * also the byte offset of element n inside a row. */
int64_t kv_dtype_bytes(kv_dtype t, int64_t n);
/* 4-byte units one encoded row of n elements occupies (bytes rounded up). */
int64_t kv_dtype_row_units(kv_dtype t, int64_t n);
/* Encodes n floats (kv_dtype_fits) into dst (kv_dtype_bytes(t, n) bytes). */
void kv_dtype_encode_row(kv_dtype t, const float *src, void *dst, int64_t n);
/* Decodes n elements (kv_dtype_fits) into floats (scalar reference; the
 * attention kernels have their own vector loaders that agree with it). */
void kv_dtype_decode_row(kv_dtype t, const void *src, float *dst, int64_t n);

#endif
