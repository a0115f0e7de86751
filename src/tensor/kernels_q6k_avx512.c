/* kernels_q6k_avx512.c - AVX-512 VNNI Q6_K matmul on the GGUF row layout
 * (KL_ROWS) against the Q8_K-style activations of kern_quantize_row_q8k
 * (int8, one f32 scale per 256; kernels_impl.h): the 210 weight bytes of a
 * super-block are unpacked in registers once per KQ_MR (8) activation rows and
 * multiplied with vpdpbusd (weights the unsigned operand); the int8 sub-block
 * scales are applied to the int32 sums in f32 lanes and d * dx once per block.
 * Q6_K is never packed into K-quant panels (kernels_kqp_avx512.c): streaming
 * the GGUF rows is about twice as fast for decode (bench/README.md, issue 22),
 * and Q6_K is the output and half of ffn_down / attn_v in Q4_K_M / Q5_K_M
 * files. Every m takes this path, so a row's result does not depend on its
 * batch. Results equal kernels_dequant.c's up to the activation rounding to
 * int8. Compiled with the AVX-512 flags (file suffix). */
#include <immintrin.h>

#include "tensor/kernels_impl.h"

#define AI static inline __attribute__((always_inline))
#define KQ_MR 8

/* ---- Q6_K x Q8_K-style activations, integer dot products ----
 * Per half h (128 elements) the 64 ql bytes give the low nibbles of elements
 * 0-63 (& 0xf) and 64-127 (>> 4); qh's 2-bit fields shifted in make two zmm of
 * unsigned 6-bit q in element order. vpdpbusd(q, a) - vpdpbusd(32, a) =
 * sum (q-32)*a per 4 lanes, i.e. lanes 4s..4s+3 belong to 16-element
 * sub-block s of the 64; scaled by the int8 sub-block scales in f32 lanes. */
AI void q6k_int_row(const int MR, const uint8_t *row, int64_t nb, const kern_qact *qa, int64_t i, int64_t k, float *y,
                    int64_t n) {
    const int64_t nb32 = k / 32;
    __m512 acc[KQ_MR];
#pragma GCC unroll 8
    for (int t = 0; t < MR; t++) acc[t] = _mm512_setzero_ps();
    const __m512i m4 = _mm512_set1_epi8(0x0f), m2 = _mm512_set1_epi8(0x03), c32 = _mm512_set1_epi8(32);
    const __m512i lane_sub = _mm512_srli_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                               2); /* lane -> sub-block 0..3 */
    for (int64_t B = 0; B < nb; B++) {
        const uint8_t *b = row + B * 210;
        float d = _cvtsh_ss((uint16_t)(b[208] | b[209] << 8));
        __m512 scall = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 192))));
        __m512i wv[4];
        __m512 scv[4];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i ql = _mm512_loadu_si512(b + 64 * h);
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
            __m512i qh01 = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
            __m512i qh23 = _mm512_srli_epi16(qh01, 4);
            wv[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_slli_epi16(_mm512_and_si512(qh01, m2), 4));
            wv[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                            _mm512_slli_epi16(_mm512_and_si512(qh23, m2), 4));
        }
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++)
            scv[p] = _mm512_permutexvar_ps(_mm512_add_epi32(lane_sub, _mm512_set1_epi32(4 * p)), scall);
#pragma GCC unroll 8
        for (int t = 0; t < MR; t++) {
            const int8_t *q = qa->q + (i + t) * k + B * 256;
            float dx = qa->d[(i + t) * nb32 + B];
            __m512 f = _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                __m512i av = _mm512_loadu_si512(q + 64 * p);
                __m512i dot = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[p], av),
                                               _mm512_dpbusd_epi32(_mm512_setzero_si512(), c32, av));
                f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scv[p], f);
            }
            acc[t] = _mm512_fmadd_ps(f, _mm512_set1_ps(d * dx), acc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < MR; t++) y[t * n] = _mm512_reduce_add_ps(acc[t]);
}

void kern_mm_q6k_int_avx512(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    int64_t k = a->k, n = a->n, nb = k / 256;
    size_t rb = dtype_row_bytes(DT_Q6_K, k);
    for (int64_t i = i0; i < i1; i += KQ_MR) {
        int mr = i1 - i < KQ_MR ? (int)(i1 - i) : KQ_MR;
        for (int64_t o = o0; o < o1; o++) {
            const uint8_t *row = (const uint8_t *)a->w->data + (size_t)o * rb;
            float *y = a->y + i * n + o;
            switch (mr) {
            case 1: q6k_int_row(1, row, nb, &a->qa, i, k, y, n); break;
            case 2: q6k_int_row(2, row, nb, &a->qa, i, k, y, n); break;
            case 3: q6k_int_row(3, row, nb, &a->qa, i, k, y, n); break;
            case 4: q6k_int_row(4, row, nb, &a->qa, i, k, y, n); break;
            case 5: q6k_int_row(5, row, nb, &a->qa, i, k, y, n); break;
            case 6: q6k_int_row(6, row, nb, &a->qa, i, k, y, n); break;
            case 7: q6k_int_row(7, row, nb, &a->qa, i, k, y, n); break;
            default: q6k_int_row(8, row, nb, &a->qa, i, k, y, n); break;
            }
        }
    }
}
