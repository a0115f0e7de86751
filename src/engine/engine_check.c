/* engine_check.c - the engine's debug invariant checker (eng_check_invariants,
 * engine_internal.h). Owns nothing: it reads the pool, the prefix cache, the
 * store adapter's held references and every active request, on the engine
 * thread, and says what is wrong. Built into every build; the engine loop
 * calls it after every step only when compiled with CINFER_CHECK_INVARIANTS
 * (set by CINFER_SANITIZE), where a violation aborts with the message.
 *
 * Invariants checked:
 *  - pool: free stack, LRU and counts agree; free + cached + used == total
 *    (kv_pool_check);
 *  - prefix cache: table entries, per-block keys and the pool's cached flags
 *    agree (prefix_cache_check);
 *  - references: every block's reference count equals the number of block
 *    tables of active requests that hold it plus the references of the store
 *    adapter (queued writes, loads) - nothing else holds blocks;
 *  - requests: a valid state; 0 <= n_registered <= n_blocks <= max_blocks;
 *    block ids in range; registered blocks are cached; finished, waiting and
 *    preempted requests hold no blocks; SCHED_LOADING iff a store chain is
 *    attached, and the adapter's count of loading requests matches;
 *  - window rings (models with window layers): a request holds a ring iff it
 *    is running or loading from the store, no two requests hold the same ring, and the pool's count of
 *    used rings equals the rings held;
 *  - window-state tier (swa_state_check): LRU, free list and table agree;
 *    its pinned entries are exactly the restores requests have planned, plus
 *    at most one per snapshot write to the store in flight. */
#include <stdio.h>
#include <stdlib.h>

#include "engine/engine_internal.h"
#include "engine/engine_swa_store.h"

static int eng_check_req(const cinfer_engine *e, const eng_req *r, int32_t *expect, char *why, size_t cap) {
    unsigned long long id = (unsigned long long)r->id;
    int32_t nb = kv_pool_n_blocks(e->kv);
    if (r->state != SCHED_WAITING && r->state != SCHED_RUNNING && r->state != SCHED_PREEMPTED &&
        r->state != SCHED_LOADING)
        return snprintf(why, cap, "request %llu: invalid state %d", id, (int)r->state), -1;
    if (r->n_blocks < 0 || r->n_blocks > r->max_blocks || r->n_registered < 0 || r->n_registered > r->n_blocks)
        return snprintf(why, cap, "request %llu: %d registered of %d blocks (capacity %d)", id, r->n_registered,
                        r->n_blocks, r->max_blocks),
               -1;
    if (r->n_blocks > 0 && (r->done || r->state == SCHED_WAITING || r->state == SCHED_PREEMPTED))
        return snprintf(why, cap, "request %llu: holds %d blocks while %s", id, r->n_blocks,
                        r->done                     ? "finished"
                        : r->state == SCHED_WAITING ? "waiting"
                                                    : "preempted"),
               -1;
    if (e->window_rings && (r->ring >= 0) != (!r->done && (r->state == SCHED_RUNNING || r->state == SCHED_LOADING)))
        return snprintf(why, cap, "request %llu: ring %d in state %d (done %d)", id, r->ring, (int)r->state, r->done),
               -1;
    if ((r->state == SCHED_LOADING) != (r->st_chain != NULL))
        return snprintf(why, cap, "request %llu: state %d with%s a store chain", id, (int)r->state,
                        r->st_chain ? "" : "out"),
               -1;
    for (int32_t b = 0; b < r->n_blocks; b++) {
        int32_t blk = r->blocks[b];
        if (blk < 0 || blk >= nb) return snprintf(why, cap, "request %llu: block %d is id %d", id, b, blk), -1;
        if (b < r->n_registered && !kv_pool_is_cached(e->kv, blk))
            return snprintf(why, cap, "request %llu: registered block %d (id %d) is not cached", id, b, blk), -1;
        expect[blk]++;
    }
    if (r->n_dblocks < 0 || r->n_dblocks > r->max_blocks || (r->n_dblocks > 0 && !r->dblocks))
        return snprintf(why, cap, "request %llu: %d draft blocks (capacity %d)", id, r->n_dblocks, r->max_blocks), -1;
    if (r->n_dblocks > 0 && (r->done || r->state != SCHED_RUNNING))
        return snprintf(why, cap, "request %llu: holds %d draft blocks while not running", id, r->n_dblocks), -1;
    for (int32_t b = 0; b < r->n_dblocks; b++) {
        int32_t blk = r->dblocks[b];
        if (blk < 0 || blk >= nb) return snprintf(why, cap, "request %llu: draft block %d is id %d", id, b, blk), -1;
        expect[blk]++;
    }
    return 0;
}

int eng_check_invariants(cinfer_engine *e, char *why, size_t cap) {
    if (kv_pool_check(e->kv, why, cap)) return -1;
    if (prefix_cache_check(e->pc, why, cap)) return -1;
    int32_t nb = kv_pool_n_blocks(e->kv);
    int32_t *expect = calloc((size_t)nb, sizeof *expect);
    if (!expect) return snprintf(why, cap, "out of memory"), -1;
    int rc = 0;
    int32_t loading = 0;
    for (int32_t i = 0; i < e->n_active && rc == 0; i++) {
        rc = eng_check_req(e, e->active[i], expect, why, cap);
        loading += e->active[i]->st_chain != NULL;
    }
    int32_t rings = 0;
    for (int32_t i = 0; e->window_rings && i < e->n_active && rc == 0; i++) {
        rings += e->active[i]->ring >= 0;
        for (int32_t j = 0; j < i && e->active[i]->ring >= 0; j++)
            if (e->active[j]->ring == e->active[i]->ring) {
                snprintf(why, cap, "two requests hold ring %d", e->active[i]->ring);
                rc = -1;
            }
    }
    if (rc == 0 && rings != kv_pool_get_stats(e->kv).rings_used) {
        snprintf(why, cap, "requests hold %d rings, the pool counts %d used", rings,
                 kv_pool_get_stats(e->kv).rings_used);
        rc = -1;
    }
    if (rc == 0 && e->swa) {
        int32_t pins = 0;
        for (int32_t i = 0; i < e->n_active; i++) pins += e->active[i]->swa_slot >= 0;
        /* every planned restore and every snapshot write in flight holds one pin (several may share a slot) */
        int32_t writing = eng_swa_store_writing(e), pin_refs = swa_state_get_stats(e->swa).pin_refs;
        if (swa_state_check(e->swa, why, cap)) rc = -1;
        else if (pin_refs != pins + writing) {
            snprintf(why, cap, "requests plan %d window-state restores, %d snapshot writes run, the tier holds %d pins",
                     pins, writing, pin_refs);
            rc = -1;
        }
    }
    if (rc == 0 && loading != eng_store_n_loading(e)) {
        snprintf(why, cap, "%d requests hold a store chain, the store adapter counts %d", loading,
                 eng_store_n_loading(e));
        rc = -1;
    }
    for (int32_t b = 0; b < nb && rc == 0; b++) {
        int32_t held = eng_store_held(e, b), refs = kv_pool_refs(e->kv, b);
        if (held < 0 || refs != expect[b] + held) {
            snprintf(why, cap, "block %d: %d references, but %d block tables and %d store references hold it", b, refs,
                     expect[b], held);
            rc = -1;
        }
    }
    free(expect);
    return rc;
}

void eng_check_or_abort(cinfer_engine *e, const char *where) {
    char why[256];
    if (eng_check_invariants(e, why, sizeof why) == 0) return;
    fprintf(stderr, "cinfer: engine invariant violated (%s): %s\n", where, why);
    abort();
}
