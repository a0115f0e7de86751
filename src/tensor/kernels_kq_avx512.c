/* kernels_kq_avx512.c - AVX-512 VNNI Q4_K, Q5_K and Q6_K matmul on the GGUF row
 * layout (KL_ROWS) against the Q8_K-style activations of kern_quantize_row_q8k
 * (int8, one f32 scale per 256, sums per 32; kernels_impl.h): the weight
 * bytes of a super-block are unpacked in registers once per KQ_MR (8)
 * activation rows and multiplied with vpdpbusd (weights the unsigned
 * operand); sub-block scales are applied to the int32 sums in f32 lanes and
 * the super-block scales once per block. Results equal kernels_dequant.c's
 * (dequantize, then f32 dot) up to the activation rounding to int8 (as in
 * llama.cpp). Every m takes this path, so a row's result does not depend on
 * its batch. Compiled with the AVX-512 flags (file suffix). */
#include <immintrin.h>
#include <string.h>

#include "tensor/kernels_impl.h"

#define AI static inline __attribute__((always_inline))
#define KQ_MR 8

/* ---- Q4_K / Q5_K x Q8_K-style activations, integer dot products ----
 * Per super-block the 32 weight bytes of sub-blocks (2j, 2j+1) become one zmm
 * of 64 nibbles in element order, so vpdpbusd against the 64 activation bytes
 * at 64j gives int32 lanes 0-7 for sub-block 2j and 8-15 for 2j+1; those are
 * scaled by the sub-block scales (float lanes), summed, and scaled by
 * d * dx once. The mins: dmin * dx * sum_s m_s * (sum of sub-block s's q).
 * Q5_K: the fifth bit of each weight comes from qh, shifted into bit 4 of the
 * bytes before the dot (weights 0..31, still an unsigned operand). */

/* Sub-block scales and mins of one Q4_K / Q5_K block, read with vector loads:
 * the 12 packed bytes become sc in int32 lanes 0-7 and mn in lanes 8-15
 * (kq_scale_min_k4's arithmetic), so no scalar loop per block. */
AI __m512i q4k_scale_min_lanes(const uint8_t *s12) {
    uint32_t w0, w1, w2;
    memcpy(&w0, s12, 4), memcpy(&w1, s12 + 4, 4), memcpy(&w2, s12 + 8, 4);
    /* lanes 0-3 sc[0..3] = s[j] & 63; 4-7 sc[4..7] = (s[j+8] & 15) | (s[j] >> 2 & 0x30);
     * lanes 8-11 mn[0..3] = s[j+4] & 63; 12-15 mn[4..7] = (s[j+8] >> 4) | (s[j+4] >> 2 & 0x30) */
    __m512i a = _mm512_cvtepu8_epi32(_mm_setr_epi32((int)w0, (int)w0, (int)w1, (int)w1));
    __m512i c = _mm512_cvtepu8_epi32(_mm_setr_epi32(0, (int)w2, 0, (int)w2));
    const __m512i hi_half = _mm512_setr_epi32(0, 0, 0, 0, -1, -1, -1, -1, 0, 0, 0, 0, -1, -1, -1, -1);
    const __m512i c_shift = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4);
    __m512i low = _mm512_and_si512(a, _mm512_set1_epi32(63));
    __m512i up = _mm512_or_si512(_mm512_and_si512(_mm512_srlv_epi32(c, c_shift), _mm512_set1_epi32(15)),
                                 _mm512_and_si512(_mm512_srli_epi32(a, 2), _mm512_set1_epi32(0x30)));
    return _mm512_ternarylogic_epi32(hi_half, up, low, 0xca); /* hi_half ? up : low */
}

/* Q4_K or Q5_K (FIVE: bit 4 of sub-block s's element l is bit s of qh[l]) x the
 * Q8_K-style activations. Weights are 0..15 / 0..31, unsigned operands. */
AI void q45k_int_row(const int MR, const int FIVE, const uint8_t *row, int64_t nb, const kern_qact *qa, int64_t i,
                     int64_t k, float *y, int64_t n) {
    const int64_t nb32 = k / 32, bb = FIVE ? 176 : 144;
    __m512 acc[KQ_MR];
    __m256 macc[KQ_MR]; /* dmin * dx * mn[s] * (sum of sub-block s's activation quants), lane s */
#pragma GCC unroll 8
    for (int t = 0; t < MR; t++) acc[t] = _mm512_setzero_ps(), macc[t] = _mm256_setzero_ps();
    const __m256i nib = _mm256_set1_epi8(0x0f), bit = _mm256_set1_epi8(0x10);
    for (int64_t B = 0; B < nb; B++) {
        const uint8_t *b = row + B * bb;
        _mm_prefetch((const char *)(b + 8 * bb), _MM_HINT_T0);
        float d = _cvtsh_ss((uint16_t)(b[0] | b[1] << 8)), dmin = _cvtsh_ss((uint16_t)(b[2] | b[3] << 8));
        __m512 scm = _mm512_cvtepi32_ps(q4k_scale_min_lanes(b + 4)); /* sc lanes 0-7, mn 8-15 */
        __m512 scv[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            scv[j] = _mm512_permutexvar_ps(
                _mm512_inserti64x4(_mm512_set1_epi32(2 * j), _mm256_set1_epi32(2 * j + 1), 1), scm);
        __m256 mnv = _mm512_extractf32x8_ps(scm, 1);
        const uint8_t *qs = b + (FIVE ? 48 : 16);
        __m256i qh = FIVE ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
        __m512i wv[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            __m256i lo = _mm256_and_si256(raw, nib), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nib);
            if (FIVE) {
                /* bit 2j of qh -> bit 4 of lo, bit 2j+1 -> bit 4 of hi */
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit));
                qh = _mm256_srli_epi16(qh, 2);
            }
            wv[j] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        }
#pragma GCC unroll 8
        for (int t = 0; t < MR; t++) {
            const int8_t *q = qa->q + (i + t) * k + B * 256;
            const int32_t *sums = qa->corr + (i + t) * nb32 + B * 8;
            float dx = qa->d[(i + t) * nb32 + B];
            __m512 f = _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wv[j], _mm512_loadu_si512(q + 64 * j));
                f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scv[j], f);
            }
            acc[t] = _mm512_fmadd_ps(f, _mm512_set1_ps(d * dx), acc[t]);
            __m256 ms = _mm256_mul_ps(mnv, _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)sums)));
            macc[t] = _mm256_fmadd_ps(ms, _mm256_set1_ps(dmin * dx), macc[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < MR; t++)
        y[t * n] = _mm512_reduce_add_ps(acc[t]) - _mm512_reduce_add_ps(_mm512_zextps256_ps512(macc[t]));
}

void kern_mm_q45k_int_avx512(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    int64_t k = a->k, n = a->n, nb = k / 256;
    int five = a->w->type == DT_Q5_K;
    size_t rb = dtype_row_bytes((uint32_t)a->w->type, k);
    for (int64_t i = i0; i < i1; i += KQ_MR) {
        int mr = i1 - i < KQ_MR ? (int)(i1 - i) : KQ_MR;
        for (int64_t o = o0; o < o1; o++) {
            const uint8_t *row = (const uint8_t *)a->w->data + (size_t)o * rb;
            float *y = a->y + i * n + o;
#define Q45_CALL(MR)                                                \
    do {                                                            \
        if (five) q45k_int_row(MR, 1, row, nb, &a->qa, i, k, y, n); \
        else q45k_int_row(MR, 0, row, nb, &a->qa, i, k, y, n);      \
    } while (0)
            switch (mr) {
            case 1: Q45_CALL(1); break;
            case 2: Q45_CALL(2); break;
            case 3: Q45_CALL(3); break;
            case 4: Q45_CALL(4); break;
            case 5: Q45_CALL(5); break;
            case 6: Q45_CALL(6); break;
            case 7: Q45_CALL(7); break;
            default: Q45_CALL(8); break;
            }
#undef Q45_CALL
        }
    }
}

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
