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
 * GCC vector builtins (vpermt2ps under AVX-512). Not a public header. */
#include <stdint.h>
#include <string.h>

typedef int32_t attn_i32x16 __attribute__((vector_size(64)));

/* One butterfly stage of the transpose: rows i and i + b (bit b of i clear)
 * exchange their columns with bit b set / clear (element (i, c) moves to
 * the row and column with bit b of the two indices swapped). */
static inline void attn_tr_stage(attn_v16 *r, int b, attn_i32x16 lo, attn_i32x16 hi) {
    for (int i = 0; i < 16; i++) {
        if (i & b) continue;
        attn_v16 x = r[i], y = r[i + b];
        r[i] = __builtin_shuffle(x, y, lo);
        r[i + b] = __builtin_shuffle(x, y, hi);
    }
}

/* r[i][c] -> r[c][i] */
static inline void attn_transpose16(attn_v16 *r) {
    const attn_i32x16 lo1 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
                      hi1 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31},
                      lo2 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
                      hi2 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
                      lo4 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
                      hi4 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
                      lo8 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
                      hi8 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31};
    attn_tr_stage(r, 1, lo1, hi1);
    attn_tr_stage(r, 2, lo2, hi2);
    attn_tr_stage(r, 4, lo4, hi4);
    attn_tr_stage(r, 8, lo8, hi8);
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
