/* kernels_kq_avx2.c - AVX2 Q4_K, Q5_K and Q6_K matmul on the GGUF row layout
 * (KL_ROWS) against the Q8_K-style activations of kern_quantize_row_q8k, the
 * integer paths (vpmaddubsw + vpmaddwd; AVX-512 runs K-quant panels instead, kernels_kqp_avx512.c):
 * the weight bytes of a super-block are unpacked once per KQ_MR (4)
 * activation rows; every m takes this path (batch-invariant results). */
#include <immintrin.h>

#include "tensor/kernels_impl.h"

#define AI static inline __attribute__((always_inline))
#define KQ_MR 4

AI float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- Q4_K, Q5_K / Q6_K x Q8_K-style activations (kern_quantize_row_q8k), integer ----
 * vpmaddubsw(unsigned q, signed a) gives int16 pair sums (|.| <= 2*63*127, no
 * saturation); vpmaddwd with the sub-block scale as int16 applies the scale
 * exactly, so a whole super-block accumulates in int32 and is converted and
 * scaled by d * dx once. Q4_K mins come from the per-32 activation sums; Q6_K's
 * offset 32 is subtracted as vpmaddubsw(32, a). Q5_K's fifth bit (qh) is shifted
 * into bit 4 of the weight bytes (0..31, |.| <= 2*31*127 in vpmaddubsw: no saturation). */
AI void q45k_int_rows(const int MR, const int FIVE, const uint8_t *row, int64_t nb, const kern_qact *qa, int64_t i,
                      int64_t k, float *y, int64_t n) {
    const int64_t nb32 = k / 32;
    __m256 acc[KQ_MR];
    float msum[KQ_MR];
#pragma GCC unroll 4
    for (int t = 0; t < MR; t++) acc[t] = _mm256_setzero_ps(), msum[t] = 0.0f;
    const __m256i nib = _mm256_set1_epi8(0x0f), bit = _mm256_set1_epi8(0x10);
    const int64_t bb = FIVE ? 176 : 144;
    for (int64_t B = 0; B < nb; B++) {
        const uint8_t *b = row + B * bb;
        float d = _cvtsh_ss((uint16_t)(b[0] | b[1] << 8)), dmin = _cvtsh_ss((uint16_t)(b[2] | b[3] << 8));
        uint8_t sc[8], mn[8];
        kq_scale_min_k4(b + 4, sc, mn);
        __m256i wv[8];
        const uint8_t *qs = b + (FIVE ? 48 : 16);
        __m256i qh = FIVE ? _mm256_loadu_si256((const __m256i *)(b + 16)) : _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256i raw = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            wv[2 * j] = _mm256_and_si256(raw, nib);
            wv[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nib);
            if (FIVE) { /* bit 2j of qh[l] -> bit 4 of sub-block 2j's element l, bit 2j+1 -> 2j+1's */
                wv[2 * j] = _mm256_or_si256(wv[2 * j], _mm256_and_si256(_mm256_slli_epi16(qh, 4), bit));
                wv[2 * j + 1] = _mm256_or_si256(wv[2 * j + 1], _mm256_and_si256(_mm256_slli_epi16(qh, 3), bit));
                qh = _mm256_srli_epi16(qh, 2);
            }
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
    int q6 = a->w->type == DT_Q6_K, five = a->w->type == DT_Q5_K;
    int64_t k = a->k, n = a->n, nb = k / 256;
    size_t rb = dtype_row_bytes((uint32_t)a->w->type, k);
    for (int64_t i = i0; i < i1; i += KQ_MR) {
        int mr = i1 - i < KQ_MR ? (int)(i1 - i) : KQ_MR;
        for (int64_t o = o0; o < o1; o++) {
            const uint8_t *row = (const uint8_t *)a->w->data + (size_t)o * rb;
            float *y = a->y + i * n + o;
#define KQ_CALL(MR)                                                       \
    do {                                                                  \
        if (q6) q6k_int_rows(MR, row, nb, &a->qa, i, k, y, n);            \
        else if (five) q45k_int_rows(MR, 1, row, nb, &a->qa, i, k, y, n); \
        else q45k_int_rows(MR, 0, row, nb, &a->qa, i, k, y, n);           \
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
