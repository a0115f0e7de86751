/* spec_ngram.c - see spec_ngram.h. Invariant: positions [SPEC_NGRAM_MIN,
 * n_indexed) are in every table whose n fits; a table slot holds p + 1 (0:
 * empty) for the latest indexed p with that n-gram before it. Each table has
 * at least twice as many slots as the capacity, so probing ends. */
#include "engine/spec_ngram.h"

#include <stdlib.h>
#include <string.h>

#define SPEC_NGRAM_TABLES (SPEC_NGRAM_MAX - SPEC_NGRAM_MIN + 1)

typedef struct spec_ngram {
    int32_t capacity, n_indexed;
    uint32_t mask; /* slots - 1 (a power of two) */
    int32_t *slots[SPEC_NGRAM_TABLES]; /* p + 1, or 0 */
} spec_ngram;

static uint32_t ngram_hash(const int32_t *t, int32_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint32_t)t[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    return (uint32_t)(h ^ (h >> 32));
}

void *spec_ngram_create(int32_t capacity) {
    if (capacity < 1) capacity = 1;
    spec_ngram *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)capacity) slots <<= 1;
    g->capacity = capacity;
    g->mask = slots - 1;
    for (int32_t t = 0; t < SPEC_NGRAM_TABLES; t++) {
        g->slots[t] = calloc(slots, sizeof(int32_t));
        if (!g->slots[t]) {
            for (int32_t u = 0; u < t; u++) free(g->slots[u]);
            free(g);
            return NULL;
        }
    }
    return g;
}

static void ngram_free(void *state) {
    spec_ngram *g = state;
    if (!g) return;
    for (int32_t t = 0; t < SPEC_NGRAM_TABLES; t++) free(g->slots[t]);
    free(g);
}

/* The slot for seq[end-n..end) in table n: the one holding it, or the empty one where it goes. */
static int32_t *ngram_slot(const spec_ngram *g, const int32_t *seq, int32_t end, int32_t n) {
    int32_t *tab = g->slots[n - SPEC_NGRAM_MIN];
    const int32_t *key = seq + end - n;
    for (uint32_t h = ngram_hash(key, n) & g->mask;; h = (h + 1) & g->mask) {
        int32_t v = tab[h];
        if (v == 0) return &tab[h];
        int32_t p = v - 1;
        if (!memcmp(seq + p - n, key, (size_t)n * sizeof(int32_t))) return &tab[h];
    }
}

/* Indexes positions up to n - 1 (each with its continuation seq[p] known). */
static void ngram_index(spec_ngram *g, const int32_t *seq, int32_t n) {
    if (n > g->capacity) n = g->capacity;
    if (g->n_indexed < SPEC_NGRAM_MIN) g->n_indexed = SPEC_NGRAM_MIN;
    for (int32_t p = g->n_indexed; p < n; p++)
        for (int32_t k = SPEC_NGRAM_MIN; k <= SPEC_NGRAM_MAX && k <= p; k++) *ngram_slot(g, seq, p, k) = p + 1;
    if (n > g->n_indexed) g->n_indexed = n;
}

static int32_t ngram_propose(void *state, const int32_t *seq, int32_t n, int32_t k, int32_t *out, float *q,
                             bool *has_q) {
    (void)q;
    spec_ngram *g = state;
    *has_q = false;
    if (n > g->capacity) return 0;
    ngram_index(g, seq, n);
    for (int32_t len = SPEC_NGRAM_MAX; len >= SPEC_NGRAM_MIN; len--) {
        if (len > n - 1) continue;
        int32_t v = *ngram_slot(g, seq, n, len);
        if (v == 0) continue;
        int32_t p = v - 1; /* seq[p-len..p) == seq[n-len..n), p < n */
        for (int32_t j = 0; j < k; j++) {
            int32_t x = p + j;
            out[j] = x < n ? seq[x] : out[x - n]; /* past the end: the proposal itself (period n - p) */
        }
        return k;
    }
    return 0;
}

static void ngram_rollback(void *state, int32_t n_valid) {
    (void)state; /* the index covers committed tokens only */
    (void)n_valid;
}

const spec_drafter_ops spec_ngram_ops = {
    .name = "ngram",
    .propose = ngram_propose,
    .rollback = ngram_rollback,
    .free = ngram_free,
};
