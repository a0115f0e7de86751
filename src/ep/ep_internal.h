/* ep_internal.h - the expert-parallel runtime's state, shared by
 * ep_runtime.c (start/stop, the executor hand-off, stats), ep_round.c (one
 * collective round: dispatch, grouped compute, combine) and ep_balance.c
 * (load window, rebalancing). Not a public header; no MPI types here (only
 * the .c files include mpi.h).
 *
 * Locking: mu guards the hand-off (req_*), stop_req, failed and the stats;
 * everything else belongs to the round thread. Buffers are sized at start:
 * a round allocates nothing (a rebalance does, every rebalance_rounds). */
#ifndef CINFER_EP_INTERNAL_H
#define CINFER_EP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "base/threadpool.h"
#include "ep/ep.h"

#define EP_LOAD_WINDOW 4 /* rebalance periods the load window spans */
#define EP_COMPUTE_CHUNK 256 /* rows per expert matmul on the compute context */

struct ep_runtime {
    const model *m;
    ep_options o;
    fwd_ctx *fc; /* the compute context: experts for rows other ranks send */
    thread_pool *pool;
    int rank, n_ranks;
    int32_t n_layer, n_expert, n_moe, max_rows;
    int64_t n_embd;
    int32_t *moe_of_layer; /* [n_layer]: MoE index or -1 */
    eplb_shape shape;
    eplb_plan plan; /* the placement rows follow now */
    eplb_plan static_plan; /* the start-up placement, the "before" of the imbalance metric */
    cinfer_moe_executor exec;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started, stop_req, failed;
    char fail_msg[512];
    /* the hand-off: one MoE call of the engine's forward thread */
    bool have_req, req_done;
    int32_t req_layer, req_n;
    const int32_t *req_expert;
    const float *req_x;
    float *req_y;

    /* round buffers */
    int32_t *dest, *perm; /* [max_rows] */
    int *hdr_s, *hdr_r; /* [2 n_ranks] */
    int *cnt_s, *cnt_r, *dsp_s, *dsp_r; /* [n_ranks], in units set per call */
    int *rows_s, *rows_r; /* [n_ranks] rows */
    int32_t *meta_s, *meta_r; /* 2 ints (layer, expert) per row */
    float *x_s, *x_r, *y_r, *y_s; /* rows: sent, received, computed, returned */
    int32_t *g_count, *g_order; /* [n_layer * n_expert + 1], [n_ranks * max_rows] */
    float *g_x, *g_y; /* [EP_COMPUTE_CHUNK * n_embd] */

    /* loads: routed (token, expert) pairs of this rank per MoE layer and expert */
    uint64_t *win; /* [EP_LOAD_WINDOW][n_moe * n_expert] */
    int32_t win_pos;
    uint64_t busy_since_rebalance;
    uint64_t *sum_local, *sum_all; /* [n_moe * n_expert] */
    float *load_f; /* [n_moe * n_expert] */

    ep_stats st; /* (mu) */
};

/* ep_round.c: one round; sets *any_busy / *all_stopping from the headers.
 * -1 only on a local compute error (the caller aborts the job). */
int ep_round(ep_runtime *r, bool *any_busy, bool *all_stopping);
/* ep_balance.c: counts the rows of a local call into the window. */
void ep_balance_count(ep_runtime *r, int32_t layer, int32_t n, const int32_t *expert);
/* ep_balance.c: called after every busy round; every rebalance_rounds of
 * them, all-reduces the window and switches to a new EPLB plan. */
int ep_balance_maybe(ep_runtime *r, cf_err *err);
/* ep_balance.c: window loads summed over ranks into r->load_f (collective). */
void ep_balance_gather(ep_runtime *r);

#endif
