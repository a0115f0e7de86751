/* kernels_amx.c - Q8_0 / Q4_0 weights (KL_P16 panels, kernels_impl.h) times Q8_0 activations
 * with AMX-INT8 tiles: the avx512 kernels' path for more than MA_Q (6) activation rows when
 * cpu_amx_active() (long speculative verifies, batches, prefill), where VNNI spends one vpdpbusd
 * per 64 weight bytes per activation row and the rows' arithmetic no longer hides under the
 * weight read.
 *
 * Per 16-row panel and 32-wide k-block b, one tile product (TDPBSUD: signed x unsigned bytes):
 *   A (tmm1) = up to 16 activation rows' int8 quants of the block: rows x 32 bytes, read in
 *              place (stride k);
 *   B (tmm2) = 8 rows of [16 output rows][4 consecutive k] bytes: exactly the KL_P16 Q8_0
 *              block (quants + 128); Q4_0's nibbles are unpacked into that layout in a 512-byte
 *              buffer first;
 *   C (tmm0) = rows x 16 int32 sums, stored to a buffer.
 * Every row then finishes the block as kernels_avx512.c's tile_q does: (C + corr) to float,
 * times d_w * d_x, FMA'd into the row's f32 accumulator, in block order. The integer sums are
 * exact, so the results are bitwise those of the VNNI tiles: a row computes the same bits alone
 * (decode, VNNI) and among others (verify, batch, AMX), which keeps greedy speculative decoding
 * identical to plain decoding.
 * Tiles are configured at entry of kern_mm_q_amx and released before it returns: a pool
 * thread holds tile state only inside one call. Tile register numbers are literals (the
 * intrinsics paste them into the instruction). */
#include <immintrin.h>
#include <string.h>

#include "tensor/kernels_impl.h"

#define AMX_ROWS 16 /* activation rows per tile product (the tile height) */
#define AMX_PF_DIST 4096 /* weight prefetch distance in a panel stream, as the VNNI tiles */

typedef struct amx_tile_cfg { /* the LDTILECFG memory operand (palette 1) */
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_tile_cfg;

/* C = tmm0 (rows x 16 int32), A = tmm1 (rows x 32 bytes), B = tmm2 (8 x 64 bytes). */
static void amx_configure(int rows) {
    amx_tile_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = (uint8_t)rows, c.colsb[0] = 64;
    c.rows[1] = (uint8_t)rows, c.colsb[1] = 32;
    c.rows[2] = 8, c.colsb[2] = 64;
    _tile_loadconfig(&c);
}

static inline __mmask16 amx_row_mask(int64_t n, int64_t o) {
    int64_t v = n - o;
    return v >= 16 ? (__mmask16)0xffff : v <= 0 ? (__mmask16)0 : (__mmask16)((1u << v) - 1);
}

/* Q4_0 block (4 x 64 bytes: byte j*64 + r*4 + t holds element 4j+t in its low nibble, 16+4j+t
 * in its high one) -> the Q8_0 B layout: row j = low nibbles of j, row 4 + j = high nibbles. */
static inline void amx_unpack_q4(const uint8_t *blk, uint8_t *out) {
    const __m512i nib = _mm512_set1_epi8(0x0f);
    for (int j = 0; j < 4; j++) {
        __m512i raw = _mm512_load_si512(blk + j * 64);
        _mm512_store_si512(out + j * 64, _mm512_and_si512(raw, nib));
        _mm512_store_si512(out + (j + 4) * 64, _mm512_and_si512(_mm512_srli_epi16(raw, 4), nib));
    }
}

/* One panel (16 output rows from o) x activation rows [i, i + M), tiles configured for M rows. */
static inline __attribute__((always_inline)) void amx_panel(const int M, const kern_mm_args *a, const uint8_t *wp,
                                                            int q4, int64_t i, int64_t o, uint8_t *unpacked,
                                                            int32_t *cbuf) {
    const int64_t k = a->k, nb = k / 32, qbytes = q4 ? 256 : 512;
    const size_t sb = kp16_scale_bytes(k);
    const int8_t *q = a->qa.q + i * k;
    const float *dx = a->qa.d + i * nb;
    const int32_t *corr = a->qa.corr + i * nb;
    __m512 acc[AMX_ROWS];
#pragma GCC unroll 16
    for (int t = 0; t < M; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = wp + sb + b * qbytes;
        for (int64_t l = 0; l < qbytes; l += 64) _mm_prefetch((const char *)(blk + l + AMX_PF_DIST), _MM_HINT_T0);
        const uint8_t *bsrc = blk;
        if (q4) {
            amx_unpack_q4(blk, unpacked);
            bsrc = unpacked;
        }
        _tile_zero(0);
        _tile_loadd(1, q + b * 32, k);
        _tile_loadd(2, bsrc, 64);
        _tile_dpbsud(0, 1, 2);
        _tile_stored(0, cbuf, 64);
        __m512 dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(wp + b * 32)));
#pragma GCC unroll 16
        for (int t = 0; t < M; t++) {
            __m512i ai = _mm512_add_epi32(_mm512_load_si512(cbuf + t * 16), _mm512_set1_epi32(corr[t * nb + b]));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), _mm512_mul_ps(dw, _mm512_set1_ps(dx[t * nb + b])), acc[t]);
        }
    }
    __mmask16 m = amx_row_mask(a->n, o);
#pragma GCC unroll 16
    for (int t = 0; t < M; t++) _mm512_mask_storeu_ps(a->y + (i + t) * a->n + o, m, acc[t]);
}

#define AMX_CASE(MM) \
    case MM: amx_panel(MM, a, wp, q4, i, o, unpacked, cbuf); break;

static void amx_panel_rows(int M, const kern_mm_args *a, const uint8_t *wp, int q4, int64_t i, int64_t o,
                           uint8_t *unpacked, int32_t *cbuf) {
    switch (M) {
        AMX_CASE(1)
        AMX_CASE(2)
        AMX_CASE(3)
        AMX_CASE(4)
        AMX_CASE(5)
        AMX_CASE(6)
        AMX_CASE(7)
        AMX_CASE(8)
        AMX_CASE(9)
        AMX_CASE(10)
        AMX_CASE(11)
        AMX_CASE(12)
        AMX_CASE(13)
        AMX_CASE(14)
        AMX_CASE(15)
    default: amx_panel(16, a, wp, q4, i, o, unpacked, cbuf); break;
    }
}

void kern_mm_q_amx(const kern_mm_args *a, int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
    const kern_weight *w = a->w;
    int q4 = w->type == DT_Q4_0;
    size_t pb = kp16_panel_bytes(w->type, w->k);
    const uint8_t *base = w->packed;
    _Alignas(64) uint8_t unpacked[512];
    _Alignas(64) int32_t cbuf[AMX_ROWS * 16];
    int rows_cfg = 0;
    for (int64_t p = o0 / 16; p < (o1 + 15) / 16; p++)
        for (int64_t i = i0; i < i1; i += AMX_ROWS) {
            int M = (int)(i1 - i < AMX_ROWS ? i1 - i : AMX_ROWS);
            if (M != rows_cfg) amx_configure(rows_cfg = M);
            amx_panel_rows(M, a, base + (size_t)p * pb, q4, i, p * 16, unpacked, cbuf);
        }
    _tile_release();
}
