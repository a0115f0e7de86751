/* kernels_kq_avx2.c - AVX2+FMA Q4_K, Q5_K and Q6_K matmul on the GGUF row layout
 * (KL_ROWS), the 8-lane twin of kernels_kq_avx512.c: each 8-element run of a
 * weight row is dequantized in registers (bytes widened to int32, converted,
 * one FMA: w = d*sc*q - dmin*m, or d*sc*(q-32)) and multiplied into up to
 * KQ_MR activation rows with f32 FMA, two accumulators per row: used for
 * Q5_K. Q4_K and Q6_K take the integer path at the end of the file. */
#include <immintrin.h>

#include "tensor/kernels_impl.h"

#define AI static inline __attribute__((always_inline))
#define KQ_MR 4

AI __m256i widen8(const uint8_t *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

AI float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AI void fma_rows(const int MR, __m256 w, const float *const *x, int64_t off, __m256 acc[][4], int s) {
    s &= MR <= 2 ? 3 : 1; /* 4 accumulators per row when few rows (FMA latency), else 2 */
#pragma GCC unroll 4
    for (int t = 0; t < MR; t++) acc[t][s] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x[t] + off), acc[t][s]);
}

/* Q4_K, or Q5_K (FIVE): qh[32] after the scales, bit s of qh[l] is bit 4 of sub-block s's element l. */
AI void q4k_block(const int MR, const int FIVE, const uint8_t *b, const float *const *x, int64_t off, __m256 acc[][4]) {
    float d = _cvtsh_ss((uint16_t)(b[0] | b[1] << 8)), dmin = _cvtsh_ss((uint16_t)(b[2] | b[3] << 8));
    uint8_t sc[8], mn[8];
    kq_scale_min_k4(b + 4, sc, mn);
    const __m256i nib = _mm256_set1_epi32(0xf), one = _mm256_set1_epi32(1);
    const uint8_t *qs = b + (FIVE ? 48 : 16), *qh = b + 16;
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m256 dl0 = _mm256_set1_ps(d * (float)sc[2 * j]), ml0 = _mm256_set1_ps(-dmin * (float)mn[2 * j]);
        __m256 dl1 = _mm256_set1_ps(d * (float)sc[2 * j + 1]), ml1 = _mm256_set1_ps(-dmin * (float)mn[2 * j + 1]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256i v = widen8(qs + 32 * j + 8 * c);
            __m256i lo = _mm256_and_si256(v, nib), hi = _mm256_srli_epi32(v, 4);
            if (FIVE) {
                __m256i h = widen8(qh + 8 * c);
                lo = _mm256_or_si256(lo, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2 * j), one), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2 * j + 1), one), 4));
            }
            __m256 wl = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lo), dl0, ml0);
            __m256 wh = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), dl1, ml1);
            fma_rows(MR, wl, x, off + 64 * j + 8 * c, acc, 2 * (c & 1));
            fma_rows(MR, wh, x, off + 64 * j + 32 + 8 * c, acc, 2 * (c & 1) + 1);
        }
    }
}

AI void q6k_block(const int MR, const uint8_t *b, const float *const *x, int64_t off, __m256 acc[][4]) {
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = _cvtsh_ss((uint16_t)(b[208] | b[209] << 8));
    const __m256i m4 = _mm256_set1_epi32(0xf), m2 = _mm256_set1_epi32(3), c32 = _mm256_set1_epi32(32);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
        for (int l0 = 0; l0 < 32; l0 += 8) {
            const uint8_t *ql = b + 64 * h + l0, *qh = b + 128 + 32 * h + l0;
            __m256i A = widen8(ql), B = widen8(ql + 32), H = widen8(qh);
            __m256i q[4] = {_mm256_or_si256(_mm256_and_si256(A, m4), _mm256_slli_epi32(_mm256_and_si256(H, m2), 4)),
                            _mm256_or_si256(_mm256_and_si256(B, m4),
                                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(H, 2), m2), 4)),
                            _mm256_or_si256(_mm256_srli_epi32(A, 4),
                                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(H, 4), m2), 4)),
                            _mm256_or_si256(_mm256_srli_epi32(B, 4), _mm256_slli_epi32(_mm256_srli_epi32(H, 6), 4))};
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                int e = 128 * h + 32 * g + l0;
                __m256 w = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q[g], c32)),
                                         _mm256_set1_ps(d * (float)sc[e / 16]));
                fma_rows(MR, w, x, off + e, acc, g);
            }
        }
}

AI void kq_row(const int MR, int ty, const uint8_t *row, int64_t nb, const float *const *x, float *y, int64_t n) {
    __m256 acc[KQ_MR][4];
#pragma GCC unroll 4
    for (int t = 0; t < MR; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = _mm256_setzero_ps();
    if (ty == DT_Q6_K)
        for (int64_t b = 0; b < nb; b++) q6k_block(MR, row + b * 210, x, b * 256, acc);
    else if (ty == DT_Q5_K)
        for (int64_t b = 0; b < nb; b++) q4k_block(MR, 1, row + b * 176, x, b * 256, acc);
    else
        for (int64_t b = 0; b < nb; b++) q4k_block(MR, 0, row + b * 144, x, b * 256, acc);
#pragma GCC unroll 4
    for (int t = 0; t < MR; t++)
        y[t * n] = hsum8(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3])));
}

void kern_mm_kq_avx2(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
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
            default: kq_row(4, ty, row, nb, x, y, n); break;
            }
        }
    }
}

/* ---- Q4_K / Q6_K x Q8_K-style activations (kern_quantize_row_q8k), integer ----
 * vpmaddubsw(unsigned q, signed a) gives int16 pair sums (|.| <= 2*63*127, no
 * saturation); vpmaddwd with the sub-block scale as int16 applies the scale
 * exactly, so a whole super-block accumulates in int32 and is converted and
 * scaled by d * dx once. Q4_K mins come from the per-32 activation sums; Q6_K's
 * offset 32 is subtracted as vpmaddubsw(32, a). */
AI void q4k_int_rows(const int MR, const uint8_t *row, int64_t nb, const kern_qact *qa, int64_t i, int64_t k, float *y,
                     int64_t n) {
    const int64_t nb32 = k / 32;
    __m256 acc[KQ_MR];
    float msum[KQ_MR];
#pragma GCC unroll 4
    for (int t = 0; t < MR; t++) acc[t] = _mm256_setzero_ps(), msum[t] = 0.0f;
    const __m256i nib = _mm256_set1_epi8(0x0f);
    for (int64_t B = 0; B < nb; B++) {
        const uint8_t *b = row + B * 144;
        float d = _cvtsh_ss((uint16_t)(b[0] | b[1] << 8)), dmin = _cvtsh_ss((uint16_t)(b[2] | b[3] << 8));
        uint8_t sc[8], mn[8];
        kq_scale_min_k4(b + 4, sc, mn);
        __m256i wv[8];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * j));
            wv[2 * j] = _mm256_and_si256(raw, nib);
            wv[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nib);
        }
#pragma GCC unroll 4
        for (int t = 0; t < MR; t++) {
            const int8_t *q = qa->q + (i + t) * k + B * 256;
            const int32_t *sums = qa->corr + (i + t) * nb32 + B * 8;
            float dx = qa->d[(i + t) * nb32 + B];
            __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int s = 0; s < 8; s++) {
                __m256i p = _mm256_maddubs_epi16(wv[s], _mm256_loadu_si256((const __m256i *)(q + 32 * s)));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16(sc[s])));
            }
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * dx), acc[t]);
            int32_t ms = 0;
            for (int s = 0; s < 8; s++) ms += (int32_t)mn[s] * sums[s];
            msum[t] += dmin * dx * (float)ms;
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < MR; t++) y[t * n] = hsum8(acc[t]) - msum[t];
}

AI void q6k_int_rows(const int MR, const uint8_t *row, int64_t nb, const kern_qact *qa, int64_t i, int64_t k, float *y,
                     int64_t n) {
    const int64_t nb32 = k / 32;
    __m256 acc[KQ_MR];
#pragma GCC unroll 4
    for (int t = 0; t < MR; t++) acc[t] = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03), c32 = _mm256_set1_epi8(32);
    for (int64_t B = 0; B < nb; B++) {
        const uint8_t *b = row + B * 210;
        const int8_t *sc = (const int8_t *)(b + 192);
        float d = _cvtsh_ss((uint16_t)(b[208] | b[209] << 8));
        __m256i wv[8], sv[8]; /* 32 elements each: 128h + 32g; scales of its two 16-element halves */
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = _mm256_loadu_si256((const __m256i *)(b + 64 * h));
            __m256i ql1 = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
            __m256i lo[4] = {_mm256_and_si256(ql0, m4), _mm256_and_si256(ql1, m4),
                             _mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4)};
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), m2);
                wv[4 * h + g] = _mm256_or_si256(lo[g], _mm256_slli_epi16(hb, 4));
                int s0 = 8 * h + 2 * g;
                sv[4 * h + g] = _mm256_set_m128i(_mm_set1_epi16(sc[s0 + 1]), _mm_set1_epi16(sc[s0]));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < MR; t++) {
            const int8_t *q = qa->q + (i + t) * k + B * 256;
            float dx = qa->d[(i + t) * nb32 + B];
            __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                __m256i av = _mm256_loadu_si256((const __m256i *)(q + 32 * g));
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(wv[g], av), _mm256_maddubs_epi16(c32, av));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sv[g]));
            }
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * dx), acc[t]);
        }
    }
#pragma GCC unroll 4
    for (int t = 0; t < MR; t++) y[t * n] = hsum8(acc[t]);
}

void kern_mm_kq_int_avx2(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    int q6 = a->w->type == DT_Q6_K;
    int64_t k = a->k, n = a->n, nb = k / 256;
    size_t rb = dtype_row_bytes((uint32_t)a->w->type, k);
    for (int64_t i = i0; i < i1; i += KQ_MR) {
        int mr = i1 - i < KQ_MR ? (int)(i1 - i) : KQ_MR;
        for (int64_t o = o0; o < o1; o++) {
            const uint8_t *row = (const uint8_t *)a->w->data + (size_t)o * rb;
            float *y = a->y + i * n + o;
#define KQ_CALL(MR)                                            \
    do {                                                       \
        if (q6) q6k_int_rows(MR, row, nb, &a->qa, i, k, y, n); \
        else q4k_int_rows(MR, row, nb, &a->qa, i, k, y, n);    \
    } while (0)
            switch (mr) {
            case 1: KQ_CALL(1); break;
            case 2: KQ_CALL(2); break;
            case 3: KQ_CALL(3); break;
            default: KQ_CALL(4); break;
            }
#undef KQ_CALL
        }
    }
}
