/* ep_peer.c - a staged plan's expert weights moved between ranks by MPI
 * point-to-point (--ep-weight-source peer; docs/ep.md "Peer moves"), for
 * hosts that cannot read the experts' pages of the model file.
 *
 * Who sends what: every rank knows the current plan (what each rank holds:
 * its slots' experts) and the staged one, so every rank computes the same
 * list of moves without talking. An expert that rank q needs and does not
 * hold comes from one of the ranks holding it now, picked by (q + cell) mod
 * holders so a hot expert's copies spread over its holders. A rank holding
 * nothing of it cannot exist: every expert has a slot in every plan.
 *
 * Steps (peer_step), advanced once per round by the round thread, the only
 * MPI caller (MPI_THREAD_SERIALIZED), so no decode round ever waits on a
 * transfer:
 *  PACKING     the receives are posted at staging; the loader thread copies
 *              each expert to send out of this rank's file mapping
 *              (model_expert_read_raw) with its XXH3-64 checksum. One it
 *              cannot read is sent as zeros with a checksum that cannot
 *              match, so every transfer still completes.
 *  MOVING      the sends are posted; MPI_Testall each round.
 *  INSTALLING  every transfer is over: the loader thread checks each
 *              received expert's checksum and makes it resident from the
 *              bytes (model_expert_acquire_raw; the file is not read).
 * Then load_state says DONE, or FAILED (a checksum mismatch, an expert this
 * rank could not pack or install): the plan switch / drop of ep_balance.c
 * follows, with no transfer left in flight. Buffers are allocated at
 * staging (a rebalance may allocate) and freed when the moves end. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <xxhash.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "ep/ep_internal.h"

#define SUM_BYTES sizeof(uint64_t) /* the checksum after an expert's bytes */

static int32_t layer_of(const ep_runtime *r, int32_t cell) { return r->layer_of_moe[cell / r->n_expert]; }
static int32_t expert_of(const ep_runtime *r, int32_t cell) { return cell % r->n_expert; }

int ep_peer_check(ep_runtime *r, cf_err *err) {
    if (r->o.weight_source != EP_WEIGHTS_PEER) return 0;
    if (!model_experts_partial(r->m))
        return cf_fail(err, "--ep-weight-source peer: model %s is not loaded per expert on this rank",
                       model_get_hparams(r->m)->arch);
    int *tag_ub = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    if (flag && tag_ub && (int64_t)r->n_moe * r->n_expert > (int64_t)*tag_ub)
        return cf_fail(err, "--ep-weight-source peer: %d x %d experts exceed this MPI's largest tag %d", r->n_moe,
                       r->n_expert, *tag_ub);
    for (int32_t mi = 0; mi < r->n_moe; mi++) {
        size_t n = model_expert_raw_size(r->m, r->layer_of_moe[mi]);
        if (!n)
            return cf_fail(err, "--ep-weight-source peer: model %s cannot move its experts as bytes",
                           model_get_hparams(r->m)->arch);
        if (n + SUM_BYTES > (size_t)INT_MAX)
            return cf_fail(err, "--ep-weight-source peer: one expert of layer %d is %zu bytes, over one MPI message",
                           r->layer_of_moe[mi], n);
    }
    r->xin = calloc((size_t)r->n_moe * (size_t)r->n_expert, sizeof *r->xin);
    r->xout = calloc((size_t)r->n_moe * (size_t)r->n_expert, sizeof *r->xout);
    if (!r->xin || !r->xout) return cf_fail(err, "expert parallelism: out of memory");
    return 0;
}

/* A transfer buffer: an anonymous mapping of its own, so its pages go back
 * to the system when the moves end (heap blocks this size would stay in
 * the allocator's arenas and a rank would grow with every rebalance). */
static char *xbuf_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes + SUM_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void xbuf_free(ep_xfer *x) {
    if (x->buf) munmap(x->buf, x->bytes + SUM_BYTES);
    x->buf = NULL;
}

static void free_bufs(ep_runtime *r) {
    for (int32_t i = 0; i < r->n_in; i++) xbuf_free(&r->xin[i]);
    for (int32_t i = 0; i < r->n_out; i++) xbuf_free(&r->xout[i]);
    r->n_in = r->n_out = 0;
    free(r->xreq);
    r->xreq = NULL;
}

/* Fails the stage locally (the moves still run to their end). */
static void fail_local(ep_runtime *r, const char *msg) {
    if (!r->peer_local_failed) snprintf(r->load_err, sizeof r->load_err, "%s", msg);
    r->peer_local_failed = true;
}

static void *pack_main(void *arg) {
    ep_runtime *r = arg;
    for (int32_t i = 0; i < r->n_out; i++) {
        ep_xfer *x = &r->xout[i];
        cf_err err = {0};
        uint64_t sum;
        if (model_expert_read_raw(r->m, layer_of(r, x->cell), expert_of(r, x->cell), x->buf, x->bytes, &err)) {
            fail_local(r, err.msg);
            memset(x->buf, 0, x->bytes);
            sum = XXH3_64bits(x->buf, x->bytes) ^ 1u; /* never matches: the receiver drops the plan */
        } else {
            sum = XXH3_64bits(x->buf, x->bytes);
        }
        memcpy(x->buf + x->bytes, &sum, SUM_BYTES);
    }
    model_trim_memory(r->m); /* the file pages read for the copies (the copies are what moves) */
    atomic_store(&r->peer_worker_done, true);
    return NULL;
}

static void *install_main(void *arg) {
    ep_runtime *r = arg;
    uint64_t bytes = 0;
    for (int32_t i = 0; i < r->n_in && !r->peer_local_failed; i++) {
        ep_xfer *x = &r->xin[i];
        int32_t layer = layer_of(r, x->cell), e = expert_of(r, x->cell);
        uint64_t sum;
        memcpy(&sum, x->buf + x->bytes, SUM_BYTES);
        char msg[512];
        if (XXH3_64bits(x->buf, x->bytes) != sum) {
            snprintf(msg, sizeof msg, "layer %d expert %d from rank %d: checksum mismatch", layer, e, x->peer);
            fail_local(r, msg);
            break;
        }
        uint64_t before = model_expert_resident_bytes(r->m);
        cf_err err = {0};
        if (model_expert_acquire_raw(r->m, layer, e, x->buf, x->bytes, &err)) {
            fail_local(r, err.msg);
            break;
        }
        bytes += model_expert_resident_bytes(r->m) - before;
    }
    r->load_bytes = bytes;
    atomic_store(&r->peer_worker_done, true);
    return NULL;
}

/* Runs fn on the loader thread, or here when no thread can start (this
 * round then waits for it, but the moves stay consistent). */
static void start_worker(ep_runtime *r, void *(*fn)(void *)) {
    atomic_store(&r->peer_worker_done, false);
    if (!pthread_create(&r->loader, NULL, fn, r)) {
        r->loader_started = true;
        return;
    }
    LOG_WARN("expert parallelism: rank %d: cannot start the weight mover thread; moving on the round thread", r->rank);
    (void)fn(r);
}

/* The rank that sends rank q its copy of cell c: one holding it under the current plan (holds[s][c]). */
static int sender_of(const ep_runtime *r, bool *const *holds, int q, int32_t c) {
    int n = 0, pick;
    for (int s = 0; s < r->n_ranks; s++) n += holds[s][c];
    if (!n) return -1;
    pick = (q + c) % n;
    for (int s = 0; s < r->n_ranks; s++)
        if (holds[s][c] && pick-- == 0) return s;
    return -1;
}

/* Lists the moves of plan next (xin, xout); -1 when out of memory. */
static int list_moves(ep_runtime *r, const eplb_plan *next) {
    size_t cells = (size_t)r->n_moe * (size_t)r->n_expert;
    int N = r->n_ranks;
    bool **holds = calloc((size_t)N, sizeof *holds), *wants = malloc(cells);
    int rc = holds && wants ? 0 : -1;
    for (int s = 0; !rc && s < N; s++)
        if ((holds[s] = malloc(cells))) ep_plan_cells(r, &r->plan, s, holds[s]);
        else rc = -1;
    for (int q = 0; !rc && q < N; q++) {
        ep_plan_cells(r, next, q, wants);
        for (int32_t c = 0; !rc && c < (int32_t)cells; c++) {
            if (!wants[c] || holds[q][c]) continue;
            int s = sender_of(r, holds, q, c);
            size_t bytes = model_expert_raw_size(r->m, layer_of(r, c));
            ep_xfer *x = q == r->rank ? &r->xin[r->n_in++] : s == r->rank ? &r->xout[r->n_out++] : NULL;
            if (!x) continue;
            *x = (ep_xfer){.cell = c, .peer = q == r->rank ? s : q, .bytes = bytes, .buf = xbuf_alloc(bytes)};
            if (!x->buf || s < 0) rc = -1;
        }
    }
    for (int s = 0; holds && s < N; s++) free(holds[s]);
    free(holds);
    free(wants);
    return rc;
}

void ep_peer_stage(ep_runtime *r, const eplb_plan *next) {
    r->peer_local_failed = false;
    r->peer_t0 = time_now();
    if (list_moves(r, next) || !(r->xreq = malloc((size_t)(r->n_in + r->n_out + 1) * sizeof(MPI_Request)))) {
        /* the other ranks' moves to and from this one would never complete: take the job down */
        LOG_ERROR("expert parallelism: rank %d: out of memory staging %d expert moves", r->rank, r->n_in + r->n_out);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Request *req = r->xreq;
    for (int32_t i = 0; i < r->n_in; i++)
        MPI_Irecv(r->xin[i].buf, (int)(r->xin[i].bytes + SUM_BYTES), MPI_BYTE, r->xin[i].peer, r->xin[i].cell,
                  MPI_COMM_WORLD, &req[i]);
    r->peer_step = EP_PEER_PACKING;
    if (r->n_out) start_worker(r, pack_main);
    else atomic_store(&r->peer_worker_done, true);
}

static void post_sends(ep_runtime *r) {
    MPI_Request *req = (MPI_Request *)r->xreq + r->n_in;
    for (int32_t i = 0; i < r->n_out; i++)
        MPI_Isend(r->xout[i].buf, (int)(r->xout[i].bytes + SUM_BYTES), MPI_BYTE, r->xout[i].peer, r->xout[i].cell,
                  MPI_COMM_WORLD, &req[i]);
}

static void finish(ep_runtime *r) {
    uint64_t in = 0, out = 0;
    for (int32_t i = 0; i < r->n_in; i++) in += r->xin[i].bytes;
    for (int32_t i = 0; i < r->n_out; i++) out += r->xout[i].bytes;
    pthread_mutex_lock(&r->mu);
    r->st.peer_bytes_in += in;
    r->st.peer_bytes_out += out;
    pthread_mutex_unlock(&r->mu);
    free_bufs(r);
    r->load_seconds = time_now() - r->peer_t0;
    r->peer_step = EP_PEER_IDLE;
    atomic_store(&r->load_state, r->peer_local_failed ? EP_LOAD_FAILED : EP_LOAD_DONE);
}

void ep_peer_progress(ep_runtime *r) {
    if (r->peer_step == EP_PEER_PACKING && atomic_load(&r->peer_worker_done)) {
        ep_weights_join(r);
        post_sends(r);
        r->peer_step = EP_PEER_MOVING;
    }
    if (r->peer_step == EP_PEER_MOVING) {
        int done = 1;
        if (r->n_in + r->n_out) MPI_Testall(r->n_in + r->n_out, r->xreq, &done, MPI_STATUSES_IGNORE);
        if (!done) return;
        r->peer_step = EP_PEER_INSTALLING;
        if (r->n_in) start_worker(r, install_main);
        else atomic_store(&r->peer_worker_done, true);
    }
    if (r->peer_step == EP_PEER_INSTALLING && atomic_load(&r->peer_worker_done)) {
        ep_weights_join(r);
        finish(r);
    }
}

void ep_peer_drain(ep_runtime *r) {
    if (r->peer_step == EP_PEER_IDLE) return;
    if (r->peer_step == EP_PEER_PACKING) {
        ep_weights_join(r);
        post_sends(r);
    }
    if (r->peer_step != EP_PEER_INSTALLING) MPI_Waitall(r->n_in + r->n_out, r->xreq, MPI_STATUSES_IGNORE);
    ep_weights_join(r);
    free_bufs(r);
    r->peer_step = EP_PEER_IDLE;
}

void ep_peer_free(ep_runtime *r) {
    free_bufs(r);
    free(r->xin);
    free(r->xout);
    r->xin = r->xout = NULL;
}
