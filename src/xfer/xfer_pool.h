/* xfer_pool.h - the decode worker's receive-buffer pool for KV handoffs
 * (docs/pd.md, "Receive buffers"): one bounded arena, carved into contiguous
 * runs of whole records, recycled between handoffs so the pages a handoff is
 * received into are already faulted in (first touch of fresh memory is the
 * slow part of a handoff on a VM: bench/README.md).
 *
 * Ownership: xfer_pool_get hands out a run; whoever holds it (the handoff
 * table, then the engine through cinfer_request.kv_import_release) gives it
 * back exactly once with xfer_pool_put, from any thread; the pool itself
 * lives until its owner freed it and every run is back. An empty pool is not
 * an error: get returns NULL and the caller waits (back-pressure) until a put.
 *
 * Invariants: the arena is mapped once at creation (optionally pre-faulted,
 * with transparent huge pages requested); runs are allocated lowest address
 * first, so a lightly used pool keeps reusing the same warm pages; free runs
 * are kept sorted by offset and merged with their neighbours; get/put never
 * allocate (the run tables are sized at creation for max_runs live runs). */
#ifndef CINFER_XFER_XFER_POOL_H
#define CINFER_XFER_XFER_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct xfer_pool xfer_pool;

typedef struct xfer_pool_stats {
    uint64_t capacity_bytes; /* the arena: whole units */
    uint64_t used_bytes; /* handed out now */
    uint64_t high_water_bytes; /* most ever handed out at once */
    uint64_t gets; /* runs handed out */
} xfer_pool_stats;

/* unit: bytes of one record; bytes: the arena bound (rounded down to whole units, at least one unit);
 * max_runs: live runs at most (a get beyond it waits like a full pool); prefault: touch every page now. */
int xfer_pool_new(size_t unit, uint64_t bytes, int32_t max_runs, bool prefault, xfer_pool **out, cf_err *err);
/* The owner lets go: freed now, or by the put that gives the last run back (an engine request may
 * still hold one when its server closes). No get after it. */
void xfer_pool_free(xfer_pool *p);
size_t xfer_pool_unit(const xfer_pool *p);
/* True when a run of n units could ever be handed out (n <= the arena). */
bool xfer_pool_fits(const xfer_pool *p, uint64_t n_units);
/* A run of n >= 1 units, or NULL while no free run is that long (back-pressure: retry after a put). */
uint8_t *xfer_pool_get(xfer_pool *p, uint64_t n_units);
/* Gives a run back (any thread). buf must be a run from this pool, given back once. */
void xfer_pool_put(xfer_pool *p, uint8_t *buf);
/* Callback shape for cinfer_request.kv_import_release: ctx is the pool. */
void xfer_pool_release(void *pool, void *buf);
bool xfer_pool_owns(const xfer_pool *p, const void *buf);
void xfer_pool_get_stats(xfer_pool *p, xfer_pool_stats *out);

#endif
