/* sim_map.c - see sim_map.h. */
#include "sim/sim_map.h"

#include <stdbool.h>
#include <stdlib.h>

static size_t slot_of(uint64_t key, size_t cap) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1); }

int sim_map_init(sim_map *m, size_t limit) {
    *m = (sim_map){.limit = limit, .cap = 1024};
    m->v = calloc(m->cap, sizeof *m->v);
    return m->v ? 0 : -1;
}

void sim_map_free(sim_map *m) {
    free(m->v);
    free(m->scratch);
    *m = (sim_map){0};
}

sim_map_ent *sim_map_get(const sim_map *m, uint64_t key) {
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->v[i].key == key) return &m->v[i];
        if (m->v[i].key == 0) return NULL;
    }
}

static int grow(sim_map *m) {
    size_t cap = m->cap * 2;
    sim_map_ent *v = calloc(cap, sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->v[i].key) continue;
        size_t j = slot_of(m->v[i].key, cap);
        while (v[j].key) j = (j + 1) & (cap - 1);
        v[j] = m->v[i];
    }
    free(m->v);
    m->v = v;
    m->cap = cap;
    return 0;
}

void sim_map_del(sim_map *m, uint64_t key) {
    size_t mask = m->cap - 1, i = slot_of(key, m->cap);
    while (m->v[i].key != key) {
        if (m->v[i].key == 0) return;
        i = (i + 1) & mask;
    }
    m->v[i].key = 0;
    m->n--;
    /* backward shift: move later entries of the run into the hole when their home allows it */
    for (size_t j = (i + 1) & mask; m->v[j].key; j = (j + 1) & mask) {
        size_t home = slot_of(m->v[j].key, m->cap);
        bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            m->v[i] = m->v[j];
            m->v[j].key = 0;
            i = j;
        }
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Drops the oldest eighth (at least one entry) of a full bounded map. */
static int evict_batch(sim_map *m) {
    if (!m->scratch) {
        m->scratch = malloc(m->limit * sizeof *m->scratch);
        if (!m->scratch) return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < m->cap && k < m->limit; i++)
        if (m->v[i].key) m->scratch[k++] = m->v[i].used;
    qsort(m->scratch, k, sizeof *m->scratch, cmp_double);
    size_t drop = k / 8 ? k / 8 : 1;
    double cutoff = m->scratch[drop - 1];
    size_t dropped = 0;
    for (size_t i = 0; i < m->cap && dropped < drop;) {
        if (m->v[i].key && m->v[i].used <= cutoff) {
            sim_map_del(m, m->v[i].key); /* a shifted entry may now sit at i: look again */
            dropped++;
            m->evicted++;
        } else {
            i++;
        }
    }
    return 0;
}

sim_map_ent *sim_map_put(sim_map *m, uint64_t key) {
    sim_map_ent *e = sim_map_get(m, key);
    if (e) return e;
    if (m->limit && m->n >= m->limit && evict_batch(m)) return NULL;
    if (2 * (m->n + 1) > m->cap && grow(m)) return NULL;
    size_t i = slot_of(key, m->cap);
    while (m->v[i].key) i = (i + 1) & (m->cap - 1);
    m->v[i] = (sim_map_ent){.key = key};
    m->n++;
    return &m->v[i];
}
