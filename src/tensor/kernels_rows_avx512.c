/* kernels_rows_avx512.c - AVX-512 kern_dot_rows_f32 / kern_axpy_rows_f32
 * (kernels.h): several queries against several rows read in place through
 * pointers (attention over gathered keys), register-tiled so each loaded
 * row chunk serves many queries.
 *
 * Bit-exactness invariant: every output equals what the single-vector
 * primitives of kernels_avx512.c give for it -
 *   dot:  the same four 16-lane accumulators over 64-element steps, the
 *         16-element steps into the first, the masked tail into the second,
 *         the same final reduction;
 *   axpy: y = fma(a, x, y) per element for rows in ascending order;
 * so callers switching from loops of kern_dot_f32 / kern_axpy_f32 keep their
 * results bit for bit. */
#include <immintrin.h>

#include "tensor/kernels_impl.h"

#define AI static inline __attribute__((always_inline))

/* NQ queries x NR rows, each pair exactly dot_f32 of kernels_avx512.c. */
AI void dot_tile(const int NQ, const int NR, const float *q, int64_t qs, const float *const *rows, int64_t d,
                 float *out, int64_t os) {
    __m512 acc[2][3][4];
#pragma GCC unroll 2
    for (int a = 0; a < NQ; a++)
#pragma GCC unroll 3
        for (int b = 0; b < NR; b++)
#pragma GCC unroll 4
            for (int l = 0; l < 4; l++) acc[a][b][l] = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 64 <= d; j += 64)
#pragma GCC unroll 4
        for (int l = 0; l < 4; l++) {
            __m512 qv[2], rv[3];
#pragma GCC unroll 2
            for (int a = 0; a < NQ; a++) qv[a] = _mm512_loadu_ps(q + a * qs + j + 16 * l);
#pragma GCC unroll 3
            for (int b = 0; b < NR; b++) rv[b] = _mm512_loadu_ps(rows[b] + j + 16 * l);
#pragma GCC unroll 2
            for (int a = 0; a < NQ; a++)
#pragma GCC unroll 3
                for (int b = 0; b < NR; b++) acc[a][b][l] = _mm512_fmadd_ps(qv[a], rv[b], acc[a][b][l]);
        }
    for (; j + 16 <= d; j += 16)
#pragma GCC unroll 2
        for (int a = 0; a < NQ; a++)
#pragma GCC unroll 3
            for (int b = 0; b < NR; b++)
                acc[a][b][0] =
                    _mm512_fmadd_ps(_mm512_loadu_ps(q + a * qs + j), _mm512_loadu_ps(rows[b] + j), acc[a][b][0]);
    if (j < d) {
        __mmask16 m = (__mmask16)((1u << (d - j)) - 1);
#pragma GCC unroll 2
        for (int a = 0; a < NQ; a++)
#pragma GCC unroll 3
            for (int b = 0; b < NR; b++)
                acc[a][b][1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + a * qs + j),
                                               _mm512_maskz_loadu_ps(m, rows[b] + j), acc[a][b][1]);
    }
#pragma GCC unroll 2
    for (int a = 0; a < NQ; a++)
#pragma GCC unroll 3
        for (int b = 0; b < NR; b++)
            out[a * os + b] = _mm512_reduce_add_ps(
                _mm512_add_ps(_mm512_add_ps(acc[a][b][0], acc[a][b][1]), _mm512_add_ps(acc[a][b][2], acc[a][b][3])));
}

void kern_dot_rows_f32_avx512(const float *q, int64_t qs, int nq, const float *const *rows, int nr, int64_t d,
                              float *out, int64_t os) {
    int a = 0;
    for (; a + 2 <= nq; a += 2) {
        int b = 0;
        for (; b + 3 <= nr; b += 3) dot_tile(2, 3, q + a * qs, qs, rows + b, d, out + a * os + b, os);
        for (; b < nr; b++) dot_tile(2, 1, q + a * qs, qs, rows + b, d, out + a * os + b, os);
    }
    for (; a < nq; a++) {
        int b = 0;
        for (; b + 3 <= nr; b += 3) dot_tile(1, 3, q + a * qs, qs, rows + b, d, out + a * os + b, os);
        for (; b < nr; b++) dot_tile(1, 1, q + a * qs, qs, rows + b, d, out + a * os + b, os);
    }
}

/* NH outputs x NC chunks of 16 elements starting at e (the last chunk under
 * mask `last`), accumulated over all rows in order. */
AI void axpy_tile(const int NH, const int NC, const float *p, int64_t ps, const float *const *rows, int nr, int64_t e,
                  __mmask16 last, float *y, int64_t ys) {
    __m512 acc[4][4];
    __mmask16 mk[4];
#pragma GCC unroll 4
    for (int c = 0; c < NC; c++) mk[c] = c == NC - 1 ? last : (__mmask16)0xffff;
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) acc[h][c] = _mm512_maskz_loadu_ps(mk[c], y + h * ys + e + 16 * c);
    for (int j = 0; j < nr; j++) {
        __m512 xv[4];
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) xv[c] = _mm512_maskz_loadu_ps(mk[c], rows[j] + e + 16 * c);
#pragma GCC unroll 4
        for (int h = 0; h < NH; h++) {
            __m512 a = _mm512_set1_ps(p[h * ps + j]);
#pragma GCC unroll 4
            for (int c = 0; c < NC; c++) acc[h][c] = _mm512_fmadd_ps(a, xv[c], acc[h][c]);
        }
    }
#pragma GCC unroll 4
    for (int h = 0; h < NH; h++)
#pragma GCC unroll 4
        for (int c = 0; c < NC; c++) _mm512_mask_storeu_ps(y + h * ys + e + 16 * c, mk[c], acc[h][c]);
}

AI void axpy_heads(const int NH, const float *p, int64_t ps, const float *const *rows, int nr, int64_t d, float *y,
                   int64_t ys) {
    int64_t e = 0;
    for (; e + 64 <= d; e += 64) axpy_tile(NH, 4, p, ps, rows, nr, e, 0xffff, y, ys);
    for (; e + 16 <= d; e += 16) axpy_tile(NH, 1, p, ps, rows, nr, e, 0xffff, y, ys);
    if (e < d) axpy_tile(NH, 1, p, ps, rows, nr, e, (__mmask16)((1u << (d - e)) - 1), y, ys);
}

void kern_axpy_rows_f32_avx512(const float *p, int64_t ps, int nh, const float *const *rows, int nr, int64_t d,
                               float *y, int64_t ys) {
    int h = 0;
    for (; h + 4 <= nh; h += 4) axpy_heads(4, p + h * ps, ps, rows, nr, d, y + h * ys, ys);
    for (; h < nh; h++) axpy_heads(1, p + h * ps, ps, rows, nr, d, y + h * ys, ys);
}
