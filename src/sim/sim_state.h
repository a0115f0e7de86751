/* sim_state.h - the simulator's run state, shared by its parts (private to
 * src/sim): the requests in flight, the instances of both pools, the cache
 * tiers and the event queue. One sim_state per sim_run; it owns every array.
 *
 * Instances: 0 .. n_prefill-1 are the prefill pool, then the decode pool.
 * An instance's `list` holds the requests it schedules, sorted by request
 * index (= arrival order = the scheduler's rank), so the first max_seqs
 * waiting entries are the ones admission can reach. A decode instance also
 * has `pend`: requests whose KV arrived but that no block/sequence room
 * admitted yet (FIFO). Between STEP_END events an instance is `busy`; its
 * last plan (items) is applied when the step ends. */
#ifndef CINFER_SIM_SIM_STATE_H
#define CINFER_SIM_SIM_STATE_H

#include "cluster/route_policy.h"
#include "engine/sched.h"
#include "sim/sim.h"
#include "sim/sim_heap.h"
#include "sim/sim_map.h"
#include "sim/sim_rng.h"

enum { SIM_POOL_PREFILL = 0, SIM_POOL_DECODE = 1 };

typedef struct sim_rq {
    int32_t inst; /* instance it is on, -1: none */
    sched_state st;
    int32_t n_generated, n_computed, n_cached, n_blocks;
    int32_t hit_hbm, hit_store, replay; /* tokens, decided at routing */
    int32_t step_accept; /* drafts accepted in the step under way */
    int32_t hw; /* positions [0, hw) were computed once already (later passes recompute) */
    double ready; /* when it joined its prefill instance's list (asynchronous scheduling) */
    bool admitted_once;
} sim_rq;

typedef struct sim_inst {
    int pool;
    int32_t *list, n, cap;
    int32_t *pend, n_pend, cap_pend; /* decode: KV arrived, not admitted */
    int64_t free_blocks, queued_tokens;
    bool busy;
    double step_start; /* when the step under way (or the last one) started */
    bool just_ended; /* a step ended and no plan was made since (asynchronous scheduling) */
    sched_req *sr;
    int32_t *sr_req; /* sr index -> request */
    sched_item *items;
    int32_t *pre, *scratch, cap_plan, n_items;
    sim_map hbm; /* prefix cache (chain keys of store blocks) */
    double nic_free;
} sim_inst;

typedef struct sim_state {
    const sim_config *c;
    const sim_workload *w;
    const sim_opts *o;
    sim_results *r;
    sim_rq *rq;
    sim_inst *inst;
    int n_prefill, n_decode, n_inst;
    sched_limits lim[2];
    sim_heap heap;
    sim_rng rng;
    double now;
    sim_map store, window;
    double store_bytes, block_bytes, store_read_free, store_write_free;
    route_worker *route_ws; /* scratch: one per instance of the larger pool */
    uint64_t route_cursor[2];
    int64_t rejected; /* requests longer than an instance's KV memory */
    double moe_imbalance[2]; /* per pool, from EPLB (sim_eplb.h) */
    int64_t pool_blocks[2]; /* KV blocks the scheduler of one instance can use, per pool */
} sim_state;

/* sim_store.c: the store and window-state tiers */
int sim_tiers_init(sim_state *s, cf_err *err);
void sim_tiers_free(sim_state *s);
/* Longest run of keys[from..n) present and unexpired in the store (touches them). */
uint32_t sim_store_hits(sim_state *s, const uint64_t *keys, uint32_t from, uint32_t n);
/* Writes keys[from..n) the store lacks; returns bytes written. */
int sim_store_write(sim_state *s, const uint64_t *keys, uint32_t n, int32_t cls, cf_err *err);
/* One GC pass: expired objects, then the quota (store_gc_lru_victims). */
int sim_store_gc(sim_state *s, cf_err *err);
/* Window tier: is there a snapshot at the end of block key? Snapshots at every block of keys[0..n). */
bool sim_window_has(sim_state *s, uint64_t key);
int sim_window_put(sim_state *s, const uint64_t *keys, uint32_t n, cf_err *err);

/* sim_inst.c: instances */
int sim_inst_init(sim_state *s, sim_inst *in, int pool, cf_err *err);
void sim_inst_free(sim_inst *in);
/* Adds request q to the instance's scheduling list (sorted). */
int sim_inst_add(sim_state *s, sim_inst *in, int32_t q, cf_err *err);
void sim_inst_remove(sim_inst *in, int32_t q);
/* Starts a step if the instance is idle and has work. */
int sim_inst_kick(sim_state *s, int32_t idx, cf_err *err);
/* Applies the step that just ended and starts the next. */
int sim_inst_step_end(sim_state *s, int32_t idx, cf_err *err);

/* sim_cluster.c: what happens to a request at the end of its prefill */
int sim_prefill_done(sim_state *s, int32_t inst, int32_t q, cf_err *err);
void sim_request_done(sim_state *s, int32_t q);
/* The router's choice of instance for request q in a pool (index within the pool), -1 on error. */
int sim_place(sim_state *s, int pool, int32_t q, cf_err *err);
/* Handles one event. */
int sim_dispatch(sim_state *s, const sim_event *e, cf_err *err);

#endif
