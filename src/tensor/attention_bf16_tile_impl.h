/* attention_bf16_tile_impl.h - the prefill tile of ATTN_PREC_BF16 attention
 * with AVX-512 BF16 (vdpbf16ps): the Q.K score block and the softmax that
 * turns a row's scores into bf16 weights. Included by attention_bf16_impl.h
 * (the AVX-512 build compiled with AVX-512 BF16; the caller checks the CPU).
 *
 * Score block: 8 rows x up to 3 K tiles of 16 keys = 24 independent
 * accumulators; per dimension pair, 3 K loads and 8 Q broadcasts feed 24
 * vdpbf16ps (the 16-row x 1-tile block needed 17 loads for 16, and loads,
 * not the dot products, bounded it). Rows run outermost so a group's Q
 * rows stay in registers and the segment's K tiles (<= 16 KiB) in L1.
 *
 * Invariants (batch invariance, attention.h): each score is its own
 * accumulator summed over dimension pairs in ascending order, whatever the
 * blocking, the rows beside it or the path (decode blocks differently and
 * gets the same bits); the softmax of a row depends only on that row's
 * scores and [lo, hi). Not a public header. */

#define ATTN_BF16_QK_R 8 /* rows per score block */
#define ATTN_BF16_QK_T 3 /* K tiles per score block */

/* R rows of bf16 Q (rows qs words apart, np pairs) times T K tiles (tb
 * bf16 apart): scores of the first nr rows to out (rows ATTN_SROW apart,
 * tile t at +16t). R and T are constants after inlining. */
static inline __attribute__((always_inline)) void attn_bf16_qk_block(const attn_u32 *q, int64_t qs, const uint16_t *kt,
                                                                     int64_t tb, int np, int R, int T, int nr,
                                                                     float *out) {
    __m512 acc[ATTN_BF16_QK_R][ATTN_BF16_QK_T];
    for (int i = 0; i < R; i++)
        for (int t = 0; t < T; t++) acc[i][t] = _mm512_setzero_ps();
    for (int p = 0; p < np; p++) {
        __m512bh k[ATTN_BF16_QK_T];
        for (int t = 0; t < T; t++) k[t] = (__m512bh)_mm512_loadu_si512(kt + t * tb + p * 32);
        for (int i = 0; i < R; i++) {
            __m512bh w = (__m512bh)_mm512_set1_epi32((int)q[i * qs + p]);
            for (int t = 0; t < T; t++) acc[i][t] = _mm512_dpbf16_ps(acc[i][t], w, k[t]);
        }
    }
    for (int i = 0; i < nr; i++)
        for (int t = 0; t < T; t++) _mm512_storeu_ps(out + (int64_t)i * ATTN_SROW + 16 * t, acc[i][t]);
}

/* Scores of every row for keys [k0, s1) into sc (row r at sc + r*ATTN_SROW,
 * key j at j - s0), from the bf16 Q rows (qb, hd2 elements each; rows up to
 * the next multiple of ATTN_BF16_QK_R readable) and K tiles (kb, tile i at
 * kb + i * 16 * hd2, pair p of key c at element (p * 16 + c) * 2). */
static void attn_bf16_scores_tiled(const attn_args *a, const uint16_t *qb, int hd2, const uint16_t *kb, int s0, int k0,
                                   int s1, float *sc) {
    const int n_rows = a->n_tok * a->n_q, np = hd2 / 2, n_tiles = (s1 - k0 + 15) / 16;
    const attn_u32 *q32 = (const attn_u32 *)qb;
    const int64_t tile = (int64_t)16 * hd2;
    for (int r0 = 0; r0 < n_rows; r0 += ATTN_BF16_QK_R) {
        int nr = n_rows - r0 < ATTN_BF16_QK_R ? n_rows - r0 : ATTN_BF16_QK_R;
        const attn_u32 *q = q32 + (int64_t)r0 * np;
        float *row = sc + (int64_t)r0 * ATTN_SROW + (k0 - s0);
        for (int i = 0; i < n_tiles; i += ATTN_BF16_QK_T) {
            const uint16_t *kt = kb + (int64_t)i * tile;
            float *out = row + 16 * i;
            switch (n_tiles - i < ATTN_BF16_QK_T ? n_tiles - i : ATTN_BF16_QK_T) {
            case 3: attn_bf16_qk_block(q, np, kt, tile, np, ATTN_BF16_QK_R, 3, nr, out); break;
            case 2: attn_bf16_qk_block(q, np, kt, tile, np, ATTN_BF16_QK_R, 2, nr, out); break;
            default: attn_bf16_qk_block(q, np, kt, tile, np, ATTN_BF16_QK_R, 1, nr, out); break;
            }
        }
    }
}

/* 2^t for t <= 0, clamped to t >= -125 (2^-125 ~ 2.4e-38: a weight that
 * rounds to the same bf16 as nothing next to the row's max term of 1):
 * n = round(t) by the 1.5 * 2^23 shifter, 2^(t - n) by a degree-5
 * polynomial on [-0.5, 0.5] (relative error ~3e-6, far below the bf16
 * rounding of the weights it feeds), and n added to the exponent field as
 * an integer (no vscalefps / vrndscaleps). */
static inline __m512 attn_exp2_fast(__m512 t) {
    const __m512 sh = _mm512_set1_ps(12582912.0f);
    t = _mm512_max_ps(t, _mm512_set1_ps(-125.0f));
    __m512 big = _mm512_add_ps(t, sh);
    __m512 n = _mm512_sub_ps(big, sh);
    __m512 f = _mm512_sub_ps(t, n);
    __m512 p = _mm512_set1_ps(1.3333558146e-3f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108665e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650696e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718056e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    /* the low bits of big hold n (two's complement): shifted to the exponent field */
    __m512i e = _mm512_slli_epi32(_mm512_castps_si512(big), 23);
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e));
}

/* The max of a row's scores srow (key j at j - s0) over its visible keys
 * [lo, hi) (lo < hi). */
static inline float attn_bf16_row_max(const float *srow, int s0, int lo, int hi) {
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int j = lo; j < hi; j += 16)
        vmax = _mm512_mask_max_ps(vmax, attn_lanes(hi - j), vmax, _mm512_loadu_ps(srow + (j - s0)));
    return _mm512_reduce_max_ps(vmax);
}

/* exp(s - m) of 16 scores at srow + (j - s0), zero outside [lo, hi) (idx:
 * the 16 key indices j..j+15). */
static inline __m512 attn_bf16_exp16(const float *srow, int s0, int j, __m512i idx, __m512i vlo, __m512i vhi,
                                     __m512 ml) {
    __mmask16 vis = _mm512_cmpge_epi32_mask(idx, vlo) & _mm512_cmplt_epi32_mask(idx, vhi);
    __m512 x = _mm512_maskz_loadu_ps(vis, srow + (j - s0));
    return _mm512_maskz_mov_ps(vis, attn_exp2_fast(_mm512_fmsub_ps(x, _mm512_set1_ps(1.44269504088896341f), ml)));
}

/* The softmax weights of one row in bf16 given its max m (attn_bf16_row_max):
 * w (key j at j - s0) gets exp(s - m) rounded to bf16 over [plo, phi) (plo
 * <= lo, phi >= hi), zero outside [lo, hi); returns the sum of the rounded
 * weights. 32 keys per step: one vcvtne2ps2bf16 rounds them and one
 * vdpbf16ps against ones adds them in pairs to 16 f32 lane sums (exact
 * products), reduced by a fixed tree at the end. Visibility by vector
 * compares of key indices, no per-vector branches. */
static inline float attn_bf16_row_exp(const float *srow, int s0, int lo, int hi, int plo, int phi, float m,
                                      uint16_t *w) {
    const __m512i sixteen = _mm512_set1_epi32(16), vlo = _mm512_set1_epi32(lo), vhi = _mm512_set1_epi32(hi);
    const __m512 ml = _mm512_set1_ps(m * 1.44269504088896341f);
    const __m512bh ones = (__m512bh)_mm512_set1_epi16(0x3f80); /* bf16 1.0 */
    __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(plo),
                                   _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    __m512 sum = _mm512_setzero_ps();
    for (int j = plo; j < phi; j += 32) {
        __m512 e0 = attn_bf16_exp16(srow, s0, j, idx, vlo, vhi, ml);
        idx = _mm512_add_epi32(idx, sixteen);
        __m512 e1 = attn_bf16_exp16(srow, s0, j + 16, idx, vlo, vhi, ml);
        idx = _mm512_add_epi32(idx, sixteen);
        __m512bh b = _mm512_cvtne2ps_pbh(e1, e0); /* keys j..j+31 in order */
        if (phi - j >= 32) _mm512_storeu_si512(w + (j - s0), (__m512i)b);
        else _mm512_mask_storeu_epi16(w + (j - s0), (__mmask32)((1u << (phi - j)) - 1), (__m512i)b);
        sum = _mm512_dpbf16_ps(sum, b, ones);
    }
    return _mm512_reduce_add_ps(sum);
}

/* Both steps for one row: *mx = the max, returns the sum (the segment loop
 * runs the steps row group by row group instead, so the max reductions of
 * a token's rows overlap; same arithmetic, same bits). */
static inline float attn_bf16_softmax_fast(const float *srow, int s0, int lo, int hi, int plo, int phi, uint16_t *w,
                                           float *mx) {
    *mx = attn_bf16_row_max(srow, s0, lo, hi);
    return attn_bf16_row_exp(srow, s0, lo, hi, plo, phi, *mx, w);
}
