/* kernels_fp8_avx512.c - FP8 e4m3 decode GEMV (one or two activation rows)
 * through bf16 dot products, for AVX-512 CPUs that also have VBMI and BF16
 * (cpu_has_avx512_vbmi_bf16; every function here is compiled for those
 * extensions only, the rest of the AVX-512 build does not assume them).
 *
 * Every e4m3 value is exactly a bf16 (3 mantissa bits, exponents 2^-9..2^8,
 * subnormals normalized), so a weight is decoded by table lookup: two VBMI
 * byte permutes (vpermt2b over 128-entry tables, indexed by the code's low 7
 * bits) give the low and high byte of the magnitude's bf16 (zero stays zero,
 * S.1111.111 gives a NaN), the code's sign bit is merged into the high byte,
 * and two byte unpacks make 2 x 32 bf16 words: 64 weights in 7 instructions
 * and 2 vdpbf16ps. The unpacks interleave within 128-bit lanes, so the
 * activations are stored once per matmul in the same order (kern_fp8_prep_x):
 * per 64-element group, word p < 32 holds x[16 (p / 8) + p % 8] and word
 * 32 + p holds x[16 (p / 8) + 8 + p % 8], rounded to bf16 (nearest even).
 * Products are exact in f32 and summed in f32; the only rounding beyond f32
 * summation is the activation's to bf16 (relative 2^-9 per element), the same
 * trade llama.cpp makes for BF16 weights. Each 128-wide block's sum is scaled
 * by its block scale in a vector register; the part of a row that does not
 * fill a 64-element group is dotted in f32 with the exact scalar decoder.
 * Weights are prefetched FP8_PREFETCH bytes ahead (software prefetch). */
#include <immintrin.h>

#include "tensor/kernels_impl.h"

/* Software prefetch distance in bytes (about one TinyLlama-sized row ahead).
 * The table decode keeps the core busy enough that the hardware prefetchers
 * alone left the stream half idle (1 thread, from DRAM: 6-7 GB/s per CPU-second
 * without, 11 with; 1 KiB and 4 KiB measured no better). */
#define FP8_PREFETCH 2048
#define FP8_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512bf16")))

/* bf16 of the e4m3 magnitude with low 7 bits c: low byte, then high byte
 * (generated from the format's definition; kern_fp8_e4m3_to_f32). */
/* clang-format off */
static const uint8_t fp8_bf16_lo[128] __attribute__((aligned(64))) = {
    0x00, 0x00, 0x80, 0xc0, 0x00, 0x20, 0x40, 0x60, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
    0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xc0,
};
static const uint8_t fp8_bf16_hi[128] __attribute__((aligned(64))) = {
    0x00, 0x3b, 0x3b, 0x3b, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c, 0x3c,
    0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d, 0x3d,
    0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e,
    0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f,
    0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40,
    0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41, 0x41,
    0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42, 0x42,
    0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x43, 0x7f,
};
/* clang-format on */

/* Activation word order of one 64-group as indices into the natural-order
 * words (n0 = elements 0..31, n1 = 32..63; vpermt2w index bit 5 picks n1). */
static inline int fp8_group_elem(int p) { return 16 * ((p & 31) / 8) + (p >= 32 ? 8 : 0) + p % 8; }

FP8_TARGET void kern_fp8_prep_x_avx512(const float *x, int64_t k, uint16_t *xb) {
    uint16_t idx[64] __attribute__((aligned(64)));
    for (int p = 0; p < 64; p++) idx[p] = (uint16_t)fp8_group_elem(p);
    __m512i ilo = _mm512_load_si512(idx), ihi = _mm512_load_si512(idx + 32);
    for (int64_t g = 0; g + 64 <= k; g += 64) {
        const float *s = x + g;
        __m512i n0 = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + 16), _mm512_loadu_ps(s));
        __m512i n1 = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + 48), _mm512_loadu_ps(s + 32));
        _mm512_storeu_si512(xb + g, _mm512_permutex2var_epi16(n0, ilo, n1));
        _mm512_storeu_si512(xb + g + 32, _mm512_permutex2var_epi16(n0, ihi, n1));
    }
}

typedef struct fp8_tables {
    __m512i lo0, lo1, hi0, hi1, sign;
} fp8_tables;

FP8_TARGET static inline fp8_tables fp8_tables_load(void) {
    fp8_tables t = {_mm512_load_si512(fp8_bf16_lo), _mm512_load_si512(fp8_bf16_lo + 64), _mm512_load_si512(fp8_bf16_hi),
                    _mm512_load_si512(fp8_bf16_hi + 64), _mm512_set1_epi8(-128)};
    return t;
}

/* 64 e4m3 codes to bf16 words in the group order above. */
FP8_TARGET static inline void fp8_decode64(const fp8_tables *t, const uint8_t *w, __m512i *wlo, __m512i *whi) {
    __m512i c = _mm512_loadu_si512(w);
    __m512i lo = _mm512_permutex2var_epi8(t->lo0, c, t->lo1);
    __m512i hi = _mm512_permutex2var_epi8(t->hi0, c, t->hi1);
    hi = _mm512_ternarylogic_epi32(hi, c, t->sign, 0xF8); /* hi | (c & 0x80) */
    *wlo = _mm512_unpacklo_epi8(lo, hi);
    *whi = _mm512_unpackhi_epi8(lo, hi);
}

/* Exact f32 dot of codes [j0, j1) of a row (the part outside whole groups). */
static float fp8_tail_dot(const uint8_t *w, const float *x, int64_t j0, int64_t j1) {
    float s = 0.0f;
    for (int64_t j = j0; j < j1; j++) s += kern_fp8_e4m3_to_f32(w[j]) * x[j];
    return s;
}

/* One weight row against NR activation rows (bf16 copies xb + r * xbs, f32
 * rows x + r * xs for the tail); out[r] = sum_b scale[b] * block dot. */
FP8_TARGET static inline void fp8_rows_dot(const uint8_t *w, const uint16_t *xb, int64_t xbs, const float *x,
                                           int64_t xs, const float *scale, int64_t k, int NR, float *out) {
    fp8_tables t = fp8_tables_load();
    __m512 tot[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t b = 0;
    for (; (b + 1) * 128 <= k; b++) {
        __m512i w0, w1, w2, w3;
        _mm_prefetch((const char *)w + b * 128 + FP8_PREFETCH, _MM_HINT_T0);
        _mm_prefetch((const char *)w + b * 128 + FP8_PREFETCH + 64, _MM_HINT_T0);
        fp8_decode64(&t, w + b * 128, &w0, &w1);
        fp8_decode64(&t, w + b * 128 + 64, &w2, &w3);
        __m512 sb = _mm512_set1_ps(scale[b]);
        for (int r = 0; r < NR; r++) {
            const uint16_t *xr = xb + r * xbs + b * 128;
            __m512 a0 = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)_mm512_loadu_si512(xr), (__m512bh)w0);
            __m512 a1 = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)_mm512_loadu_si512(xr + 32), (__m512bh)w1);
            a0 = _mm512_dpbf16_ps(a0, (__m512bh)_mm512_loadu_si512(xr + 64), (__m512bh)w2);
            a1 = _mm512_dpbf16_ps(a1, (__m512bh)_mm512_loadu_si512(xr + 96), (__m512bh)w3);
            tot[r] = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), sb, tot[r]);
        }
    }
    float extra[2] = {0.0f, 0.0f};
    int64_t j0 = b * 128;
    if (j0 < k) { /* last, partial block: whole 64-groups in bf16, the rest exact */
        int64_t jg = j0 + (k - j0) / 64 * 64;
        for (int r = 0; r < NR; r++) {
            __m512 acc = _mm512_setzero_ps();
            for (int64_t j = j0; j < jg; j += 64) {
                __m512i w0, w1;
                fp8_decode64(&t, w + j, &w0, &w1);
                const uint16_t *xr = xb + r * xbs + j;
                acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(xr), (__m512bh)w0);
                acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(xr + 32), (__m512bh)w1);
            }
            extra[r] = scale[b] * (_mm512_reduce_add_ps(acc) + fp8_tail_dot(w, x + r * xs, jg, k));
        }
    }
    for (int r = 0; r < NR; r++) out[r] = _mm512_reduce_add_ps(tot[r]) + extra[r];
}

FP8_TARGET void kern_fp8_rows_dot_avx512(const uint8_t *w, const uint16_t *xb, int64_t xbs, const float *x, int64_t xs,
                                         const float *scale, int64_t k, int nr, float *out) {
    if (nr == 2) fp8_rows_dot(w, xb, xbs, x, xs, scale, k, 2, out);
    else fp8_rows_dot(w, xb, xbs, x, xs, scale, k, 1, out);
}
