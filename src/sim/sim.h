/* sim.h - `cinfer sim`, the cluster simulator: replays a workload
 * (sim_workload.h) on a cluster (sim_config.h) as a discrete-event
 * simulation and returns its results.
 *
 * Same code as the server: every engine step of every instance is planned by
 * the engine's scheduler (sched_plan_step); the store tier's expiry and LRU
 * eviction are the store's own decisions (store_expiry_for, store_is_expired,
 * store_gc_lru_victims); requests come from bench serve's generators and
 * trace reader. The router's placement policies live in sim_route.c until
 * the cluster layer provides them (docs/sim.md, "Seams").
 *
 * A run is deterministic: the same config, workload and seed give the same
 * results (no clock, no global state; ties in the event queue pop in push
 * order). Accounting invariant, checked by the unit tests: every input token
 * of a finished request is exactly one of cached (HBM or store), replayed
 * (bounded window replay) or computed, and the tokens the plans executed
 * equal computed + replayed + recomputed (after preemption) + decode tokens. */
#ifndef CINFER_SIM_SIM_H
#define CINFER_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "sim/sim_config.h"
#include "sim/sim_workload.h"

typedef struct sim_opts {
    uint64_t seed;
    bool progress; /* a progress bar on stderr */
    bool store_only; /* cache tiers only (no compute model): fast multi-day retention studies */
} sim_opts;

/* Per request. */
typedef struct sim_req_result {
    double ttft, tpot, e2e; /* seconds; tpot 0 when output_len == 1 */
    int32_t cached_hbm, cached_store, replayed, computed, recomputed;
    int64_t executed; /* tokens in plan items for this request (prefill + decode, drafts included) */
    int32_t generated;
    int32_t drafted, accepted; /* speculative decoding */
    bool done;
} sim_req_result;

typedef struct sim_pool_result {
    long instances, accels;
    double busy_s; /* summed over instances */
    int64_t prefill_tokens, decode_tokens, steps, preemptions;
} sim_pool_result;

typedef struct sim_results {
    sim_req_result *req; /* n, in workload order */
    size_t n, n_done;
    int64_t rejected; /* requests whose input + output exceed one instance's KV memory */
    double makespan_s, wall_s;
    int64_t class_input[STORE_N_CLASSES], class_cached[STORE_N_CLASSES]; /* finished requests, by traffic class */
    int64_t input_tokens, cached_hbm, cached_store, replayed, computed, recomputed, output_tokens;
    sim_pool_result pool[2]; /* prefill, decode (decode.instances 0: colocated) */
    /* store tier */
    double store_peak_bytes, store_bytes_read, store_bytes_written;
    int64_t store_gc_expired, store_gc_lru, store_blocks_end;
    /* window-state tier */
    int64_t window_hits, window_misses;
    /* network */
    double kv_bytes_moved;
    double moe_imbalance[2]; /* per pool: max/mean expert load per rank under its placement (EPLB) */
    int64_t backpressure; /* placements where the router's policy found no eligible instance */
} sim_results;

int sim_run(const sim_config *c, const sim_workload *w, const sim_opts *o, sim_results *r, cf_err *err);
void sim_results_free(sim_results *r);

#endif
