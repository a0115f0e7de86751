/* ep_round.c - one collective round of expert parallelism (ep.h):
 *  1. header all-to-all: rows for each rank, and this rank's flags (busy:
 *     an engine MoE call is pending; stopping; a staged plan's experts are
 *     ready / failed to load); every rank sees every flag, so all agree
 *     whether rows move this round, when to stop and when to switch plans;
 *  2. dispatch: each pending row goes to a rank holding a replica of its
 *     expert (replica chosen by row index, so replicas share the load); the
 *     (layer, expert) ids and the hidden rows move by all-to-all-v;
 *  3. grouped compute: received rows are grouped by (layer, expert) (counting
 *     sort, arrival order kept) and each group runs as one expert matmul;
 *  4. combine: outputs go back by all-to-all-v into the sender's row order.
 * The engine combines the rows itself in its fixed order, so which rank or
 * group computed a row never changes the result. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "base/timeutil.h"
#include "ep/ep_internal.h"

/* Rank computing row i (expert e of MoE layer mi) under the current plan. */
static int owner(const ep_runtime *r, int32_t mi, int32_t e, int32_t i) {
    const eplb_plan *p = &r->plan;
    size_t at = (size_t)mi * (size_t)r->n_expert + (size_t)e;
    int32_t cnt = p->log_count[at];
    int32_t slot = p->log2phy[at * (size_t)p->max_replicas + (size_t)((r->rank + i) % cnt)];
    return eplb_rank_of_slot(&r->shape, slot);
}

/* Groups the n received rows by (layer, expert) and computes each group. */
static int compute(ep_runtime *r, int32_t n) {
    int32_t keys = r->n_layer * r->n_expert;
    int64_t E = r->n_embd;
    memset(r->g_count, 0, ((size_t)keys + 1) * sizeof(int32_t));
    for (int32_t j = 0; j < n; j++) {
        int32_t l = r->meta_r[2 * j], e = r->meta_r[2 * j + 1];
        if (l < 0 || l >= r->n_layer || r->moe_of_layer[l] < 0 || e < 0 || e >= r->n_expert) {
            snprintf(r->fail_msg, sizeof r->fail_msg, "a peer sent a row for layer %d expert %d", l, e);
            return -1;
        }
        r->g_count[l * r->n_expert + e + 1]++;
    }
    for (int32_t k = 0; k < keys; k++) r->g_count[k + 1] += r->g_count[k];
    for (int32_t j = 0; j < n; j++) {
        int32_t key = r->meta_r[2 * j] * r->n_expert + r->meta_r[2 * j + 1];
        r->g_order[r->g_count[key]++] = j; /* g_count[key] ends at the group's end */
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
        }
        start = end;
    }
    return 0;
}

/* Orders this rank's pending rows by destination (stable): perm, rows_s. */
static void plan_dispatch(ep_runtime *r, int32_t n, int32_t layer, const int32_t *expert) {
    int32_t mi = r->moe_of_layer[layer];
    for (int d = 0; d < r->n_ranks; d++) r->rows_s[d] = 0;
    for (int32_t i = 0; i < n; i++) r->rows_s[r->dest[i] = owner(r, mi, expert[i], i)]++;
    int *at = r->dsp_s; /* scratch here; counts() rewrites it */
    for (int d = 0, sum = 0; d < r->n_ranks; d++) at[d] = sum, sum += r->rows_s[d];
    for (int32_t i = 0; i < n; i++) r->perm[at[r->dest[i]]++] = i;
}

/* Counts and displacements of `unit` items per row. */
static void counts(const int *rows, int n_ranks, int unit, int *cnt, int *dsp) {
    for (int d = 0, sum = 0; d < n_ranks; d++) cnt[d] = rows[d] * unit, dsp[d] = sum, sum += cnt[d];
}

static void add_stats(ep_runtime *r, int32_t n_sent, int32_t n_recv, double t_comm, double t_compute) {
    uint64_t row_bytes = (uint64_t)r->n_embd * sizeof(float), cross_s = 0, cross_r = 0;
    for (int d = 0; d < r->n_ranks; d++)
        if (d != r->rank) cross_s += (uint64_t)r->rows_s[d], cross_r += (uint64_t)r->rows_r[d];
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
        for (int d = 0; d < N; d++) r->rows_s[d] = 0;
    }
    int flags = (busy ? EP_FLAG_BUSY : 0) | (stopping ? EP_FLAG_STOPPING : 0) | ep_balance_flags(r);
    for (int d = 0; d < N; d++) r->hdr_s[2 * d] = r->rows_s[d], r->hdr_s[2 * d + 1] = flags;
    double t0 = time_now();
    MPI_Alltoall(r->hdr_s, 2, MPI_INT, r->hdr_r, 2, MPI_INT, MPI_COMM_WORLD);
    *any_busy = false, *all_stopping = true;
    r->all_ready = true, r->any_failed = false;
    int32_t n_recv = 0;
    for (int s = 0; s < N; s++) {
        *any_busy = *any_busy || (r->hdr_r[2 * s + 1] & EP_FLAG_BUSY);
        *all_stopping = *all_stopping && (r->hdr_r[2 * s + 1] & EP_FLAG_STOPPING);
        r->all_ready = r->all_ready && (r->hdr_r[2 * s + 1] & EP_FLAG_READY);
        r->any_failed = r->any_failed || (r->hdr_r[2 * s + 1] & EP_FLAG_LOAD_FAILED);
        r->rows_r[s] = r->hdr_r[2 * s];
        n_recv += r->rows_r[s];
    }
    if (!*any_busy) return 0;
    for (int32_t j = 0; j < n; j++) {
        int32_t i = r->perm[j];
        r->meta_s[2 * j] = layer, r->meta_s[2 * j + 1] = expert[i];
        memcpy(r->x_s + (int64_t)j * E, x + (int64_t)i * E, (size_t)E * sizeof(float));
    }
    counts(r->rows_s, N, 2, r->cnt_s, r->dsp_s);
    counts(r->rows_r, N, 2, r->cnt_r, r->dsp_r);
    MPI_Alltoallv(r->meta_s, r->cnt_s, r->dsp_s, MPI_INT, r->meta_r, r->cnt_r, r->dsp_r, MPI_INT, MPI_COMM_WORLD);
    counts(r->rows_s, N, (int)E, r->cnt_s, r->dsp_s);
    counts(r->rows_r, N, (int)E, r->cnt_r, r->dsp_r);
    MPI_Alltoallv(r->x_s, r->cnt_s, r->dsp_s, MPI_FLOAT, r->x_r, r->cnt_r, r->dsp_r, MPI_FLOAT, MPI_COMM_WORLD);
    double t1 = time_now();
    if (compute(r, n_recv)) return -1;
    double t2 = time_now();
    MPI_Alltoallv(r->y_r, r->cnt_r, r->dsp_r, MPI_FLOAT, r->y_s, r->cnt_s, r->dsp_s, MPI_FLOAT, MPI_COMM_WORLD);
    for (int32_t j = 0; j < n; j++)
        memcpy(y + (int64_t)r->perm[j] * E, r->y_s + (int64_t)j * E, (size_t)E * sizeof(float));
    double t3 = time_now();
    add_stats(r, n, n_recv, (t1 - t0) + (t3 - t2), t2 - t1);
    if (busy) {
        pthread_mutex_lock(&r->mu);
        r->req_done = true;
        r->have_req = false;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
    return 0;
}
