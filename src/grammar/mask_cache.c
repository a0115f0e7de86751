/* mask_cache.c - the shared context-independent mask cache (see mask_cache.h): an open-addressing
 * table of immutable entries under one mutex, bounded by bytes held. */
#include "grammar/mask_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct gr_mask_cache {
    pthread_mutex_t mu;
    uint64_t vocab_hash;
    gr_ci_entry **slots;
    uint32_t cap, n;
    size_t bytes, max_bytes;
};

gr_mask_cache *gr_mask_cache_new(uint64_t vocab_hash, size_t max_bytes) {
    gr_mask_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cap = 256;
    c->slots = calloc(c->cap, sizeof *c->slots);
    if (!c->slots || pthread_mutex_init(&c->mu, NULL)) {
        free(c->slots);
        free(c);
        return NULL;
    }
    c->vocab_hash = vocab_hash;
    c->max_bytes = max_bytes;
    return c;
}

void gr_ci_entry_free(gr_ci_entry *e) {
    if (!e) return;
    free(e->items);
    free(e->mask);
    free(e->bounds);
    free(e->prefix);
    free(e->need_tok);
    free(e->need_start);
    free(e->bound_need);
    free(e);
}

void gr_mask_cache_free(gr_mask_cache *c) {
    if (!c) return;
    for (uint32_t i = 0; i < c->cap; i++) gr_ci_entry_free(c->slots[i]);
    free(c->slots);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

uint64_t gr_mask_cache_vocab(const gr_mask_cache *c) { return c->vocab_hash; }

static int same(const gr_ci_entry *e, uint64_t hash, const gr_item *items, uint32_t n) {
    return e->hash == hash && e->n_items == n && !memcmp(e->items, items, n * sizeof *items);
}

/* Under the lock. */
static gr_ci_entry **find_slot(gr_mask_cache *c, uint64_t hash, const gr_item *items, uint32_t n) {
    uint32_t mask = c->cap - 1;
    for (uint32_t h = (uint32_t)hash & mask;; h = (h + 1) & mask)
        if (!c->slots[h] || same(c->slots[h], hash, items, n)) return &c->slots[h];
}

const gr_ci_entry *gr_mask_cache_find(gr_mask_cache *c, uint64_t hash, const gr_item *items, uint32_t n) {
    pthread_mutex_lock(&c->mu);
    const gr_ci_entry *e = *find_slot(c, hash, items, n);
    pthread_mutex_unlock(&c->mu);
    return e;
}

static int grow(gr_mask_cache *c) {
    uint32_t cap = c->cap * 2;
    gr_ci_entry **s = calloc(cap, sizeof *s);
    if (!s) return -1;
    for (uint32_t i = 0; i < c->cap; i++) {
        gr_ci_entry *e = c->slots[i];
        if (!e) continue;
        uint32_t h = (uint32_t)e->hash & (cap - 1);
        while (s[h]) h = (h + 1) & (cap - 1);
        s[h] = e;
    }
    free(c->slots);
    c->slots = s;
    c->cap = cap;
    return 0;
}

const gr_ci_entry *gr_mask_cache_insert(gr_mask_cache *c, gr_ci_entry *e, int *kept) {
    pthread_mutex_lock(&c->mu);
    gr_ci_entry **slot = find_slot(c, e->hash, e->items, e->n_items);
    const gr_ci_entry *out = e;
    *kept = 0;
    if (*slot) {
        out = *slot;
        gr_ci_entry_free(e);
        *kept = 1;
    } else if (c->bytes + e->bytes <= c->max_bytes && ((c->n + 1) * 2 <= c->cap || !grow(c))) {
        *find_slot(c, e->hash, e->items, e->n_items) = e;
        c->n++;
        c->bytes += e->bytes;
        *kept = 1;
    }
    pthread_mutex_unlock(&c->mu);
    return out;
}
