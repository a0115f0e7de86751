/* ep_runtime.c - the expert-parallel runtime's life cycle (ep.h): start
 * (compute context, plan, buffers, the round thread), the executor the
 * engine calls (hands its rows to the round thread and waits), stop, stats.
 *
 * Invariants: at most one request is handed off at a time (the engine has
 * one forward thread); the round thread finishes every request it took
 * (req_done) before it exits; the engine is destroyed before ep_runtime_stop. */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "ep/ep_internal.h"

#define EP_BACKOFF_MAX_US 1000

static int ep_run(void *self, int32_t layer, int32_t n_pairs, const int32_t *expert, const float *x, int64_t n_embd,
                  float *y, char *err, size_t err_len) {
    ep_runtime *r = self;
    if (n_pairs == 0) return 0;
    if (n_pairs > r->max_rows || n_embd != r->n_embd || layer < 0 || layer >= r->n_layer) {
        snprintf(err, err_len, "expert parallelism: %d rows of layer %d (at most %d rows of width %lld)", n_pairs,
                 layer, r->max_rows, (long long)r->n_embd);
        return -1;
    }
    pthread_mutex_lock(&r->mu);
    if (!r->failed) {
        r->req_layer = layer, r->req_n = n_pairs, r->req_expert = expert, r->req_x = x, r->req_y = y;
        r->req_done = false;
        r->have_req = true;
        pthread_cond_broadcast(&r->cv);
        while (!r->req_done && !r->failed) pthread_cond_wait(&r->cv, &r->mu);
    }
    bool failed = r->failed;
    if (failed) snprintf(err, err_len, "expert parallelism: %s", r->fail_msg);
    pthread_mutex_unlock(&r->mu);
    return failed ? -1 : 0;
}

static void ep_fail(ep_runtime *r, const char *msg) {
    pthread_mutex_lock(&r->mu);
    r->failed = true;
    snprintf(r->fail_msg, sizeof r->fail_msg, "%s", msg);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Sleeps up to us microseconds, or until a request or a stop arrives. */
static void ep_backoff(ep_runtime *r, int us) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)us * 1000;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    double t0 = time_now();
    pthread_mutex_lock(&r->mu);
    while (!r->have_req && !r->stop_req)
        if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT) break;
    r->st.t_wait += time_now() - t0;
    pthread_mutex_unlock(&r->mu);
}

static void *ep_main(void *arg) {
    ep_runtime *r = arg;
    int backoff = 0;
    for (;;) {
        bool busy = false, all_stop = false;
        if (ep_round(r, &busy, &all_stop)) {
            LOG_ERROR("expert parallelism: rank %d: %s; aborting the job", r->rank, r->fail_msg);
            ep_mpi_abort(3);
        }
        ep_balance_after_round(r); /* a staged plan switches at this boundary */
        if (busy) {
            backoff = 0;
            cf_err err = {0};
            if (ep_balance_maybe(r, &err)) LOG_WARN("expert parallelism: rebalance skipped: %s", err.msg);
            continue;
        }
        if (all_stop) break;
        backoff = backoff ? (backoff * 2 > EP_BACKOFF_MAX_US ? EP_BACKOFF_MAX_US : backoff * 2) : 20;
        ep_backoff(r, backoff);
    }
    ep_fail(r, "the runtime stopped");
    return NULL;
}

static int ep_alloc(ep_runtime *r, cf_err *err) {
    size_t n = (size_t)r->n_ranks, rows = (size_t)r->max_rows, E = (size_t)r->n_embd;
    size_t cells = (size_t)r->n_moe * (size_t)r->n_expert, keys = (size_t)r->n_layer * (size_t)r->n_expert + 1;
    if ((double)n * (double)rows * (double)E > (double)INT_MAX)
        return cf_fail(err, "%zu ranks x %zu rows x %zu floats overflow an MPI count: lower --max-batch", n, rows, E);
    r->dest = malloc(rows * sizeof(int32_t));
    r->perm = malloc(rows * sizeof(int32_t));
    bool ok = r->dest && r->perm;
    ok = ok && (r->hdr_s = calloc(3 * n, sizeof(int))) && (r->hdr_r = calloc(3 * n, sizeof(int))) &&
         (r->total = calloc(n, sizeof(int)));
    for (int m = 0; m < 2; m++) {
        ep_mb *b = &r->mb[m];
        int **ints[] = {&b->rows_s, &b->rows_r, &b->seen, &b->start, &b->cm_s, &b->dm_s,
                        &b->cm_r,   &b->dm_r,   &b->cx_s, &b->dx_s,  &b->cx_r, &b->dx_r};
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) ok = ok && (*ints[i] = calloc(n, sizeof(int)));
    }
    r->meta_s = malloc(2 * rows * sizeof(int32_t));
    r->meta_r = malloc(2 * n * rows * sizeof(int32_t));
    r->x_s = malloc(rows * E * sizeof(float));
    r->y_s = malloc(rows * E * sizeof(float));
    r->x_r = malloc(n * rows * E * sizeof(float));
    r->y_r = malloc(n * rows * E * sizeof(float));
    r->g_count = calloc(keys + 1, sizeof(int32_t));
    r->g_order = malloc(n * rows * sizeof(int32_t));
    r->g_x = malloc((size_t)EP_COMPUTE_CHUNK * E * sizeof(float));
    r->g_y = malloc((size_t)EP_COMPUTE_CHUNK * E * sizeof(float));
    r->win = calloc((size_t)EP_LOAD_WINDOW * cells, sizeof(uint64_t));
    r->sum_local = calloc(cells, sizeof(uint64_t));
    r->sum_all = calloc(cells, sizeof(uint64_t));
    r->load_f = calloc(cells, sizeof(float));
    ok = ok && r->meta_s && r->meta_r && r->x_s && r->y_s && r->x_r && r->y_r && r->g_count && r->g_order && r->g_x &&
         r->g_y && r->win && r->sum_local && r->sum_all && r->load_f;
    return ok ? 0 : cf_fail(err, "expert parallelism: out of memory for %zu-row buffers", rows);
}

static void ep_free(ep_runtime *r) {
    void *bufs[] = {r->dest,    r->perm,         r->hdr_s, r->hdr_r, r->total,     r->meta_s,
                    r->meta_r,  r->x_s,          r->y_s,   r->x_r,   r->y_r,       r->g_count,
                    r->g_order, r->g_x,          r->g_y,   r->win,   r->sum_local, r->sum_all,
                    r->load_f,  r->moe_of_layer, r->held,  r->need,  r->load_list, r->layer_of_moe};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    for (int m = 0; m < 2; m++) {
        ep_mb *b = &r->mb[m];
        int *ints[] = {b->rows_s, b->rows_r, b->seen, b->start, b->cm_s, b->dm_s,
                       b->cm_r,   b->dm_r,   b->cx_s, b->dx_s,  b->cx_r, b->dx_r};
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) free(ints[i]);
    }
    ep_peer_free(r);
    eplb_plan_free(&r->plan);
    eplb_plan_free(&r->static_plan);
    eplb_plan_free(&r->next);
    fwd_ctx_free(r->fc);
    if (r->pool) pool_destroy(r->pool);
    free(r);
}

/* Shape of the plan: slots = experts + redundant, rounded up to the ranks. */
static int ep_shape(ep_runtime *r, const model_hparams *hp, cf_err *err) {
    int32_t slots = hp->n_expert + (r->o.redundant > 0 ? r->o.redundant : 0);
    slots = (slots + r->n_ranks - 1) / r->n_ranks * r->n_ranks;
    r->shape = (eplb_shape){.n_layers = r->n_moe,
                            .n_logical = hp->n_expert,
                            .n_physical = slots,
                            .n_groups = hp->n_expert_group > 1 ? hp->n_expert_group : 1,
                            .n_nodes = r->o.n_nodes > 0 ? r->o.n_nodes : 1,
                            .n_ranks = r->n_ranks};
    if (r->n_ranks % r->shape.n_nodes)
        return cf_fail(err, "expert parallelism: %d ranks do not split over %d nodes", r->n_ranks, r->shape.n_nodes);
    return eplb_plan_identity(&r->shape, &r->plan, err) || eplb_plan_identity(&r->shape, &r->static_plan, err) ? -1 : 0;
}

/* Collective: every rank must run with the same layout options (mismatched
 * micro-batches or slots would mismatch the collectives). */
static int ep_agree(const ep_runtime *r, cf_err *err) {
    int mine[5] = {r->o.micro_batches == 2 ? 2 : 1, r->o.redundant, r->o.rebalance_rounds, r->o.n_nodes,
                   (int)r->o.weight_source};
    int lo[5], hi[5];
    MPI_Allreduce(mine, lo, 5, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(mine, hi, 5, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    static const char *const names[5] = {"--ep-micro-batches", "--ep-redundant", "--ep-rebalance", "--ep-nodes",
                                         "--ep-weight-source (0 file, 1 peer)"};
    for (int i = 0; i < 5; i++)
        if (lo[i] != hi[i])
            return cf_fail(err, "expert parallelism: the ranks disagree on %s (%d to %d): give every rank the same",
                           names[i], lo[i], hi[i]);
    return 0;
}

int ep_runtime_start(model *m, const ep_options *o, ep_runtime **out, cf_err *err) {
    *out = NULL;
    const model_hparams *hp = model_get_hparams(m);
    ep_runtime *r = calloc(1, sizeof *r);
    if (!r) return cf_fail(err, "expert parallelism: out of memory");
    r->m = m;
    r->o = *o;
    pthread_mutex_init(&r->mu, NULL); /* a default mutex: nothing to destroy on the failure paths */
    MPI_Comm_rank(MPI_COMM_WORLD, &r->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r->n_ranks);
    r->n_layer = hp->n_layer, r->n_expert = hp->n_expert, r->n_embd = hp->n_embd;
    r->max_rows = o->max_rows > 0 ? o->max_rows : 1;
    r->moe_of_layer = malloc((size_t)hp->n_layer * sizeof(int32_t));
    if (!(r->pool = pool_create(o->threads > 0 ? o->threads : 1)) || !r->moe_of_layer) {
        ep_free(r);
        return cf_fail(err, "expert parallelism: cannot start the compute threads");
    }
    /* attention never runs here: the smallest context every family accepts (deepseek4: 128-token blocks) */
    if (!(r->fc = fwd_ctx_create(m, r->pool, EP_COMPUTE_CHUNK, 128, 128, err))) {
        ep_free(r);
        return -1;
    }
    for (int32_t il = 0; il < hp->n_layer; il++)
        r->moe_of_layer[il] = fwd_ctx_expert_load(r->fc, il, NULL, 0) > 0 ? r->n_moe++ : -1;
    if (r->n_moe == 0 || hp->n_expert <= 0) {
        ep_free(r);
        return cf_fail(err, "expert parallelism: model %s has no routed experts", hp->arch);
    }
    if (ep_agree(r, err) || ep_shape(r, hp, err) || ep_alloc(r, err) || ep_weights_init(r, err) ||
        ep_peer_check(r, err)) {
        ep_free(r);
        return -1;
    }
    ep_stats held = r->st; /* ep_weights_init's counts */
    r->st = (ep_stats){.expert_bytes = held.expert_bytes,
                       .experts_held = held.experts_held,
                       .rank = r->rank,
                       .n_ranks = r->n_ranks,
                       .n_moe = r->n_moe,
                       .n_expert = r->n_expert,
                       .n_physical = r->shape.n_physical,
                       .imbalance_before = 1.0,
                       .imbalance_after = 1.0,
                       .replica_bytes = eplb_replica_bytes(&r->plan, (int64_t)model_expert_bytes(m))};
    r->exec = (cinfer_moe_executor){.self = r, .run = ep_run};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&r->thread, NULL, ep_main, r)) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        ep_free(r);
        return cf_fail(err, "expert parallelism: cannot start the round thread");
    }
    r->started = true;
    *out = r;
    return 0;
}

const cinfer_moe_executor *ep_runtime_executor(ep_runtime *r) { return &r->exec; }

void ep_runtime_stop(ep_runtime *r) {
    if (!r) return;
    if (r->started) {
        pthread_mutex_lock(&r->mu);
        r->stop_req = true;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
        ep_peer_drain(r); /* moves under way when the job stopped: every rank waits its transfers out */
        ep_weights_join(r); /* a plan staged when the job stopped */
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
    }
    ep_free(r);
}

ep_stats ep_runtime_get_stats(ep_runtime *r) {
    pthread_mutex_lock(&r->mu);
    ep_stats s = r->st;
    pthread_mutex_unlock(&r->mu);
    return s;
}
