/* kernels_iq4_avx512.c - IQ4_NL and MXFP4 matmul with AVX-512 VNNI,
 * weights in the GGUF row layout (KL_ROWS).
 *
 * Both types are 32-element sub-blocks of 4-bit indexes into a 16-entry
 * table of small integers (IQ4's non-linear levels; MXFP4's e2m1 values times
 * two) with one scale per sub-block: IQ4_NL fp16 d; MXFP4 2^(e - 128) (the table holds twice
 * the value). Sub-block j's low nibbles are elements 0..15, its high nibbles
 * 16..31. The activations are Q8_0 (kern_qact with off = 128): the nibbles of
 * two sub-blocks are looked up with vpshufb in the table plus 128 (so the
 * weights are vpdpbusd's unsigned operand; corr = -128 * sum q undoes the
 * offset) and multiplied with the int8 activations, 64 products per vpdpbusd;
 * each sub-block's integer sum is scaled by its weight scale times the
 * activation's block scale in a vector FMA. Integer products are exact, so the
 * result is the dot product of the exact weights with Q8_0(x), as for Q8_0 /
 * Q4_0 weights (and llama.cpp's IQ4_NL / MXFP4 vec_dot). Weights are
 * software-prefetched 1 KiB ahead. IQ4_XS runs on the K-quant panels
 * (kernels_kqp_avx512.c). */
#include <immintrin.h>
#include <string.h>

#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"

#define IQ4_PREFETCH 1024

/* Table entries plus 128, per 128-bit lane (vpshufb looks up within lanes). */
static const int8_t iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
static const int8_t e2m1_x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

static __m512i table_u8(dtype t) {
    const int8_t *v = t == DT_MXFP4 ? e2m1_x2 : iq4_levels;
    uint8_t b[16];
    for (int i = 0; i < 16; i++) b[i] = (uint8_t)(v[i] + 128);
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)b));
}

/* Sub-block j of an IQ4_NL or MXFP4 row: its 16 bytes of nibbles and its weight scale. */
static inline const uint8_t *sub_block(dtype t, const uint8_t *row, int64_t j, float *scale) {
    if (t == DT_IQ4_NL) {
        const uint8_t *b = row + j * 18;
        *scale = _cvtsh_ss((uint16_t)(b[0] | b[1] << 8));
        return b + 2;
    }
    const uint8_t *b = row + j * 17; /* MXFP4 */
    union {
        uint32_t u;
        float f;
    } s = {.u = b[0] >= 2 ? (uint32_t)(b[0] - 1) << 23 : 0x00400000u >> (1 - b[0])}; /* 2^(e - 128) */
    *scale = s.f;
    return b + 1;
}

/* Sub-blocks j, j+1 (j+1 only when two) as 64 unsigned table values in
 * element order: [j 0..15 | j 16..31 | j+1 0..15 | j+1 16..31]. */
static inline __m512i decode_pair(const uint8_t *q0, const uint8_t *q1, __m512i table) {
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)q0)),
                                        _mm_loadu_si128((const __m128i *)q1), 1);
    __m256i m = _mm256_set1_epi8(0x0f);
    __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); /* [j lo, j+1 lo, j hi, j+1 hi] */
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm512_shuffle_epi8(table, z);
}

static float row_dot(dtype t, const uint8_t *row, const int8_t *xq, const float *xd, const int32_t *corr, int64_t nb,
                     __m512i table) {
    __m512 acc = _mm512_setzero_ps();
    float extra = 0.0f;
    for (int64_t j = 0; j < nb; j += 2) {
        int two = j + 1 < nb;
        float s0, s1 = 0.0f;
        const uint8_t *q0 = sub_block(t, row, j, &s0), *q1 = two ? sub_block(t, row, j + 1, &s1) : q0;
        _mm_prefetch((const char *)q0 + IQ4_PREFETCH, _MM_HINT_T0);
        __m512i w = decode_pair(q0, q1, table);
        __m512i x = _mm512_maskz_loadu_epi8(two ? ~0ull : 0xffffffffull, xq + j * 32);
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, x);
        s0 *= xd[j];
        s1 = two ? s1 * xd[j + 1] : 0.0f;
        __m512 sv = _mm512_insertf32x8(_mm512_set1_ps(s0), _mm256_set1_ps(s1), 1);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sv, acc);
        extra += s0 * (float)corr[j] + (two ? s1 * (float)corr[j + 1] : 0.0f);
    }
    return _mm512_reduce_add_ps(acc) + extra;
}

void kern_mm_iq4_avx512(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    const kern_weight *w = a->w;
    dtype t = w->type;
    int64_t k = a->k, n = a->n, nb = k / 32;
    size_t rb = dtype_row_bytes((uint32_t)t, k);
    __m512i table = table_u8(t);
    for (int64_t o = o0; o < o1; o++) {
        const uint8_t *row = (const uint8_t *)w->data + (size_t)o * rb;
        for (int64_t i = i0; i < i1; i++)
            a->y[i * n + o] = row_dot(t, row, a->qa.q + i * k, a->qa.d + i * nb, a->qa.corr + i * nb, nb, table);
    }
}
