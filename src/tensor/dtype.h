/* dtype.h - element types of weights and activations, as GGUF numbers them.
 *
 * The numeric values are ggml's `enum ggml_type`, so a GGUF tensor's type field
 * maps directly. Every ggml type has a known block layout here (so the GGUF
 * reader can validate sizes of any valid file); F32, F16, BF16, Q8_0, Q4_0,
 * Q4_1, Q5_0, Q5_1 and the K-quants Q2_K..Q6_K are *computable*
 * (dtype_computable()); the last eight by dequantizing blocks (kquant.c).
 *
 * Block layouts (little-endian, as ggml writes them):
 *   Q8_0: 32 elements = { fp16 d; int8 qs[32]; }          34 bytes, x = d*q
 *   Q4_0: 32 elements = { fp16 d; uint8 qs[16]; }         18 bytes,
 *         element j (j<16) = low nibble of qs[j], element j+16 = high nibble,
 *         x = d*(nibble-8)
 *   Q4_1: 32 = { fp16 d, m; uint8 qs[16]; }                20 bytes, x = d*nibble + m
 *   Q5_0: 32 = { fp16 d; uint8 qh[4]; uint8 qs[16]; }      22 bytes, nibbles as Q4_0,
 *         bit j of the little-endian uint32 qh is bit 4 of element j, x = d*(q-16)
 *   Q5_1: 32 = { fp16 d, m; uint8 qh[4]; uint8 qs[16]; }   24 bytes, x = d*q + m
 *   K-quants: super-blocks of 256 elements (byte-exact layouts in kquant.c):
 *   Q2_K 84, Q3_K 110, Q4_K 144 { fp16 d, dmin; uint8 scales[12]; uint8 qs[128]; },
 *   Q5_K 176, Q6_K 210 { uint8 ql[128], qh[64]; int8 scales[16]; fp16 d; }
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
    DT_Q4_1 = 3,
    DT_Q5_0 = 6,
    DT_Q5_1 = 7,
    DT_Q8_0 = 8,
    DT_Q2_K = 10,
    DT_Q3_K = 11,
    DT_Q4_K = 12,
    DT_Q5_K = 13,
    DT_Q6_K = 14,
    DT_IQ4_NL = 20, /* 18 B / 32: fp16 d, 16 bytes of 4-bit indexes into the IQ4 table */
    DT_IQ4_XS = 23, /* 136 B / 256: fp16 d, 8 x 6-bit sub-block scales, IQ4 table indexes */
    DT_BF16 = 30,
    DT_MXFP4 = 39, /* 17 B / 32: E8M0 exponent byte, 16 bytes of FP4 e2m1 codes (OCP MX) */
    /* Not a ggml type (never in a GGUF file; dtype_known() is false): FP8 e4m3
     * weights [n][k] with one f32 scale per 128 x 128 block, kept beside the
     * data (kern_weight.scale; DeepSeek V3's weight_scale_inv). kernels_fp8.c. */
    DT_F8_B128 = 1000,
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

/* True if `t` is any ggml type id with a known layout (not DT_F8_B128, which
 * no GGUF file may hold; dtype_name / block sizes / row bytes know it: 1 byte
 * per element, its scales live apart). */
bool dtype_known(uint32_t t);
/* True if cinfer can compute with it (see above). */
bool dtype_computable(uint32_t t);
/* "f32", "q8_0", ... or "type#N" for unknown ids (static storage for known ones). */
const char *dtype_name(uint32_t t);
/* Parses "f32|f16|bf16|q8_0|q4_0|q4_k|q6_k" (case-insensitive): the types
 * dtype_quantize_row writes; -1 otherwise. */
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
 * quantizers, matching ggml's quantize_row_*_ref rounding for F32, F16, BF16,
 * Q8_0 and Q4_0; simple ones for Q4_K and Q6_K (kquant.c). Only dtype_parse's
 * types; others write nothing. */
void dtype_quantize_row(dtype t, const float *src, void *dst, int64_t n);
/* Converts n elements of `t` to floats (every computable type). */
void dtype_dequantize_row(dtype t, const void *src, float *dst, int64_t n);

/* kquant.c: true for the types computed by dequantizing blocks (Q4_1, Q5_0,
 * Q5_1, Q2_K..Q6_K); dequantizes nblocks whole blocks of such a type. */
bool kq_is_dequant_type(uint32_t t);
void kq_dequantize_blocks(uint32_t t, const void *src, float *dst, int64_t nblocks);
/* Unpacks the 8 (scale, min) 6-bit pairs of a Q4_K / Q5_K block (the 12
 * bytes after d and dmin). Inline: the kernels call it per block. */
static inline void kq_scale_min_k4(const uint8_t *s, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 0xf) | ((s[j] >> 2) & 0x30));
        mn[j + 4] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30));
    }
}
/* Simple (not ggml's searching) quantizers: Q4_K, Q5_K, Q6_K and IQ4_XS only. */
void kq_quantize_blocks(uint32_t t, const float *src, void *dst, int64_t nblocks);

#endif
