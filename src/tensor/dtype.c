/* dtype.c - type table, scalar conversions and reference (de)quantizers.
 * See dtype.h for the block layouts. These are the reference paths; the hot
 * kernels live in matmul*.c. */
#include "tensor/dtype.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *name;
    int64_t block_elems;
    size_t block_bytes;
} dtype_info;

/* ggml type ids with their block geometry; holes are ids ggml retired. */
static const dtype_info type_table[] = {
    [0] = {"f32", 1, 4},         [1] = {"f16", 1, 2},         [2] = {"q4_0", 32, 18},      [3] = {"q4_1", 32, 20},
    [6] = {"q5_0", 32, 22},      [7] = {"q5_1", 32, 24},      [8] = {"q8_0", 32, 34},      [9] = {"q8_1", 32, 36},
    [10] = {"q2_k", 256, 84},    [11] = {"q3_k", 256, 110},   [12] = {"q4_k", 256, 144},   [13] = {"q5_k", 256, 176},
    [14] = {"q6_k", 256, 210},   [15] = {"q8_k", 256, 292},   [16] = {"iq2_xxs", 256, 66}, [17] = {"iq2_xs", 256, 74},
    [18] = {"iq3_xxs", 256, 98}, [19] = {"iq1_s", 256, 50},   [20] = {"iq4_nl", 32, 18},   [21] = {"iq3_s", 256, 110},
    [22] = {"iq2_s", 256, 82},   [23] = {"iq4_xs", 256, 136}, [24] = {"i8", 1, 1},         [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},        [27] = {"i64", 1, 8},        [28] = {"f64", 1, 8},        [29] = {"iq1_m", 256, 56},
    [30] = {"bf16", 1, 2},       [34] = {"tq1_0", 256, 54},   [35] = {"tq2_0", 256, 66},   [39] = {"mxfp4", 32, 17},
};
#define N_TYPES (sizeof type_table / sizeof type_table[0])

bool dtype_known(uint32_t t) { return t < N_TYPES && type_table[t].name != NULL; }

bool dtype_computable(uint32_t t) {
    return t == DT_F32 || t == DT_F16 || t == DT_BF16 || t == DT_Q8_0 || t == DT_Q4_0 || kq_is_dequant_type(t);
}

const char *dtype_name(uint32_t t) {
    if (dtype_known(t)) return type_table[t].name;
    if (t == DT_F8_B128) return "f8_e4m3_b128";
    static _Thread_local char buf[32];
    snprintf(buf, sizeof buf, "type#%u", t);
    return buf;
}

int dtype_parse(const char *s, dtype *out) {
    static const dtype all[] = {DT_F32, DT_F16, DT_BF16, DT_Q8_0, DT_Q4_0, DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_IQ4_XS};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcasecmp(s, type_table[all[i]].name) == 0) {
            *out = all[i];
            return 0;
        }
    return -1;
}

int64_t dtype_block_elems(uint32_t t) { return dtype_known(t) ? type_table[t].block_elems : t == DT_F8_B128; }
size_t dtype_block_bytes(uint32_t t) { return dtype_known(t) ? type_table[t].block_bytes : t == DT_F8_B128; }

size_t dtype_row_bytes(uint32_t t, int64_t n) {
    if (t == DT_F8_B128) return n < 0 ? 0 : (size_t)n;
    if (!dtype_known(t) || n < 0) return 0;
    int64_t be = type_table[t].block_elems;
    if (n % be) return 0;
    return (size_t)(n / be) * type_table[t].block_bytes;
}

/* ---- half / bfloat16 ---- */

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float fp16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0) {
        /* zero or subnormal: value = man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (man << 13));
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_fp16(float f) {
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) {
        /* result is subnormal or zero: round(|f| * 2^24) with ties to even */
        float a = bits_f32(ax);
        float scaled = a * 16777216.0f; /* exact: power of two */
        uint32_t r = (uint32_t)nearbyintf(scaled);
        return (uint16_t)(sign | r);
    }
    /* normal: rebias and round mantissa to 10 bits, ties to even */
    uint32_t mant_odd = (ax >> 13) & 1;
    ax += 0xfffu + mant_odd;
    ax -= 112u << 23;
    return (uint16_t)(sign | (ax >> 13));
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64); /* quiet nan */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* ---- reference quantizers (ggml's *_ref rounding) ---- */

static void quantize_q8_0(const float *x, block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float *xb = x + b * QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float d = amax / 127.0f;
        float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) y[b].qs[j] = (int8_t)roundf(xb[j] * id);
    }
}

static void quantize_q4_0(const float *x, block_q4_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK4_0; b++) {
        const float *xb = x + b * QK4_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; j++)
            if (amax < fabsf(xb[j])) {
                amax = fabsf(xb[j]);
                max = xb[j];
            }
        float d = max / -8.0f;
        float id = d ? 1.0f / d : 0.0f;
        y[b].d = f32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            float x0 = xb[j] * id, x1 = xb[QK4_0 / 2 + j] * id;
            int q0 = (int)(x0 + 8.5f), q1 = (int)(x1 + 8.5f);
            if (q0 > 15) q0 = 15;
            if (q1 > 15) q1 = 15;
            if (q0 < 0) q0 = 0;
            if (q1 < 0) q1 = 0;
            y[b].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void dtype_quantize_row(dtype t, const float *src, void *dst, int64_t n) {
    switch (t) {
    case DT_F32: memcpy(dst, src, (size_t)n * 4); break;
    case DT_F16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = f32_to_fp16(src[i]);
        break;
    case DT_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = f32_to_bf16(src[i]);
        break;
    case DT_Q8_0: quantize_q8_0(src, dst, n); break;
    case DT_Q4_0: quantize_q4_0(src, dst, n); break;
    case DT_Q4_K:
    case DT_Q5_K:
    case DT_Q6_K:
    case DT_IQ4_XS: kq_quantize_blocks(t, src, dst, n / 256); break;
    default: break;
    }
}

void dtype_dequantize_row(dtype t, const void *src, float *dst, int64_t n) {
    switch (t) {
    case DT_F32: memcpy(dst, src, (size_t)n * 4); break;
    case DT_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_f32(((const uint16_t *)src)[i]);
        break;
    case DT_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_f32(((const uint16_t *)src)[i]);
        break;
    case DT_Q8_0: {
        const block_q8_0 *b = src;
        for (int64_t i = 0; i < n / QK8_0; i++) {
            float d = fp16_to_f32(b[i].d);
            for (int j = 0; j < QK8_0; j++) dst[i * QK8_0 + j] = d * (float)b[i].qs[j];
        }
        break;
    }
    case DT_Q4_0: {
        const block_q4_0 *b = src;
        for (int64_t i = 0; i < n / QK4_0; i++) {
            float d = fp16_to_f32(b[i].d);
            for (int j = 0; j < QK4_0 / 2; j++) {
                dst[i * QK4_0 + j] = d * (float)((b[i].qs[j] & 0xf) - 8);
                dst[i * QK4_0 + j + 16] = d * (float)((b[i].qs[j] >> 4) - 8);
            }
        }
        break;
    }
    default: kq_dequantize_blocks(t, src, dst, n / dtype_block_elems(t)); break;
    }
}
