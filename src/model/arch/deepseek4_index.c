/* deepseek4_index.c - the lightning indexer's row selection for the ratio-4
 * (CSA) layers of a ragged batch, as GEMMs (deepseek4_fwd.h, ds4_index_select).
 *
 * For query t (indexer queries iq[t][h] of I dims, head weights iw[t][h])
 * and a visible compressed row j < (pos_t + 1) / 4 with indexer key k_j:
 *     score(t, j) = sum over h = 0.. of iw[t][h] * relu(iq[t][h] . k_j)
 * and the selection is the top-k of the scores, ties to the lower row
 * (ds4_topk). The dot products of a tile of queries (all their heads: up to
 * DS4_IDX_ACT_ROWS activation rows) against a tile of up to DS4_IDX_ROW_TILE
 * keys run as one kern_matmul: the gathered keys are packed as an f32 weight
 * into preallocated memory, so nothing is allocated per step.
 *
 * Batch invariance: kern_matmul's f32 path computes each output element as
 * the same sequential sum over its k dims whatever the tile shape or the
 * number of activation rows, and the head sum runs in ascending h for every
 * (t, j), so a query's scores (hence its selection) do not depend on which
 * other queries share its batch or tile. Rows past a query's visibility are
 * computed with its tile but never read. */
#include <stdlib.h>
#include <string.h>

#include "model/arch/deepseek4_fwd.h"
#include "model/arch/deepseek4_math.h"

int ds4_index_init(ds4_fwd *c) {
    const model_hparams *hp = &c->m->hp;
    int64_t I = hp->ds4_index_dim, IH = hp->ds4_index_heads > 0 ? hp->ds4_index_heads : 1;
    c->idx_qt = (int32_t)(DS4_IDX_ACT_ROWS / IH > 0 ? DS4_IDX_ACT_ROWS / IH : 1);
    c->idx_rows = (int32_t)(c->max_ctx / 4 + 1);
    int32_t topk = hp->ds4_index_topk < c->idx_rows ? hp->ds4_index_topk : c->idx_rows;
    c->idx_k = topk > 0 ? topk : 1;
    if (I <= 0) return 0;
    size_t packed = kern_weight_packed_size(DT_F32, DS4_IDX_ROW_TILE, I);
    c->idx_kc = kern_ctx_create(c->pool, (int64_t)c->idx_qt * IH, I);
    c->idx_keys = malloc((size_t)DS4_IDX_ROW_TILE * (size_t)I * sizeof(float));
    c->idx_packed = packed ? aligned_alloc(64, (packed + 63) / 64 * 64) : NULL;
    c->idx_dots = malloc((size_t)c->idx_qt * (size_t)IH * DS4_IDX_ROW_TILE * sizeof(float));
    c->idx_score = malloc((size_t)c->idx_qt * (size_t)c->idx_rows * sizeof(float));
    c->idx_sel = malloc((size_t)c->max_tokens * (size_t)c->idx_k * sizeof(int32_t));
    c->idx_nsel = malloc((size_t)c->max_tokens * sizeof(int32_t));
    if (!c->idx_kc || !c->idx_keys || (packed && !c->idx_packed) || !c->idx_dots || !c->idx_score || !c->idx_sel ||
        !c->idx_nsel)
        return -1;
    return 0;
}

void ds4_index_free(ds4_fwd *c) {
    kern_ctx_destroy(c->idx_kc);
    free(c->idx_keys);
    free(c->idx_packed);
    free(c->idx_dots);
    free(c->idx_score);
    free(c->idx_sel);
    free(c->idx_nsel);
}

/* The tile being scored (pool tasks read it). */
typedef struct idx_tile {
    ds4_fwd *c;
    const fwd_batch *b;
    int32_t t0, nq; /* queries t0 .. t0 + nq - 1 */
    int32_t j0, nr; /* rows j0 .. j0 + nr - 1 (idx_dots holds their dots) */
} idx_tile;

static int32_t visible_rows(const fwd_batch *b, int32_t t) { return (b->pos[t] + 1) / 4; }

/* idx_score[q][j0 + j] = head-weighted ReLU sum of the tile's dots. */
static void reduce_task(void *ctx, int ith, int nth) {
    const idx_tile *tl = ctx;
    ds4_fwd *c = tl->c;
    int64_t IH = c->m->hp.ds4_index_heads;
    long long q0, q1;
    pool_split(tl->nq, ith, nth, &q0, &q1);
    for (int32_t q = (int32_t)q0; q < (int32_t)q1; q++) {
        int32_t t = tl->t0 + q, n = visible_rows(tl->b, t) - tl->j0;
        if (n > tl->nr) n = tl->nr;
        if (n <= 0) continue;
        float *s = c->idx_score + (int64_t)q * c->idx_rows + tl->j0;
        const float *w = c->iw + (int64_t)t * IH;
        memset(s, 0, (size_t)n * sizeof *s);
        for (int64_t h = 0; h < IH; h++) {
            const float *d = c->idx_dots + ((int64_t)q * IH + h) * tl->nr;
            for (int32_t j = 0; j < n; j++) s[j] += w[h] * (d[j] > 0 ? d[j] : 0);
        }
    }
}

static void topk_task(void *ctx, int ith, int nth) {
    const idx_tile *tl = ctx;
    ds4_fwd *c = tl->c;
    long long q0, q1;
    pool_split(tl->nq, ith, nth, &q0, &q1);
    for (int32_t q = (int32_t)q0; q < (int32_t)q1; q++) {
        int32_t t = tl->t0 + q;
        c->idx_nsel[t] = ds4_topk(c->idx_score + (int64_t)q * c->idx_rows, visible_rows(tl->b, t),
                                  c->m->hp.ds4_index_topk, c->idx_sel + (int64_t)t * c->idx_k);
    }
}

static void run_tasks(ds4_fwd *c, pool_task_fn fn, idx_tile *tl) {
    if (c->pool) pool_run(c->pool, fn, tl);
    else fn(tl, 0, 1);
}

/* Scores and selects for queries t0 .. t0 + nq - 1 (one sequence). */
static int select_tile(ds4_fwd *c, const fwd_batch *b, int il, int32_t seq, int32_t t0, int32_t nq, cf_err *err) {
    const model_hparams *hp = &c->m->hp;
    int64_t I = hp->ds4_index_dim, IH = hp->ds4_index_heads;
    int32_t vmax = 0;
    for (int32_t q = 0; q < nq; q++)
        if (visible_rows(b, t0 + q) > vmax) vmax = visible_rows(b, t0 + q);
    idx_tile tl = {.c = c, .b = b, .t0 = t0, .nq = nq};
    for (int32_t j0 = 0; j0 < vmax; j0 += DS4_IDX_ROW_TILE) {
        int32_t nr = vmax - j0 < DS4_IDX_ROW_TILE ? vmax - j0 : DS4_IDX_ROW_TILE;
        for (int32_t j = 0; j < nr; j++)
            memcpy(c->idx_keys + (int64_t)j * I, ds4_group_rows(c, b, seq, j0 + j, il) + hp->head_dim,
                   (size_t)I * sizeof(float));
        kern_weight keys;
        if (kern_weight_prepare_into(&keys, DT_F32, c->idx_keys, nr, I, c->idx_packed, false, err)) return -1;
        kern_matmul(c->idx_kc, &keys, c->iq + (int64_t)t0 * IH * I, (int64_t)nq * IH, c->idx_dots);
        tl.j0 = j0, tl.nr = nr;
        run_tasks(c, reduce_task, &tl);
    }
    run_tasks(c, topk_task, &tl);
    return 0;
}

int ds4_index_select(ds4_fwd *c, const fwd_batch *b, int il, cf_err *err) {
    for (int32_t t = 0; t < b->n_tokens;) {
        int32_t seq = b->seq[t], nq = 1;
        while (nq < c->idx_qt && t + nq < b->n_tokens && b->seq[t + nq] == seq) nq++;
        if (select_tile(c, b, il, seq, t, nq, err)) return -1;
        t += nq;
    }
    return 0;
}
