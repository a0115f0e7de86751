/* kernels_kqpack.c - repacking of Q4_K, Q5_K and IQ4_XS rows (GGUF
 * block layouts, kquant.c) into the K-quant KL_P16 panels of kernels_impl.h,
 * and the int16 activation sums the panel kernel (kernels_kqp_avx512.c) reads.
 *
 * Invariants: the packed panel holds exactly the GGUF block's integers (fp16
 * scales copied bit for bit, 6-bit scales / mins / IQ4_XS ls - 32 as bytes, every quant's bits), so the kernel's integer dot products
 * are those of the original weights; rows past n (the last panel's padding)
 * are all zero bytes (d = 0). Portable C: runs once per weight at load. */
#include <string.h>

#include "tensor/dtype.h"
#include "tensor/kernels_impl.h"

/* One super-block of one row, unpacked: quants (unsigned; IQ4_XS table
 * indexes), sub-block scales and mins, and the fp16 scales. */
typedef struct {
    uint8_t q[256];
    int sc[8], mn[8];
    uint16_t d, dmin;
} kq_block;

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static void unpack_block(dtype t, const uint8_t *b, kq_block *u) {
    memset(u, 0, sizeof *u);
    if (t == DT_Q4_K || t == DT_Q5_K) {
        int five = t == DT_Q5_K;
        uint8_t sc[8], mn[8];
        kq_scale_min_k4(b + 4, sc, mn);
        u->d = rd16(b), u->dmin = rd16(b + 2);
        const uint8_t *qh = b + 16, *qs = b + (five ? 48 : 16);
        for (int s = 0; s < 8; s++) {
            u->sc[s] = sc[s], u->mn[s] = mn[s];
            for (int l = 0; l < 32; l++) {
                int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0xf;
                if (five) q |= ((qh[l] >> s) & 1) << 4;
                u->q[32 * s + l] = (uint8_t)q;
            }
        }
    } else { /* IQ4_XS */
        uint16_t sh = rd16(b + 2);
        u->d = rd16(b);
        for (int s = 0; s < 8; s++) {
            u->sc[s] = (((b[4 + s / 2] >> (4 * (s % 2))) & 0xf) | ((sh >> (2 * s)) & 3) << 4) - 32;
            for (int j = 0; j < 16; j++) {
                u->q[32 * s + j] = b[8 + 16 * s + j] & 0xf;
                u->q[32 * s + 16 + j] = b[8 + 16 * s + j] >> 4;
            }
        }
    }
}

/* Writes row r's part of one packed super-block (kernels_impl.h). */
static void put_block(dtype t, const kq_block *u, int r, uint8_t *sb) {
    const int S = 32, nsub = 256 / S, nv = S / 8;
    memcpy(sb + 2 * r, &u->d, 2);
    if (t == DT_Q4_K || t == DT_Q5_K) memcpy(sb + 32 + 2 * r, &u->dmin, 2);
    for (int s = 0; s < nsub; s++) {
        sb[64 + (s / 2) * 32 + r * 2 + s % 2] = (uint8_t)u->sc[s];
        if (t == DT_Q4_K || t == DT_Q5_K) sb[192 + (s / 2) * 32 + r * 2 + s % 2] = (uint8_t)u->mn[s];
    }
    uint8_t *qs = sb + kqp_qs_off(t), *hb = qs + 2048;
    for (int s = 0; s < nsub; s++)
        for (int g = 0; g < nv; g++)
            for (int tt = 0; tt < 4; tt++) {
                int e0 = S * s + 4 * g + tt, e1 = e0 + S / 2, at = r * 4 + tt;
                qs[(s * nv + g) * 64 + at] = (uint8_t)((u->q[e0] & 0xf) | (u->q[e1] & 0xf) << 4);
                if (t == DT_Q5_K)
                    hb[s * 64 + at] |=
                        (uint8_t)(((u->q[e0] >> 4) & 1) << (2 * g) | ((u->q[e1] >> 4) & 1) << (2 * g + 1));
            }
}

void kern_pack_kq(dtype t, const uint8_t *src, uint8_t *dst, int64_t n, int64_t k) {
    int64_t nb = k / 256, np = (n + 15) / 16;
    size_t rb = dtype_row_bytes((uint32_t)t, k), bb = dtype_block_bytes((uint32_t)t), sbb = kqp_sb_bytes(t);
    memset(dst, 0, (size_t)np * (size_t)nb * sbb);
    kq_block u;
    for (int64_t o = 0; o < n; o++) {
        uint8_t *panel = dst + (size_t)(o / 16) * (size_t)nb * sbb;
        for (int64_t B = 0; B < nb; B++) {
            unpack_block(t, src + (size_t)o * rb + (size_t)B * bb, &u);
            put_block(t, &u, (int)(o % 16), panel + (size_t)B * sbb);
        }
    }
}

void kern_q8k_sums16(const int8_t *q, int64_t k, int16_t *s16, int16_t *s32) {
    for (int64_t b = 0; b < k / 16; b++) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += q[16 * b + j];
        s16[b] = (int16_t)s; /* |s| <= 16 * 127 */
    }
    for (int64_t b = 0; b < k / 32; b++) s32[b] = (int16_t)(s16[2 * b] + s16[2 * b + 1]); /* <= 4064 */
}
