/* earley.h - the Earley recognizer over bytes that every matcher runs (one chart per matcher).
 *
 * The chart is a stack of Earley sets, one per accepted byte plus set 0. An item is a dotted
 * position in the grammar (cfg.h) and the set it started in. Each set is closed (prediction with
 * the nullable rule of Aycock & Horspool, completion) when it is pushed, and caches the union of
 * the byte classes its items can scan next (next_bytes), so a byte nothing can scan is rejected
 * without touching the items. Because the grammar has only productive symbols (gr_cfg_finalize
 * drops the rest), a non-empty set means the bytes so far are a viable prefix.
 * Invariants: n_sets >= 1 after init; sets are immutable once pushed; pop_to only truncates.
 * Buffers grow geometrically and are kept, so steady-state scanning does not allocate. */
#ifndef CINFER_GRAMMAR_EARLEY_H
#define CINFER_GRAMMAR_EARLEY_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/cfg.h"
#include "grammar/scan_memo.h"

typedef struct gr_item {
    uint32_t pos;
    uint32_t origin;
} gr_item;

typedef struct gr_chart {
    const gr_cfg *g;
    gr_item *items;
    uint32_t n_items, cap_items;
    uint32_t *set_start; /* n_sets + 1 entries: set k is items[set_start[k] .. set_start[k+1]) */
    gr_class *next_bytes; /* per set */
    uint32_t n_sets, cap_sets;
    /* dedup of the set being built: open addressing over (pos, origin), stamped by gen */
    uint64_t *seen_key;
    uint32_t *seen_gen;
    uint32_t seen_cap, gen;
    /* context watch for the mask cache (mask_cache.h): a completion that reads a set below
     * `guard` other than the `readable` ones sets `crossed` (guard 0 disables the watch) */
    uint32_t guard;
    int crossed;
    const uint32_t *readable;
    uint32_t n_readable;
    gr_scan_memo *memo; /* NULL, or the transition memo of the walk in progress (scan_memo.h) */
    /* set when a set being built would exceed g->max_set_items items (the scan then fails as if
     * the byte were not viable); sticky, read through cinfer_grammar_matcher_limit_error */
    int over_limit;
    /* completion index, a cache built on demand for large finished sets: the entries of set k
     * are sx[sx_off[k] .. sx_off[k] + sx_len[k]), each (symbol after the dot) << 32 | item index,
     * sorted; sx_off[k] == GR_SX_NONE when not built. A set gets GR_SX_NONE when pushed, so an
     * index never outlives the items it was built from. */
    uint64_t *sx;
    uint32_t sx_n, sx_cap;
    uint32_t *sx_off, *sx_len; /* per set */
    /* the set being built, by the nonterminal after the dot: its items waiting on nonterminal A are
     * wait_head[A], wait_next[...], ... in item order (valid while wait_stamp[A] == wait_gen), so
     * a completion inside the set (an empty derivation) visits only them, not the whole set */
    uint32_t *wait_next; /* per item (cap_items) */
    uint32_t *wait_head, *wait_tail, *wait_stamp; /* per nonterminal */
    uint32_t wait_gen;
} gr_chart;

#define GR_SX_NONE UINT32_MAX
/* Marks set k as newly pushed (its completion index, if any, is stale). */
static inline void gr_chart_set_pushed(gr_chart *c, uint32_t k) { c->sx_off[k] = GR_SX_NONE; }

/* Pushes set 0 (the closure of S' -> . start). Returns 0 or -1 (memory). */
int gr_chart_init(gr_chart *c, const gr_cfg *g);
void gr_chart_free(gr_chart *c);
/* A deep copy of src into dst (dst uninitialized). Returns 0 or -1. */
int gr_chart_copy(gr_chart *dst, const gr_chart *src);
/* Pushes the set after byte b. Returns 1 if pushed (b is viable), 0 if not (nothing pushed),
 * -1 on allocation failure (nothing pushed). */
int gr_chart_scan(gr_chart *c, uint8_t b);
/* Makes room for set index `sets` and `items` items. Returns 0 or -1. */
int gr_chart_reserve(gr_chart *c, uint32_t sets, uint32_t items);
/* Truncates to the first n sets (1 <= n <= n_sets). */
static inline void gr_chart_pop_to(gr_chart *c, uint32_t n) {
    c->n_sets = n;
    c->n_items = c->set_start[n];
}
/* Sorts items by (pos, origin): insertion sort for the short runs sets usually are, qsort above. */
void gr_items_sort(gr_item *v, uint32_t n);
/* 1 if the last set holds S' -> start . (the bytes so far are a complete match). */
int gr_chart_accepting(const gr_chart *c);
static inline const gr_class *gr_chart_next_bytes(const gr_chart *c) { return &c->next_bytes[c->n_sets - 1]; }

#endif
