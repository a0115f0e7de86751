/* ep_internal.h - the expert-parallel runtime's state, shared by
 * ep_runtime.c (start/stop, the executor hand-off, stats), ep_round.c (one
 * collective round: dispatch, grouped compute, combine) and ep_balance.c
 * (load window, rebalancing). Not a public header; no MPI types here (only
 * the .c files include mpi.h).
 *
 * Locking: mu guards the hand-off (req_*), stop_req, failed and the stats;
 * load_state is the loader thread's hand-back (atomic); everything else
 * belongs to the round thread (the loader only reads load_list and writes
 * the model's experts named there, which no plan in use routes to). Buffers are sized at start:
 * a round allocates nothing (a rebalance does, every rebalance_rounds). */
#ifndef CINFER_EP_INTERNAL_H
#define CINFER_EP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/threadpool.h"
#include "ep/ep.h"

#define EP_LOAD_WINDOW 4 /* rebalance periods the load window spans */
#define EP_COMPUTE_CHUNK 256 /* rows per expert matmul on the compute context */

/* Round-header flags (ep_round.c): an engine MoE call is pending; the
 * rank is stopping; its staged plan's experts are resident; they failed to
 * load. */
enum { EP_FLAG_BUSY = 1, EP_FLAG_STOPPING = 2, EP_FLAG_READY = 4, EP_FLAG_LOAD_FAILED = 8 };

/* A staged plan's background load (ep_weights.c). */
enum { EP_LOAD_IDLE = 0, EP_LOAD_RUNNING, EP_LOAD_DONE, EP_LOAD_FAILED };

/* The steps of a staged plan's peer moves (ep_peer.c). */
enum { EP_PEER_IDLE = 0, EP_PEER_PACKING, EP_PEER_MOVING, EP_PEER_INSTALLING };

/* One expert moving between ranks (ep_peer.c): its cell (MoE index *
 * n_expert + expert), the rank it comes from / goes to, its raw bytes and
 * the buffer (bytes, then their XXH3-64 checksum). */
typedef struct ep_xfer {
    int32_t cell;
    int peer;
    size_t bytes;
    char *buf;
} ep_xfer;

/* One micro-batch of a round (ep_round.c): its rows per rank each way,
 * their counts and displacements in ids (2 per row: cm/dm) and in floats
 * (cx/dx), and where its rows sit in the send / receive buffers. */
typedef struct ep_mb {
    int *rows_s, *rows_r, *seen, *start; /* [n_ranks] */
    int *cm_s, *dm_s, *cm_r, *dm_r, *cx_s, *dx_s, *cx_r, *dx_r; /* [n_ranks] */
    int32_t n_s, n_r, s_off, r_off;
} ep_mb;

struct ep_runtime {
    model *m;
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
    int *hdr_s, *hdr_r; /* [3 n_ranks] */
    int *total; /* [n_ranks] scratch */
    ep_mb mb[2]; /* micro-batches A and B (B empty unless o.micro_batches == 2) */
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

    /* expert residency: what this rank holds, and a staged plan */
    bool *held; /* [n_moe * n_expert] resident here */
    bool *need; /* [n_moe * n_expert] scratch: what a plan gives this rank */
    int32_t *layer_of_moe; /* [n_moe] */
    int32_t *load_list, n_load; /* [n_moe * n_expert] (layer, expert) keys the loader makes resident */
    bool staged;
    eplb_plan next;
    double next_before, next_after;
    pthread_t loader;
    bool loader_started;
    atomic_int load_state; /* EP_LOAD_* */
    char load_err[512]; /* set by the loader before EP_LOAD_FAILED */
    uint64_t load_bytes;
    double load_seconds;
    bool all_ready, any_failed; /* from the last round's headers */
    /* peer moves (ep_peer.c): the loader thread packs xout, then installs xin; the round thread posts
     * and tests the transfers (xreq: MPI_Request[n_in + n_out], receives first) */
    ep_xfer *xin, *xout; /* [n_moe * n_expert] each */
    int32_t n_in, n_out;
    void *xreq;
    int peer_step; /* EP_PEER_* (round thread) */
    atomic_bool peer_worker_done;
    bool peer_local_failed; /* a send could not be packed (its receiver fails the checksum) */
    double peer_t0;

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
/* ep_balance.c: this rank's round-header flags about a staged plan. */
int ep_balance_flags(ep_runtime *r);
/* ep_balance.c: after every round (the headers agreed): switches to the
 * staged plan when every rank is ready, or drops it when one failed. */
void ep_balance_after_round(ep_runtime *r);
/* ep_weights.c: the experts the start-up plan gives this rank (held), the
 * staging of a plan's weights and the switch. */
int ep_weights_init(ep_runtime *r, cf_err *err);
void ep_weights_stage(ep_runtime *r, const eplb_plan *next);
void ep_weights_switch(ep_runtime *r, const eplb_plan *next);
void ep_weights_abandon(ep_runtime *r);
void ep_weights_join(ep_runtime *r);
/* ep_weights.c: the experts plan p gives rank `rank` (need[cell]). */
void ep_plan_cells(const ep_runtime *r, const eplb_plan *p, int rank, bool *need);
/* ep_peer.c (--ep-weight-source peer; round thread): start checks (collective-free), staging a plan's
 * moves, advancing them once per round (sets load_state DONE / FAILED when every transfer is over),
 * and waiting them out at stop. */
int ep_peer_check(ep_runtime *r, cf_err *err);
void ep_peer_stage(ep_runtime *r, const eplb_plan *next);
void ep_peer_progress(ep_runtime *r);
void ep_peer_drain(ep_runtime *r);
void ep_peer_free(ep_runtime *r);

#endif
