/* attention_bf16_impl.h - one segment of ATTN_PREC_BF16 attention (see
 * attention.h) for the AVX-512 build: included by attention_impl.h when the
 * file is compiled with AVX-512 BF16; the caller checks the CPU has it.
 *
 * Per segment [s0, s1) and call (rows r = t*n_q + h, all query heads of one
 * KV head for up to ATTN_MAX_CHUNK tokens), the load step converts once:
 *   Q: each row times scale, as bf16 in dimension order (pair p = dims
 *      2p, 2p+1 is one 32-bit word, broadcast to the 16 key lanes);
 *   K: tiles of 16 keys, [pair p][key c][2] (one zmm per pair), read through
 *      attn_k_tile (in place or gathered across blocks);
 *   V: [key pair][dim][2] (one zmm = 16 dims x 2 keys), head_dim padded to
 *      16 with zeros, keys outside [lo of the first row rounded down to even,
 *      s1) zero.
 * Q.K: vdpbf16ps sums dims in pairs into f32 scores; the softmax runs in
 * f32 (its own exp: attn_exp2_fast); the weights P are rounded to bf16 with zeros
 * outside [lo, hi) of their row, and l sums the rounded weights; P.V:
 * vdpbf16ps over key pairs aligned to even absolute positions. A row's
 * result depends only on its own lo, hi, query and keys, never on the
 * call's other rows. */
#include <immintrin.h>

/* bf16 pairs written by vector stores, read as 32-bit words */
typedef uint32_t attn_u32 __attribute__((may_alias));

/* [x0..x15] and [y0..y15] rounded to bf16 (nearest even) and interleaved:
 * x0 y0 x1 y1 ... (element 2c = x[c], 2c+1 = y[c]). */
static inline __m512i attn_bf16_pairs(__m512 x, __m512 y) {
    static const uint16_t idx[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                     8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    __m512i xy = (__m512i)_mm512_cvtne2ps_pbh(y, x); /* low half x, high half y */
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(idx), xy);
}

static inline __mmask16 attn_lanes(int n) {
    return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n > 0 ? n : 0)) - 1);
}

/* Q of every row times scale as bf16, row r at qb + r * hd2 (hd2 = head_dim
 * rounded up to even, the pad zero). */
static void attn_bf16_pack_q(const attn_args *a, uint16_t *qb, int hd2) {
    const int hd = a->head_dim, nq = a->n_q, n_rows = a->n_tok * nq;
    const __m512 scale = _mm512_set1_ps(a->scale);
    for (int r = 0; r < n_rows; r++) {
        const float *q = a->q + (r / nq) * a->q_stride + (int64_t)(r % nq) * hd;
        uint16_t *o = qb + (int64_t)r * hd2;
        for (int d = 0; d < hd; d += 32) {
            __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(attn_lanes(hd - d), q + d), scale);
            __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(attn_lanes(hd - d - 16), q + d + 16), scale);
            __m512i v = (__m512i)_mm512_cvtne2ps_pbh(y, x);
            int n = hd2 - d < 32 ? hd2 - d : 32;
            _mm512_mask_storeu_epi16(o + d, (__mmask32)(n >= 32 ? 0xffffffffu : (1u << n) - 1), v);
        }
    }
}

/* K tiles of keys [k0, s1) (k0 a multiple of 16) into kb, np pairs of dims
 * each (pairs past head_dim zero): tile i at kb + i * 32 * np bf16, pair p
 * of key c at element (p * 16 + c) * 2 of its tile. */
static void attn_bf16_pack_k(const attn_args *a, int k0, int s1, uint16_t *kb, int np) {
    const int hd = a->head_dim;
    float kt[hd * 16];
    for (int j0 = k0; j0 < s1; j0 += 16) {
        int nk = s1 - j0 < 16 ? s1 - j0 : 16;
        int64_t st;
        const float *t = attn_k_tile(a, j0, nk, kt, &st);
        uint16_t *o = kb + (int64_t)(j0 - k0) * 2 * np;
        for (int p = 0; p < np; p++) {
            __m512 x = 2 * p < hd ? _mm512_loadu_ps(t + 2 * p * st) : _mm512_setzero_ps();
            __m512 y = 2 * p + 1 < hd ? _mm512_loadu_ps(t + (2 * p + 1) * st) : _mm512_setzero_ps();
            _mm512_storeu_si512(o + p * 32, attn_bf16_pairs(x, y));
        }
    }
}

/* V of keys [v0, v1) (both even, relative to nothing: absolute) into vb:
 * pair (j, j+1) at vb + (j - s0) / 2 * hd16 * 2, dims interleaved with
 * keys; keys outside [lo, s1) are zero. */
static void attn_bf16_pack_v(const attn_args *a, int s0, int v0, int v1, int lo, int s1, uint16_t *vb, int hd16) {
    const int hd = a->head_dim;
    for (int j = v0; j < v1; j += 2) {
        const float *x = j >= lo && j < s1 ? attn_row(a, a->v_off, j) : NULL;
        const float *y = j + 1 >= lo && j + 1 < s1 ? attn_row(a, a->v_off, j + 1) : NULL;
        uint16_t *o = vb + (int64_t)(j - s0) / 2 * hd16 * 2;
        for (int d = 0; d < hd16; d += 16) {
            __mmask16 m = attn_lanes(hd - d);
            __m512 xv = x ? _mm512_maskz_loadu_ps(m, x + d) : _mm512_setzero_ps();
            __m512 yv = y ? _mm512_maskz_loadu_ps(m, y + d) : _mm512_setzero_ps();
            _mm512_storeu_si512(o + d * 2, attn_bf16_pairs(xv, yv));
        }
    }
}

/* n (a constant after inlining) rows of bf16 Q (rows qs words apart, np
 * pairs) times nt (1 or 2) K tiles (tb words apart): scores of the first nr
 * rows to out (rows ATTN_SROW apart, tile 2 at +16). */
static inline __attribute__((always_inline)) void attn_bf16_qk(const attn_u32 *q, int64_t qs, const uint16_t *kt,
                                                               int64_t tb, int nt, int np, int n, int nr, float *out) {
    __m512 acc[16], acc2[8];
    for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    for (int i = 0; i < 8; i++) acc2[i] = _mm512_setzero_ps();
    for (int p = 0; p < np; p++) {
        __m512bh ka = (__m512bh)_mm512_loadu_si512(kt + p * 32);
        if (nt == 2) {
            __m512bh kb = (__m512bh)_mm512_loadu_si512(kt + tb + p * 32);
            for (int i = 0; i < n && i < 8; i++) {
                __m512bh w = (__m512bh)_mm512_set1_epi32((int)q[i * qs + p]);
                acc[i] = _mm512_dpbf16_ps(acc[i], w, ka);
                acc2[i] = _mm512_dpbf16_ps(acc2[i], w, kb);
            }
        } else {
            for (int i = 0; i < n; i++)
                acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)_mm512_set1_epi32((int)q[i * qs + p]), ka);
        }
    }
    for (int i = 0; i < nr; i++) {
        _mm512_storeu_ps(out + (int64_t)i * ATTN_SROW, acc[i]);
        if (nt == 2) _mm512_storeu_ps(out + (int64_t)i * ATTN_SROW + 16, acc2[i]);
    }
}

/* Scores of every row for keys [k0, s1) into sc (as attn_scores). */
static void attn_bf16_scores(const attn_args *a, const uint16_t *qb, int hd2, const uint16_t *kb, int s0, int k0,
                             int s1, float *sc) {
    const int n_rows = a->n_tok * a->n_q, np = hd2 / 2;
    const attn_u32 *q32 = (const attn_u32 *)qb;
    const int64_t tile = (int64_t)16 * hd2;
    for (int j0 = k0; j0 < s1; j0 += 32) {
        const uint16_t *kt = kb + (int64_t)(j0 - k0) * hd2;
        bool two = j0 + 16 < s1;
        for (int r0 = 0; r0 < n_rows; r0 += 16) {
            int nr = n_rows - r0 < 16 ? n_rows - r0 : 16;
            const attn_u32 *q = q32 + (int64_t)r0 * np;
            float *out = sc + (int64_t)r0 * ATTN_SROW + (j0 - s0);
            if (nr <= 8 && two) {
                if (nr > 4) attn_bf16_qk(q, np, kt, tile, 2, np, 8, nr, out);
                else attn_bf16_qk(q, np, kt, tile, 2, np, 4, nr, out);
                continue;
            }
            attn_bf16_qk(q, np, kt, tile, 1, np, 16, nr, out);
            if (two) attn_bf16_qk(q, np, kt + tile, tile, 1, np, 16, nr, out + 16);
        }
    }
}

#include "tensor/attention_bf16_tile_impl.h" /* attn_bf16_scores_tiled, attn_bf16_softmax_fast */

/* acc[k][0..nv) += sum over key pairs i < np of w[k][i] . V pair i, for 4
 * heads (ATTN_PV_HEADS) and nv (a constant after inlining) vectors of
 * 16 dims; V pairs vs words apart. */
static inline __attribute__((always_inline)) void attn_bf16_pv_run(const attn_u32 *const *w, int np, const uint16_t *v,
                                                                   int64_t vs, int nv, __m512 acc[4][4]) {
    for (int i = 0; i < np; i++, v += vs) {
        __m512bh vv[4];
        for (int q = 0; q < nv; q++) vv[q] = (__m512bh)_mm512_loadu_si512(v + q * 32);
        for (int k = 0; k < 4; k++) {
            __m512bh wk = (__m512bh)_mm512_set1_epi32((int)w[k][i]);
            for (int q = 0; q < nv; q++) acc[k][q] = _mm512_dpbf16_ps(acc[k][q], wk, vv[q]);
        }
    }
}

/* P.V of token t's heads over key pairs [plo, phi) into the part's acc rows. */
static void attn_bf16_pv(const attn_args *a, int t, int s0, int plo, int phi, const uint16_t *pb, const uint16_t *vb,
                         int hd16, float *acc) {
    const int hd = a->head_dim, nq = a->n_q, np = (phi - plo) / 2;
    for (int h = 0; h < nq; h += 4) {
        int nh = nq - h < 4 ? nq - h : 4, r = t * nq + h;
        const attn_u32 *w[4];
        for (int k = 0; k < 4; k++)
            w[k] = (const attn_u32 *)(pb + (int64_t)(r + (k < nh ? k : 0)) * ATTN_SEG) + (plo - s0) / 2;
        const uint16_t *v0 = vb + (int64_t)(plo - s0) / 2 * hd16 * 2;
        for (int d0 = 0; d0 < hd16; d0 += 64) {
            int nv = (hd16 - d0) / 16 < 4 ? (hd16 - d0) / 16 : 4;
            __m512 ac[4][4];
            for (int k = 0; k < 4; k++)
                for (int q = 0; q < 4; q++) ac[k][q] = _mm512_setzero_ps();
            const uint16_t *v = v0 + d0 * 2;
            switch (nv) {
            case 4: attn_bf16_pv_run(w, np, v, (int64_t)hd16 * 2, 4, ac); break;
            case 3: attn_bf16_pv_run(w, np, v, (int64_t)hd16 * 2, 3, ac); break;
            case 2: attn_bf16_pv_run(w, np, v, (int64_t)hd16 * 2, 2, ac); break;
            default: attn_bf16_pv_run(w, np, v, (int64_t)hd16 * 2, 1, ac); break;
            }
            for (int k = 0; k < nh; k++)
                for (int q = 0; q < nv; q++) {
                    int d = d0 + 16 * q;
                    _mm512_mask_storeu_ps(acc + (int64_t)(r + k) * hd + d, attn_lanes(hd - d), ac[k][q]);
                }
        }
    }
}

/* Segment seg's partial state of every row into part (as attn_segment),
 * in BF16. sc: scores, the merge's M and L, the packed Q, then the bf16
 * K, V and weights (attn_scratch_floats). */
static __attribute__((noinline)) void attn_segment_bf16(const attn_args *a, int seg, float *part, float *sc) {
    const int hd = a->head_dim, nq = a->n_q, nt = a->n_tok, n_rows = nt * nq;
    const int hd2 = (hd + 1) / 2 * 2, hd16 = (hd + 15) / 16 * 16, rows16 = (n_rows + 15) / 16 * 16;
    float *acc = part, *m = part + (int64_t)n_rows * hd, *l = m + n_rows;
    const int s0 = seg * ATTN_SEG, j_end = a->pos[nt - 1] + 1;
    const int s1 = s0 + ATTN_SEG < j_end ? s0 + ATTN_SEG : j_end;
    int lo0 = attn_lo(a, 0) > s0 ? attn_lo(a, 0) : s0, k0 = lo0 / 16 * 16;
    uint16_t *qb = (uint16_t *)(sc + (int64_t)n_rows * (ATTN_SROW + 2));
    uint16_t *kb = (uint16_t *)((float *)qb + (int64_t)rows16 * (hd + 16));
    uint16_t *vb = kb + (int64_t)ATTN_SEG * ((hd + 31) / 32 * 32), *pb = vb + (int64_t)ATTN_SEG * hd16;
    attn_bf16_pack_q(a, qb, hd2);
    /* rows up to the score block's multiple read as zeros (never stored) */
    memset(qb + (int64_t)n_rows * hd2, 0, sizeof(uint16_t) * (size_t)((-n_rows & (ATTN_BF16_QK_R - 1)) * hd2));
    attn_bf16_pack_k(a, k0, s1, kb, hd2 / 2);
    attn_bf16_pack_v(a, s0, lo0 & ~1, (s1 + 1) & ~1, lo0, s1, vb, hd16);
    if (n_rows > 8) attn_bf16_scores_tiled(a, qb, hd2, kb, s0, k0, s1, sc);
    else attn_bf16_scores(a, qb, hd2, kb, s0, k0, s1, sc);
    for (int t = 0; t < nt; t++) {
        int lo = attn_lo(a, t), hi = a->pos[t] + 1;
        if (lo < s0) lo = s0;
        if (hi > s1) hi = s1;
        for (int h = 0; h < nq; h++) {
            int r = t * nq + h;
            if (lo >= hi) {
                m[r] = -INFINITY;
                l[r] = 0.0f;
                memset(acc + (int64_t)r * hd, 0, sizeof(float) * (size_t)hd);
                continue;
            }
            float *srow = sc + (int64_t)r * ATTN_SROW, *s = srow + (lo - s0);
            if (a->softcap > 0.0f)
                for (int j = 0; j < hi - lo; j++) s[j] = a->softcap * tanhf(s[j] / a->softcap);
            m[r] = attn_bf16_row_max(srow, s0, lo, hi);
        }
        for (int h = 0; lo < hi && h < nq; h++) { /* after every max of the token: the reductions overlap */
            int r = t * nq + h;
            l[r] = attn_bf16_row_exp(sc + (int64_t)r * ATTN_SROW, s0, lo, hi, lo & ~1, (hi + 1) & ~1, m[r],
                                     pb + (int64_t)r * ATTN_SEG);
        }
        if (lo < hi) attn_bf16_pv(a, t, s0, lo & ~1, (hi + 1) & ~1, pb, vb, hd16, acc);
    }
}
