/* kernels_dequant.c - matmul for the weight types computed by dequantizing
 * (kq_is_dequant_type: Q4_1, Q5_0, Q5_1, Q2_K..Q6_K), shared by every ISA.
 *
 * A weight row is dequantized exactly (kquant.c) in chunks of DQ_CHUNK
 * elements into a stack buffer, and each chunk is dotted with every activation
 * row of the range by the ISA's f32 dot product, so the result is
 * dequantize-then-dot up to f32 summation order, and the dequantization of a
 * row is shared by all activation rows (prefill). Weights stay in the GGUF
 * row layout (KL_ROWS) under every ISA. Also the Q8_K-style activation
 * quantizer the AVX-512 Q4_K kernel uses (kernels_impl.h). */
#include <math.h>

#include "tensor/kernels_impl.h"

/* Elements of a weight row dequantized at a time (a multiple of 256). */
#define DQ_CHUNK 4096

void kern_mm_dequant(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1,
                     float (*dot)(const float *x, const float *y, int64_t n)) {
    const kern_weight *w = a->w;
    int64_t k = a->k, n = a->n, be = dtype_block_elems((uint32_t)w->type);
    size_t rb = dtype_row_bytes((uint32_t)w->type, k), bb = dtype_block_bytes((uint32_t)w->type);
    float buf[DQ_CHUNK];
    for (int64_t o = o0; o < o1; o++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)o * rb;
        for (int64_t j0 = 0; j0 < k; j0 += DQ_CHUNK) {
            int64_t len = k - j0 < DQ_CHUNK ? k - j0 : DQ_CHUNK;
            kq_dequantize_blocks((uint32_t)w->type, row + (size_t)(j0 / be) * bb, buf, len / be);
            for (int64_t i = i0; i < i1; i++) {
                float s = dot(buf, a->x + i * k + j0, len);
                float *yo = a->y + i * n + o;
                *yo = j0 ? *yo + s : s;
            }
        }
    }
}

void kern_quantize_row_q8k(const float *x, int64_t k, int8_t *q, float *d, int32_t *sums) {
    for (int64_t B = 0; B < k / 256; B++) {
        const float *xb = x + B * 256;
        float amax = 0.0f;
        for (int j = 0; j < 256; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float db = amax / 127.0f, id = db > 0 ? 1.0f / db : 0.0f;
        for (int s = 0; s < 8; s++) {
            int32_t sum = 0;
            for (int j = 32 * s; j < 32 * s + 32; j++) {
                int v = (int)roundf(xb[j] * id);
                v = v > 127 ? 127 : v < -127 ? -127 : v;
                q[B * 256 + j] = (int8_t)v;
                sum += v;
            }
            sums[B * 8 + s] = sum;
        }
        d[B] = db;
    }
}
