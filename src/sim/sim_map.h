/* sim_map.h - the block tables of the simulator's cache tiers (accelerator
 * memory prefix caches, the store, the window-state tier): an open-addressing
 * hash map from a nonzero 64-bit chain key to its last use, expiry and
 * traffic class. Linear probing with backward-shift deletion (no
 * tombstones); the table doubles at 1/2 load. The map owns its arrays.
 *
 * Bounded tiers (capacity > 0) evict by least recent use in batches: when an
 * insert finds the map full, the oldest eighth of the entries go at once
 * (one sort of the use stamps), so an insert costs O(1) amortized. The store
 * tier is unbounded here: its capacity is enforced by the store's own GC
 * decision (store_gc_lru_victims), run by sim_store.c. */
#ifndef CINFER_SIM_SIM_MAP_H
#define CINFER_SIM_SIM_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct sim_map_ent {
    uint64_t key; /* 0: empty slot */
    double used; /* last use (simulated seconds) */
    double expires; /* store tier: expiry (seconds); others: unused */
    int32_t cls; /* traffic class */
} sim_map_ent;

typedef struct sim_map {
    sim_map_ent *v;
    size_t cap, n; /* slots (power of two), live entries */
    size_t limit; /* most live entries; 0: unbounded */
    uint64_t evicted; /* entries dropped by the LRU batches */
    double *scratch; /* use stamps for the eviction sort */
} sim_map;

int sim_map_init(sim_map *m, size_t limit);
void sim_map_free(sim_map *m);
sim_map_ent *sim_map_get(const sim_map *m, uint64_t key);
/* Inserts key (or returns its entry), evicting first if the map is full;
 * NULL only on no memory. A new entry is zeroed except for its key. */
sim_map_ent *sim_map_put(sim_map *m, uint64_t key);
void sim_map_del(sim_map *m, uint64_t key);

#endif
