/* spec_ngram.c - see spec_ngram.h. Invariants: positions [SPEC_NGRAM_MIN,
 * n_indexed) are indexed for every n <= p; a table slot holds p + 1 (0:
 * empty) for the latest indexed p whose preceding n tokens are its key, and
 * prev[n][p] the previous such p + 1 (0: none), so chains run strictly
 * backwards. Each table has at least twice as many slots as the capacity,
 * so probing ends. */
#include "engine/spec_ngram.h"

#include <stdlib.h>
#include <string.h>

#include "cinfer/engine.h"

#define SPEC_NGRAM_TABLES (SPEC_NGRAM_MAX - SPEC_NGRAM_MIN + 1)
#define SPEC_NGRAM_CANDS 8 /* distinct continuations counted per lookup */
#define SPEC_NGRAM_MIN_CONF 0.25f /* a draft stops where the product of its confidences falls below this */

typedef struct spec_ngram {
    int32_t capacity, n_indexed;
    uint32_t mask; /* slots - 1 (a power of two) */
    int32_t *slots[SPEC_NGRAM_TABLES]; /* p + 1, or 0 */
    int32_t *prev[SPEC_NGRAM_TABLES]; /* [capacity]: the previous occurrence's p + 1, or 0 */
} spec_ngram;

/* One lookup's answer: the continuation to draft and how sure it is. */
typedef struct ngram_pick {
    int32_t token;
    float conf;
} ngram_pick;

static uint32_t ngram_hash(const int32_t *t, int32_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int32_t i = 0; i < n; i++) {
        h ^= (uint32_t)t[i];
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 29;
    }
    return (uint32_t)(h ^ (h >> 32));
}

static void ngram_free(void *state) {
    spec_ngram *g = state;
    if (!g) return;
    for (int32_t t = 0; t < SPEC_NGRAM_TABLES; t++) {
        free(g->slots[t]);
        free(g->prev[t]);
    }
    free(g);
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
        g->prev[t] = calloc((size_t)capacity, sizeof(int32_t));
        if (!g->slots[t] || !g->prev[t]) {
            ngram_free(g);
            return NULL;
        }
    }
    return g;
}

/* The slot of table n for the n-gram key[0..n): the one holding it, or the empty one where it goes. */
static int32_t *ngram_slot(const spec_ngram *g, const int32_t *seq, const int32_t *key, int32_t n) {
    int32_t *tab = g->slots[n - SPEC_NGRAM_MIN];
    for (uint32_t h = ngram_hash(key, n) & g->mask;; h = (h + 1) & g->mask) {
        int32_t v = tab[h];
        if (v == 0) return &tab[h];
        if (!memcmp(seq + (v - 1) - n, key, (size_t)n * sizeof(int32_t))) return &tab[h];
    }
}

/* Indexes positions up to n - 1 (each with its continuation seq[p] known). */
static void ngram_index(spec_ngram *g, const int32_t *seq, int32_t n) {
    if (n > g->capacity) n = g->capacity;
    if (g->n_indexed < SPEC_NGRAM_MIN) g->n_indexed = SPEC_NGRAM_MIN;
    for (int32_t p = g->n_indexed; p < n; p++)
        for (int32_t k = SPEC_NGRAM_MIN; k <= SPEC_NGRAM_MAX && k <= p; k++) {
            int32_t *slot = ngram_slot(g, seq, seq + p - k, k);
            g->prev[k - SPEC_NGRAM_MIN][p] = *slot;
            *slot = p + 1;
        }
    if (n > g->n_indexed) g->n_indexed = n;
}

/* Confidence of a continuation seen `best` times among `total` occurrences of a key of length n:
 * its share, shrunk towards a prior that trusts longer keys more (a key seen once is a guess). */
static float ngram_conf(int32_t best, int32_t total, int32_t n) {
    float prior = 0.35f + 0.1f * (float)(n < 5 ? n : 5);
    return ((float)best + prior) / ((float)total + 1.0f);
}

/* Distinct tokens and how often each was seen, in the order first seen. */
typedef struct ngram_tally {
    int32_t tok[SPEC_NGRAM_CANDS], cnt[SPEC_NGRAM_CANDS], n_cand, total;
} ngram_tally;

static void tally_add(ngram_tally *t, int32_t token) {
    int32_t c = 0;
    while (c < t->n_cand && t->tok[c] != token) c++;
    if (c == t->n_cand && t->n_cand < SPEC_NGRAM_CANDS) {
        t->tok[c] = token;
        t->cnt[t->n_cand++] = 0;
    }
    if (c < t->n_cand) t->cnt[c]++;
    t->total++;
}

/* The most frequent token (ties: the first seen) with its confidence for a key of length n. */
static ngram_pick tally_pick(const ngram_tally *t, int32_t n) {
    if (t->n_cand == 0) return (ngram_pick){-1, 0.0f};
    int32_t best = 0;
    for (int32_t c = 1; c < t->n_cand; c++)
        if (t->cnt[c] > t->cnt[best]) best = c;
    return (ngram_pick){t->tok[best], ngram_conf(t->cnt[best], t->total, n)};
}

/* The most frequent continuation among the latest SPEC_NGRAM_WALK occurrences of the longest
 * n-gram ending ctx[0..len) that occurred in seq[0..n_seq). When none did (the last token is new
 * to the sequence), the most frequent of the last SPEC_NGRAM_WALK committed tokens, as a key of
 * length 0: a guess, but a verify row costs little next to the weight read (bench/README.md).
 * conf 0: nothing to propose. */
static ngram_pick ngram_lookup(const spec_ngram *g, const int32_t *seq, int32_t n_seq, const int32_t *ctx,
                               int32_t len) {
    ngram_tally t = {.n_cand = 0};
    int32_t n_max = len < SPEC_NGRAM_MAX ? len : SPEC_NGRAM_MAX;
    for (int32_t n = n_max; n >= SPEC_NGRAM_MIN; n--) {
        int32_t v = *ngram_slot(g, seq, ctx + len - n, n);
        if (v == 0) continue;
        for (int32_t walk = 0; v != 0 && walk < SPEC_NGRAM_WALK; walk++, v = g->prev[n - SPEC_NGRAM_MIN][v - 1])
            tally_add(&t, seq[v - 1]); /* latest first */
        return tally_pick(&t, n);
    }
    for (int32_t p = n_seq - 1; p >= 0 && p >= n_seq - SPEC_NGRAM_WALK; p--) tally_add(&t, seq[p]);
    return tally_pick(&t, 0);
}

static int32_t ngram_propose(void *state, const int32_t *seq, int32_t n, int32_t k, int32_t *out, float *q,
                             bool *has_q) {
    (void)q;
    spec_ngram *g = state;
    *has_q = false;
    if (n > g->capacity || k <= 0) return 0;
    ngram_index(g, seq, n);
    /* ctx: the last SPEC_NGRAM_MAX committed tokens, then the drafts */
    int32_t ctx[SPEC_NGRAM_MAX + CINFER_SPEC_MAX_K];
    int32_t head = n < SPEC_NGRAM_MAX ? n : SPEC_NGRAM_MAX, len = head;
    memcpy(ctx, seq + n - head, (size_t)head * sizeof(int32_t));
    if (k > CINFER_SPEC_MAX_K) k = CINFER_SPEC_MAX_K;
    float conf = 1.0f;
    int32_t drafted = 0;
    while (drafted < k) {
        ngram_pick p = ngram_lookup(g, seq, n, ctx, len);
        conf *= p.conf;
        if (p.token < 0 || (drafted > 0 && conf < SPEC_NGRAM_MIN_CONF)) break;
        out[drafted++] = p.token;
        ctx[len++] = p.token;
    }
    return drafted;
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
