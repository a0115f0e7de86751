/* cache.c - cinfer_grammar_cache: compiled grammars keyed by (kind, flags, text), hashed with
 * XXH3; a hit compares the full text too, so a hash collision can never return the wrong
 * grammar. Bounded by capacity (least recently used evicted). One mutex guards the table;
 * compilation runs outside it, so a slow compile never blocks hits on other specs (two threads
 * missing on the same spec may both compile; the first insert wins). Limits are not part of the
 * key: a cached grammar was compiled within the limits of the first request for it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "grammar/grammar_impl.h"

typedef struct cache_entry {
    uint64_t hash;
    cinfer_grammar_kind kind;
    uint32_t flags;
    char *text;
    size_t len;
    cinfer_grammar *g; /* NULL: empty slot */
    uint64_t last_used;
} cache_entry;

struct cinfer_grammar_cache {
    pthread_mutex_t mu;
    cache_entry *entries;
    size_t capacity;
    uint64_t tick;
};

cinfer_grammar_cache *cinfer_grammar_cache_new(size_t capacity) {
    cinfer_grammar_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->capacity = capacity ? capacity : 256;
    c->entries = calloc(c->capacity, sizeof *c->entries);
    if (!c->entries || pthread_mutex_init(&c->mu, NULL)) {
        free(c->entries);
        free(c);
        return NULL;
    }
    return c;
}

void cinfer_grammar_cache_free(cinfer_grammar_cache *c) {
    if (!c) return;
    for (size_t i = 0; i < c->capacity; i++) {
        cinfer_grammar_release(c->entries[i].g);
        free(c->entries[i].text);
    }
    free(c->entries);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static uint64_t spec_hash(const cinfer_grammar_spec *s) {
    uint64_t seed = (uint64_t)s->kind << 32 | s->flags;
    return s->text ? XXH3_64bits_withSeed(s->text, s->len, seed) : seed;
}

static int same_spec(const cache_entry *e, uint64_t h, const cinfer_grammar_spec *s) {
    if (!e->g || e->hash != h || e->kind != s->kind || e->flags != s->flags || e->len != s->len) return 0;
    return !s->len || !memcmp(e->text, s->text, s->len);
}

/* Under the lock: a new reference to the entry matching the spec, or NULL. */
static cinfer_grammar *lookup(cinfer_grammar_cache *c, uint64_t h, const cinfer_grammar_spec *s) {
    for (size_t i = 0; i < c->capacity; i++)
        if (same_spec(&c->entries[i], h, s)) {
            c->entries[i].last_used = ++c->tick;
            return cinfer_grammar_retain(c->entries[i].g);
        }
    return NULL;
}

/* Under the lock: stores g (takes a new reference) in an empty or the least recently used slot. */
static void insert(cinfer_grammar_cache *c, uint64_t h, const cinfer_grammar_spec *s, cinfer_grammar *g) {
    char *text = malloc(s->len ? s->len : 1);
    if (!text) return; /* not cached; the caller still has its grammar */
    if (s->len) memcpy(text, s->text, s->len);
    size_t victim = 0;
    for (size_t i = 0; i < c->capacity; i++) {
        if (!c->entries[i].g) {
            victim = i;
            break;
        }
        if (c->entries[i].last_used < c->entries[victim].last_used) victim = i;
    }
    cache_entry *e = &c->entries[victim];
    cinfer_grammar_release(e->g);
    free(e->text);
    *e = (cache_entry){.hash = h,
                       .kind = s->kind,
                       .flags = s->flags,
                       .text = text,
                       .len = s->len,
                       .g = cinfer_grammar_retain(g),
                       .last_used = ++c->tick};
}

cinfer_grammar *cinfer_grammar_cache_get(cinfer_grammar_cache *c, const cinfer_grammar_spec *spec,
                                         const cinfer_grammar_limits *limits, int *hit, cinfer_grammar_error *err) {
    if (hit) *hit = 0;
    if (!c || !spec) return gr_fail(err, "", -1, "no cache or spec"), NULL;
    uint64_t h = spec_hash(spec);
    pthread_mutex_lock(&c->mu);
    cinfer_grammar *g = lookup(c, h, spec);
    pthread_mutex_unlock(&c->mu);
    if (g) {
        if (hit) *hit = 1;
        return g;
    }
    g = cinfer_grammar_compile(spec, limits, err);
    if (!g) return NULL;
    pthread_mutex_lock(&c->mu);
    cinfer_grammar *other = lookup(c, h, spec);
    if (other) {
        cinfer_grammar_release(g);
        g = other;
    } else {
        insert(c, h, spec, g);
    }
    pthread_mutex_unlock(&c->mu);
    return g;
}
