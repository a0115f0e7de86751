/* mask.c - token masks: cinfer_grammar_matcher_fill_mask.
 *
 * A mask is a depth-first walk of the vocabulary trie that pushes one Earley set per trie edge
 * and prunes a subtree as soon as a byte is not viable. Most of that walk depends only on the
 * top Earley set (see mask_cache.h), so it is done once per canonical top set and cached: a
 * mask is then a copy of the cached context-independent mask plus a real walk from each cached
 * boundary node (the trie nodes whose bytes complete a rule started before the current
 * position), reached by replaying the boundary's bytes with prefix sharing between consecutive
 * boundaries. On a cache miss the walk runs over interned states (scan_memo.h); where every byte
 * below a trie node is known to lead from the node's state back to that state (inside a string
 * or a digit run), the node's whole subtree is accepted without walking it. Invariant: the chart
 * is back at its height on return. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "grammar/matcher_impl.h"

void gr_mask_scratch_free(gr_mask_scratch *s) {
    free(s->sig);
    free(s->origins);
    free(s->readable);
    free(s->path);
    free(s->replay);
    free(s->path_state);
    free(s->bounds);
    free(s->pool);
    gr_scan_memo_free(&s->memo);
    memset(s, 0, sizeof *s);
}

/* Marks the tokens whose bytes end at trie node `node` (a run of trie_tokens: read in walk order,
 * unlike a chain through same_next, which jumps around by token id). */
static inline void mark_tokens(const cinfer_grammar_vocab *v, uint32_t node, uint32_t *mask) {
    const gr_trie_node *nd = &v->nodes[node];
    for (uint32_t i = nd->tok_lo; i < nd->tok_lo + nd->n_own; i++) {
        uint32_t t = v->trie_tokens[i];
        mask[t >> 5] |= 1u << (t & 31);
    }
}

/* Marks every token at or below trie node `node`. */
static void mark_subtree(const cinfer_grammar_vocab *v, uint32_t node, uint32_t *mask) {
    const gr_trie_node *nd = &v->nodes[node];
    for (uint32_t i = nd->tok_lo; i < nd->tok_hi; i++) {
        uint32_t t = v->trie_tokens[i];
        mask[t >> 5] |= 1u << (t & 31);
    }
}

static int class_within(const gr_class *a, const gr_class *b) {
    return !((a->bits[0] & ~b->bits[0]) | (a->bits[1] & ~b->bits[1]) | (a->bits[2] & ~b->bits[2]) |
             (a->bits[3] & ~b->bits[3]));
}

/* Checked before class_within on a node's below_bytes: a state that loops on no byte (a counted
 * repetition) then skips loading them. */
static inline int class_nonempty(const gr_class *c) { return (c->bits[0] | c->bits[1] | c->bits[2] | c->bits[3]) != 0; }

/* The full walk below trie node `node` with the real chart. */
static void walk(cinfer_grammar_matcher *m, uint32_t node, uint32_t *mask) {
    const cinfer_grammar_vocab *v = m->v;
    const gr_trie_node *nd = &v->nodes[node];
    uint32_t height = m->chart.n_sets;
    for (uint32_t e = nd->first_edge; e < nd->first_edge + nd->n_edges; e++) {
        uint8_t b = v->edge_byte[e];
        if (!gr_class_has(gr_chart_next_bytes(&m->chart), b) || gr_chart_scan(&m->chart, b) != 1) continue;
        uint32_t child = v->edge_node[e];
        mark_tokens(v, child, mask);
        if (v->nodes[child].n_edges) walk(m, child, mask);
        gr_chart_pop_to(&m->chart, height);
    }
}

int gr_mask_add_boundary(gr_mask_scratch *s, uint32_t node, const uint8_t *path, uint32_t len) {
    if (s->n_bounds == s->cap_bounds) {
        uint32_t n = s->cap_bounds ? s->cap_bounds * 2 : 256;
        gr_boundary *b = realloc(s->bounds, n * sizeof *b);
        if (!b) return -1;
        s->bounds = b;
        s->cap_bounds = n;
    }
    if (s->n_pool + len > s->cap_pool) {
        uint32_t n = s->cap_pool ? s->cap_pool : 4096;
        while (n < s->n_pool + len) n *= 2;
        uint8_t *p = realloc(s->pool, n);
        if (!p) return -1;
        s->pool = p;
        s->cap_pool = n;
    }
    memcpy(s->pool + s->n_pool, path, len);
    s->bounds[s->n_bounds++] = (gr_boundary){node, s->n_pool, len};
    s->n_pool += len;
    return 0;
}

/* The context-independent walk below `node` (chart guard set): tokens reached without reading a
 * set below the guard go to mask; where a byte's closure reads one, the node is a boundary. */
static int ci_walk(cinfer_grammar_matcher *m, uint32_t node, uint32_t depth, uint32_t *mask) {
    const cinfer_grammar_vocab *v = m->v;
    const gr_trie_node *nd = &v->nodes[node];
    uint32_t height = m->chart.n_sets;
    for (uint32_t e = nd->first_edge; e < nd->first_edge + nd->n_edges; e++) {
        uint8_t b = v->edge_byte[e];
        if (!gr_class_has(gr_chart_next_bytes(&m->chart), b)) continue;
        m->chart.crossed = 0;
        int r = gr_chart_scan(&m->chart, b);
        if (r < 0 && !m->chart.over_limit) return -1;
        if (r <= 0) continue; /* not viable, or over the item limit (left out of the mask) */
        uint32_t child = v->edge_node[e];
        m->ms.path[depth] = b;
        int rc = 0;
        if (m->chart.crossed) rc = gr_mask_add_boundary(&m->ms, child, m->ms.path, depth + 1);
        else {
            mark_tokens(v, child, mask);
            if (v->nodes[child].n_edges) rc = ci_walk(m, child, depth + 1, mask);
        }
        gr_chart_pop_to(&m->chart, height);
        if (rc) return -1;
    }
    return 0;
}

/* The walk over memo states: no chart work while every transition is known. The chart holds the
 * sets of the current path up to depth `*valid` (the rest is pushed from the states when a real
 * scan is needed). path_state[d] is the state at depth d. */
typedef struct state_walk {
    cinfer_grammar_matcher *m;
    uint32_t *mask;
    int32_t *path_state;
    uint32_t base, valid;
} state_walk;

/* Makes the chart hold the current path's sets up to depth d. Returns 0 or -1. */
static int materialize(state_walk *w, uint32_t d) {
    gr_chart *c = &w->m->chart;
    gr_chart_pop_to(c, w->base + 1 + w->valid);
    while (w->valid < d) {
        if (gr_memo_push(c, w->path_state[w->valid + 1])) return -1;
        w->valid++;
    }
    return 0;
}

static int state_ci_walk(state_walk *w, uint32_t node, uint32_t depth) {
    cinfer_grammar_matcher *m = w->m;
    const cinfer_grammar_vocab *v = m->v;
    gr_scan_memo *memo = &m->ms.memo;
    const gr_trie_node *nd = &v->nodes[node];
    int32_t q = w->path_state[depth];
    for (uint32_t e = nd->first_edge; e < nd->first_edge + nd->n_edges; e++) {
        uint8_t b = v->edge_byte[e];
        if (!gr_class_has(&memo->st_bytes[q], b)) continue;
        int32_t t = memo->trans[(size_t)q * 256 + b];
        uint32_t child = v->edge_node[e];
        m->ms.path[depth] = b;
        if (t == -2) { /* unknown: a real scan from the materialized path records it */
            if (materialize(w, depth)) return -1;
            m->chart.crossed = 0;
            int r = gr_chart_scan(&m->chart, b);
            if (r < 0 && !m->chart.over_limit) return -1;
            if (r < 0) continue; /* over the item limit: left out of the mask */
            t = memo->trans[(size_t)q * 256 + b];
            if (r == 1 && t == -2) { /* not internable: finish this subtree on the chart */
                int rc = 0;
                if (m->chart.crossed) rc = gr_mask_add_boundary(&m->ms, child, m->ms.path, depth + 1);
                else {
                    mark_tokens(v, child, w->mask);
                    if (v->nodes[child].n_edges) rc = ci_walk(m, child, depth + 1, w->mask);
                }
                gr_chart_pop_to(&m->chart, w->base + 1 + depth);
                if (rc) return -1;
                continue;
            }
            gr_chart_pop_to(&m->chart, w->base + 1 + depth);
        }
        if (t < 0) continue;
        if (t & 1) {
            if (gr_mask_add_boundary(&m->ms, child, m->ms.path, depth + 1)) return -1;
            continue;
        }
        if (v->nodes[child].n_edges && class_nonempty(&memo->st_loop[t >> 1]) &&
            class_within(&v->below_bytes[child], &memo->st_loop[t >> 1])) {
            mark_subtree(v, child, w->mask); /* every byte below loops back to t: all accepted */
            continue;
        }
        mark_tokens(v, child, w->mask);
        if (!v->nodes[child].n_edges) continue;
        w->path_state[depth + 1] = t >> 1;
        if (w->valid > depth) w->valid = depth; /* the chart's deeper sets were another path's */
        if (state_ci_walk(w, child, depth + 1)) return -1;
        if (w->valid > depth) w->valid = depth;
    }
    return 0;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t sorted_unique(uint32_t *v, uint32_t n) {
    qsort(v, n, sizeof *v, cmp_u32);
    uint32_t u = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!u || v[u - 1] != v[i]) v[u++] = v[i];
    return u;
}

static int reserve_sig(gr_mask_scratch *s, uint32_t n) {
    if (n <= s->cap_sig) return 0;
    uint32_t cap = s->cap_sig ? s->cap_sig : 256;
    while (cap < n) cap *= 2;
    free(s->sig);
    free(s->origins);
    free(s->readable);
    s->sig = malloc(cap * sizeof *s->sig);
    s->origins = malloc(cap * sizeof *s->origins);
    s->readable = malloc(cap * sizeof *s->readable);
    s->cap_sig = cap;
    return s->sig && s->origins && s->readable ? 0 : -1;
}

/* Appends the items of set j to the signature, origins renamed to their rank among the u sorted
 * old origins (the top set's own index k -> GR_ORIGIN_HERE), sorted. */
static uint32_t append_set(gr_mask_scratch *s, const gr_chart *c, uint32_t j, uint32_t k, uint32_t u, uint32_t at) {
    uint32_t lo = c->set_start[j], hi = c->set_start[j + 1], start = at;
    for (uint32_t i = lo; i < hi; i++) {
        gr_item it = c->items[i];
        if (it.origin == k) it.origin = GR_ORIGIN_HERE;
        else {
            uint32_t *r = bsearch(&it.origin, s->origins, u, sizeof *s->origins, cmp_u32);
            it.origin = (uint32_t)(r - s->origins);
        }
        s->sig[at++] = it;
    }
    gr_items_sort(s->sig + start, at - start);
    return at;
}

/* Fills ms.sig with the canonical signature of the context the cached part of a mask depends on:
 * the top set, then each set its items' origins name (the readable sets, ms.readable), origins
 * renamed by rank. Returns its item count, or -1 (memory). */
static int64_t signature(cinfer_grammar_matcher *m, uint64_t *hash) {
    gr_chart *c = &m->chart;
    gr_mask_scratch *s = &m->ms;
    uint32_t k = c->n_sets - 1, lo = c->set_start[k], n_top = c->set_start[k + 1] - lo;
    if (reserve_sig(s, n_top + 1)) return -1;
    uint32_t n_read = 0;
    for (uint32_t i = 0; i < n_top; i++)
        if (c->items[lo + i].origin != k) s->readable[n_read++] = c->items[lo + i].origin;
    n_read = sorted_unique(s->readable, n_read);
    uint32_t total = n_top + 1 + n_read;
    for (uint32_t r = 0; r < n_read; r++) total += c->set_start[s->readable[r] + 1] - c->set_start[s->readable[r]];
    if (reserve_sig(s, total)) return -1;
    /* recollect: reserve_sig may have replaced the buffers */
    n_read = 0;
    for (uint32_t i = 0; i < n_top; i++)
        if (c->items[lo + i].origin != k) s->readable[n_read++] = c->items[lo + i].origin;
    n_read = sorted_unique(s->readable, n_read);
    uint32_t u = 0;
    for (uint32_t i = 0; i < n_top; i++)
        if (c->items[lo + i].origin != k) s->origins[u++] = c->items[lo + i].origin;
    for (uint32_t r = 0; r < n_read; r++)
        for (uint32_t i = c->set_start[s->readable[r]]; i < c->set_start[s->readable[r] + 1]; i++)
            s->origins[u++] = c->items[i].origin;
    u = sorted_unique(s->origins, u);
    uint32_t at = append_set(s, c, k, k, u, 0);
    for (uint32_t r = 0; r < n_read; r++) {
        s->sig[at++] = (gr_item){UINT32_MAX - 1, c->set_start[s->readable[r] + 1] - c->set_start[s->readable[r]]};
        at = append_set(s, c, s->readable[r], k, u, at);
    }
    s->n_readable = n_read;
    *hash = XXH3_64bits(s->sig, at * sizeof *s->sig);
    return at;
}

/* Computes the entry for the current top set (a cache miss) and offers it to the cache. */
static const gr_ci_entry *build_entry(cinfer_grammar_matcher *m, uint64_t hash, uint32_t n, int *kept) {
    gr_mask_scratch *s = &m->ms;
    size_t words = cinfer_grammar_mask_words(m->v);
    gr_ci_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->mask = calloc(words, sizeof *e->mask);
    e->items = malloc((n ? n : 1) * sizeof *e->items);
    if (!e->mask || !e->items) goto fail;
    if (n) memcpy(e->items, s->sig, n * sizeof *e->items);
    e->n_items = n;
    e->hash = hash;
    s->n_bounds = s->n_pool = 0;
    m->chart.guard = m->chart.n_sets - 1;
    m->chart.readable = s->readable;
    m->chart.n_readable = s->n_readable;
    int rc;
    int32_t q0 = -1;
    if (!gr_scan_memo_reset(&s->memo, m->chart.guard, m->v->max_depth)) {
        m->chart.memo = &s->memo;
        q0 = gr_memo_state_of(&m->chart, m->chart.guard);
    }
    if (q0 >= 0) {
        state_walk w = {.m = m, .mask = e->mask, .path_state = s->path_state, .base = m->chart.guard, .valid = 0};
        s->path_state[0] = q0;
        rc = state_ci_walk(&w, 0, 0);
        gr_chart_pop_to(&m->chart, w.base + 1);
    } else {
        rc = ci_walk(m, 0, 0, e->mask);
    }
    m->chart.memo = NULL;
    m->chart.guard = 0;
    m->chart.readable = NULL;
    m->chart.n_readable = 0;
    if (rc) goto fail;
    e->n_bounds = s->n_bounds;
    e->bounds = malloc((s->n_bounds ? s->n_bounds : 1) * sizeof *e->bounds);
    e->prefix = malloc(s->n_pool ? s->n_pool : 1);
    if (!e->bounds || !e->prefix) goto fail;
    if (s->n_bounds) memcpy(e->bounds, s->bounds, s->n_bounds * sizeof *e->bounds);
    if (s->n_pool) memcpy(e->prefix, s->pool, s->n_pool);
    e->bytes = sizeof *e + words * 4 + n * sizeof *e->items + s->n_bounds * sizeof *e->bounds + s->n_pool;
    return gr_mask_cache_insert(m->cache, e, kept);
fail:
    gr_ci_entry_free(e);
    return NULL;
}

/* The full walk below trie node `node` from the chart's top set, over memo states where the
 * memo knows that set (chart.memo set, guard 0: nothing is a boundary). Falls back to the plain
 * walk when the set is not internable or memory runs out. Leaves the chart at its height. */
static void replay_subtree(cinfer_grammar_matcher *m, uint32_t node, uint32_t *mask) {
    uint32_t top = m->chart.n_sets - 1;
    int32_t q = m->chart.memo ? gr_memo_state_of(&m->chart, top) : -1;
    if (q >= 0) {
        state_walk w = {.m = m, .mask = mask, .path_state = m->ms.path_state, .base = top, .valid = 0};
        m->ms.path_state[0] = q;
        int rc = state_ci_walk(&w, node, 0);
        gr_chart_pop_to(&m->chart, top + 1);
        if (!rc) return;
    }
    walk(m, node, mask); /* marking twice is harmless: both walks mark only allowed tokens */
}

/* Walks each boundary of e with the real chart, sharing replayed prefixes. One scan memo based
 * at the top set serves every boundary, so the sets that several boundaries reach (the
 * continuations after a lexeme ends) are closed once per mask. */
void gr_mask_replay(cinfer_grammar_matcher *m, const gr_ci_entry *e, uint32_t *mask) {
    const cinfer_grammar_vocab *v = m->v;
    uint32_t base = m->chart.n_sets, have = 0;
    uint8_t *cur = m->ms.replay;
    if (!e->n_bounds) return;
    if (!gr_scan_memo_reset(&m->ms.memo, base - 1, v->max_depth)) m->chart.memo = &m->ms.memo;
    for (uint32_t i = 0; i < e->n_bounds; i++) {
        const gr_boundary *b = &e->bounds[i];
        const uint8_t *p = e->prefix + b->prefix_off;
        uint32_t common = 0;
        while (common < have && common < b->prefix_len && p[common] == cur[common]) common++;
        gr_chart_pop_to(&m->chart, base + common);
        have = common;
        int ok = 1;
        while (have < b->prefix_len) {
            if (gr_chart_scan(&m->chart, p[have]) != 1) {
                ok = 0;
                break;
            }
            cur[have] = p[have];
            have++;
        }
        if (!ok) continue;
        mark_tokens(v, b->node, mask);
        if (v->nodes[b->node].n_edges) replay_subtree(m, b->node, mask);
    }
    m->chart.memo = NULL;
    gr_chart_pop_to(&m->chart, base);
}

static int ensure_scratch(cinfer_grammar_matcher *m) {
    gr_mask_scratch *s = &m->ms;
    if (s->path) return 0;
    s->path = malloc(m->v->max_depth + 1);
    s->replay = malloc(m->v->max_depth + 1);
    s->path_state = malloc((m->v->max_depth + 2) * sizeof *s->path_state);
    return s->path && s->replay && s->path_state ? 0 : -1;
}

int cinfer_grammar_matcher_fill_mask(cinfer_grammar_matcher *m, uint32_t *mask, size_t n_words) {
    if (!m || !mask) return 0;
    size_t words = cinfer_grammar_mask_words(m->v);
    memset(mask, 0, n_words * sizeof *mask);
    if (n_words < words || m->terminated || ensure_scratch(m)) return 0;
    if (gr_mask_lexeme(m, mask)) goto done;
    uint64_t hash = 0;
    int64_t n = signature(m, &hash);
    const gr_ci_entry *e = n < 0 ? NULL : gr_mask_cache_find(m->cache, hash, m->ms.sig, (uint32_t)n);
    int kept = 1;
    if (!e && n >= 0) e = build_entry(m, hash, (uint32_t)n, &kept);
    if (e) {
        memcpy(mask, e->mask, words * sizeof *mask);
        gr_mask_replay(m, e, mask);
        if (!kept) gr_ci_entry_free((gr_ci_entry *)e);
    } else {
        walk(m, 0, mask); /* out of memory for the cache: the plain walk */
    }
done:
    if (m->chart.over_limit) atomic_store(&m->g->limit_hit, 1); /* cached masks may now lack tokens */
    if (gr_chart_accepting(&m->chart))
        for (uint32_t i = 0; i < m->v->n_eos; i++) mask[m->v->eos[i] >> 5] |= 1u << (m->v->eos[i] & 31);
    int count = 0;
    for (size_t w = 0; w < words; w++) count += __builtin_popcount(mask[w]);
    return count;
}
