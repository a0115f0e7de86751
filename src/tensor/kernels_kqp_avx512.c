/* kernels_kqp_avx512.c - AVX-512 VNNI Q4_K, Q5_K and IQ4_XS matmul on
 * the K-quant KL_P16 panels (kernels_impl.h; packed by kernels_kqpack.c)
 * against the Q8_K-style activations (kern_quantize_row_q8k: int8, one f32
 * scale dx per 256, int16 sums per 32 in s32). Q6_K is not packed: it runs on
 * its GGUF rows (kernels_q6k_avx512.c), whose decode is about twice as fast.
 *
 * A register tile is RV panels (16 or 32 output rows, one per int32 lane) x
 * MA activation rows. Per sub-block (32 elements) each 64-byte
 * vector of unpacked unsigned weights (4 consecutive quants of 16 rows) meets
 * a broadcast dword of 4 activation quants in vpdpbusd, so the weights are
 * unpacked once per tile, not once per activation row. Per output row o and
 * activation row i, all integer and exact:
 *   isum = sum_s sc_s * dot_s            (vpmulld of the sub-block sum)
 *   imin = sum_s mn_s * sum32_s (Q4_K, Q5_K), sum_s sc_s * sum32_s (IQ4_XS)
 *          (vpdpwssd on int16 pairs)
 * then per super-block, in f32, in this order:
 *   Q4_K/Q5_K: acc = fma(float(isum), d*dx, acc); acc = fnmadd(float(imin), dmin*dx, acc)
 *   IQ4_XS:    acc = fma(float(isum - 128 imin), d*dx, acc)   (table + 128)
 * Bit-exactness invariant: these operations per (o, i) do not depend on RV, MA,
 * the tile a row lands in, the thread, or m, so a row's result is the same
 * alone (decode), in any batch and in any split (batch invariance).
 * Bounds: |isum|, |imin| < 2^28 (IQ4_XS: 8 x 32 x 241 x 32 x 127). */
#include <immintrin.h>
#include <string.h>

#include "tensor/kernels_impl.h"

#define AI static inline __attribute__((always_inline))
#ifndef MA_K
#define MA_K 6 /* activation rows per tile */
#endif
#ifndef PF_DIST
#define PF_DIST 4096
#endif
enum { TY_Q4K, TY_Q5K, TY_IQ4XS };

static const int8_t iq4_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

AI __m512i bc32(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* v shifted (per 16-bit lane) so that bit `from` of each byte lands on bit `to`
 * (|from - to| <= 4: no bits cross into the checked positions). */
AI __m512i move_bits(__m512i v, const int from, const int to) {
    if (from < to) return _mm512_slli_epi16(v, (unsigned)(to - from));
    if (from > to) return _mm512_srli_epi16(v, (unsigned)(from - to));
    return v;
}

AI __m512i or_and(__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi32(a, b, c, 0xf8); } /* a|(b&c) */

/* Sub-block s's scales of 16 rows as int32 lanes, from the pair vector. */
AI __m512i pair_half(__m512i pair, int odd) {
    return odd ? _mm512_srai_epi32(pair, 16) : _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16);
}
AI __m512i pair_vec(const int SIGNED, const uint8_t *p) {
    __m256i b = _mm256_load_si256((const __m256i *)p);
    return SIGNED ? _mm512_cvtepi8_epi16(b) : _mm512_cvtepu8_epi16(b);
}

AI void tile_kq(const int TY, const int RV, const int MA, const uint8_t *wp0, const uint8_t *wp1, const kern_qact *qa,
                int64_t i, int64_t k, float *y, int64_t n, int64_t o) {
    const dtype dt = TY == TY_Q4K ? DT_Q4_K : TY == TY_Q5K ? DT_Q5_K : DT_IQ4_XS;
    const int S = 32, NSUB = 256 / S, NV = S / 8, Q45 = TY == TY_Q4K || TY == TY_Q5K;
    const int64_t nb = k / 256, nb32 = k / 32;
    const size_t sbb = kqp_sb_bytes(dt), qoff = kqp_qs_off(dt);
    const uint8_t *wp[2] = {wp0, wp1};
    const __m512i nib = _mm512_set1_epi8(0x0f), b4 = _mm512_set1_epi8(0x10);
    uint8_t tb[16];
    for (int e = 0; e < 16; e++) tb[e] = (uint8_t)(iq4_levels[e] + 128);
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)tb));
    __m512 acc[2][MA_K];
#pragma GCC unroll 8
    for (int t = 0; t < MA; t++) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
    for (int64_t B = 0; B < nb; B++) {
        const uint8_t *wb[2] = {wp[0] + B * sbb, wp[1] + B * sbb};
        const int8_t *xq[MA_K];
#pragma GCC unroll 8
        for (int t = 0; t < MA; t++) xq[t] = qa->q + (i + t) * k + B * 256;
        __m512i isum[2][MA_K];
#pragma GCC unroll 8
        for (int t = 0; t < MA; t++) isum[0][t] = isum[1][t] = _mm512_setzero_si512();
#pragma GCC unroll 2
        for (int s = 0; s < NSUB; s++) {
            __m512i sub[2][MA_K], hv[2];
#pragma GCC unroll 8
            for (int t = 0; t < MA; t++) sub[0][t] = sub[1][t] = _mm512_setzero_si512();
#pragma GCC unroll 2
            for (int r = 0; r < RV; r++)
                hv[r] = TY == TY_Q5K ? _mm512_load_si512(wb[r] + qoff + 2048 + s * 64) : _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int g = 0; g < NV; g++) {
                __m512i lo[2], hi[2];
#pragma GCC unroll 2
                for (int r = 0; r < RV; r++) {
                    const uint8_t *v = wb[r] + qoff + (size_t)(s * NV + g) * 64;
                    if (MA <= 2) _mm_prefetch((const char *)v + PF_DIST, _MM_HINT_T0);
                    __m512i raw = _mm512_load_si512(v);
                    lo[r] = _mm512_and_si512(raw, nib);
                    hi[r] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nib);
                    if (TY == TY_Q5K) {
                        lo[r] = or_and(lo[r], move_bits(hv[r], 2 * g, 4), b4);
                        hi[r] = or_and(hi[r], move_bits(hv[r], 2 * g + 1, 4), b4);
                    } else if (TY == TY_IQ4XS) {
                        lo[r] = _mm512_shuffle_epi8(table, lo[r]);
                        hi[r] = _mm512_shuffle_epi8(table, hi[r]);
                    }
                }
#pragma GCC unroll 8
                for (int t = 0; t < MA; t++) {
                    __m512i xl = bc32(xq[t] + S * s + 4 * g), xh = bc32(xq[t] + S * s + S / 2 + 4 * g);
#pragma GCC unroll 2
                    for (int r = 0; r < RV; r++) {
                        sub[r][t] = _mm512_dpbusd_epi32(sub[r][t], lo[r], xl);
                        sub[r][t] = _mm512_dpbusd_epi32(sub[r][t], hi[r], xh);
                    }
                }
            }
#pragma GCC unroll 2
            for (int r = 0; r < RV; r++) {
                __m512i sc = pair_half(pair_vec(!Q45, wb[r] + 64 + (s / 2) * 32), s % 2);
#pragma GCC unroll 8
                for (int t = 0; t < MA; t++)
                    isum[r][t] = _mm512_add_epi32(isum[r][t], _mm512_mullo_epi32(sub[r][t], sc));
            }
        }
        /* the super-block's epilogue: imin, then the f32 steps of the header comment */
#pragma GCC unroll 2
        for (int r = 0; r < RV; r++) {
            __m512 dv = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)wb[r]));
            __m512 dmv = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(wb[r] + 32)));
            __m512i pv[8];
#pragma GCC unroll 8
            for (int u = 0; u < NSUB / 2; u++) pv[u] = pair_vec(!Q45, wb[r] + (Q45 ? 192 : 64) + u * 32);
#pragma GCC unroll 8
            for (int t = 0; t < MA; t++) {
                const int16_t *sums = qa->s32 + (i + t) * nb32 + B * 8;
                __m512i imin = _mm512_setzero_si512();
#pragma GCC unroll 8
                for (int u = 0; u < NSUB / 2; u++)
                    imin = _mm512_dpwssd_epi32(imin, pv[u], bc32((const int8_t *)(sums + 2 * u)));
                __m512 vdx = _mm512_set1_ps(qa->d[(i + t) * nb32 + B]);
                if (Q45) {
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][t]), _mm512_mul_ps(dv, vdx), acc[r][t]);
                    acc[r][t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(imin), _mm512_mul_ps(dmv, vdx), acc[r][t]);
                } else {
                    __m512i tot = _mm512_sub_epi32(isum[r][t], _mm512_slli_epi32(imin, 7));
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot), _mm512_mul_ps(dv, vdx), acc[r][t]);
                }
            }
        }
    }
    __mmask16 m0 = n - o >= 16 ? 0xffff : (__mmask16)((1u << (n - o)) - 1);
    __mmask16 m1 = n - o - 16 >= 16 ? 0xffff : n - o <= 16 ? 0 : (__mmask16)((1u << (n - o - 16)) - 1);
#pragma GCC unroll 8
    for (int t = 0; t < MA; t++) {
        _mm512_mask_storeu_ps(y + t * n + o, m0, acc[0][t]);
        if (RV == 2) _mm512_mask_storeu_ps(y + t * n + o + 16, m1, acc[1][t]);
    }
}

/* ma (1..MA_K) as a compile-time tile height */
#define KQ_MA(c) ((c) < MA_K ? (c) : MA_K)
#define KQ_SWITCH_MA(TY, RV, ma, ...)                      \
    switch (ma) {                                          \
    case 1: tile_kq(TY, RV, 1, __VA_ARGS__); break;        \
    case 2: tile_kq(TY, RV, KQ_MA(2), __VA_ARGS__); break; \
    case 3: tile_kq(TY, RV, KQ_MA(3), __VA_ARGS__); break; \
    case 4: tile_kq(TY, RV, KQ_MA(4), __VA_ARGS__); break; \
    case 5: tile_kq(TY, RV, KQ_MA(5), __VA_ARGS__); break; \
    case 6: tile_kq(TY, RV, KQ_MA(6), __VA_ARGS__); break; \
    case 7: tile_kq(TY, RV, KQ_MA(7), __VA_ARGS__); break; \
    default: tile_kq(TY, RV, MA_K, __VA_ARGS__); break;    \
    }
_Static_assert(MA_K >= 1 && MA_K <= 8, "KQ_SWITCH_MA lists 1..8");

AI void tiles(const int TY, const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    size_t pb = kp16_panel_bytes(a->w->type, a->k);
    const uint8_t *base = a->w->packed;
    int64_t p0 = o0 / 16, p1 = (o1 + 15) / 16;
    for (int64_t p = p0; p < p1;) {
        int RV = p1 - p >= 2 ? 2 : 1;
        const uint8_t *w0 = base + (size_t)p * pb, *w1 = base + (size_t)(p + RV - 1) * pb;
        for (int64_t i = i0; i < i1; i += MA_K) {
            int ma = (int)(i1 - i < MA_K ? i1 - i : MA_K);
            float *y = a->y + i * a->n;
            if (RV == 2) KQ_SWITCH_MA(TY, 2, ma, w0, w1, &a->qa, i, a->k, y, a->n, p * 16)
            else KQ_SWITCH_MA(TY, 1, ma, w0, w0, &a->qa, i, a->k, y, a->n, p * 16)
        }
        p += RV;
    }
}

void kern_mm_kqp_avx512(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    switch (a->w->type) {
    case DT_Q4_K: tiles(TY_Q4K, a, o0, o1, i0, i1); break;
    case DT_Q5_K: tiles(TY_Q5K, a, o0, o1, i0, i1); break;
    default: tiles(TY_IQ4XS, a, o0, o1, i0, i1); break;
    }
}
