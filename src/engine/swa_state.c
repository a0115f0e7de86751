/* swa_state.c - the window-state tier (swa_state.h): a fixed slab of
 * equal-size snapshot slots, a chained hash table from chain key to slot,
 * and one doubly linked LRU list (head = least recently used).
 *
 * Invariants: a slot is either on the free list (used == false, in no chain,
 * not on the LRU) or used (in exactly one chain, on the LRU); used slots +
 * free slots == slots; a pinned slot is used. */
#include "engine/swa_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SWA_NIL (-1)
#define SWA_ALIGN 64

typedef struct swa_slot {
    uint8_t key[SWA_KEY_BYTES];
    double t; /* last put or hit */
    int32_t chain; /* next slot in the bucket */
    int32_t prev, next; /* LRU links; next doubles as the free-list link */
    int32_t pins;
    bool used;
} swa_slot;

struct swa_state {
    int32_t n_slots, n_used, n_pinned, n_pin_refs;
    int64_t entry_floats, slot_stride; /* stride in floats */
    int64_t budget;
    double ttl;
    float *mem;
    swa_slot *slots;
    int32_t *buckets;
    uint32_t bucket_mask;
    int32_t lru_head, lru_tail, free_head;
    uint64_t version;
    uint64_t hits, misses, inserts, evictions, expirations;
};

static uint32_t swa_bucket(const swa_state *s, const uint8_t key[SWA_KEY_BYTES]) {
    uint64_t h;
    memcpy(&h, key, sizeof h);
    return (uint32_t)(h ^ (h >> 32)) & s->bucket_mask;
}

int swa_state_create(int64_t budget_bytes, int64_t entry_floats, double ttl_s, swa_state **out, cf_err *err) {
    *out = NULL;
    if (entry_floats <= 0 || budget_bytes < 0 || !(ttl_s > 0))
        return cf_fail(err, "window-state tier: bad sizes (entry %lld floats, budget %lld bytes, ttl %g s)",
                       (long long)entry_floats, (long long)budget_bytes, ttl_s);
    swa_state *s = calloc(1, sizeof *s);
    if (!s) return cf_fail(err, "out of memory for the window-state tier");
    int64_t stride_bytes = (entry_floats * (int64_t)sizeof(float) + SWA_ALIGN - 1) / SWA_ALIGN * SWA_ALIGN;
    int64_t per_slot = stride_bytes + (int64_t)sizeof(swa_slot) +
                       4 * (int64_t)sizeof(int32_t); /* slot, slot header, hash buckets (<= 4 per slot) */
    int64_t n = budget_bytes / per_slot;
    if (n > INT32_MAX / 4) n = INT32_MAX / 4;
    s->n_slots = (int32_t)n;
    s->entry_floats = entry_floats;
    s->slot_stride = stride_bytes / (int64_t)sizeof(float);
    s->budget = budget_bytes;
    s->ttl = ttl_s;
    uint32_t nb = 1;
    while (nb < 2u * (uint32_t)(n > 0 ? n : 1)) nb <<= 1;
    s->bucket_mask = nb - 1;
    s->buckets = malloc((size_t)nb * sizeof(int32_t));
    s->slots = calloc((size_t)(n > 0 ? n : 1), sizeof(swa_slot));
    s->mem = n > 0 ? aligned_alloc(SWA_ALIGN, (size_t)(n * stride_bytes)) : NULL;
    if (!s->buckets || !s->slots || (n > 0 && !s->mem)) {
        swa_state_free(s);
        return cf_fail(err, "window-state tier: cannot allocate %lld slots of %lld bytes", (long long)n,
                       (long long)stride_bytes);
    }
    for (uint32_t b = 0; b < nb; b++) s->buckets[b] = SWA_NIL;
    s->lru_head = s->lru_tail = SWA_NIL;
    s->free_head = SWA_NIL;
    for (int32_t i = s->n_slots - 1; i >= 0; i--) {
        s->slots[i].next = s->free_head;
        s->free_head = i;
    }
    *out = s;
    return 0;
}

void swa_state_free(swa_state *s) {
    if (!s) return;
    free(s->mem);
    free(s->slots);
    free(s->buckets);
    free(s);
}

static int32_t swa_lookup(const swa_state *s, const uint8_t key[SWA_KEY_BYTES]) {
    for (int32_t i = s->buckets[swa_bucket(s, key)]; i != SWA_NIL; i = s->slots[i].chain)
        if (!memcmp(s->slots[i].key, key, SWA_KEY_BYTES)) return i;
    return SWA_NIL;
}

static void swa_lru_unlink(swa_state *s, int32_t i) {
    swa_slot *e = &s->slots[i];
    if (e->prev != SWA_NIL) s->slots[e->prev].next = e->next;
    else s->lru_head = e->next;
    if (e->next != SWA_NIL) s->slots[e->next].prev = e->prev;
    else s->lru_tail = e->prev;
    e->prev = e->next = SWA_NIL;
}

static void swa_lru_append(swa_state *s, int32_t i) {
    swa_slot *e = &s->slots[i];
    e->prev = s->lru_tail;
    e->next = SWA_NIL;
    if (s->lru_tail != SWA_NIL) s->slots[s->lru_tail].next = i;
    else s->lru_head = i;
    s->lru_tail = i;
}

/* Drops a used, unpinned slot: out of its chain and the LRU, onto the free list. */
static void swa_drop(swa_state *s, int32_t i) {
    swa_slot *e = &s->slots[i];
    int32_t *link = &s->buckets[swa_bucket(s, e->key)];
    while (*link != i) link = &s->slots[*link].chain;
    *link = e->chain;
    swa_lru_unlink(s, i);
    e->used = false;
    e->next = s->free_head;
    s->free_head = i;
    s->n_used--;
    s->version++;
}

static bool swa_expired(const swa_state *s, const swa_slot *e, double now) { return now - e->t > s->ttl; }

bool swa_state_has(const swa_state *s, const uint8_t key[SWA_KEY_BYTES], double now) {
    int32_t i = swa_lookup(s, key);
    return i != SWA_NIL && (s->slots[i].pins > 0 || !swa_expired(s, &s->slots[i], now));
}

int32_t swa_state_find(swa_state *s, const uint8_t key[SWA_KEY_BYTES], double now) {
    int32_t i = swa_lookup(s, key);
    if (i != SWA_NIL && s->slots[i].pins == 0 && swa_expired(s, &s->slots[i], now)) {
        swa_drop(s, i);
        s->expirations++;
        i = SWA_NIL;
    }
    if (i == SWA_NIL) {
        s->misses++;
        return SWA_NIL;
    }
    s->hits++;
    s->slots[i].t = now;
    swa_lru_unlink(s, i);
    swa_lru_append(s, i);
    return i;
}

int32_t swa_state_expire(swa_state *s, double now) {
    int32_t n = 0;
    for (int32_t i = s->lru_head; i != SWA_NIL;) { /* oldest first: stop at the first live entry */
        int32_t nx = s->slots[i].next;
        if (!swa_expired(s, &s->slots[i], now)) break;
        if (s->slots[i].pins == 0) {
            swa_drop(s, i);
            s->expirations++;
            n++;
        }
        i = nx;
    }
    return n;
}

/* A free slot: the free list, else an expired or the least recently used unpinned entry. */
static int32_t swa_take_slot(swa_state *s, double now) {
    if (s->free_head == SWA_NIL) (void)swa_state_expire(s, now);
    if (s->free_head == SWA_NIL) {
        int32_t i = s->lru_head;
        while (i != SWA_NIL && s->slots[i].pins > 0) i = s->slots[i].next;
        if (i == SWA_NIL) return SWA_NIL;
        swa_drop(s, i);
        s->evictions++;
    }
    int32_t i = s->free_head;
    s->free_head = s->slots[i].next;
    return i;
}

float *swa_state_put(swa_state *s, const uint8_t key[SWA_KEY_BYTES], double now) {
    int32_t i = swa_lookup(s, key);
    if (i != SWA_NIL) {
        s->slots[i].t = now;
        swa_lru_unlink(s, i);
        swa_lru_append(s, i);
        return NULL;
    }
    if (s->n_slots == 0 || (i = swa_take_slot(s, now)) == SWA_NIL) return NULL;
    swa_slot *e = &s->slots[i];
    memcpy(e->key, key, SWA_KEY_BYTES);
    e->t = now;
    e->pins = 0;
    e->used = true;
    uint32_t b = swa_bucket(s, key);
    e->chain = s->buckets[b];
    s->buckets[b] = i;
    swa_lru_append(s, i);
    s->n_used++;
    s->inserts++;
    s->version++;
    return s->mem + (int64_t)i * s->slot_stride;
}

const float *swa_state_data(const swa_state *s, int32_t slot) { return s->mem + (int64_t)slot * s->slot_stride; }

int32_t swa_state_slot_of(const swa_state *s, const float *data) { return (int32_t)((data - s->mem) / s->slot_stride); }

void swa_state_pin(swa_state *s, int32_t slot) {
    if (s->slots[slot].pins++ == 0) s->n_pinned++;
    s->n_pin_refs++;
}

void swa_state_unpin(swa_state *s, int32_t slot) {
    if (--s->slots[slot].pins == 0) s->n_pinned--;
    s->n_pin_refs--;
}

uint64_t swa_state_version(const swa_state *s) { return s->version; }

swa_state_stats swa_state_get_stats(const swa_state *s) {
    int64_t slot_bytes = s->slot_stride * (int64_t)sizeof(float);
    return (swa_state_stats){.slots = s->n_slots,
                             .used = s->n_used,
                             .pinned = s->n_pinned,
                             .pin_refs = s->n_pin_refs,
                             .slot_bytes = slot_bytes,
                             .bytes = (int64_t)s->n_used * slot_bytes,
                             .budget = s->budget,
                             .hits = s->hits,
                             .misses = s->misses,
                             .inserts = s->inserts,
                             .evictions = s->evictions,
                             .expirations = s->expirations};
}

int swa_state_check(const swa_state *s, char *why, size_t cap) {
    int32_t n_lru = 0, n_free = 0, n_pinned = 0, n_chained = 0, n_refs = 0;
    for (int32_t i = s->lru_head, prev = SWA_NIL; i != SWA_NIL; prev = i, i = s->slots[i].next) {
        if (!s->slots[i].used || s->slots[i].prev != prev || ++n_lru > s->n_slots) {
            snprintf(why, cap, "window-state tier: LRU broken at slot %d", i);
            return -1;
        }
        if (swa_lookup(s, s->slots[i].key) != i) {
            snprintf(why, cap, "window-state tier: slot %d not found under its key", i);
            return -1;
        }
        n_pinned += s->slots[i].pins > 0;
        n_refs += s->slots[i].pins;
    }
    for (int32_t i = s->free_head; i != SWA_NIL; i = s->slots[i].next)
        if (s->slots[i].used || ++n_free > s->n_slots) {
            snprintf(why, cap, "window-state tier: free list broken at slot %d", i);
            return -1;
        }
    for (uint32_t b = 0; b <= s->bucket_mask; b++)
        for (int32_t i = s->buckets[b]; i != SWA_NIL && n_chained <= s->n_slots; i = s->slots[i].chain) n_chained++;
    if (n_lru != s->n_used || n_lru + n_free != s->n_slots || n_chained != s->n_used || n_pinned != s->n_pinned ||
        n_refs != s->n_pin_refs) {
        snprintf(why, cap,
                 "window-state tier: counts (lru %d free %d chained %d used %d slots %d pinned %d/%d pins %d/%d)",
                 n_lru, n_free, n_chained, s->n_used, s->n_slots, n_pinned, s->n_pinned, n_refs, s->n_pin_refs);
        return -1;
    }
    return 0;
}
