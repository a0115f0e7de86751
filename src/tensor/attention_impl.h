/* attention_impl.h - the body of kern_attention (see attention.h), included by
 * attention_scalar.c / attention_avx2.c / attention_avx512.c, each of which
 * defines ATTN_FN and is compiled with its ISA's flags. 16-wide GCC vector
 * types map to the ISA at hand. Not a public header. */
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

static inline const float *attn_row(const attn_args *a, int64_t off, int j) {
    return a->blocks[j / a->block_tokens] + off + (int64_t)(j % a->block_tokens) * a->row_stride;
}

static inline int attn_lo(const attn_args *a, int t) {
    int lo = a->window > 0 ? a->pos[t] - a->window + 1 : 0;
    if (lo < a->floor) lo = a->floor;
    return lo > 0 ? lo : 0;
}

void ATTN_FN(const attn_args *a) {
    const int hd = a->head_dim, nq = a->n_q, nt = a->n_tok;
    const int j_end = a->pos[nt - 1] + 1; /* keys any token of the chunk may see */
    const int j_start = attn_lo(a, 0);
    const int64_t srow = j_end; /* score row length */
    const int bt = a->block_tokens;
    float kt[hd][16]; /* gathered K tile (tiles that cross a block) */

    /* pass 1: scores, 16 keys at a time. K is stored dimension-major in each
     * block ([dim][token]), so a tile of 16 keys inside one block is read in
     * place: row d of the tile is 16 consecutive floats. Lanes past the last
     * visible key read later slots of the same block; their scores are never
     * used. */
    for (int j0 = j_start / 16 * 16; j0 < j_end; j0 += 16) {
        int nk = j_end - j0 < 16 ? j_end - j0 : 16;
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
        /* 8 query rows (token-major, head-minor) at a time: 8 independent
         * FMA chains share each K tile load. Rows of tokens for which the
         * tile is in the future compute scores that pass 2 never reads. */
        const int n_rows = nt * nq;
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
                float *sc = a->scores + (int64_t)(r0 + i) * srow + j0;
                for (int c = 0; c < nk; c++) sc[c] = acc[i][c] * a->scale;
            }
        }
    }
    /* pass 2: per row softmax over its visible keys (normalised in place),
     * then P.V for two heads at a time: 2 rows x 4 vectors = 8 independent
     * accumulators sharing each V row load. */
    for (int t = 0; t < nt; t++) {
        int lo = attn_lo(a, t), hi = a->pos[t] + 1;
        for (int h = 0; h < nq; h++) {
            float *sc = a->scores + ((int64_t)t * nq + h) * srow;
            float mx = -INFINITY;
            for (int j = lo; j < hi; j++) {
                if (a->softcap > 0.0f) sc[j] = a->softcap * tanhf(sc[j] / a->softcap);
                if (sc[j] > mx) mx = sc[j];
            }
            float sum = vm_exp_sub_sum(sc + lo, hi - lo, mx);
            float inv = 1.0f / sum;
            for (int j = lo; j < hi; j++) sc[j] *= inv;
        }
        for (int h = 0; h < nq; h += 2) {
            int nh = nq - h < 2 ? 1 : 2;
            const float *p0 = a->scores + ((int64_t)t * nq + h) * srow;
            const float *p1 = p0 + (nh == 2 ? srow : 0);
            float *o0 = a->out + t * a->out_stride + (int64_t)h * hd;
            int d0 = 0;
            for (; d0 + 64 <= hd; d0 += 64) {
                attn_v16 acc0[4] = {{0}}, acc1[4] = {{0}};
                for (int j = lo; j < hi; j++) {
                    const float *v = attn_row(a, a->v_off, j) + d0;
                    float w0 = p0[j], w1 = p1[j];
                    for (int r = 0; r < 4; r++) {
                        attn_v16 vv;
                        memcpy(&vv, v + 16 * r, sizeof vv);
                        acc0[r] += w0 * vv;
                        acc1[r] += w1 * vv;
                    }
                }
                for (int r = 0; r < 4; r++) {
                    memcpy(o0 + d0 + 16 * r, &acc0[r], sizeof acc0[r]);
                    if (nh == 2) memcpy(o0 + hd + d0 + 16 * r, &acc1[r], sizeof acc1[r]);
                }
            }
            for (int k = 0; d0 < hd && k < nh; k++) {
                const float *pk = k ? p1 : p0;
                float *o = o0 + (int64_t)k * hd;
                memset(o + d0, 0, sizeof(float) * (size_t)(hd - d0));
                for (int j = lo; j < hi; j++) attn_axpy(pk[j], attn_row(a, a->v_off, j) + d0, o + d0, hd - d0);
            }
        }
    }
}
