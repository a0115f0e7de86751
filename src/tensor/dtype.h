/* dtype.h - element types of weights and activations, as GGUF numbers them.
 *
 * The numeric values are ggml's `enum ggml_type`, so a GGUF tensor's type field
 * maps directly. Every ggml type has a known block layout here (so the GGUF
 * reader can validate sizes of any valid file); only F32, F16, BF16, Q8_0 and
 * Q4_0 are *computable* (dtype_computable()).
 *
 * Block layouts (little-endian, as ggml writes them):
 *   Q8_0: 32 elements = { fp16 d; int8 qs[32]; }          34 bytes, x = d*q
 *   Q4_0: 32 elements = { fp16 d; uint8 qs[16]; }         18 bytes,
 *         element j (j<16) = low nibble of qs[j], element j+16 = high nibble,
 *         x = d*(nibble-8)
 *   F16 = IEEE half, BF16 = upper 16 bits of an f32. */
#ifndef CINFER_TENSOR_DTYPE_H
#define CINFER_TENSOR_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum dtype {
    DT_F32 = 0,
    DT_F16 = 1,
    DT_Q4_0 = 2,
    DT_Q8_0 = 8,
    DT_BF16 = 30,
} dtype;

#define QK8_0 32
#define QK4_0 32

typedef struct {
    uint16_t d; /* fp16 scale */
    int8_t qs[QK8_0];
} block_q8_0;

typedef struct {
    uint16_t d; /* fp16 scale */
    uint8_t qs[QK4_0 / 2];
} block_q4_0;

_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");

/* True if `t` is any ggml type id with a known layout. */
bool dtype_known(uint32_t t);
/* True if cinfer can compute with it (F32, F16, BF16, Q8_0, Q4_0). */
bool dtype_computable(uint32_t t);
/* "f32", "q8_0", ... or "type#N" for unknown ids (static storage for known ones). */
const char *dtype_name(uint32_t t);
/* Parses "f32|f16|bf16|q8_0|q4_0" (case-insensitive); -1 if not computable/unknown. */
int dtype_parse(const char *s, dtype *out);
/* Elements per block (1 for float types). 0 for unknown. */
int64_t dtype_block_elems(uint32_t t);
/* Bytes per block. 0 for unknown. */
size_t dtype_block_bytes(uint32_t t);
/* Bytes of a row of n elements; n must be a multiple of the block size
 * (returns 0 if not, or if unknown). */
size_t dtype_row_bytes(uint32_t t, int64_t n);

float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f); /* round to nearest even */
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f); /* round to nearest even, NaN kept NaN */

/* Converts n floats to `t` (n a multiple of the block size). Scalar reference
 * quantizers, matching ggml's quantize_row_*_ref rounding. */
void dtype_quantize_row(dtype t, const float *src, void *dst, int64_t n);
/* Converts n elements of `t` to floats. */
void dtype_dequantize_row(dtype t, const void *src, float *dst, int64_t n);

#endif
