/* swa_state.h - the window-state tier: snapshots of a sequence's window
 * rings (the last rows of every sliding-window layer, docs/engine.md
 * "Window layer groups") taken at block boundaries along a prefix, keyed by
 * the prefix-cache chain key of the block that ends at the boundary, held in
 * host memory under their own byte budget (separate from the KV pool's).
 *
 * A snapshot at boundary B holds the ring blocks of positions
 * [B - n_blocks * bt, B) (n_blocks = the window rounded up to whole blocks),
 * every window layer, in position order; restoring it into a fresh ring lets
 * a sequence resume at B exactly (every row a pass from B reads is there).
 *
 * Memory: all slots are allocated at create (budget / slot bytes of them,
 * each `entry_floats` floats, 64-byte aligned); nothing is allocated
 * afterwards, so taking a snapshot on the engine's commit path never
 * allocates. A budget smaller than one slot makes a tier with no slots: every
 * put fails quietly, every lookup misses.
 *
 * Eviction: least recently used (put or hit) first; entries older than the
 * TTL (seconds since their last put or hit) are dropped when found and when a
 * put needs room. A pinned entry (a restore planned but not yet copied) is
 * never evicted or expired; pins are counted.
 *
 * Keys are SHA-256 chain keys, so the first 8 bytes hash the table.
 * Single-threaded: the engine thread owns the tier. Times are caller-given
 * seconds on a monotonic clock (tests pass their own). */
#ifndef CINFER_ENGINE_SWA_STATE_H
#define CINFER_ENGINE_SWA_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define SWA_KEY_BYTES 32
#define SWA_DEFAULT_MEMORY_BYTES (256LL << 20)
#define SWA_DEFAULT_TTL_S 300.0

typedef struct swa_state swa_state;

typedef struct swa_state_stats {
    int32_t slots, used, pinned; /* pinned: slots with at least one pin */
    int32_t pin_refs; /* pins held over all slots (a slot may be pinned by several restores and a write) */
    int64_t slot_bytes; /* bytes of one snapshot */
    int64_t bytes; /* bytes held by entries: used * slot_bytes */
    int64_t budget;
    uint64_t hits, misses; /* counted lookups (swa_state_find) */
    uint64_t inserts, evictions, expirations;
} swa_state_stats;

/* Creates a tier of floor(budget_bytes / slot bytes) slots of entry_floats
 * floats (entry_floats > 0, budget >= 0, ttl_s > 0). */
int swa_state_create(int64_t budget_bytes, int64_t entry_floats, double ttl_s, swa_state **out, cf_err *err);
void swa_state_free(swa_state *s);

/* Is a live entry stored under key? No stats, no LRU touch, no expiry (for
 * the scheduler's peeks). */
bool swa_state_has(const swa_state *s, const uint8_t key[SWA_KEY_BYTES], double now);
/* The entry's slot (LRU touched, a hit counted) or -1 (a miss counted; an
 * expired entry is dropped). */
int32_t swa_state_find(swa_state *s, const uint8_t key[SWA_KEY_BYTES], double now);
/* A slot to fill for a new entry under key (inserted now, most recently
 * used), evicting expired then least recently used unpinned entries; NULL
 * when the key is already stored (its time is refreshed) or no slot can be
 * had. The caller fills all entry_floats floats before the next call. */
float *swa_state_put(swa_state *s, const uint8_t key[SWA_KEY_BYTES], double now);
const float *swa_state_data(const swa_state *s, int32_t slot);
/* The slot whose data starts at `data` (a pointer swa_state_put returned). */
int32_t swa_state_slot_of(const swa_state *s, const float *data);
/* Drops every unpinned entry older than the TTL (the LRU is in time order, so
 * this stops at the first live one); returns how many. */
int32_t swa_state_expire(swa_state *s, double now);
void swa_state_pin(swa_state *s, int32_t slot);
void swa_state_unpin(swa_state *s, int32_t slot);
/* Changes whenever an entry is added or removed (for cached peeks). */
uint64_t swa_state_version(const swa_state *s);
swa_state_stats swa_state_get_stats(const swa_state *s);
/* Recounts the LRU, free list, table and pins. 0, or -1 with why. */
int swa_state_check(const swa_state *s, char *why, size_t cap);

#endif
