/* ep.h - MoE expert parallelism over MPI (`mpirun -n N cinfer serve --ep`).
 *
 * Layout: every rank is a whole server (its own engine, KV pool, scheduler,
 * HTTP port base + rank): attention and dense layers are data-parallel. The
 * routed experts are spread over the ranks by an EPLB plan (src/eplb): each
 * rank's engine routes its tokens itself and hands every MoE layer's (token,
 * expert) rows to this runtime (cinfer_moe_executor), which sends each row to
 * a rank holding that expert, has it computed there, and returns the outputs;
 * the engine combines them in its fixed order, so outputs are bit-identical
 * to the single-process server whatever the placement.
 *
 * Rounds: one thread per rank (the only MPI caller) runs collective rounds
 * forever: an all-to-all of row counts (which also says which ranks have work
 * and which are stopping), then all-to-all-v of the rows, the owned experts'
 * grouped compute, and all-to-all-v of the results. A rank with no MoE layer
 * pending joins every round with zero rows (it still computes for the
 * others); when no rank has work the rounds back off to a 1 ms poll. Ranks
 * need not be at the same layer: a row names its layer and expert.
 *
 * Weights: each rank keeps only the routed experts its placement gives it
 * (ep_initial_keep at load, then the plan's: model_expert_acquire /
 * _release), so expert memory per rank falls with the rank count and a
 * replica costs real memory. Rebalancing: every `rebalance_rounds` busy
 * rounds the ranks sum their routed-row counts of the last window
 * (all-reduce) and run EPLB on it (every rank computes the same plan); the
 * plan is staged: a loader thread per rank prepares the experts it newly
 * gets from the mmap'd model file (every rank maps the same file, so no
 * weights cross MPI and the round thread never waits), and the switch comes
 * at the first round boundary at which every rank's header says "ready";
 * then each rank frees the experts it no longer holds. Rows keep flowing
 * under the old plan meanwhile: no request waits or is dropped.
 *
 * Faults: a rank that dies takes the job down (Open MPI's mpirun aborts every
 * rank and prints which one failed); serving ranks then stop answering, so a
 * front (router) sees connection errors, not hangs.
 *
 * Thread-safety: ep_runtime_start/stop on the main thread; the executor's
 * run() from one engine forward thread; stats readers from any thread. */
#ifndef CINFER_EP_EP_H
#define CINFER_EP_EP_H

#include <stdint.h>

#include "base/error.h"
#include "eplb/eplb.h"
#include "model/model.h"

/* Where a rank gets the weights of an expert a new plan gives it: its own
 * file mapping, or (peer) a rank holding it, by MPI point-to-point with a
 * checksum (ep_peer.c), for hosts that cannot read the experts' file pages. */
typedef enum { EP_WEIGHTS_FILE = 0, EP_WEIGHTS_PEER = 1 } ep_weight_source;

typedef struct ep_options {
    int32_t redundant; /* extra expert slots per MoE layer (replicas of hot experts); total slots must
                        * divide by the rank count: rounded up to that */
    int32_t rebalance_rounds; /* busy rounds between rebalances (0: never) */
    int32_t n_nodes; /* hosts, for EPLB's hierarchical policy (0: 1) */
    int32_t threads; /* compute threads for the experts this rank serves to others (0: 1) */
    int32_t max_rows; /* rows one MoE call may send: max_batch_tokens x experts_used */
    int32_t micro_batches; /* 2: dual-batch overlap (each round's rows in two halves whose all-to-all
                            * overlaps the other's expert compute); 0 or 1: one batch. Same on every rank */
    ep_weight_source weight_source; /* where a rebalance's moved experts come from. Same on every rank */
} ep_options;

typedef struct ep_runtime ep_runtime;

/* Per-rank counters (monotonic unless noted), safe to read any time. */
typedef struct ep_stats {
    int32_t rank, n_ranks, n_moe, n_expert, n_physical;
    uint64_t rounds, busy_rounds, rebalances;
    uint64_t rows_sent, rows_received; /* expert rows this rank's engine sent out / this rank computed */
    uint64_t bytes_sent, bytes_received; /* of them, bytes that crossed to / from other ranks (both ways) */
    double t_comm, t_compute, t_wait; /* seconds in all-to-all, expert compute, backoff sleeps */
    double imbalance_before, imbalance_after; /* at the last rebalance, under the window's loads: the start-up
                                               * placement vs the new plan (max/mean rank load, mean over MoE
                                               * layers) */
    int64_t replica_bytes; /* expert weight bytes of the replicas the plan adds (all ranks) */
    uint64_t expert_bytes; /* routed expert weight bytes resident on this rank now */
    int32_t experts_held; /* (MoE layer, expert) pairs resident on this rank */
    bool staged; /* a plan is staged (its experts loading) */
    uint64_t weight_loads, weight_releases; /* experts made resident / freed by rebalances */
    uint64_t weight_load_bytes; /* their bytes */
    double t_weight_load; /* seconds the loader thread spent preparing them (peer: stage to installed) */
    uint64_t peer_bytes_in, peer_bytes_out; /* expert bytes received from / sent to other ranks (peer) */
} ep_stats;

/* Where each rank starts: the identity placement (slot p holds expert
 * p mod experts; slots = experts + redundant rounded up to the ranks). */
typedef struct ep_placement {
    int rank, n_ranks;
    int32_t redundant;
} ep_placement;

/* model_load_opts.expert_keep for that placement (ctx: an ep_placement):
 * true when one of this rank's slots holds `expert`. */
bool ep_initial_keep(void *ctx, const model_hparams *hp, int32_t layer, int32_t expert);

/* MPI_Init (argc/argv as main got them) at thread level serialized; -1 if MPI cannot start. */
int ep_mpi_init(int *argc, char ***argv, int *rank, int *n_ranks, cf_err *err);
/* MPI_Finalize, once, after ep_runtime_stop. */
void ep_mpi_finalize(void);
/* MPI_Abort: a rank that cannot start takes the job down at once. */
void ep_mpi_abort(int code);

/* Starts the round thread for model m (a MoE model: deepseek2, deepseek4), loaded
 * with ep_initial_keep for this rank (or with every expert). Collective:
 * every rank calls it with the same model and options. The runtime acquires
 * and releases m's experts as plans change. */
int ep_runtime_start(model *m, const ep_options *o, ep_runtime **out, cf_err *err);
/* The executor to give the engine (cinfer_engine_options.moe_executor). */
const cinfer_moe_executor *ep_runtime_executor(ep_runtime *r);
/* Collective: waits until every rank has asked to stop (their engines are
 * gone), ends the rounds and frees. NULL-safe. */
void ep_runtime_stop(ep_runtime *r);
ep_stats ep_runtime_get_stats(ep_runtime *r);

#endif
