/* kernels_kq_avx512.c - AVX-512 Q4_K, Q5_K and Q6_K matmul on the GGUF row layout
 * (KL_ROWS): each 16-element run of a weight row is dequantized in registers
 * (nibbles widened to int32, converted, scaled with one FMA: w = d*sc*q -
 * dmin*m, or d*sc*(q-32)) and multiplied into up to KQ_MR (8) activation rows
 * with f32 FMA, two accumulators per row. Same semantics as kernels_dequant.c
 * (dequantize, then f32 dot) up to rounding; the weight row is decoded once
 * per KQ_MR activation rows. Compiled with the AVX-512 flags (file suffix).
 * Used for Q5_K. Q4_K and Q6_K instead take the integer paths at the end of
 * the file (activations quantized per 256 as llama.cpp's Q8_K, vpdpbusd):
 * about twice the decode throughput, at the cost of activation rounding. */
#include <immintrin.h>

#include "tensor/kernels_impl.h"

#define AI static inline __attribute__((always_inline))
#define KQ_MR 8

AI void fma_rows(const int MR, __m512 w, const float *const *x, int64_t off, __m512 acc[][4], int s) {
    s &= MR <= 2 ? 3 : 1; /* 4 accumulators per row when few rows (FMA latency), else 2 */
#pragma GCC unroll 8
    for (int t = 0; t < MR; t++) acc[t][s] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x[t] + off), acc[t][s]);
}

/* Q4_K, or Q5_K (FIVE): qh[32] after the scales, bit s of qh[l] is bit 4 of sub-block s's element l. */
AI void q4k_block(const int MR, const int FIVE, const uint8_t *b, const float *const *x, int64_t off, __m512 acc[][4]) {
    float d = _cvtsh_ss((uint16_t)(b[0] | b[1] << 8)), dmin = _cvtsh_ss((uint16_t)(b[2] | b[3] << 8));
    uint8_t sc[8], mn[8];
    kq_scale_min_k4(b + 4, sc, mn);
    const __m512i nib = _mm512_set1_epi32(0xf), one = _mm512_set1_epi32(1);
    const uint8_t *qs = b + (FIVE ? 48 : 16), *qh = b + 16;
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512 dl0 = _mm512_set1_ps(d * (float)sc[2 * j]), ml0 = _mm512_set1_ps(-dmin * (float)mn[2 * j]);
        __m512 dl1 = _mm512_set1_ps(d * (float)sc[2 * j + 1]), ml1 = _mm512_set1_ps(-dmin * (float)mn[2 * j + 1]);
#pragma GCC unroll 2
        for (int hp = 0; hp < 2; hp++) {
            __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qs + 32 * j + 16 * hp)));
            __m512i lo = _mm512_and_si512(v, nib), hi = _mm512_srli_epi32(v, 4);
            if (FIVE) {
                __m512i h = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qh + 16 * hp)));
                lo = _mm512_or_si512(lo, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2 * j), one), 4));
                hi = _mm512_or_si512(hi, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2 * j + 1), one), 4));
            }
            __m512 wl = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo), dl0, ml0);
            __m512 wh = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), dl1, ml1);
            fma_rows(MR, wl, x, off + 64 * j + 16 * hp, acc, 2 * hp);
            fma_rows(MR, wh, x, off + 64 * j + 32 + 16 * hp, acc, 2 * hp + 1);
        }
    }
}

AI void q6k_block(const int MR, const uint8_t *b, const float *const *x, int64_t off, __m512 acc[][4]) {
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = _cvtsh_ss((uint16_t)(b[208] | b[209] << 8));
    const __m512i m4 = _mm512_set1_epi32(0xf), m2 = _mm512_set1_epi32(3), c32 = _mm512_set1_epi32(32);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
        for (int l0 = 0; l0 < 32; l0 += 16) {
            const uint8_t *ql = b + 64 * h + l0, *qh = b + 128 + 32 * h + l0;
            __m512i A = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)ql));
            __m512i B = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + 32)));
            __m512i H = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qh));
            __m512i q[4] = {_mm512_or_si512(_mm512_and_si512(A, m4), _mm512_slli_epi32(_mm512_and_si512(H, m2), 4)),
                            _mm512_or_si512(_mm512_and_si512(B, m4),
                                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(H, 2), m2), 4)),
                            _mm512_or_si512(_mm512_srli_epi32(A, 4),
                                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(H, 4), m2), 4)),
                            _mm512_or_si512(_mm512_srli_epi32(B, 4), _mm512_slli_epi32(_mm512_srli_epi32(H, 6), 4))};
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                int e = 128 * h + 32 * g + l0;
                __m512 w = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q[g], c32)),
                                         _mm512_set1_ps(d * (float)sc[e / 16]));
                fma_rows(MR, w, x, off + e, acc, g);
            }
        }
}

AI void kq_row(const int MR, int ty, const uint8_t *row, int64_t nb, const float *const *x, float *y, int64_t n) {
    __m512 acc[KQ_MR][4];
#pragma GCC unroll 8
    for (int t = 0; t < MR; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm512_setzero_ps();
    if (ty == DT_Q6_K)
        for (int64_t b = 0; b < nb; b++) q6k_block(MR, row + b * 210, x, b * 256, acc);
    else if (ty == DT_Q5_K)
        for (int64_t b = 0; b < nb; b++) q4k_block(MR, 1, row + b * 176, x, b * 256, acc);
    else
        for (int64_t b = 0; b < nb; b++) q4k_block(MR, 0, row + b * 144, x, b * 256, acc);
#pragma GCC unroll 8
    for (int t = 0; t < MR; t++)
        y[t * n] = _mm512_reduce_add_ps(
            _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][1]), _mm512_add_ps(acc[t][2], acc[t][3])));
}

void kern_mm_kq_avx512(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    const kern_weight *w = a->w;
    int ty = (int)w->type;
    int64_t k = a->k, n = a->n, nb = k / 256;
    size_t rb = dtype_row_bytes((uint32_t)w->type, k);
    for (int64_t i = i0; i < i1; i += KQ_MR) {
        int mr = i1 - i < KQ_MR ? (int)(i1 - i) : KQ_MR;
        const float *x[KQ_MR];
        for (int t = 0; t < KQ_MR; t++) x[t] = a->x + (i + (t < mr ? t : 0)) * k;
        for (int64_t o = o0; o < o1; o++) {
            const uint8_t *row = (const uint8_t *)w->data + (size_t)o * rb;
            float *y = a->y + i * n + o;
            switch (mr) {
            case 1: kq_row(1, ty, row, nb, x, y, n); break;
            case 2: kq_row(2, ty, row, nb, x, y, n); break;
            case 3: kq_row(3, ty, row, nb, x, y, n); break;
            case 4: kq_row(4, ty, row, nb, x, y, n); break;
            case 5: kq_row(5, ty, row, nb, x, y, n); break;
            case 6: kq_row(6, ty, row, nb, x, y, n); break;
            case 7: kq_row(7, ty, row, nb, x, y, n); break;
            default: kq_row(8, ty, row, nb, x, y, n); break;
            }
        }
    }
}

/* ---- Q4_K x Q8_K-style activations, integer dot products ----
 * Per super-block the 32 weight bytes of sub-blocks (2j, 2j+1) become one zmm
 * of 64 nibbles in element order, so vpdpbusd against the 64 activation bytes
 * at 64j gives int32 lanes 0-7 for sub-block 2j and 8-15 for 2j+1; those are
 * scaled by the sub-block scales (float lanes), summed, and scaled by
 * d * dx once. The mins: dmin * dx * sum_s m_s * (sum of sub-block s's q). */

/* Lanes 0-7 = sc[2j], lanes 8-15 = sc[2j+1], as floats. */
AI void q4k_scale_lanes(const uint8_t sc[8], __m512 out[4]) {
    __m256 s8 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sc)));
    __m512 s = _mm512_castps256_ps512(s8);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m512i idx = _mm512_inserti64x4(_mm512_set1_epi32(2 * j), _mm256_set1_epi32(2 * j + 1), 1);
        out[j] = _mm512_permutexvar_ps(idx, s);
    }
}

AI void q4k_int_row(const int MR, const uint8_t *row, int64_t nb, const kern_qact *qa, int64_t i, int64_t k, float *y,
                    int64_t n) {
    const int64_t nb32 = k / 32;
    __m512 acc[KQ_MR];
    float msum[KQ_MR];
#pragma GCC unroll 8
    for (int t = 0; t < MR; t++) acc[t] = _mm512_setzero_ps(), msum[t] = 0.0f;
    const __m256i nib = _mm256_set1_epi8(0x0f);
    for (int64_t B = 0; B < nb; B++) {
        const uint8_t *b = row + B * 144;
        float d = _cvtsh_ss((uint16_t)(b[0] | b[1] << 8)), dmin = _cvtsh_ss((uint16_t)(b[2] | b[3] << 8));
        uint8_t sc[8], mn[8];
        kq_scale_min_k4(b + 4, sc, mn);
        __m512 scv[4];
        q4k_scale_lanes(sc, scv);
        __m512i wv[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * j));
            __m256i lo = _mm256_and_si256(raw, nib), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nib);
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
            int32_t ms = 0;
            for (int s = 0; s < 8; s++) ms += (int32_t)mn[s] * sums[s];
            msum[t] += dmin * dx * (float)ms;
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < MR; t++) y[t * n] = _mm512_reduce_add_ps(acc[t]) - msum[t];
}

void kern_mm_q4k_int_avx512(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    int64_t k = a->k, n = a->n, nb = k / 256;
    size_t rb = dtype_row_bytes(DT_Q4_K, k);
    for (int64_t i = i0; i < i1; i += KQ_MR) {
        int mr = i1 - i < KQ_MR ? (int)(i1 - i) : KQ_MR;
        for (int64_t o = o0; o < o1; o++) {
            const uint8_t *row = (const uint8_t *)a->w->data + (size_t)o * rb;
            float *y = a->y + i * n + o;
            switch (mr) {
            case 1: q4k_int_row(1, row, nb, &a->qa, i, k, y, n); break;
            case 2: q4k_int_row(2, row, nb, &a->qa, i, k, y, n); break;
            case 3: q4k_int_row(3, row, nb, &a->qa, i, k, y, n); break;
            case 4: q4k_int_row(4, row, nb, &a->qa, i, k, y, n); break;
            case 5: q4k_int_row(5, row, nb, &a->qa, i, k, y, n); break;
            case 6: q4k_int_row(6, row, nb, &a->qa, i, k, y, n); break;
            case 7: q4k_int_row(7, row, nb, &a->qa, i, k, y, n); break;
            default: q4k_int_row(8, row, nb, &a->qa, i, k, y, n); break;
            }
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
