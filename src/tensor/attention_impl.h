/* attention_impl.h - the bodies of kern_attention, kern_attention_part and
 * kern_attention_merge (see attention.h), included by attention_scalar.c /
 * attention_avx2.c / attention_avx512.c, each of which defines ATTN_FN,
 * ATTN_PART_FN and ATTN_MERGE_FN and is compiled with its ISA's flags.
 * 16-wide GCC vector types map to the ISA at hand. The whole and the split
 * forms call the same segment, merge-step and finish functions, so they
 * round identically. Not a public header. */
#include <math.h>
#include <string.h>

#include "tensor/attention.h"
#include "tensor/vecmath_impl.h"

typedef float attn_v16 __attribute__((vector_size(64), aligned(4)));

static inline void attn_axpy(float w, const float *x, float *y, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        attn_v16 xv, yv;
        memcpy(&xv, x + i, sizeof xv);
        memcpy(&yv, y + i, sizeof yv);
        yv += w * xv;
        memcpy(y + i, &yv, sizeof yv);
    }
    for (; i < n; i++) y[i] += w * x[i];
}

/* y = y*alpha + x*beta over n floats */
static inline void attn_scale_add(float alpha, float *y, float beta, const float *x, int n) {
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        attn_v16 xv, yv;
        memcpy(&xv, x + i, sizeof xv);
        memcpy(&yv, y + i, sizeof yv);
        yv = yv * alpha + xv * beta;
        memcpy(y + i, &yv, sizeof yv);
    }
    for (; i < n; i++) y[i] = y[i] * alpha + x[i] * beta;
}

static inline const float *attn_row(const attn_args *a, int64_t off, int j) {
    return a->blocks[j / a->block_tokens] + off + (int64_t)(j % a->block_tokens) * a->row_stride;
}

static inline int attn_lo(const attn_args *a, int t) {
    int lo = a->window > 0 ? a->pos[t] - a->window + 1 : 0;
    return lo > 0 ? lo : 0;
}

static inline float *attn_out_row(const attn_args *a, int r) {
    return a->out + (int64_t)(r / a->n_q) * a->out_stride + (int64_t)(r % a->n_q) * a->head_dim;
}

/* Scores of every row for keys [k0, s1) of the segment starting at s0 into
 * sc (row r at sc + r*ATTN_SEG, key j at index j - s0), 16 keys at a time.
 * K is dimension-major in each block ([dim][token]), so a tile of 16 keys
 * inside one block is read in place: row d of the tile is 16 consecutive
 * floats. Lanes past s1 read later slots of the same block; their scores
 * are never used. */
static void attn_scores(const attn_args *a, int s0, int k0, int s1, float *sc) {
    const int hd = a->head_dim, nq = a->n_q, bt = a->block_tokens;
    const int n_rows = a->n_tok * nq;
    float kt[hd][16]; /* gathered K tile (tiles that cross a block) */
    for (int j0 = k0; j0 < s1; j0 += 16) {
        int nk = s1 - j0 < 16 ? s1 - j0 : 16;
        const float *tile;
        int64_t tstride;
        if (j0 % bt + 16 <= bt) {
            tile = a->blocks[j0 / bt] + a->k_off + j0 % bt;
            tstride = bt;
        } else {
            for (int c = 0; c < 16; c++) {
                int j = j0 + (c < nk ? c : 0);
                const float *k = a->blocks[j / bt] + a->k_off + j % bt;
                for (int d = 0; d < hd; d++) kt[d][c] = c < nk ? k[(int64_t)d * bt] : 0.0f;
            }
            tile = &kt[0][0];
            tstride = 16;
        }
        /* 8 rows (token-major, head-minor) at a time: 8 independent FMA
         * chains share each K tile load. */
        for (int r0 = 0; r0 < n_rows; r0 += 8) {
            int nr = n_rows - r0 < 8 ? n_rows - r0 : 8;
            const float *qr[8];
            for (int i = 0; i < 8; i++) {
                int r = r0 + (i < nr ? i : 0);
                qr[i] = a->q + (r / nq) * a->q_stride + (int64_t)(r % nq) * hd;
            }
            attn_v16 acc[8] = {{0}};
            for (int d = 0; d < hd; d++) {
                attn_v16 kv;
                memcpy(&kv, tile + d * tstride, sizeof kv);
                for (int i = 0; i < 8; i++) acc[i] += qr[i][d] * kv;
            }
            for (int i = 0; i < nr; i++) {
                float *s = sc + (int64_t)(r0 + i) * ATTN_SEG + (j0 - s0);
                for (int c = 0; c < nk; c++) s[c] = acc[i][c] * a->scale;
            }
        }
    }
}

/* P.V of token t's heads over keys [lo, hi) of the segment at s0 (weights
 * in sc) into acc (row r at acc + r*hd): two heads at a time, 2 rows x 4
 * vectors = 8 independent accumulators sharing each V row load. */
static void attn_pv(const attn_args *a, int t, int s0, int lo, int hi, const float *sc, float *acc) {
    const int hd = a->head_dim, nq = a->n_q;
    for (int h = 0; h < nq; h += 2) {
        int nh = nq - h < 2 ? 1 : 2, r = t * nq + h;
        const float *p0 = sc + (int64_t)r * ATTN_SEG;
        const float *p1 = p0 + (nh == 2 ? ATTN_SEG : 0);
        float *o0 = acc + (int64_t)r * hd;
        int d0 = 0;
        for (; d0 + 64 <= hd; d0 += 64) {
            attn_v16 acc0[4] = {{0}}, acc1[4] = {{0}};
            for (int j = lo; j < hi; j++) {
                const float *v = attn_row(a, a->v_off, j) + d0;
                float w0 = p0[j - s0], w1 = p1[j - s0];
                for (int q = 0; q < 4; q++) {
                    attn_v16 vv;
                    memcpy(&vv, v + 16 * q, sizeof vv);
                    acc0[q] += w0 * vv;
                    acc1[q] += w1 * vv;
                }
            }
            for (int q = 0; q < 4; q++) {
                memcpy(o0 + d0 + 16 * q, &acc0[q], sizeof acc0[q]);
                if (nh == 2) memcpy(o0 + hd + d0 + 16 * q, &acc1[q], sizeof acc1[q]);
            }
        }
        for (int k = 0; d0 < hd && k < nh; k++) {
            const float *pk = k ? p1 : p0;
            float *o = o0 + (int64_t)k * hd;
            memset(o + d0, 0, sizeof(float) * (size_t)(hd - d0));
            for (int j = lo; j < hi; j++) attn_axpy(pk[j - s0], attn_row(a, a->v_off, j) + d0, o + d0, hd - d0);
        }
    }
}

/* Segment seg's partial state of every row into part: acc (rows x hd), then
 * m (rows), then l (rows). sc: rows x ATTN_SEG scratch. */
static __attribute__((noinline)) void attn_segment(const attn_args *a, int seg, float *part, float *sc) {
    const int hd = a->head_dim, nq = a->n_q, nt = a->n_tok, n_rows = nt * nq;
    float *acc = part, *m = part + (int64_t)n_rows * hd, *l = m + n_rows;
    const int s0 = seg * ATTN_SEG, j_end = a->pos[nt - 1] + 1;
    const int s1 = s0 + ATTN_SEG < j_end ? s0 + ATTN_SEG : j_end;
    int k0 = attn_lo(a, 0) / 16 * 16;
    if (k0 < s0) k0 = s0;
    attn_scores(a, s0, k0, s1, sc);
    for (int t = 0; t < nt; t++) {
        int lo = attn_lo(a, t), hi = a->pos[t] + 1;
        if (lo < s0) lo = s0;
        if (hi > s1) hi = s1;
        for (int h = 0; h < nq; h++) {
            int r = t * nq + h;
            if (lo >= hi) { /* no visible key of this segment: the empty state */
                m[r] = -INFINITY;
                l[r] = 0.0f;
                memset(acc + (int64_t)r * hd, 0, sizeof(float) * (size_t)hd);
                continue;
            }
            float *s = sc + (int64_t)r * ATTN_SEG + (lo - s0);
            int n = hi - lo;
            float mx = -INFINITY;
            for (int j = 0; j < n; j++) {
                if (a->softcap > 0.0f) s[j] = a->softcap * tanhf(s[j] / a->softcap);
                if (s[j] > mx) mx = s[j];
            }
            m[r] = mx;
            l[r] = vm_exp_sub_sum(s, n, mx);
        }
        if (lo < hi) attn_pv(a, t, s0, lo, hi, sc, acc);
    }
}

/* Running state: out rows zero, M = -inf, L = 0. */
static void attn_merge_begin(const attn_args *a, float *M, float *L) {
    int n_rows = a->n_tok * a->n_q;
    for (int r = 0; r < n_rows; r++) {
        M[r] = -INFINITY;
        L[r] = 0.0f;
        memset(attn_out_row(a, r), 0, sizeof(float) * (size_t)a->head_dim);
    }
}

static __attribute__((noinline)) void attn_merge_step(const attn_args *a, const float *part, float *M, float *L) {
    const int hd = a->head_dim, n_rows = a->n_tok * a->n_q;
    const float *acc = part, *m = part + (int64_t)n_rows * hd, *l = m + n_rows;
    for (int r = 0; r < n_rows; r++) {
        if (m[r] == -INFINITY) continue; /* empty partial */
        float mn = M[r] > m[r] ? M[r] : m[r];
        float alpha = expf(M[r] - mn), beta = expf(m[r] - mn);
        M[r] = mn;
        L[r] = L[r] * alpha + l[r] * beta;
        attn_scale_add(alpha, attn_out_row(a, r), beta, acc + (int64_t)r * hd, hd);
    }
}

/* out = O / (L + sink); a row with no visible key (cannot happen for a
 * causal row) is left zero. */
static __attribute__((noinline)) void attn_merge_finish(const attn_args *a, const float *M, const float *L) {
    const int hd = a->head_dim, n_rows = a->n_tok * a->n_q;
    for (int r = 0; r < n_rows; r++) {
        float mx = M[r], denom = L[r], f = 1.0f;
        if (a->sinks) {
            float sk = a->sinks[r % a->n_q];
            float mn = mx > sk ? mx : sk;
            f = expf(mx - mn);
            denom = denom * f + expf(sk - mn);
        }
        if (!(denom > 0.0f)) continue;
        float w = f / denom;
        float *o = attn_out_row(a, r);
        for (int i = 0; i < hd; i++) o[i] *= w;
    }
}

void ATTN_PART_FN(const attn_args *a, int seg, float *part) {
    int n_rows = a->n_tok * a->n_q;
    attn_segment(a, seg, part, a->scratch + (int64_t)n_rows * (a->head_dim + 2));
}

void ATTN_MERGE_FN(const attn_args *a, const float *parts, int64_t part_stride) {
    int n_rows = a->n_tok * a->n_q, first, end;
    float *M = a->scratch + (int64_t)n_rows * (a->head_dim + 2 + ATTN_SEG), *L = M + n_rows;
    attn_segments(a, &first, &end);
    attn_merge_begin(a, M, L);
    for (int g = first; g < end; g++) attn_merge_step(a, parts + (int64_t)(g - first) * part_stride, M, L);
    attn_merge_finish(a, M, L);
}

void ATTN_FN(const attn_args *a) {
    int n_rows = a->n_tok * a->n_q, first, end;
    float *part = a->scratch, *sc = part + (int64_t)n_rows * (a->head_dim + 2);
    float *M = sc + (int64_t)n_rows * ATTN_SEG, *L = M + n_rows;
    attn_segments(a, &first, &end);
    attn_merge_begin(a, M, L);
    for (int g = first; g < end; g++) {
        attn_segment(a, g, part, sc);
        attn_merge_step(a, part, M, L);
    }
    attn_merge_finish(a, M, L);
}
