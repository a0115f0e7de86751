/* kquant.c - exact dequantization of the legacy, K-quant, IQ4 and MXFP4 GGUF
 * block types that cinfer computes by dequantizing (Q4_1, Q5_0, Q5_1, Q2_K,
 * Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4). Layouts are documented in dtype.h; the arithmetic (and its
 * float rounding order) follows ggml's dequantize_row_* so results are
 * bit-identical to gguf-py's numpy dequantization (tests/data/kquant).
 * Also simple quantizers for Q4_K, Q5_K, Q6_K and IQ4_XS (end of file). */
#include <math.h>
#include <string.h>

#include "tensor/dtype.h"

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline float rdh(const uint8_t *p) { return fp16_to_f32(rd16(p)); }

/* Q4_1 (20 bytes) = d, m, qs[16]; Q5_x adds qh[4] (bit j = high bit of element j). */
static void deq_q4_1(const uint8_t *b, float *y) {
    float d = rdh(b), m = rdh(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(b[4 + j] & 0xf) + m;
        y[j + 16] = d * (float)(b[4 + j] >> 4) + m;
    }
}

static void deq_q5(const uint8_t *b, float *y, int has_min) {
    float d = rdh(b), m = has_min ? rdh(b + 2) : 0.0f;
    const uint8_t *qh = b + (has_min ? 4 : 2), *qs = qh + 4;
    uint32_t h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 0xf) | (int)((h >> j) & 1) << 4, hi = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
        if (has_min) {
            y[j] = d * (float)lo + m;
            y[j + 16] = d * (float)hi + m;
        } else {
            y[j] = d * (float)(lo - 16);
            y[j + 16] = d * (float)(hi - 16);
        }
    }
}

/* Q2_K (84) = scales[16] (lo nibble scale, hi nibble min), qs[64], d, dmin.
 * Element e: q = (qs[32*(e/128) + e%32] >> 2*((e%128)/32)) & 3, sub-block e/16. */
static void deq_q2_k(const uint8_t *b, float *y) {
    const uint8_t *sc = b, *qs = b + 16;
    float d = rdh(b + 80), dmin = rdh(b + 82);
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int lh = 0; lh < 2; lh++) {
                int sb = 8 * h + 2 * s + lh;
                float dl = d * (float)(sc[sb] & 0xf), ml = dmin * (float)(sc[sb] >> 4);
                for (int l = 16 * lh; l < 16 * lh + 16; l++)
                    y[128 * h + 32 * s + l] = dl * (float)((qs[32 * h + l] >> (2 * s)) & 3) - ml;
            }
}

/* Q3_K (110) = hmask[32], qs[64], scales[12] (16 x 6 bit, biased by 32), d.
 * Low 2 bits as Q2_K; the value drops by 4 when bit e/32 of hmask[e%32] is 0. */
static void deq_q3_k(const uint8_t *b, float *y) {
    const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
    float d = rdh(b + 108);
    for (int h = 0; h < 2; h++)
        for (int s = 0; s < 4; s++)
            for (int lh = 0; lh < 2; lh++) {
                int sb = 8 * h + 2 * s + lh;
                int ls = (sc[sb % 8] >> (4 * (sb / 8))) & 0xf, hs = (sc[8 + sb % 4] >> (2 * (sb / 4))) & 3;
                float dl = d * (float)((ls | hs << 4) - 32);
                for (int l = 16 * lh; l < 16 * lh + 16; l++) {
                    int q = (qs[32 * h + l] >> (2 * s)) & 3;
                    q -= ((hm[l] >> (4 * h + s)) & 1) ? 0 : 4;
                    y[128 * h + 32 * s + l] = dl * (float)q;
                }
            }
}

/* Q4_K (144) = d, dmin, scales[12], qs[128]; element e: nibble (e/32)%2 of
 * qs[32*(e/64) + e%32], sub-block e/32: x = d*sc*q - dmin*m.
 * Q5_K (176) adds qh[32] before qs: bit e/32 of qh[e%32] is bit 4. */
static void deq_q45_k(const uint8_t *b, float *y, int five) {
    float d = rdh(b), dmin = rdh(b + 2);
    uint8_t sc[8], mn[8];
    kq_scale_min_k4(b + 4, sc, mn);
    const uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
    for (int s = 0; s < 8; s++) {
        float dl = d * (float)sc[s], ml = dmin * (float)mn[s];
        for (int l = 0; l < 32; l++) {
            int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xf;
            if (five) q |= ((qh[l] >> s) & 1) << 4;
            y[s * 32 + l] = dl * (float)q - ml;
        }
    }
}

/* Q6_K (210) = ql[128], qh[64], scales[16] (int8), d; element e (h = e/128,
 * r = e%128): low 4 bits = nibble r/64 of ql[64h + r%64], high 2 bits =
 * (qh[32h + r%32] >> 2*(r/32)) & 3; x = d*scale[e/16]*(q - 32). */
static void deq_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = rdh(b + 208);
    for (int h = 0; h < 2; h++)
        for (int g = 0; g < 4; g++)
            for (int lh = 0; lh < 2; lh++) {
                float s = d * (float)sc[8 * h + 2 * g + lh];
                for (int l = 16 * lh; l < 16 * lh + 16; l++) {
                    int lo = (ql[64 * h + l + 32 * (g & 1)] >> (4 * (g >> 1))) & 0xf;
                    int q = lo | ((qh[32 * h + l] >> (2 * g)) & 3) << 4;
                    y[128 * h + 32 * g + l] = s * (float)(q - 32);
                }
            }
}

/* The 16 non-linear levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl). */
static const int8_t IQ4_LEVELS[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
/* FP4 e2m1 codes as twice their value (0, 0.5, 1, 1.5, 2, 3, 4, 6; bit 3 = sign). */
static const int8_t E2M1_X2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* IQ4_NL (18) = d, qs[16]: y[j] = d * level[qs[j] & 15], y[j + 16] = d * level[qs[j] >> 4]. */
static void deq_iq4_nl(const uint8_t *b, float *y) {
    float d = rdh(b);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)IQ4_LEVELS[b[2 + j] & 0xf];
        y[j + 16] = d * (float)IQ4_LEVELS[b[2 + j] >> 4];
    }
}

/* IQ4_XS (136) = d, scales_h (u16), scales_l[4], qs[128]; sub-block s of 32 has the 6-bit
 * scale ls = nibble s%2 of scales_l[s/2] | bits 2s..2s+1 of scales_h << 4, dl = d * (ls - 32),
 * and its 16 bytes of qs as IQ4_NL's. */
static void deq_iq4_xs(const uint8_t *b, float *y) {
    float d = rdh(b);
    uint16_t sh = rd16(b + 2);
    const uint8_t *sl = b + 4, *qs = b + 8;
    for (int s = 0; s < 8; s++) {
        int ls = ((sl[s / 2] >> (4 * (s % 2))) & 0xf) | (((sh >> (2 * s)) & 3) << 4);
        float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[32 * s + j] = dl * (float)IQ4_LEVELS[qs[16 * s + j] & 0xf];
            y[32 * s + j + 16] = dl * (float)IQ4_LEVELS[qs[16 * s + j] >> 4];
        }
    }
}

/* MXFP4 (17) = e, qs[16]: the block scale is 2^(e - 127) and the codes are e2m1, so
 * y = (2 x value) * 2^(e - 128), exact (ggml's E8M0 "half" convention). */
static void deq_mxfp4(const uint8_t *b, float *y) {
    float d = ldexpf(1.0f, (int)b[0] - 128);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)E2M1_X2[b[1 + j] & 0xf] * d;
        y[j + 16] = (float)E2M1_X2[b[1 + j] >> 4] * d;
    }
}

bool kq_is_dequant_type(uint32_t t) {
    switch (t) {
    case DT_Q4_1:
    case DT_Q5_0:
    case DT_Q5_1:
    case DT_Q2_K:
    case DT_Q3_K:
    case DT_Q4_K:
    case DT_Q5_K:
    case DT_Q6_K:
    case DT_IQ4_NL:
    case DT_IQ4_XS:
    case DT_MXFP4: return true;
    default: return false;
    }
}

void kq_dequantize_blocks(uint32_t t, const void *src, float *dst, int64_t nblocks) {
    const uint8_t *b = src;
    size_t bb = dtype_block_bytes(t);
    int64_t be = dtype_block_elems(t);
    for (int64_t i = 0; i < nblocks; i++, b += bb, dst += be) {
        switch (t) {
        case DT_Q4_1: deq_q4_1(b, dst); break;
        case DT_Q5_0: deq_q5(b, dst, 0); break;
        case DT_Q5_1: deq_q5(b, dst, 1); break;
        case DT_Q2_K: deq_q2_k(b, dst); break;
        case DT_Q3_K: deq_q3_k(b, dst); break;
        case DT_Q4_K: deq_q45_k(b, dst, 0); break;
        case DT_Q5_K: deq_q45_k(b, dst, 1); break;
        case DT_Q6_K: deq_q6_k(b, dst); break;
        case DT_IQ4_NL: deq_iq4_nl(b, dst); break;
        case DT_IQ4_XS: deq_iq4_xs(b, dst); break;
        case DT_MXFP4: deq_mxfp4(b, dst); break;
        default: memset(dst, 0, sizeof(float) * (size_t)be); break;
        }
    }
}

/* ---- simple reference quantizers (Q4_K, Q5_K, Q6_K; IQ4_XS below) ----
 * Not ggml's iterative search (make_qkx2_quants): each sub-block's scale (and
 * min) spans its range exactly, the super-block scales are the largest of
 * those over 63 (127 for Q6_K), rounded through fp16, and every element is
 * rounded to the nearest level (clamped). Enough for `cinfer quantize` and
 * tests; files from llama.cpp are what users run. */

static inline void wr16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Q4_K (levels 15) or Q5_K (FIVE, levels 31: bit 4 of sub-block s's element l
 * goes to bit s of qh[l], the 32 bytes before qs). */
static void quant_q45_k_block(const float *x, uint8_t *b, int five) {
    const int levels = five ? 31 : 15;
    float scale[8], minv[8], smax = 0, mmax = 0;
    for (int s = 0; s < 8; s++) {
        float lo = 0, hi = -INFINITY;
        for (int l = 0; l < 32; l++) {
            float v = x[32 * s + l];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        scale[s] = (hi - lo) / (float)levels;
        minv[s] = -lo;
        smax = scale[s] > smax ? scale[s] : smax;
        mmax = minv[s] > mmax ? minv[s] : mmax;
    }
    uint16_t dh = f32_to_fp16(smax / 63.0f), mh = f32_to_fp16(mmax / 63.0f);
    float d = fp16_to_f32(dh), dmin = fp16_to_f32(mh);
    uint8_t sc[8], mn[8];
    for (int s = 0; s < 8; s++) {
        sc[s] = (uint8_t)(d > 0 ? clampi((int)lrintf(scale[s] / d), 0, 63) : 0);
        mn[s] = (uint8_t)(dmin > 0 ? clampi((int)lrintf(minv[s] / dmin), 0, 63) : 0);
    }
    memset(b, 0, five ? 176 : 144);
    wr16(b, dh);
    wr16(b + 2, mh);
    for (int j = 0; j < 4; j++) {
        b[4 + j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        b[8 + j] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        b[12 + j] = (uint8_t)((sc[j + 4] & 0xf) | (mn[j + 4] & 0xf) << 4);
    }
    uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
    for (int s = 0; s < 8; s++) {
        float dl = d * (float)sc[s], ml = dmin * (float)mn[s];
        for (int l = 0; l < 32; l++) {
            int q = dl > 0 ? clampi((int)lrintf((x[32 * s + l] + ml) / dl), 0, levels) : 0;
            qs[32 * (s / 2) + l] |= (uint8_t)((q & 0xf) << (4 * (s % 2)));
            if (five) qh[l] |= (uint8_t)((q >> 4) << s);
        }
    }
}

static void quant_q6_k_block(const float *x, uint8_t *b) {
    float scale[16], smax = 0;
    for (int s = 0; s < 16; s++) {
        float amax = 0;
        for (int l = 0; l < 16; l++) amax = fabsf(x[16 * s + l]) > amax ? fabsf(x[16 * s + l]) : amax;
        scale[s] = amax / 31.0f;
        smax = scale[s] > smax ? scale[s] : smax;
    }
    uint16_t dh = f32_to_fp16(smax / 127.0f);
    float d = fp16_to_f32(dh);
    memset(b, 0, 210);
    for (int s = 0; s < 16; s++) {
        int sc = d > 0 ? clampi((int)lrintf(scale[s] / d), -128, 127) : 0;
        b[192 + s] = (uint8_t)(int8_t)sc;
        float dl = d * (float)sc;
        for (int l = 0; l < 16; l++) {
            int e = 16 * s + l, h = e / 128, r = e % 128;
            int q = (dl > 0 ? clampi((int)lrintf(x[e] / dl), -32, 31) : 0) + 32;
            b[64 * h + r % 64] |= (uint8_t)((q & 0xf) << (4 * (r / 64)));
            b[128 + 32 * h + r % 32] |= (uint8_t)((q >> 4) << (2 * (r / 32)));
        }
    }
    wr16(b + 208, dh);
}

/* Index of the IQ4 level nearest to v (levels ascending; binary search). */
static int iq4_nearest(float v) {
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < (float)IQ4_LEVELS[mid]) hi = mid;
        else lo = mid;
    }
    return v - (float)IQ4_LEVELS[lo] <= (float)IQ4_LEVELS[hi] - v ? lo : hi;
}

/* Squared error of sub-block x[32] coded with step dl (each element to its nearest level). */
static float iq4_sub_error(const float *x, float dl) {
    float err = 0;
    for (int l = 0; l < 32; l++) {
        float r = dl != 0 ? x[l] - dl * (float)IQ4_LEVELS[iq4_nearest(x[l] / dl)] : x[l];
        err += r * r;
    }
    return err;
}

/* IQ4_XS: per sub-block of 32 the step is chosen among a few candidates that map
 * the element of largest magnitude onto one of the outer levels (least squared
 * error wins); the super-block scale is the largest step over 31 (fp16), each
 * 6-bit sub-scale rounds step / d, and elements round to the nearest level. */
static void quant_iq4_xs_block(const float *x, uint8_t *b) {
    float step[8], smax = 0;
    for (int s = 0; s < 8; s++) {
        const float *xs = x + 32 * s;
        float vmax = 0;
        for (int l = 0; l < 32; l++)
            if (fabsf(xs[l]) > fabsf(vmax)) vmax = xs[l];
        static const int outer[] = {-127, -104, -83, 113, 89, 69};
        float best = 0, best_err = INFINITY;
        for (size_t c = 0; c < sizeof outer / sizeof outer[0] && vmax != 0; c++) {
            float dl = vmax / (float)outer[c], e = iq4_sub_error(xs, dl);
            if (e < best_err) best_err = e, best = dl;
        }
        step[s] = best;
        smax = fabsf(best) > smax ? fabsf(best) : smax;
    }
    uint16_t dh = f32_to_fp16(smax / 31.0f);
    float d = fp16_to_f32(dh);
    memset(b, 0, 136);
    wr16(b, dh);
    uint16_t sh = 0;
    for (int s = 0; s < 8; s++) {
        int ls = d > 0 ? clampi((int)lrintf(step[s] / d), -32, 31) + 32 : 32;
        b[4 + s / 2] |= (uint8_t)((ls & 0xf) << (4 * (s % 2)));
        sh |= (uint16_t)((ls >> 4) << (2 * s));
        float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            int lo = dl != 0 ? iq4_nearest(x[32 * s + j] / dl) : 8;
            int hi = dl != 0 ? iq4_nearest(x[32 * s + j + 16] / dl) : 8;
            b[8 + 16 * s + j] = (uint8_t)(lo | hi << 4);
        }
    }
    wr16(b + 2, sh);
}

void kq_quantize_blocks(uint32_t t, const float *src, void *dst, int64_t nblocks) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < nblocks; i++) {
        if (t == DT_Q4_K) quant_q45_k_block(src + i * 256, b + i * 144, 0);
        else if (t == DT_Q5_K) quant_q45_k_block(src + i * 256, b + i * 176, 1);
        else if (t == DT_Q6_K) quant_q6_k_block(src + i * 256, b + i * 210);
        else if (t == DT_IQ4_XS) quant_iq4_xs_block(src + i * 256, b + i * 136);
    }
}
