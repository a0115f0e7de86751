/* attention_impl.h - the bodies of kern_attention, kern_attention_part and
 * kern_attention_merge (see attention.h), included by attention_scalar.c /
 * attention_avx2.c / attention_avx512.c, each of which defines ATTN_FN,
 * ATTN_PART_FN and ATTN_MERGE_FN and is compiled with its ISA's flags.
 * 16-wide GCC vector types map to the ISA at hand. The whole and the split
 * forms call the same segment, merge-step and finish functions, so they
 * round identically. Not a public header. */
#include <math.h>
#include <string.h>

#include "base/cpu.h"
#include "tensor/attention.h"
#include "tensor/vecmath_impl.h"

typedef float attn_v16 __attribute__((vector_size(64), aligned(4)));

/* Score row stride: a segment plus one vector, so whole-vector softmax
 * passes over a row's last keys stay inside the row. */
#define ATTN_SROW (ATTN_SEG + 16)

/* Register blocking: rows per K tile pass and heads per V pass. AVX-512 has
 * 32 vector registers: 16 independent FMA chains; 16-wide vectors take two
 * registers each under AVX2 and scalar builds: 8. */
#ifdef __AVX512F__
#define ATTN_QK_ROWS 16
#define ATTN_PV_HEADS 4
#else
#define ATTN_QK_ROWS 8
#define ATTN_PV_HEADS 2
#endif

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

/* exp(x) for x <= 0 (softmax terms, x = s - max): inputs below -87.3
 * (and -inf) give exp(-87.3) ~ 1e-38, not 0, which leaves every sum it joins
 * (>= 1, the max term) unchanged. Same range reduction and polynomial as
 * vm_exp, with n = round(x log2 e) by the 1.5 * 2^23 shifter and no upper
 * clamp. */
static inline vm_f16 attn_exp_le0(vm_f16 x) {
    const vm_f16 lo = vm_splat(-87.33654475055310f), shifter = vm_splat(12582912.0f);
    x = vm_select(x < lo, x, lo);
    vm_f16 big = x * 1.44269504088896341f + shifter;
    vm_f16 n = big - shifter;
    vm_f16 r = x - n * 0.693359375f + n * 2.12194440e-4f;
    vm_f16 r2 = r * r;
    vm_f16 p = vm_splat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r2 + r + 1.0f;
    vm_i16 bi, sb;
    memcpy(&bi, &big, sizeof bi);
    memcpy(&sb, &shifter, sizeof sb);
    vm_i16 e = (bi - sb + 127) << 23;
    vm_f16 scale;
    memcpy(&scale, &e, sizeof scale);
    return p * scale;
}

/* x[0..n) (n >= 1; x has room for n rounded up to 16) = exp(x - max),
 * max to *mx; returns the sum. Whole vectors: lanes past n are set to -inf
 * (exp 0, stored, never read) instead of a scalar tail. */
static inline float attn_softmax_row(float *x, int n, float *mx) {
    const int nv = (n + 15) / 16;
    vm_f16 tail_ok = {0}, ninf = vm_splat(-INFINITY), vmax = ninf, sum = {0};
    for (int c = 0; c < 16; c++) tail_ok[c] = (float)c;
    tail_ok -= (float)(n - (nv - 1) * 16); /* lane < valid count: negative */
    vm_i16 tail_mask = tail_ok >= 0.0f; /* lanes to clear in the last vector */
    for (int i = 0; i < nv; i++) {
        vm_f16 v;
        memcpy(&v, x + 16 * i, sizeof v);
        if (i == nv - 1) v = vm_select(tail_mask, v, ninf);
        vmax = vm_select(v > vmax, vmax, v);
        memcpy(x + 16 * i, &v, sizeof v);
    }
    float m = vmax[0];
    for (int c = 1; c < 16; c++) m = vmax[c] > m ? vmax[c] : m;
    for (int i = 0; i < nv; i++) {
        vm_f16 v;
        memcpy(&v, x + 16 * i, sizeof v);
        v = attn_exp_le0(v - m);
        sum += v;
        memcpy(x + 16 * i, &v, sizeof v);
    }
    *mx = m;
    float t = 0.0f;
    for (int c = 0; c < 16; c++) t += sum[c];
    return t;
}

static inline const float *attn_row(const attn_args *a, int64_t off, int j) {
    return a->blocks[j / a->block_tokens] + off + (int64_t)(j % a->block_tokens) * a->row_stride;
}

static inline int attn_lo(const attn_args *a, int t) {
    int lo = a->window > 0 ? a->pos[t] - a->window + 1 : 0;
    if (lo < a->floor) lo = a->floor;
    return lo > 0 ? lo : 0;
}

/* Width of V and output rows: head_dim, or v_dim for shared-row MQA. */
static inline int attn_vd(const attn_args *a) { return a->v_dim > 0 ? a->v_dim : a->head_dim; }

static inline float *attn_out_row(const attn_args *a, int r) {
    return a->out + (int64_t)(r / a->n_q) * a->out_stride + (int64_t)(r % a->n_q) * attn_vd(a);
}

/* Q of every row, times scale, into qt as groups of ATTN_QK_ROWS rows, each
 * [head_dim][ATTN_QK_ROWS] (rows past the last are zero): the score loop
 * then reads a group's broadcasts at constant offsets from one pointer. */
static void attn_pack_q(const attn_args *a, float *qt) {
    const int hd = a->head_dim, nq = a->n_q, n_rows = a->n_tok * nq;
    for (int r0 = 0; r0 < n_rows; r0 += ATTN_QK_ROWS) {
        float *g = qt + (int64_t)r0 * hd;
        for (int i = 0; i < ATTN_QK_ROWS; i++) {
            int r = r0 + i;
            const float *q = a->q + (r / nq) * a->q_stride + (int64_t)(r % nq) * hd;
            for (int d = 0; d < hd; d++) g[d * ATTN_QK_ROWS + i] = r < n_rows ? q[d] * a->scale : 0.0f;
        }
    }
}

/* n (a constant after inlining) rows of a packed Q group times one K tile:
 * scores of the first nr rows to out (rows ATTN_SROW apart; nk keys are
 * valid). */
static inline __attribute__((always_inline)) void attn_qk_tile(const float *g, const float *tile, int64_t tstride,
                                                               int hd, int n, int nr, int nk, float *out) {
    attn_v16 acc[ATTN_QK_ROWS] = {{0}};
    for (int d = 0; d < hd; d++, g += ATTN_QK_ROWS) {
        attn_v16 kv;
        memcpy(&kv, tile + d * tstride, sizeof kv);
        for (int i = 0; i < n; i++) acc[i] += g[i] * kv;
    }
    (void)nk; /* all 16 lanes are stored: the row has room to the segment's end, lanes past nk are never read */
    for (int i = 0; i < nr; i++) memcpy(out + (int64_t)i * ATTN_SROW, &acc[i], sizeof acc[i]);
}

/* Scores of every row for keys [k0, s1) of the segment starting at s0 into
 * sc (row r at sc + r*ATTN_SROW, key j at index j - s0), 16 keys at a time,
 * from the packed Q (attn_pack_q). K is dimension-major in each block
 * ([dim][token]), so a tile of 16 keys inside one block is read in place:
 * row d of the tile is 16 consecutive floats. Lanes past s1 read later
 * slots of the same block; their scores are never used. */
/* The K tile of keys [j0, j0+16) (nk of them valid): in place when inside
 * one block (*stride = block_tokens), else gathered into kt (*stride 16). */
static inline const float *attn_k_tile(const attn_args *a, int j0, int nk, float *kt, int64_t *stride) {
    const int hd = a->head_dim, bt = a->block_tokens;
    *stride = 16;
    if (a->v_dim > 0) { /* shared-row MQA: token-major K rows, transposed into the tile */
        for (int c = 0; c < 16; c++) {
            if (c >= nk) {
                for (int d = 0; d < hd; d++) kt[d * 16 + c] = 0.0f;
                continue;
            }
            const float *k = attn_row(a, a->k_off, j0 + c);
            for (int d = 0; d < hd; d++) kt[d * 16 + c] = k[d];
        }
        return kt;
    }
    if (j0 % bt + 16 <= bt) {
        *stride = bt;
        return a->blocks[j0 / bt] + a->k_off + j0 % bt;
    }
    for (int c = 0; c < 16; c++) {
        int j = j0 + (c < nk ? c : 0);
        const float *k = a->blocks[j / bt] + a->k_off + j % bt;
        for (int d = 0; d < hd; d++) kt[d * 16 + c] = c < nk ? k[(int64_t)d * bt] : 0.0f;
    }
    *stride = 16;
    return kt;
}

/* n (8 or 4, a constant after inlining; nr <= n valid) rows of a packed Q
 * group times two K tiles: 16 (8) independent FMA chains when a chunk has
 * few rows (decode; 4 rows: llama3-style GQA 4:1). */
static inline __attribute__((always_inline)) void attn_qk_tile2(const float *g, const float *ta, int64_t sa,
                                                                const float *tb, int64_t sb, int hd, int n, int nr,
                                                                float *out) {
    attn_v16 acc[8] = {{0}}, acc2[8] = {{0}};
    for (int d = 0; d < hd; d++, g += ATTN_QK_ROWS) {
        attn_v16 ka, kb;
        memcpy(&ka, ta + d * sa, sizeof ka);
        memcpy(&kb, tb + d * sb, sizeof kb);
        for (int i = 0; i < n; i++) {
            acc[i] += g[i] * ka;
            acc2[i] += g[i] * kb;
        }
    }
    for (int i = 0; i < nr; i++) {
        memcpy(out + (int64_t)i * ATTN_SROW, &acc[i], sizeof acc[i]);
        memcpy(out + (int64_t)i * ATTN_SROW + 16, &acc2[i], sizeof acc2[i]);
    }
}

static void attn_scores(const attn_args *a, const float *qt, int s0, int k0, int s1, float *sc) {
    const int hd = a->head_dim;
    const int n_rows = a->n_tok * a->n_q;
    float kt[2][hd * 16]; /* gathered K tiles (tiles that cross a block) */
    for (int j0 = k0; j0 < s1; j0 += 32) {
        int nk = s1 - j0 < 16 ? s1 - j0 : 16, nk2 = s1 - j0 - 16 < 16 ? s1 - j0 - 16 : 16;
        int64_t sa, sb = 0;
        const float *ta = attn_k_tile(a, j0, nk, kt[0], &sa),
                    *tb = nk2 > 0 ? attn_k_tile(a, j0 + 16, nk2, kt[1], &sb) : NULL;
        /* ATTN_QK_ROWS rows (token-major, head-minor) at a time: that many
         * independent FMA chains share each K tile load. */
        for (int r0 = 0; r0 < n_rows; r0 += ATTN_QK_ROWS) {
            int nr = n_rows - r0 < ATTN_QK_ROWS ? n_rows - r0 : ATTN_QK_ROWS;
            const float *g = qt + (int64_t)r0 * hd;
            float *out = sc + (int64_t)r0 * ATTN_SROW + (j0 - s0);
            if (nr <= 8 && tb) {
                if (nr > 4) attn_qk_tile2(g, ta, sa, tb, sb, hd, 8, nr, out);
                else attn_qk_tile2(g, ta, sa, tb, sb, hd, 4, nr, out);
                continue;
            }
            if (nr > 8) attn_qk_tile(g, ta, sa, hd, ATTN_QK_ROWS, nr, nk, out);
            else attn_qk_tile(g, ta, sa, hd, 8, nr, nk, out);
            if (!tb) continue;
            if (nr > 8) attn_qk_tile(g, tb, sb, hd, ATTN_QK_ROWS, nr, nk2, out + 16);
            else attn_qk_tile(g, tb, sb, hd, 8, nr, nk2, out + 16);
        }
    }
}

/* acc[k][0..4) += sum over n keys of w[k][i] * V row i, for the 64 floats
 * of every V row at v (rows rs apart), four heads (ATTN_PV_HEADS == 4) or
 * two. Named accumulators and V vectors: GCC keeps them in registers
 * (arrays of them spill). */
static inline void attn_pv_run4(const float *const *w, int n, const float *v, int64_t rs, attn_v16 acc[][4]) {
    attn_v16 a0[4], a1[4];
    memcpy(a0, acc[0], sizeof a0);
    memcpy(a1, acc[1], sizeof a1);
#if ATTN_PV_HEADS == 4
    attn_v16 a2[4], a3[4];
    memcpy(a2, acc[2], sizeof a2);
    memcpy(a3, acc[3], sizeof a3);
#endif
    for (int i = 0; i < n; i++, v += rs) {
        attn_v16 v0, v1, v2, v3;
        memcpy(&v0, v, sizeof v0);
        memcpy(&v1, v + 16, sizeof v1);
        memcpy(&v2, v + 32, sizeof v2);
        memcpy(&v3, v + 48, sizeof v3);
        float w0 = w[0][i], w1 = w[1][i];
        a0[0] += w0 * v0, a0[1] += w0 * v1, a0[2] += w0 * v2, a0[3] += w0 * v3;
        a1[0] += w1 * v0, a1[1] += w1 * v1, a1[2] += w1 * v2, a1[3] += w1 * v3;
#if ATTN_PV_HEADS == 4
        float w2 = w[2][i], w3 = w[3][i];
        a2[0] += w2 * v0, a2[1] += w2 * v1, a2[2] += w2 * v2, a2[3] += w2 * v3;
        a3[0] += w3 * v0, a3[1] += w3 * v1, a3[2] += w3 * v2, a3[3] += w3 * v3;
#endif
    }
    memcpy(acc[0], a0, sizeof a0);
    memcpy(acc[1], a1, sizeof a1);
#if ATTN_PV_HEADS == 4
    memcpy(acc[2], a2, sizeof a2);
    memcpy(acc[3], a3, sizeof a3);
#endif
}

/* The same for nv (1 or 2) vectors of each V row (head_dim remainders). */
static inline void attn_pv_run_small(const float *const *w, int n, const float *v, int64_t rs, int nv,
                                     attn_v16 acc[][4]) {
    for (int i = 0; i < n; i++, v += rs)
        for (int q = 0; q < nv; q++) {
            attn_v16 vv;
            memcpy(&vv, v + 16 * q, sizeof vv);
            for (int k = 0; k < ATTN_PV_HEADS; k++) acc[k][q] += w[k][i] * vv;
        }
}

/* P.V of token t's heads over keys [lo, hi) of the segment at s0 (weights
 * in sc) into acc (row r at acc + r*hd): ATTN_PV_HEADS heads x up to 4
 * vectors of independent accumulators share each V row load (head_dim in
 * slices of 64, then 32, then 16 floats, then a scalar tail). Keys are
 * walked in runs inside one block (no division per key); every sum runs in
 * key order whatever the block size or head blocking. */
static void attn_pv(const attn_args *a, int t, int s0, int lo, int hi, const float *sc, float *acc) {
    const int hd = attn_vd(a), nq = a->n_q, bt = a->block_tokens;
    for (int h = 0; h < nq; h += ATTN_PV_HEADS) {
        int nh = nq - h < ATTN_PV_HEADS ? nq - h : ATTN_PV_HEADS, r = t * nq + h;
        const float *p[ATTN_PV_HEADS]; /* weight of key lo, per head (repeats past nh) */
        for (int k = 0; k < ATTN_PV_HEADS; k++) p[k] = sc + (int64_t)(r + (k < nh ? k : 0)) * ATTN_SROW + (lo - s0);
        float *o0 = acc + (int64_t)r * hd;
        int d0 = 0;
        while (hd - d0 >= 16) {
            int nv = hd - d0 >= 64 ? 4 : hd - d0 >= 32 ? 2 : 1;
            attn_v16 ac[ATTN_PV_HEADS][4];
            memset(ac, 0, sizeof ac);
            for (int j = lo; j < hi;) {
                int run = bt - j % bt < hi - j ? bt - j % bt : hi - j;
                const float *w[ATTN_PV_HEADS];
                for (int k = 0; k < ATTN_PV_HEADS; k++) w[k] = p[k] + (j - lo);
                const float *v = attn_row(a, a->v_off, j) + d0;
                if (nv == 4) attn_pv_run4(w, run, v, a->row_stride, ac);
                else attn_pv_run_small(w, run, v, a->row_stride, nv, ac);
                j += run;
            }
            for (int k = 0; k < nh; k++) memcpy(o0 + (int64_t)k * hd + d0, ac[k], sizeof(attn_v16) * (size_t)nv);
            d0 += 16 * nv;
        }
        for (int k = 0; d0 < hd && k < nh; k++) {
            float *o = o0 + (int64_t)k * hd;
            memset(o + d0, 0, sizeof(float) * (size_t)(hd - d0));
            for (int j = lo; j < hi; j++) attn_axpy(p[k][j - lo], attn_row(a, a->v_off, j) + d0, o + d0, hd - d0);
        }
    }
}

#ifdef __AVX512BF16__
#include "tensor/attention_bf16_impl.h"
#ifdef __AMX_BF16__
#include "tensor/attention_amx_impl.h"
#endif
#endif

/* Segment seg's partial state of every row into part: acc (rows x hd), then
 * m (rows), then l (rows). sc: scratch of rows x ATTN_SROW score floats,
 * then 2 x rows (the merge's, untouched), then the packed Q. */
static __attribute__((noinline)) void attn_segment(const attn_args *a, int seg, float *part, float *sc) {
    const int hd = attn_vd(a), nq = a->n_q, nt = a->n_tok, n_rows = nt * nq;
    float *acc = part, *m = part + (int64_t)n_rows * hd, *l = m + n_rows;
    const int s0 = seg * ATTN_SEG, j_end = a->pos[nt - 1] + 1;
    const int s1 = s0 + ATTN_SEG < j_end ? s0 + ATTN_SEG : j_end;
#ifdef __AVX512BF16__
    if (a->prec == ATTN_PREC_BF16 && a->v_dim == 0 && cpu_has_avx512_bf16()) {
#ifdef __AMX_BF16__
        if (cpu_has_amx_bf16()) {
            attn_segment_amx(a, seg, part, sc);
            return;
        }
#endif
        attn_segment_bf16(a, seg, part, sc);
        return;
    }
#endif
    int k0 = attn_lo(a, 0) / 16 * 16;
    if (k0 < s0) k0 = s0;
    float *qt = sc + (int64_t)n_rows * (ATTN_SROW + 2); /* past the merge's M and L */
    attn_pack_q(a, qt);
    attn_scores(a, qt, s0, k0, s1, sc);
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
            float *s = sc + (int64_t)r * ATTN_SROW + (lo - s0);
            int n = hi - lo;
            if (a->softcap > 0.0f)
                for (int j = 0; j < n; j++) s[j] = a->softcap * tanhf(s[j] / a->softcap);
            l[r] = attn_softmax_row(s, n, &m[r]);
        }
        if (lo < hi) attn_pv(a, t, s0, lo, hi, sc, acc);
    }
}

#include "tensor/attention_kv_impl.h" /* attn_segment_kv: the load step of non-f32 caches */

/* Running state: out rows zero, M = -inf, L = 0. */
static void attn_merge_begin(const attn_args *a, float *M, float *L) {
    int n_rows = a->n_tok * a->n_q;
    for (int r = 0; r < n_rows; r++) {
        M[r] = -INFINITY;
        L[r] = 0.0f;
        memset(attn_out_row(a, r), 0, sizeof(float) * (size_t)attn_vd(a));
    }
}

static __attribute__((noinline)) void attn_merge_step(const attn_args *a, const float *part, float *M, float *L) {
    const int hd = attn_vd(a), n_rows = a->n_tok * a->n_q;
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
    const int hd = attn_vd(a), n_rows = a->n_tok * a->n_q;
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
    attn_segment_kv(a, seg, part, a->scratch + (int64_t)n_rows * (a->head_dim + 2));
}

void ATTN_MERGE_FN(const attn_args *a, const float *parts, int64_t part_stride) {
    int n_rows = a->n_tok * a->n_q, first, end;
    float *M = a->scratch + (int64_t)n_rows * (a->head_dim + 2 + ATTN_SROW), *L = M + n_rows;
    attn_segments(a, &first, &end);
    attn_merge_begin(a, M, L);
    for (int g = first; g < end; g++) attn_merge_step(a, parts + (int64_t)(g - first) * part_stride, M, L);
    attn_merge_finish(a, M, L);
}

void ATTN_FN(const attn_args *a) {
    int n_rows = a->n_tok * a->n_q, first, end;
    float *part = a->scratch, *sc = part + (int64_t)n_rows * (a->head_dim + 2);
    float *M = sc + (int64_t)n_rows * ATTN_SROW, *L = M + n_rows;
    attn_segments(a, &first, &end);
    attn_merge_begin(a, M, L);
    for (int g = first; g < end; g++) {
        attn_segment_kv(a, g, part, sc);
        attn_merge_step(a, part, M, L);
    }
    attn_merge_finish(a, M, L);
}
