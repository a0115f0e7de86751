/* kernels_fp8.c - FP8 e4m3 weights with 128 x 128 block scales (DT_F8_B128,
 * DeepSeek V3's layout: W[o][j] = e4m3[o][j] * scale[o/128][j/128]), shared by
 * every ISA. Every activation row, decode and prefill alike (so a row's result
 * does not depend on its batch): the ISA's fp8_row_dot converts a weight row in
 * registers and multiplies it straight into the activations, each 128-wide
 * block's partial sum scaled by its block scale in a vector register (one
 * horizontal sum per row); on AVX-512 CPUs with VBMI and BF16 the row is
 * decoded to bf16 by table lookup and dotted with bf16 copies of two activation
 * rows at a time instead (kernels_fp8_avx512.c). The weights are never widened
 * in memory: 1 byte per weight plus the scales. (kern_ops.fp8_to_f32, the array
 * conversion, is no longer on the matmul path; the kernel tests still check it.)
 * Also the exact scalar e4m3 decoding the kernel tests and the vector paths
 * are checked against. */
#include <math.h>
#include <string.h>

#include "tensor/kernels_impl.h"

#define FP8_BLOCK 128

float kern_fp8_e4m3_to_f32(uint8_t v) {
    int sign = v >> 7, e = (v >> 3) & 15, m = v & 7;
    if (e == 15 && m == 7) return NAN;
    float mag = e ? ldexpf(1.0f + (float)m / 8.0f, e - 7) : ldexpf((float)m / 8.0f, -6);
    return sign ? -mag : mag;
}

void kern_fp8_to_f32_scalar(const uint8_t *src, float *dst, int64_t n) {
    for (int64_t j = 0; j < n; j++) dst[j] = kern_fp8_e4m3_to_f32(src[j]);
}

float kern_fp8_row_dot_scalar(const uint8_t *w, const float *x, const float *scale, int64_t k) {
    float acc = 0.0f;
    for (int64_t b = 0; b * FP8_BLOCK < k; b++) {
        int64_t j0 = b * FP8_BLOCK, len = k - j0 < FP8_BLOCK ? k - j0 : FP8_BLOCK;
        float s = 0.0f;
        for (int64_t j = j0; j < j0 + len; j++) s += kern_fp8_e4m3_to_f32(w[j]) * x[j];
        acc += scale[b] * s;
    }
    return acc;
}

/* Decode: each weight row dotted in registers with its block scales; with
 * bf16 activations (a->xb) one decode of the row serves both rows. */
static void mm_fp8_direct(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1, const kern_ops *ops) {
    const kern_weight *w = a->w;
    int64_t k = a->k, n = a->n;
    for (int64_t o = o0; o < o1; o++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)o * (size_t)k;
        const float *srow = w->scale + (o / FP8_BLOCK) * w->scale_cols;
        if (a->xb) { /* rows in pairs: each row's sum is the same alone or paired */
            for (int64_t i = i0; i < i1; i += 2) {
                int nr = i1 - i >= 2 ? 2 : 1;
                float out[2];
                ops->fp8_rows_dot(row, a->xb + i * a->xb_stride, a->xb_stride, a->x + i * k, k, srow, k, nr, out);
                for (int r = 0; r < nr; r++) a->y[(i + r) * n + o] = out[r];
            }
            continue;
        }
        for (int64_t i = i0; i < i1; i++) a->y[i * n + o] = ops->fp8_row_dot(row, a->x + i * k, srow, k);
    }
}

/* Every m takes the per-row path, so a row's result does not depend on the
 * batch it is in (batch invariance); prefill re-decodes each weight row per
 * activation row on CPUs without the bf16 path. */
void kern_mm_fp8(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1, const kern_ops *ops) {
    mm_fp8_direct(a, o0, o1, i0, i1, ops);
}
