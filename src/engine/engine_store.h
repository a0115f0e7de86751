/* engine_store.h - the engine's side of the persistent KV block store
 * (src/store/): the few hooks engine.c / engine_step.c call, so all store
 * logic stays in src/store/ and engine_store.c. Every hook is a no-op when
 * the engine has no store (no kv_store_dir, or the directory was unusable).
 *
 * Flow of a request (docs/store.md):
 *   admission: after the in-memory prefix match, eng_store_on_admit() asks
 *     the store for the following full blocks (those before the last token)
 *     and parks the request in SCHED_LOADING (the scheduler skips it);
 *   lookup done (eng_store_poll): n objects present -> n pool blocks
 *     allocated, LOAD submitted (if a forward pass is in flight, only after
 *     it: a block freed during that step may still be written by it); none ->
 *     back to RUNNING at once;
 *   load done: verified blocks are registered in the prefix cache and
 *     appended to the block table, n_computed advances, RUNNING again (the
 *     scheduler then plans the remainder as a running prefill); blocks that
 *     failed are freed. A load that outlives kv_store_load_timeout_ms is
 *     abandoned: the request runs without it and the late completion only
 *     frees its blocks.
 *   write-back: every block that becomes full and is registered
 *     (eng_store_on_register) is queued for writing with a pool reference
 *     held until the write completes, unless it came from the store or was
 *     written already (a per-block "known stored" key). Full write queue or
 *     degraded store: dropped and counted, never waited for.
 *
 * Threads: all hooks run on the engine thread; the store's I/O threads only
 * call the notify function, which sets e->store_wake under e->mu. */
#ifndef CINFER_ENGINE_ENGINE_STORE_H
#define CINFER_ENGINE_ENGINE_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

struct cinfer_engine;
struct eng_req;

/* The store fingerprint of this engine's blocks (model weights + KV layout + block size + dtype):
 * what every store object and handoff record carries. 0, or -1 with err. */
int eng_kv_fingerprint(struct cinfer_engine *e, uint8_t out[32], cf_err *err);
/* Opens the store named by e->opt (after the pool and prefix cache exist,
 * e->kv_fp is set and e->mu is initialised). A store that cannot be opened is logged and left
 * out: returns 0 either way except on out-of-memory. */
int eng_store_open(struct cinfer_engine *e, cf_err *err);
/* Stops the store's threads (finishing queued writes), releases every block
 * it still references and frees it. Call after the engine thread is joined,
 * before e->mu is destroyed and before the pool is freed. Idempotent. When a
 * store thread is still stuck in a syscall after kv_store_close_timeout_ms
 * (a hung mount), the store is abandoned and e->store_abandoned is set: the
 * caller must then not free the pool (a late read may still land in it). */
void eng_store_close(struct cinfer_engine *e);

/* Admission hook (after the prefix match): true when the request now waits
 * for a store lookup (state SCHED_LOADING; drop its item from this step). */
bool eng_store_on_admit(struct cinfer_engine *e, struct eng_req *r);
/* Start of each loop iteration: completions -> requests, write refs dropped,
 * timeouts, stats copied into e->st. */
void eng_store_poll(struct cinfer_engine *e);
/* After eng_register: blocks [from, r->n_registered) became full; parent is
 * the key of block from - 1 (NULL when from == 0). */
void eng_store_on_register(struct cinfer_engine *e, struct eng_req *r, int32_t from, const uint8_t *parent);
/* From eng_release_blocks: forget any load in flight for r. */
void eng_store_detach(struct cinfer_engine *e, struct eng_req *r);
/* Requests currently waiting for the store. */
int32_t eng_store_n_loading(const struct cinfer_engine *e);
/* Pool references the adapter holds on a block (queued writes, loads in flight or deferred). */
int32_t eng_store_held(const struct cinfer_engine *e, int32_t block);
/* With e->mu held: waits up to a few ms for a store completion; true on timeout. */
bool eng_store_wait(struct cinfer_engine *e);

#endif
