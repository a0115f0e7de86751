/* kernels_avx512.c - AVX-512 (F/BW/VL/DQ/VNNI) kernels.
 *
 * Weights are in the KL_P16 panel layouts (kernels_impl.h): 16 output rows per
 * zmm. A register tile is RV panels (1 or 2, i.e. 16 or 32 rows) x MA
 * activation rows; each activation value (or Q8_0 dword of 4 quants) is
 * broadcast and multiplied into all rows of the tile at once:
 *   F32/F16 : vfmadd231ps, F16 converted with vcvtph2ps per k
 *   BF16    : converted to f32 with shifts + FMA (exact). (vdpbf16ps with
 *             bf16-rounded activations measured slower than this on SPR.)
 * Float activations for m > 1 come packed 12 rows interleaved (a->xp), so a
 * tile broadcasts from one contiguous stream instead of 12 rows k apart.
 *   Q8_0/Q4_0: vpdpbusd(unsigned weights, signed Q8_0 activations), the int32
 *             accumulator of each 32-block starts at the activation block's
 *             correction (-128 or -8 times sum q), then is scaled by
 *             d_w * d_x into an f32 accumulator.
 * Output rows past n (padding of the last panel) are masked off on store.
 * Q8_0 / Q4_0 with more than MA_Q activation rows go to kernels_amx.c when cpu_amx_active(). */
#include <immintrin.h>

#include "base/cpu.h"
#include "tensor/kernels_impl.h"

#define AI static inline __attribute__((always_inline))

static float dot_f32(const float *a, const float *b, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t j = 0;
    for (; j + 64 <= n; j += 64) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 16), _mm512_loadu_ps(b + j + 16), s1);
        s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 32), _mm512_loadu_ps(b + j + 32), s2);
        s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j + 48), _mm512_loadu_ps(b + j + 48), s3);
    }
    for (; j + 16 <= n; j += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), s0);
    if (j < n) {
        __mmask16 m = (__mmask16)((1u << (n - j)) - 1);
        s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + j), _mm512_maskz_loadu_ps(m, b + j), s1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

static void axpy_f32(float a, const float *x, float *y, int64_t n) {
    __m512 va = _mm512_set1_ps(a);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(y + j, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + j), _mm512_loadu_ps(y + j)));
    if (j < n) {
        __mmask16 m = (__mmask16)((1u << (n - j)) - 1);
        _mm512_mask_storeu_ps(y + j, m,
                              _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + j), _mm512_maskz_loadu_ps(m, y + j)));
    }
}

/* ---- activation preparation ---- */

/* roundf semantics (half away from zero), exact. */
AI __m512i round_away(__m512 v) {
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
    __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __m512 one = _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(_mm512_set1_ps(1.0f)),
                        _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u))));
    return _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, one));
}

static void quantize_row(const float *x, int64_t k, int8_t *q, float *d, int32_t *corr, int32_t off) {
    for (int64_t b = 0; b < k / 32; b++) {
        __m512 v0 = _mm512_loadu_ps(x + b * 32), v1 = _mm512_loadu_ps(x + b * 32 + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        float db = amax / 127.0f;
        float id = db ? 1.0f / db : 0.0f;
        __m512 vid = _mm512_set1_ps(id);
        __m512i i0 = round_away(_mm512_mul_ps(v0, vid)), i1 = round_away(_mm512_mul_ps(v1, vid));
        _mm_storeu_si128((__m128i *)(q + b * 32), _mm512_cvtsepi32_epi8(i0));
        _mm_storeu_si128((__m128i *)(q + b * 32 + 16), _mm512_cvtsepi32_epi8(i1));
        d[b] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        corr[b] = -off * _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
    }
}

/* ---- register tiles ---- */

#define MA_F 12 /* activation rows per float tile (RV=2 -> 24 accumulators) */
#define MA_Q 6 /* activation rows per quantized tile */
/* Decode-like tiles (few activation rows) are memory bound: prefetch weights
 * PF_DIST bytes ahead in each panel stream. (Prefetches past the end of a
 * panel are harmless hints.) */
#ifndef PF_DIST
#define PF_DIST 4096
#endif
#define PF_MAX_MA 2

AI __mmask16 row_mask(int64_t n, int64_t o) {
    int64_t v = n - o;
    return v >= 16 ? (__mmask16)0xffff : v <= 0 ? (__mmask16)0 : (__mmask16)((1u << v) - 1);
}

AI void store_tile(const int RV, const int MA, __m512 acc[2][MA_F], float *y, int64_t n, int64_t o) {
    __mmask16 m0 = row_mask(n, o), m1 = row_mask(n, o + 16);
#pragma GCC unroll 12
    for (int t = 0; t < MA; t++) {
        _mm512_mask_storeu_ps(y + t * n + o, m0, acc[0][t]);
        if (RV == 2) _mm512_mask_storeu_ps(y + t * n + o + 16, m1, acc[1][t]);
    }
}

/* TY: 0 = f32 panels, 1 = f16 panels. Activation (t, j) is x[j*xs + t*ts]. */
AI void tile_f(const int TY, const int RV, const int MA, const void *wp0, const void *wp1, const float *x, int64_t xs,
               int64_t ts, int64_t k, float *y, int64_t n, int64_t o) {
    __m512 acc[2][MA_F];
#pragma GCC unroll 12
    for (int t = 0; t < MA; t++) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
    const void *wp[2] = {wp0, wp1};
    for (int64_t j = 0; j < k; j++) {
        __m512 wv[2];
#pragma GCC unroll 2
        for (int r = 0; r < RV; r++) {
            const char *wj = (const char *)wp[r] + j * (TY == 0 ? 64 : 32);
            if (MA <= PF_MAX_MA && (TY == 0 || (j & 1) == 0)) _mm_prefetch(wj + PF_DIST, _MM_HINT_T0);
            wv[r] =
                TY == 0 ? _mm512_load_ps((const float *)wj) : _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)wj));
        }
#pragma GCC unroll 12
        for (int t = 0; t < MA; t++) {
            __m512 xb = _mm512_set1_ps(x[j * xs + t * ts]);
#pragma GCC unroll 2
            for (int r = 0; r < RV; r++) acc[r][t] = _mm512_fmadd_ps(wv[r], xb, acc[r][t]);
        }
    }
    store_tile(RV, MA, acc, y, n, o);
}

/* BF16 panels, exact f32 path: each zmm = 16 rows x 2 k, split with shifts. */
AI void tile_bf16(const int RV, const int MA, const void *wp0, const void *wp1, const float *x, int64_t xs, int64_t ts,
                  int64_t k, float *y, int64_t n, int64_t o) {
    __m512 acc[2][MA_F];
#pragma GCC unroll 12
    for (int t = 0; t < MA; t++) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
    const uint32_t *wp[2] = {wp0, wp1};
    const __m512i hi_mask = _mm512_set1_epi32((int)0xffff0000u);
    int64_t kh = k / 2;
    for (int64_t jj = 0; jj < kh; jj++) {
        __m512 ev[2], od[2];
#pragma GCC unroll 2
        for (int r = 0; r < RV; r++) {
            __m512i v = _mm512_load_si512(wp[r] + jj * 16);
            if (MA <= PF_MAX_MA) _mm_prefetch((const char *)(wp[r] + jj * 16) + PF_DIST, _MM_HINT_T0);
            ev[r] = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
            od[r] = _mm512_castsi512_ps(_mm512_and_si512(v, hi_mask));
        }
#pragma GCC unroll 12
        for (int t = 0; t < MA; t++) {
            __m512 xe = _mm512_set1_ps(x[2 * jj * xs + t * ts]), xo = _mm512_set1_ps(x[(2 * jj + 1) * xs + t * ts]);
#pragma GCC unroll 2
            for (int r = 0; r < RV; r++) {
                acc[r][t] = _mm512_fmadd_ps(ev[r], xe, acc[r][t]);
                acc[r][t] = _mm512_fmadd_ps(od[r], xo, acc[r][t]);
            }
        }
    }
    if (k & 1) { /* last, unpaired k: only the even half exists */
#pragma GCC unroll 2
        for (int r = 0; r < RV; r++) {
            __m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_load_si512(wp[r] + kh * 16), 16));
#pragma GCC unroll 12
            for (int t = 0; t < MA; t++)
                acc[r][t] = _mm512_fmadd_ps(ev, _mm512_set1_ps(x[(k - 1) * xs + t * ts]), acc[r][t]);
        }
    }
    store_tile(RV, MA, acc, y, n, o);
}

/* Q8_0 (Q4 = 0) or Q4_0 (Q4 = 1) panels x Q8_0 activations (MA rows). */
AI void tile_q(const int Q4, const int RV, const int MA, const uint8_t *wp0, const uint8_t *wp1, const kern_qact *qa,
               int64_t i, int64_t k, float *y, int64_t n, int64_t o) {
    const int64_t nb = k / 32, qbytes = Q4 ? 256 : 512;
    const size_t sb = kp16_scale_bytes(k);
    const uint8_t *wp[2] = {wp0, wp1};
    const int8_t *q = qa->q + i * k;
    const float *dx = qa->d + i * nb;
    const int32_t *corr = qa->corr + i * nb;
    const __m512i nib = _mm512_set1_epi8(0x0f);
    __m512 acc[2][MA_F];
#pragma GCC unroll 12
    for (int t = 0; t < MA; t++) acc[0][t] = acc[1][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i ai[2][8];
#pragma GCC unroll 8
        for (int t = 0; t < MA; t++) ai[0][t] = ai[1][t] = _mm512_set1_epi32(corr[t * nb + b]);
        if (Q4) {
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) {
                __m512i lo[2], hi[2];
#pragma GCC unroll 2
                for (int r = 0; r < RV; r++) {
                    __m512i raw = _mm512_load_si512(wp[r] + sb + b * qbytes + g * 64);
                    if (MA <= PF_MAX_MA)
                        _mm_prefetch((const char *)(wp[r] + sb + b * qbytes + g * 64 + PF_DIST), _MM_HINT_T0);
                    lo[r] = _mm512_and_si512(raw, nib);
                    hi[r] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nib);
                }
#pragma GCC unroll 8
                for (int t = 0; t < MA; t++) {
                    const int8_t *qb = q + t * k + b * 32;
                    __m512i xl = _mm512_set1_epi32(*(const int32_t *)(qb + g * 4));
                    __m512i xh = _mm512_set1_epi32(*(const int32_t *)(qb + 16 + g * 4));
#pragma GCC unroll 2
                    for (int r = 0; r < RV; r++) {
                        ai[r][t] = _mm512_dpbusd_epi32(ai[r][t], lo[r], xl);
                        ai[r][t] = _mm512_dpbusd_epi32(ai[r][t], hi[r], xh);
                    }
                }
            }
        } else {
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                __m512i wv[2];
#pragma GCC unroll 2
                for (int r = 0; r < RV; r++) {
                    wv[r] = _mm512_load_si512(wp[r] + sb + b * qbytes + g * 64);
                    if (MA <= PF_MAX_MA)
                        _mm_prefetch((const char *)(wp[r] + sb + b * qbytes + g * 64 + PF_DIST), _MM_HINT_T0);
                }
#pragma GCC unroll 8
                for (int t = 0; t < MA; t++) {
                    __m512i xb = _mm512_set1_epi32(*(const int32_t *)(q + t * k + b * 32 + g * 4));
#pragma GCC unroll 2
                    for (int r = 0; r < RV; r++) ai[r][t] = _mm512_dpbusd_epi32(ai[r][t], wv[r], xb);
                }
            }
        }
        __m512 dw[2];
#pragma GCC unroll 2
        for (int r = 0; r < RV; r++) dw[r] = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(wp[r] + b * 32)));
#pragma GCC unroll 8
        for (int t = 0; t < MA; t++) {
            __m512 vdx = _mm512_set1_ps(dx[t * nb + b]);
#pragma GCC unroll 2
            for (int r = 0; r < RV; r++)
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[r][t]), _mm512_mul_ps(dw[r], vdx), acc[r][t]);
        }
    }
    store_tile(RV, MA, acc, y, n, o);
}

/* ---- drivers: panels [p0, p1) x activation rows [i0, i1) ---- */

#define SWITCH_MA12(CALL_RV, ma) \
    switch (ma) {                \
    case 1: CALL_RV(1); break;   \
    case 2: CALL_RV(2); break;   \
    case 3: CALL_RV(3); break;   \
    case 4: CALL_RV(4); break;   \
    case 5: CALL_RV(5); break;   \
    case 6: CALL_RV(6); break;   \
    case 7: CALL_RV(7); break;   \
    case 8: CALL_RV(8); break;   \
    case 9: CALL_RV(9); break;   \
    case 10: CALL_RV(10); break; \
    case 11: CALL_RV(11); break; \
    default: CALL_RV(12); break; \
    }

#define SWITCH_MAQ(CALL_RV, ma)    \
    switch (ma) {                  \
    case 1: CALL_RV(1); break;     \
    case 2: CALL_RV(2); break;     \
    case 3: CALL_RV(3); break;     \
    case 4: CALL_RV(4); break;     \
    case 5: CALL_RV(5); break;     \
    default: CALL_RV(MA_Q); break; \
    }

/* Activation addressing for float tiles: packed group (m > 1) or the plain row (m == 1). */
#define X_ARGS(a, i)                                                                                \
    ((a)->xp ? (a)->xp + (i) / MA_F * (a)->k * MA_F : (a)->x + (i) * (a)->k), ((a)->xp ? MA_F : 1), \
        ((a)->xp ? 1 : (a)->k)

static void mm_f32(const kern_mm_args *a, int RV, const void *w0, const void *w1, int64_t i, int ma, int64_t o) {
#define CALL(MA)                                                                             \
    do {                                                                                     \
        if (RV == 2) tile_f(0, 2, MA, w0, w1, X_ARGS(a, i), a->k, a->y + i * a->n, a->n, o); \
        else tile_f(0, 1, MA, w0, w0, X_ARGS(a, i), a->k, a->y + i * a->n, a->n, o);         \
    } while (0)
    SWITCH_MA12(CALL, ma)
#undef CALL
}

static void mm_f16(const kern_mm_args *a, int RV, const void *w0, const void *w1, int64_t i, int ma, int64_t o) {
#define CALL(MA)                                                                             \
    do {                                                                                     \
        if (RV == 2) tile_f(1, 2, MA, w0, w1, X_ARGS(a, i), a->k, a->y + i * a->n, a->n, o); \
        else tile_f(1, 1, MA, w0, w0, X_ARGS(a, i), a->k, a->y + i * a->n, a->n, o);         \
    } while (0)
    SWITCH_MA12(CALL, ma)
#undef CALL
}

static void mm_bf16(const kern_mm_args *a, int RV, const void *w0, const void *w1, int64_t i, int ma, int64_t o) {
#define CALL(MA)                                                                             \
    do {                                                                                     \
        if (RV == 2) tile_bf16(2, MA, w0, w1, X_ARGS(a, i), a->k, a->y + i * a->n, a->n, o); \
        else tile_bf16(1, MA, w0, w0, X_ARGS(a, i), a->k, a->y + i * a->n, a->n, o);         \
    } while (0)
    SWITCH_MA12(CALL, ma)
#undef CALL
}

static void mm_q(const kern_mm_args *a, int RV, const void *w0, const void *w1, int64_t i, int ma, int64_t o) {
    int q4 = a->w->type == DT_Q4_0;
#define CALL(MA)                                                                              \
    do {                                                                                      \
        if (q4) {                                                                             \
            if (RV == 2) tile_q(1, 2, MA, w0, w1, &a->qa, i, a->k, a->y + i * a->n, a->n, o); \
            else tile_q(1, 1, MA, w0, w0, &a->qa, i, a->k, a->y + i * a->n, a->n, o);         \
        } else {                                                                              \
            if (RV == 2) tile_q(0, 2, MA, w0, w1, &a->qa, i, a->k, a->y + i * a->n, a->n, o); \
            else tile_q(0, 1, MA, w0, w0, &a->qa, i, a->k, a->y + i * a->n, a->n, o);         \
        }                                                                                     \
    } while (0)
    SWITCH_MAQ(CALL, ma)
#undef CALL
}

typedef void (*tile_fn)(const kern_mm_args *a, int RV, const void *w0, const void *w1, int64_t i, int ma, int64_t o);

/* e4m3 -> f32 in registers, via IEEE half: the byte's exponent and mantissa
 * shifted into half's fields (e4m3's subnormals land on half subnormals,
 * which vcvtph2ps converts exactly) give the value / 2^8; callers multiply by
 * 2^8 once (FP8_HALF_RESCALE). NaN codes (S.1111.111) read as +-480 here: a
 * weight file has none (the scalar decoder, kern_fp8_e4m3_to_f32, keeps NaN). */
static inline __m512 fp8x16(const uint8_t *src) {
    __m256i h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)src)), 7);
    h = _mm256_add_epi16(h, _mm256_and_si256(h, _mm256_set1_epi16(0x4000))); /* sign: bit 14 -> 15 */
    return _mm512_cvtph_ps(h);
}

static void fp8_to_f32(const uint8_t *src, float *dst, int64_t n) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) _mm512_storeu_ps(dst + j, _mm512_mul_ps(fp8x16(src + j), _mm512_set1_ps(256.0f)));
    kern_fp8_to_f32_scalar(src + j, dst + j, n - j);
}

/* 32 e4m3 codes as halves in one zmm (value / 2^8): sign-extended to 16 bits, shifted
 * into place (the sign lands in bits 15 and 14), bit 14 cleared. */
static inline __m512i fp8x32_half(const uint8_t *src) {
    __m512i h = _mm512_slli_epi16(_mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)src)), 7);
    return _mm512_and_si512(h, _mm512_set1_epi16((short)0xBFFF));
}

/* One 128-wide block: sum_j e4m3(w[j]) * x[j] / 2^8 as 16 lanes (4 chains). */
static inline __m512 fp8_block128(const uint8_t *w, const float *x) {
    __m512i h0 = fp8x32_half(w), h1 = fp8x32_half(w + 32), h2 = fp8x32_half(w + 64), h3 = fp8x32_half(w + 96);
    __m512 a0 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h0)), _mm512_loadu_ps(x));
    __m512 a1 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h0, 1)), _mm512_loadu_ps(x + 16));
    __m512 a2 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h1)), _mm512_loadu_ps(x + 32));
    __m512 a3 = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h1, 1)), _mm512_loadu_ps(x + 48));
    a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h2)), _mm512_loadu_ps(x + 64), a0);
    a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h2, 1)), _mm512_loadu_ps(x + 80), a1);
    a2 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h3)), _mm512_loadu_ps(x + 96), a2);
    a3 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h3, 1)), _mm512_loadu_ps(x + 112), a3);
    return _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
}

/* A weight row against x: whole blocks in registers, each scaled by scale[b] * 2^8 into
 * one vector (one horizontal sum per row); a last partial block in 16s, then scalars. */
static float fp8_row_dot(const uint8_t *w, const float *x, const float *scale, int64_t k) {
    __m512 tot = _mm512_setzero_ps();
    int64_t b = 0;
    for (; (b + 1) * 128 <= k; b++) {
        _mm_prefetch((const char *)w + b * 128 + 2048, _MM_HINT_T0); /* as kernels_fp8_avx512.c */
        _mm_prefetch((const char *)w + b * 128 + 2048 + 64, _MM_HINT_T0);
        tot = _mm512_fmadd_ps(fp8_block128(w + b * 128, x + b * 128), _mm512_set1_ps(scale[b] * 256.0f), tot);
    }
    float s = _mm512_reduce_add_ps(tot);
    int64_t j = b * 128;
    if (j < k) {
        __m512 acc = _mm512_setzero_ps();
        for (; j + 16 <= k; j += 16) acc = _mm512_fmadd_ps(fp8x16(w + j), _mm512_loadu_ps(x + j), acc);
        float t = _mm512_reduce_add_ps(acc) * 256.0f;
        for (; j < k; j++) t += kern_fp8_e4m3_to_f32(w[j]) * x[j];
        s += scale[b] * t;
    }
    return s;
}

static void mm(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    const kern_weight *w = a->w;
    if (w->type == DT_F8_B128) {
        kern_mm_fp8(a, o0, o1, i0, i1, &kern_ops_avx512);
        return;
    }
    if (kqp_type(w->type)) { /* K-quant panels x Q8_K-style activations (kern_matmul), every m */
        kern_mm_kqp_avx512(a, o0, o1, i0, i1);
        return;
    }
    if (w->type == DT_Q6_K) { /* GGUF rows x Q8_K-style activations (kern_matmul), every m */
        kern_mm_q6k_int_avx512(a, o0, o1, i0, i1);
        return;
    }
    if (a->qa.q && kern_iq4_int_type(w->type)) { /* decode: Q8_0 activations (kern_matmul) */
        kern_mm_iq4_avx512(a, o0, o1, i0, i1);
        return;
    }
    if (kq_is_dequant_type((uint32_t)w->type)) {
        kern_mm_dequant(a, o0, o1, i0, i1, dot_f32);
        return;
    }
    /* More activation rows of Q8_0 / Q4_0 than one VNNI tile holds (MA_Q): AMX tiles when the
     * CPU has them (kernels_amx.c; the same bits as the VNNI tiles below). Up to MA_Q rows (decode,
     * speculative verifies of up to 5 drafts) keep the VNNI tiles: one pass over the weights there
     * costs less CPU time than AMX's per-block tile store and reload (bench_verify_cost with
     * CINFER_AMX=0|1, bench/README.md) */
    if ((w->type == DT_Q8_0 || w->type == DT_Q4_0) && a->m > MA_Q && cpu_amx_active()) {
        kern_mm_q_amx(a, o0, o1, i0, i1);
        return;
    }
    tile_fn fn;
    int ma_max;
    switch (w->type) {
    case DT_F32: fn = mm_f32, ma_max = MA_F; break;
    case DT_F16: fn = mm_f16, ma_max = MA_F; break;
    case DT_BF16: fn = mm_bf16, ma_max = MA_F; break;
    default: fn = mm_q, ma_max = MA_Q; break;
    }
    size_t pb = kp16_panel_bytes(w->type, w->k);
    const uint8_t *base = w->packed;
    int64_t p0 = o0 / 16, p1 = (o1 + 15) / 16;
    for (int64_t p = p0; p < p1;) {
        int RV = p1 - p >= 2 ? 2 : 1;
        const void *w0 = base + (size_t)p * pb, *w1 = base + (size_t)(p + RV - 1) * pb;
        for (int64_t i = i0; i < i1; i += ma_max) {
            int ma = (int)(i1 - i < ma_max ? i1 - i : ma_max);
            fn(a, RV, w0, w1, i, ma, p * 16);
        }
        p += RV;
    }
}

static uint64_t read_sum(const void *buf, size_t bytes) {
    const __m512i *p = buf;
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 4 <= bytes / 64; i += 4) {
#pragma GCC unroll 4
        for (int l = 0; l < 4; l++) _mm_prefetch((const char *)(p + i + l) + PF_DIST, _MM_HINT_T0);
        s0 = _mm512_add_epi64(s0, _mm512_load_si512(p + i));
        s1 = _mm512_add_epi64(s1, _mm512_load_si512(p + i + 1));
        s2 = _mm512_add_epi64(s2, _mm512_load_si512(p + i + 2));
        s3 = _mm512_add_epi64(s3, _mm512_load_si512(p + i + 3));
    }
    /* horizontal sum in unsigned arithmetic (_mm512_reduce_add_epi64 adds as signed: UB on wrap) */
    uint64_t lanes[8], sum = 0;
    _mm512_storeu_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(s0, s1), _mm512_add_epi64(s2, s3)));
    for (int l = 0; l < 8; l++) sum += lanes[l];
    return sum;
}

const kern_ops kern_ops_avx512 = {
    .row_block = 16,
    .x_group = MA_F,
    .m_block = MA_F,
    .dot_f32 = dot_f32,
    .axpy_f32 = axpy_f32,
    .quantize_row = quantize_row,
    .mm = mm,
    .fp8_to_f32 = fp8_to_f32,
    .fp8_row_dot = fp8_row_dot,
    .fp8_prep_x = kern_fp8_prep_x_avx512,
    .fp8_rows_dot = kern_fp8_rows_dot_avx512,
    .read_sum = read_sum,
};
