/* attention_ktile_impl.h - the K half of the load step of a non-f32 KV cache
 * (attention_kv_impl.h): 16 keys' token-major encoded K rows decoded into
 * f32 rows, then written dimension-major (tile[d * stride + c], c = key) by
 * 16 x 16 in-register transposes: 64 two-vector shuffles per 256 elements
 * instead of one scalar store per element, strided by 512 B (issue 24:
 * q8_0 decode at depth 4,096 went from 12.1-15.2 to 15.6-23.4 tok/s per
 * CPU-second, bench/results/longctx-dec24-d4096.txt).
 * Invariants: only data moves: every tile element is bit for bit the value
 * attn_decode_row gives (the f32 segment that reads the tile therefore
 * computes exactly what it computed before); nothing is allocated (one
 * 16-row stack buffer); rows c >= nk of the 16 are written as zeros.
 * Included by attention_kv_impl.h after attn_decode_row; the shuffles are
 * __builtin_shufflevector (GCC >= 12, clang; vpermt2ps under AVX-512). Not a
 * public header. */
#include <stdint.h>
#include <string.h>

/* Index lists of the four butterfly stages (__builtin_shufflevector takes
 * constants: GCC >= 12 and clang both have it). */
#define ATTN_TR_LO1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define ATTN_TR_HI1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
#define ATTN_TR_LO2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define ATTN_TR_HI2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define ATTN_TR_LO4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define ATTN_TR_HI4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define ATTN_TR_LO8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define ATTN_TR_HI8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31

/* One butterfly stage of the transpose: rows i and i + B (bit B of i clear)
 * exchange their columns with bit B set / clear (element (i, c) moves to
 * the row and column with bit B of the two indices swapped). */
#define ATTN_TR_STAGE(r, B, LO, HI)                          \
    for (int i_ = 0; i_ < 16; i_++) {                        \
        if (i_ & (B)) continue;                              \
        attn_v16 x_ = (r)[i_], y_ = (r)[i_ + (B)];           \
        (r)[i_] = __builtin_shufflevector(x_, y_, LO);       \
        (r)[i_ + (B)] = __builtin_shufflevector(x_, y_, HI); \
    }

/* r[i][c] -> r[c][i] */
static inline void attn_transpose16(attn_v16 *r) {
    ATTN_TR_STAGE(r, 1, ATTN_TR_LO1, ATTN_TR_HI1)
    ATTN_TR_STAGE(r, 2, ATTN_TR_LO2, ATTN_TR_HI2)
    ATTN_TR_STAGE(r, 4, ATTN_TR_LO4, ATTN_TR_HI4)
    ATTN_TR_STAGE(r, 8, ATTN_TR_LO8, ATTN_TR_HI8)
}

/* The K rows of keys j0 .. j0 + nk - 1 (nk <= 16) of the cache in `a`
 * (token-major encoded, attention.h) decoded into tile[d * stride + c]. */
static void attn_load_ktile16(const attn_args *a, int j0, int nk, float *tile, int64_t stride) {
    const int hd = a->head_dim, bt = a->block_tokens, hd16 = (hd + 15) / 16 * 16;
    float rows[16][hd16];
    for (int c = 0; c < 16; c++) {
        if (c >= nk) {
            memset(rows[c], 0, sizeof(float) * (size_t)hd16);
            continue;
        }
        int j = j0 + c;
        const float *blk = a->blocks[j / bt];
        const uint8_t *src = (const uint8_t *)(blk + a->k_off + (int64_t)(j % bt) * a->row_stride) + a->head_bytes;
        attn_decode_row(a->kv_dtype, src, rows[c], hd);
        memset(rows[c] + hd, 0, sizeof(float) * (size_t)(hd16 - hd));
    }
    for (int d0 = 0; d0 < hd; d0 += 16) {
        attn_v16 r[16];
        for (int c = 0; c < 16; c++) memcpy(&r[c], rows[c] + d0, sizeof r[c]);
        attn_transpose16(r);
        int nd = hd - d0 < 16 ? hd - d0 : 16;
        for (int d = 0; d < nd; d++) memcpy(tile + (int64_t)(d0 + d) * stride, &r[d], sizeof r[d]);
    }
}
