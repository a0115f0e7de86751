/* kernels_avx2.c - AVX2+FMA+F16C kernels (compiled with -mavx2 -mfma -mf16c).
 * Reads weights in the original GGUF row layout (KL_ROWS): every output is a
 * row dot product, 4 weight rows at a time for float types. Quantized weights
 * use the activations quantized to Q8_0: Q8_0 x Q8_0 via maddubs with the
 * abs/sign trick, Q4_0 via maddubs(unsigned nibble, signed act) plus the
 * per-block correction -8 * sum(q) precomputed at quantization time. */
#include <immintrin.h>
#include <math.h>

#include "tensor/kernels_impl.h"

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int32_t hsum8i(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

static float dot_f32(const float *a, const float *b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 16), _mm256_loadu_ps(b + j + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 24), _mm256_loadu_ps(b + j + 24), s3);
    }
    for (; j + 8 <= n; j += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), s0);
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; j < n; j++) s += a[j] * b[j];
    return s;
}

static void axpy_f32(float a, const float *x, float *y, int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(y + j, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
    for (; j < n; j++) y[j] += a * x[j];
}

/* roundf semantics (half away from zero), exact: trunc, then bump by sign if |frac| >= 0.5. */
static inline __m256i round_away(__m256 v) {
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 frac = _mm256_and_ps(_mm256_sub_ps(v, t), absmask);
    __m256 bump = _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_andnot_ps(absmask, v)));
    return _mm256_cvttps_epi32(_mm256_add_ps(t, bump));
}

static void quantize_row(const float *x, int64_t k, int8_t *q, float *d, int32_t *corr, int32_t off) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < k / 32; b++) {
        __m256 v[4];
        for (int t = 0; t < 4; t++) v[t] = _mm256_loadu_ps(x + b * 32 + t * 8);
        __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], absmask), _mm256_and_ps(v[1], absmask)),
                                 _mm256_max_ps(_mm256_and_ps(v[2], absmask), _mm256_and_ps(v[3], absmask)));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float amax = _mm_cvtss_f32(m4);
        float db = amax / 127.0f;
        float id = db ? 1.0f / db : 0.0f;
        __m256 vid = _mm256_set1_ps(id);
        __m256i i[4];
        for (int t = 0; t < 4; t++) i[t] = round_away(_mm256_mul_ps(v[t], vid));
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
        __m256i a = _mm256_packs_epi32(i[0], i[1]);
        __m256i c = _mm256_packs_epi32(i[2], i[3]);
        __m256i p8 = _mm256_packs_epi16(a, c);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(q + b * 32), p8);
        d[b] = _cvtsh_ss(_cvtss_sh(db, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        corr[b] = -off * hsum8i(sum);
    }
}

static inline __m256 load8_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline __m256 load8_bf16(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* 4 rows x 1 activation row, float weights. */
#define DEF_DOT4(NAME, T, LOAD, CONV)                                                             \
    static void NAME(const T *w, int64_t k, const float *x, float *out) {                         \
        const T *r0 = w, *r1 = w + k, *r2 = w + 2 * k, *r3 = w + 3 * k;                           \
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                               \
        int64_t j = 0;                                                                            \
        for (; j + 8 <= k; j += 8) {                                                              \
            __m256 xv = _mm256_loadu_ps(x + j);                                                   \
            s0 = _mm256_fmadd_ps(LOAD(r0 + j), xv, s0);                                           \
            s1 = _mm256_fmadd_ps(LOAD(r1 + j), xv, s1);                                           \
            s2 = _mm256_fmadd_ps(LOAD(r2 + j), xv, s2);                                           \
            s3 = _mm256_fmadd_ps(LOAD(r3 + j), xv, s3);                                           \
        }                                                                                         \
        out[0] = hsum8(s0), out[1] = hsum8(s1), out[2] = hsum8(s2), out[3] = hsum8(s3);           \
        for (; j < k; j++) {                                                                      \
            out[0] += CONV(r0[j]) * x[j], out[1] += CONV(r1[j]) * x[j];                           \
            out[2] += CONV(r2[j]) * x[j], out[3] += CONV(r3[j]) * x[j];                           \
        }                                                                                         \
    }                                                                                             \
    static float NAME##_1(const T *w, int64_t k, const float *x) {                                \
        __m256 s0 = _mm256_setzero_ps();                                                          \
        int64_t j = 0;                                                                            \
        for (; j + 8 <= k; j += 8) s0 = _mm256_fmadd_ps(LOAD(w + j), _mm256_loadu_ps(x + j), s0); \
        float s = hsum8(s0);                                                                      \
        for (; j < k; j++) s += CONV(w[j]) * x[j];                                                \
        return s;                                                                                 \
    }

static inline float id_f32(float v) { return v; }
DEF_DOT4(dot4_f32, float, _mm256_loadu_ps, id_f32)
DEF_DOT4(dot4_f16, uint16_t, load8_f16, fp16_to_f32)
DEF_DOT4(dot4_bf16, uint16_t, load8_bf16, bf16_to_f32)

#define DISPATCH_FLOAT(DOT4, T)                                         \
    do {                                                                \
        const T *W = (const T *)w->data;                                \
        for (int64_t i = i0; i < i1; i++) {                             \
            const float *xr = a->x + i * k;                             \
            float *yr = a->y + i * n;                                   \
            int64_t o = o0;                                             \
            for (; o + 4 <= o1; o += 4) DOT4(W + o * k, k, xr, yr + o); \
            for (; o < o1; o++) yr[o] = DOT4##_1(W + o * k, k, xr);     \
        }                                                               \
    } while (0)

static inline __m256 q8_block_dot(const block_q8_0 *wb, const int8_t *q) {
    __m256i wv = _mm256_loadu_si256((const __m256i *)wb->qs);
    __m256i xv = _mm256_loadu_si256((const __m256i *)q);
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* Q4_0 block: sum nibble*q (nibbles unsigned); the -8*sum(q) part comes from corr. */
static inline __m256 q4_block_dot(const block_q4_0 *wb, const int8_t *q) {
    __m128i raw = _mm_loadu_si128((const __m128i *)wb->qs);
    __m128i lo = _mm_and_si128(raw, _mm_set1_epi8(0xf));
    __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0xf));
    __m256i wv = _mm256_set_m128i(hi, lo);
    __m256i xv = _mm256_loadu_si256((const __m256i *)q);
    __m256i p = _mm256_maddubs_epi16(wv, xv);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

static void mm_quant(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    const kern_weight *w = a->w;
    int64_t k = a->k, n = a->n, nb = k / 32;
    int is_q8 = w->type == DT_Q8_0;
    for (int64_t i = i0; i < i1; i++) {
        const int8_t *q = a->qa.q + i * k;
        const float *dx = a->qa.d + i * nb;
        const int32_t *corr = a->qa.corr + i * nb;
        for (int64_t o = o0; o < o1; o++) {
            __m256 acc = _mm256_setzero_ps();
            float sc = 0;
            if (is_q8) {
                const block_q8_0 *r = (const block_q8_0 *)w->data + o * nb;
                for (int64_t b = 0; b < nb; b++)
                    acc = _mm256_fmadd_ps(q8_block_dot(r + b, q + b * 32), _mm256_set1_ps(_cvtsh_ss(r[b].d) * dx[b]),
                                          acc);
            } else {
                const block_q4_0 *r = (const block_q4_0 *)w->data + o * nb;
                for (int64_t b = 0; b < nb; b++) {
                    float s = _cvtsh_ss(r[b].d) * dx[b];
                    acc = _mm256_fmadd_ps(q4_block_dot(r + b, q + b * 32), _mm256_set1_ps(s), acc);
                    sc += s * (float)corr[b];
                }
            }
            a->y[i * n + o] = hsum8(acc) + sc;
        }
    }
}

/* e4m3 -> f32 in registers via IEEE half (value / 2^8; NaN codes read as
 * +-480), as kernels_avx512.c's fp8x16. */
static inline __m256 fp8x8(const uint8_t *src) {
    __m128i h = _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)src)), 7);
    h = _mm_add_epi16(h, _mm_and_si128(h, _mm_set1_epi16(0x4000))); /* sign: bit 14 -> 15 */
    return _mm256_cvtph_ps(h);
}

static void fp8_to_f32(const uint8_t *src, float *dst, int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, _mm256_mul_ps(fp8x8(src + j), _mm256_set1_ps(256.0f)));
    kern_fp8_to_f32_scalar(src + j, dst + j, n - j);
}

/* 16 e4m3 codes as halves (value / 2^8): sign-extended to 16 bits, shifted into place
 * (the sign lands in bits 15 and 14), bit 14 cleared. */
static inline __m256i fp8x16_half(const uint8_t *src) {
    __m256i h = _mm256_slli_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)src)), 7);
    return _mm256_and_si256(h, _mm256_set1_epi16((short)0xBFFF));
}

static inline float hsum256(__m256 a) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

/* A weight row against x: each whole 128-block's 8-lane sum (4 chains) scaled by
 * scale[b] * 2^8 into one vector; a last partial block in 8s, then scalars. */
static float fp8_row_dot(const uint8_t *w, const float *x, const float *scale, int64_t k) {
    __m256 tot = _mm256_setzero_ps();
    int64_t b = 0;
    for (; (b + 1) * 128 <= k; b++) {
        const uint8_t *wb = w + b * 128;
        const float *xb = x + b * 128;
        _mm_prefetch((const char *)wb + 2048, _MM_HINT_T0); /* as kernels_fp8_avx512.c */
        _mm_prefetch((const char *)wb + 2048 + 64, _MM_HINT_T0);
        __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int g = 0; g < 8; g += 2) {
            __m256i h0 = fp8x16_half(wb + g * 16), h1 = fp8x16_half(wb + g * 16 + 16);
            a[0] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h0)), _mm256_loadu_ps(xb + g * 16), a[0]);
            a[1] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h0, 1)), _mm256_loadu_ps(xb + g * 16 + 8),
                                   a[1]);
            a[2] =
                _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h1)), _mm256_loadu_ps(xb + g * 16 + 16), a[2]);
            a[3] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h1, 1)), _mm256_loadu_ps(xb + g * 16 + 24),
                                   a[3]);
        }
        __m256 blk = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3]));
        tot = _mm256_fmadd_ps(blk, _mm256_set1_ps(scale[b] * 256.0f), tot);
    }
    float s = hsum256(tot);
    int64_t j = b * 128;
    if (j < k) {
        __m256 acc = _mm256_setzero_ps();
        for (; j + 8 <= k; j += 8) acc = _mm256_fmadd_ps(fp8x8(w + j), _mm256_loadu_ps(x + j), acc);
        float t = hsum256(acc) * 256.0f;
        for (; j < k; j++) t += kern_fp8_e4m3_to_f32(w[j]) * x[j];
        s += scale[b] * t;
    }
    return s;
}

static void mm(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    const kern_weight *w = a->w;
    if (w->type == DT_F8_B128) {
        kern_mm_fp8(a, o0, o1, i0, i1, &kern_ops_avx2);
        return;
    }
    if (w->type == DT_Q4_K || w->type == DT_Q5_K || w->type == DT_Q6_K) {
        kern_mm_kq_int_avx2(a, o0, o1, i0, i1);
        return;
    }
    if (kq_is_dequant_type((uint32_t)w->type)) {
        kern_mm_dequant(a, o0, o1, i0, i1, dot_f32);
        return;
    }
    int64_t k = a->k, n = a->n;
    switch (w->type) {
    case DT_F32: DISPATCH_FLOAT(dot4_f32, float); break;
    case DT_F16: DISPATCH_FLOAT(dot4_f16, uint16_t); break;
    case DT_BF16: DISPATCH_FLOAT(dot4_bf16, uint16_t); break;
    case DT_Q8_0:
    case DT_Q4_0: mm_quant(a, o0, o1, i0, i1); break;
    default: break;
    }
}

static uint64_t read_sum(const void *buf, size_t bytes) {
    const __m256i *p = buf;
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i + 4 <= bytes / 32; i += 4) {
        s0 = _mm256_add_epi64(s0, _mm256_load_si256(p + i));
        s1 = _mm256_add_epi64(s1, _mm256_load_si256(p + i + 1));
        s2 = _mm256_add_epi64(s2, _mm256_load_si256(p + i + 2));
        s3 = _mm256_add_epi64(s3, _mm256_load_si256(p + i + 3));
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)out, s);
    return out[0] + out[1] + out[2] + out[3];
}

const kern_ops kern_ops_avx2 = {
    .row_block = 4,
    .x_group = 0,
    .m_block = 1,
    .dot_f32 = dot_f32,
    .axpy_f32 = axpy_f32,
    .quantize_row = quantize_row,
    .mm = mm,
    .fp8_to_f32 = fp8_to_f32,
    .fp8_row_dot = fp8_row_dot,
    .read_sum = read_sum,
};
