/* kernels_scalar.c - portable C kernels: the fallback ISA and the reference the
 * vector paths are tested against. Reads weights in the original GGUF row
 * layout (KL_ROWS) only. Quantized weights use exact integer block dot
 * products with the Q8_0-quantized activations (as the vector paths do). */
#include <math.h>
#include <string.h>

#include "tensor/kernels_impl.h"

static float dot_f32(const float *a, const float *b, int64_t n) {
    float s[4] = {0, 0, 0, 0};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
        for (int t = 0; t < 4; t++) s[t] += a[j + t] * b[j + t];
    for (; j < n; j++) s[0] += a[j] * b[j];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

static void axpy_f32(float a, const float *x, float *y, int64_t n) {
    for (int64_t j = 0; j < n; j++) y[j] += a * x[j];
}

void kern_quantize_row_scalar(const float *x, int64_t k, int8_t *q, float *d, int32_t *corr, int32_t off) {
    for (int64_t b = 0; b < k / 32; b++) {
        const float *xb = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float db = amax / 127.0f;
        float id = db ? 1.0f / db : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < 32; j++) {
            int v = (int)roundf(xb[j] * id);
            q[b * 32 + j] = (int8_t)v;
            sum += v;
        }
        d[b] = fp16_to_f32(f32_to_fp16(db));
        corr[b] = -off * sum;
    }
}

/* One output element for each weight type, KL_ROWS layout. */
static float row_dot_float(const kern_weight *w, int64_t o, const float *x) {
    int64_t k = w->k;
    switch (w->type) {
    case DT_F32: return dot_f32((const float *)w->data + o * k, x, k);
    case DT_F16: {
        const uint16_t *r = (const uint16_t *)w->data + o * k;
        float s = 0;
        for (int64_t j = 0; j < k; j++) s += fp16_to_f32(r[j]) * x[j];
        return s;
    }
    case DT_BF16: {
        const uint16_t *r = (const uint16_t *)w->data + o * k;
        float s = 0;
        for (int64_t j = 0; j < k; j++) s += bf16_to_f32(r[j]) * x[j];
        return s;
    }
    default: return 0;
    }
}

static float row_dot_q8(const block_q8_0 *r, const int8_t *q, const float *d, int64_t nb) {
    float s = 0;
    for (int64_t b = 0; b < nb; b++) {
        int32_t acc = 0;
        for (int j = 0; j < 32; j++) acc += (int32_t)r[b].qs[j] * q[b * 32 + j];
        s += fp16_to_f32(r[b].d) * d[b] * (float)acc;
    }
    return s;
}

static float row_dot_q4(const block_q4_0 *r, const int8_t *q, const float *d, int64_t nb) {
    float s = 0;
    for (int64_t b = 0; b < nb; b++) {
        int32_t acc = 0;
        for (int j = 0; j < 16; j++) {
            acc += ((r[b].qs[j] & 0xf) - 8) * q[b * 32 + j];
            acc += ((r[b].qs[j] >> 4) - 8) * q[b * 32 + 16 + j];
        }
        s += fp16_to_f32(r[b].d) * d[b] * (float)acc;
    }
    return s;
}

void kern_mm_scalar(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    const kern_weight *w = a->w;
    if (w->type == DT_F8_B128) {
        kern_mm_fp8(a, o0, o1, i0, i1, &kern_ops_scalar);
        return;
    }
    if (kq_is_dequant_type((uint32_t)w->type)) {
        kern_mm_dequant(a, o0, o1, i0, i1, dot_f32);
        return;
    }
    int64_t k = a->k, n = a->n, nb = k / 32;
    for (int64_t i = i0; i < i1; i++) {
        float *yr = a->y + i * n;
        if (w->type == DT_Q8_0 || w->type == DT_Q4_0) {
            const int8_t *q = a->qa.q + i * k;
            const float *d = a->qa.d + i * nb;
            for (int64_t o = o0; o < o1; o++)
                yr[o] = w->type == DT_Q8_0 ? row_dot_q8((const block_q8_0 *)w->data + o * nb, q, d, nb)
                                           : row_dot_q4((const block_q4_0 *)w->data + o * nb, q, d, nb);
        } else {
            for (int64_t o = o0; o < o1; o++) yr[o] = row_dot_float(w, o, a->x + i * k);
        }
    }
}

static uint64_t read_sum(const void *buf, size_t bytes) {
    const uint64_t *p = buf;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= bytes / 8; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

const kern_ops kern_ops_scalar = {
    .row_block = 1,
    .x_group = 0,
    .m_block = 1,
    .dot_f32 = dot_f32,
    .axpy_f32 = axpy_f32,
    .quantize_row = kern_quantize_row_scalar,
    .mm = kern_mm_scalar,
    .fp8_to_f32 = kern_fp8_to_f32_scalar,
    .fp8_row_dot = kern_fp8_row_dot_scalar,
    .read_sum = read_sum,
};
