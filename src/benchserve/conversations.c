/* conversations.c - see conversations.h.
 *
 * Prefixes of hash-id lists are found through an open-addressing table keyed
 * by a rolling hash of the prefix; each entry names the first line that had
 * the prefix and its length, and a lookup compares the ids themselves, so
 * hash collisions never link lines wrongly. Parents always come earlier, so a
 * line's root is its parent's root. */
#include "benchserve/conversations.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "benchserve/textgen.h"

typedef struct prefix_entry {
    uint64_t h;
    size_t line; /* SIZE_MAX = empty */
    size_t len;
} prefix_entry;

typedef struct prefix_table {
    prefix_entry *e;
    size_t mask;
} prefix_table;

static int same_prefix(const bs_trace *t, size_t a, size_t b, size_t len) {
    return !memcmp(t->reqs[a].hash, t->reqs[b].hash, len * sizeof(uint64_t));
}

/* The slot of (line's first len ids, hash h): the entry holding it, or the empty slot where it goes. */
static prefix_entry *table_slot(prefix_table *pt, const bs_trace *t, uint64_t h, size_t line, size_t len) {
    for (size_t i = (size_t)h & pt->mask;; i = (i + 1) & pt->mask) {
        prefix_entry *e = &pt->e[i];
        if (e->line == SIZE_MAX) return e;
        if (e->h == h && e->len == len && same_prefix(t, e->line, line, len)) return e;
    }
}

/* parent[j]: the line j continues, or SIZE_MAX. */
static int find_parents(const bs_trace *t, size_t *parent, cf_err *err) {
    size_t total = 0;
    for (size_t j = 0; j < t->n; j++) total += t->reqs[j].n_hash;
    size_t cap = 16;
    while (cap < 2 * total) cap *= 2;
    prefix_table pt = {.e = malloc(cap * sizeof *pt.e), .mask = cap - 1};
    uint64_t *hs = malloc((total ? total : 1) * sizeof *hs);
    if (!pt.e || !hs) {
        free(pt.e);
        free(hs);
        return cf_fail(err, "out of memory grouping %zu trace lines", t->n);
    }
    for (size_t i = 0; i < cap; i++) pt.e[i].line = SIZE_MAX;
    for (size_t j = 0; j < t->n; j++) {
        const bs_trace_req *r = &t->reqs[j];
        uint64_t h = 0x9e3779b97f4a7c15ull;
        for (size_t k = 0; k < r->n_hash; k++) hs[k] = h = bs_rng_mix(h, r->hash[k]); /* hs[k]: first k + 1 ids */
        parent[j] = SIZE_MAX;
        for (size_t k = r->n_hash > 0 ? r->n_hash - 1 : 0; k >= 2 && parent[j] == SIZE_MAX; k--) {
            prefix_entry *e = table_slot(&pt, t, hs[k - 1], j, k);
            if (e->line != SIZE_MAX) parent[j] = e->line;
        }
        for (size_t k = 2; k <= r->n_hash; k++) {
            prefix_entry *e = table_slot(&pt, t, hs[k - 1], j, k);
            if (e->line == SIZE_MAX) *e = (prefix_entry){.h = hs[k - 1], .line = j, .len = k};
        }
    }
    free(pt.e);
    free(hs);
    return 0;
}

static int fits(const bs_trace *t, const bs_conv_opts *o, const size_t *lines, size_t n) {
    if (o->max_context <= 0) return 1;
    for (size_t k = 0; k < n; k++) {
        const bs_trace_req *r = &t->reqs[lines[k]];
        long out = o->max_output > 0 && r->output_len > o->max_output ? o->max_output : r->output_len;
        if (bs_trace_scaled_input(r, o->block) + (out < 1 ? 1 : out) > o->max_context) return 0;
    }
    return 1;
}

int bs_conv_group(const bs_trace *t, const bs_conv_opts *o, bs_convs *out, cf_err *err) {
    *out = (bs_convs){0};
    if (o->min_turns < 1 || o->max_turns < 0 || o->block < 1 || o->limit < 0)
        return cf_fail(err, "conversations: min turns must be >= 1, max turns, limit >= 0, block >= 1");
    size_t n = t->n, *parent = malloc((n ? n : 1) * sizeof *parent), *root = malloc((n ? n : 1) * sizeof *root);
    size_t *count = calloc(n ? n : 1, sizeof *count), *at = malloc((n ? n : 1) * sizeof *at);
    size_t *chain = malloc((n ? n : 1) * sizeof *chain);
    out->first = malloc((n + 1) * sizeof *out->first);
    out->lines = malloc((n ? n : 1) * sizeof *out->lines);
    int rc = 0;
    if (!parent || !root || !count || !at || !chain || !out->first || !out->lines)
        rc = cf_fail(err, "out of memory grouping %zu trace lines", n);
    if (!rc) rc = find_parents(t, parent, err);
    if (!rc) {
        for (size_t j = 0; j < n; j++) {
            root[j] = parent[j] == SIZE_MAX ? j : root[parent[j]];
            count[root[j]]++;
        }
        size_t off = 0; /* chain: every conversation's lines, in order of its root */
        for (size_t j = 0; j < n; j++) {
            at[j] = off;
            off += count[j];
        }
        for (size_t j = 0; j < n; j++) chain[at[root[j]]++] = j;
        size_t used = 0;
        out->first[0] = 0;
        for (size_t j = 0, start = 0; j < n; start += count[j], j++) {
            if (!count[j] || count[j] < (size_t)o->min_turns) continue;
            out->qualified++;
            size_t keep = o->max_turns > 0 && count[j] > (size_t)o->max_turns ? (size_t)o->max_turns : count[j];
            if ((o->limit && out->n >= (size_t)o->limit) || !fits(t, o, chain + start, keep)) continue;
            memcpy(out->lines + used, chain + start, keep * sizeof *chain);
            used += keep;
            out->first[++out->n] = used;
        }
    }
    free(parent);
    free(root);
    free(count);
    free(at);
    free(chain);
    if (rc) bs_convs_free(out);
    return rc;
}

void bs_convs_free(bs_convs *c) {
    free(c->first);
    free(c->lines);
    *c = (bs_convs){0};
}
