/* ep_round.c - one collective round of expert parallelism (ep.h):
 *  1. header all-to-all: rows for each rank (per micro-batch), and this
 *     rank's flags (busy: an engine MoE call is pending; stopping; a staged
 *     plan's experts are ready / failed to load); every rank sees every
 *     flag, so all agree whether rows move this round, when to stop and
 *     when to switch plans;
 *  2. dispatch: each pending row goes to a rank holding a replica of its
 *     expert (replica chosen by row index, so replicas share the load); the
 *     (layer, expert) ids and the hidden rows move by all-to-all-v;
 *  3. grouped compute: received rows are grouped by (layer, expert) (counting
 *     sort, arrival order kept) and each group runs as one expert matmul;
 *  4. combine: outputs go back by all-to-all-v into the sender's row order.
 * Dual-batch overlap (micro_batches 2): each rank's rows for each
 * destination are split in two halves, A and B, with their own
 * non-blocking all-to-all-v's: B's dispatch travels while A is computed, and
 * A's results travel back while B is computed (MPI_Testall between expert
 * groups drives the transfers). Every rank uses the same micro_batches.
 * The engine combines the rows itself in its fixed order, so which rank,
 * micro-batch or group computed a row never changes the result. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "base/timeutil.h"
#include "ep/ep_internal.h"

#define HDR_INTS 3 /* per rank pair: rows of micro-batch A, of B, flags */

/* Rank computing row i (expert e of MoE layer mi) under the current plan. */
static int owner(const ep_runtime *r, int32_t mi, int32_t e, int32_t i) {
    const eplb_plan *p = &r->plan;
    size_t at = (size_t)mi * (size_t)r->n_expert + (size_t)e;
    int32_t cnt = p->log_count[at];
    int32_t slot = p->log2phy[at * (size_t)p->max_replicas + (size_t)((r->rank + i) % cnt)];
    return eplb_rank_of_slot(&r->shape, slot);
}

/* Computes the n received rows from row `off` on, grouped by (layer,
 * expert); between groups, drives the pending transfers (may be NULL). */
static int compute(ep_runtime *r, int32_t off, int32_t n, MPI_Request *pending, int n_pending) {
    int32_t keys = r->n_layer * r->n_expert;
    int64_t E = r->n_embd;
    const int32_t *meta = r->meta_r + 2 * (int64_t)off;
    memset(r->g_count, 0, ((size_t)keys + 1) * sizeof(int32_t));
    for (int32_t j = 0; j < n; j++) {
        int32_t l = meta[2 * j], e = meta[2 * j + 1];
        if (l < 0 || l >= r->n_layer || r->moe_of_layer[l] < 0 || e < 0 || e >= r->n_expert) {
            snprintf(r->fail_msg, sizeof r->fail_msg, "a peer sent a row for layer %d expert %d", l, e);
            return -1;
        }
        r->g_count[l * r->n_expert + e + 1]++;
    }
    for (int32_t k = 0; k < keys; k++) r->g_count[k + 1] += r->g_count[k];
    for (int32_t j = 0; j < n; j++) {
        int32_t key = meta[2 * j] * r->n_expert + meta[2 * j + 1];
        r->g_order[r->g_count[key]++] = off + j; /* g_count[key] ends at the group's end */
    }
    int32_t start = 0;
    for (int32_t k = 0; k < keys; k++) {
        int32_t end = r->g_count[k];
        for (int32_t at = start; at < end; at += EP_COMPUTE_CHUNK) {
            int32_t rows = end - at < EP_COMPUTE_CHUNK ? end - at : EP_COMPUTE_CHUNK;
            for (int32_t i = 0; i < rows; i++)
                memcpy(r->g_x + i * E, r->x_r + (int64_t)r->g_order[at + i] * E, (size_t)E * sizeof(float));
            cf_err err = {0};
            if (fwd_ctx_expert_ffn(r->fc, k / r->n_expert, k % r->n_expert, r->g_x, rows, r->g_y, &err)) {
                snprintf(r->fail_msg, sizeof r->fail_msg, "%s", err.msg);
                return -1;
            }
            for (int32_t i = 0; i < rows; i++)
                memcpy(r->y_r + (int64_t)r->g_order[at + i] * E, r->g_y + i * E, (size_t)E * sizeof(float));
            int done;
            if (n_pending) MPI_Testall(n_pending, pending, &done, MPI_STATUSES_IGNORE);
        }
        start = end;
    }
    return 0;
}

/* Orders this rank's pending rows by micro-batch, then destination (stable):
 * perm (packed row -> request row), mb[m].rows_s. */
static void plan_dispatch(ep_runtime *r, int32_t n, int32_t layer, const int32_t *expert) {
    int32_t mi = r->moe_of_layer[layer];
    int N = r->n_ranks, M = r->o.micro_batches == 2 ? 2 : 1;
    int *total = r->total; /* scratch */
    for (int d = 0; d < N; d++) total[d] = 0;
    for (int32_t i = 0; i < n; i++) total[r->dest[i] = owner(r, mi, expert[i], i)]++;
    for (int d = 0; d < N; d++) { /* A takes the first (larger) half of each destination's rows */
        r->mb[0].rows_s[d] = M == 2 ? (total[d] + 1) / 2 : total[d];
        r->mb[1].rows_s[d] = total[d] - r->mb[0].rows_s[d];
    }
    for (int m = 0, sum = 0; m < 2; m++)
        for (int d = 0; d < N; d++) r->mb[m].seen[d] = 0, r->mb[m].start[d] = sum, sum += r->mb[m].rows_s[d];
    for (int32_t i = 0; i < n; i++) {
        int d = r->dest[i], m = r->mb[0].seen[d] < r->mb[0].rows_s[d] ? 0 : 1;
        r->perm[r->mb[m].start[d] + r->mb[m].seen[d]++] = i;
    }
}

/* Counts and displacements of `unit` items per row. */
static void counts(const int *rows, int n_ranks, int unit, int *cnt, int *dsp) {
    for (int d = 0, sum = 0; d < n_ranks; d++) cnt[d] = rows[d] * unit, dsp[d] = sum, sum += cnt[d];
}

static int32_t sum_of(const int *v, int n) {
    int32_t s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return s;
}

static void add_stats(ep_runtime *r, int32_t n_sent, int32_t n_recv, double t_comm, double t_compute) {
    uint64_t row_bytes = (uint64_t)r->n_embd * sizeof(float), cross_s = 0, cross_r = 0;
    for (int m = 0; m < 2; m++)
        for (int d = 0; d < r->n_ranks; d++)
            if (d != r->rank) cross_s += (uint64_t)r->mb[m].rows_s[d], cross_r += (uint64_t)r->mb[m].rows_r[d];
    pthread_mutex_lock(&r->mu);
    r->st.busy_rounds++;
    r->st.rows_sent += (uint64_t)n_sent;
    r->st.rows_received += (uint64_t)n_recv;
    r->st.bytes_sent += (cross_s + cross_r) * row_bytes; /* rows out, results back */
    r->st.bytes_received += (cross_r + cross_s) * row_bytes;
    r->st.t_comm += t_comm;
    r->st.t_compute += t_compute;
    pthread_mutex_unlock(&r->mu);
}

/* Posts micro-batch m's dispatch (ids and rows) into req[0..1]. */
static void post_dispatch(ep_runtime *r, ep_mb *b, MPI_Request *req) {
    int N = r->n_ranks;
    int64_t E = r->n_embd;
    counts(b->rows_s, N, 2, b->cm_s, b->dm_s);
    counts(b->rows_r, N, 2, b->cm_r, b->dm_r);
    counts(b->rows_s, N, (int)E, b->cx_s, b->dx_s);
    counts(b->rows_r, N, (int)E, b->cx_r, b->dx_r);
    MPI_Ialltoallv(r->meta_s + 2 * (int64_t)b->s_off, b->cm_s, b->dm_s, MPI_INT, r->meta_r + 2 * (int64_t)b->r_off,
                   b->cm_r, b->dm_r, MPI_INT, MPI_COMM_WORLD, &req[0]);
    MPI_Ialltoallv(r->x_s + E * b->s_off, b->cx_s, b->dx_s, MPI_FLOAT, r->x_r + E * b->r_off, b->cx_r, b->dx_r,
                   MPI_FLOAT, MPI_COMM_WORLD, &req[1]);
}

/* Posts micro-batch m's combine (results back to their senders) into *req. */
static void post_combine(ep_runtime *r, ep_mb *b, MPI_Request *req) {
    int64_t E = r->n_embd;
    MPI_Ialltoallv(r->y_r + E * b->r_off, b->cx_r, b->dx_r, MPI_FLOAT, r->y_s + E * b->s_off, b->cx_s, b->dx_s,
                   MPI_FLOAT, MPI_COMM_WORLD, req);
}

/* Steps 2-4 once the headers are in: one micro-batch, or two overlapped. */
static int exchange(ep_runtime *r, double *t_comm, double *t_compute) {
    ep_mb *a = &r->mb[0], *b = &r->mb[1];
    bool two = r->o.micro_batches == 2;
    MPI_Request da[2], db[2], ca, cb;
    double t0 = time_now(), tc = 0.0;
    post_dispatch(r, a, da);
    if (two) post_dispatch(r, b, db);
    MPI_Waitall(2, da, MPI_STATUSES_IGNORE);
    double t1 = time_now();
    if (compute(r, a->r_off, a->n_r, two ? db : NULL, two ? 2 : 0)) return -1;
    tc += time_now() - t1;
    post_combine(r, a, &ca);
    if (two) {
        MPI_Waitall(2, db, MPI_STATUSES_IGNORE);
        double t2 = time_now();
        if (compute(r, b->r_off, b->n_r, &ca, 1)) return -1;
        tc += time_now() - t2;
        post_combine(r, b, &cb);
        MPI_Wait(&cb, MPI_STATUS_IGNORE);
    }
    MPI_Wait(&ca, MPI_STATUS_IGNORE);
    *t_compute = tc;
    *t_comm = time_now() - t0 - tc;
    return 0;
}

int ep_round(ep_runtime *r, bool *any_busy, bool *all_stopping) {
    pthread_mutex_lock(&r->mu);
    bool busy = r->have_req && !r->req_done, stopping = r->stop_req;
    int32_t n = busy ? r->req_n : 0, layer = r->req_layer;
    const int32_t *expert = r->req_expert;
    const float *x = r->req_x;
    float *y = r->req_y;
    r->st.rounds++;
    pthread_mutex_unlock(&r->mu);
    int N = r->n_ranks;
    int64_t E = r->n_embd;
    if (busy) {
        plan_dispatch(r, n, layer, expert);
        ep_balance_count(r, layer, n, expert);
    } else {
        for (int d = 0; d < N; d++) r->mb[0].rows_s[d] = r->mb[1].rows_s[d] = 0;
    }
    int flags = (busy ? EP_FLAG_BUSY : 0) | (stopping ? EP_FLAG_STOPPING : 0) | ep_balance_flags(r);
    for (int d = 0; d < N; d++)
        r->hdr_s[HDR_INTS * d] = r->mb[0].rows_s[d], r->hdr_s[HDR_INTS * d + 1] = r->mb[1].rows_s[d],
                            r->hdr_s[HDR_INTS * d + 2] = flags;
    double t0 = time_now();
    MPI_Alltoall(r->hdr_s, HDR_INTS, MPI_INT, r->hdr_r, HDR_INTS, MPI_INT, MPI_COMM_WORLD);
    double t_hdr = time_now() - t0;
    *any_busy = false, *all_stopping = true;
    r->all_ready = true, r->any_failed = false;
    for (int s = 0; s < N; s++) {
        int f = r->hdr_r[HDR_INTS * s + 2];
        *any_busy = *any_busy || (f & EP_FLAG_BUSY);
        *all_stopping = *all_stopping && (f & EP_FLAG_STOPPING);
        r->all_ready = r->all_ready && (f & EP_FLAG_READY);
        r->any_failed = r->any_failed || (f & EP_FLAG_LOAD_FAILED);
        r->mb[0].rows_r[s] = r->hdr_r[HDR_INTS * s], r->mb[1].rows_r[s] = r->hdr_r[HDR_INTS * s + 1];
    }
    if (!*any_busy) return 0;
    r->mb[0].n_s = sum_of(r->mb[0].rows_s, N), r->mb[1].n_s = sum_of(r->mb[1].rows_s, N);
    r->mb[0].n_r = sum_of(r->mb[0].rows_r, N), r->mb[1].n_r = sum_of(r->mb[1].rows_r, N);
    r->mb[0].s_off = r->mb[0].r_off = 0;
    r->mb[1].s_off = r->mb[0].n_s, r->mb[1].r_off = r->mb[0].n_r;
    for (int32_t j = 0; j < n; j++) {
        int32_t i = r->perm[j];
        r->meta_s[2 * j] = layer, r->meta_s[2 * j + 1] = expert[i];
        memcpy(r->x_s + (int64_t)j * E, x + (int64_t)i * E, (size_t)E * sizeof(float));
    }
    double t_comm = 0.0, t_compute = 0.0;
    if (exchange(r, &t_comm, &t_compute)) return -1;
    for (int32_t j = 0; j < n; j++)
        memcpy(y + (int64_t)r->perm[j] * E, r->y_s + (int64_t)j * E, (size_t)E * sizeof(float));
    add_stats(r, n, r->mb[0].n_r + r->mb[1].n_r, t_hdr + t_comm, t_compute);
    if (busy) {
        pthread_mutex_lock(&r->mu);
        r->req_done = true;
        r->have_req = false;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
    return 0;
}
