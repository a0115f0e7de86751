/* earley.c - Earley set construction over bytes (see earley.h for the chart layout).
 * Owns the closure loop (predict, complete, nullable shortcut) and the per-set dedup table. */
#include "grammar/earley.h"

#include "grammar/lexeme.h"

#include <stdlib.h>
#include <string.h>

static int reserve_items(gr_chart *c, uint32_t need) {
    if (need <= c->cap_items) return 0;
    uint32_t n = c->cap_items ? c->cap_items : 256;
    while (n < need) n *= 2;
    gr_item *p = realloc(c->items, (size_t)n * sizeof *p);
    if (!p) return -1;
    c->items = p;
    uint32_t *w = realloc(c->wait_next, (size_t)n * sizeof *w);
    if (!w) return -1;
    c->wait_next = w;
    c->cap_items = n;
    return 0;
}

/* Allocates the per-nonterminal wait lists (chart init and copy). Returns 0 or -1. */
static int wait_alloc(gr_chart *c) {
    size_t n = c->g->n_nts ? c->g->n_nts : 1;
    c->wait_head = malloc(n * sizeof *c->wait_head);
    c->wait_tail = malloc(n * sizeof *c->wait_tail);
    c->wait_stamp = calloc(n, sizeof *c->wait_stamp);
    c->wait_gen = 0;
    return c->wait_head && c->wait_tail && c->wait_stamp ? 0 : -1;
}

/* Starts the wait lists of a new set being built. */
static void wait_begin(gr_chart *c) {
    if (++c->wait_gen == 0) {
        memset(c->wait_stamp, 0, (c->g->n_nts ? c->g->n_nts : 1) * sizeof *c->wait_stamp);
        c->wait_gen = 1;
    }
}

static int reserve_sets(gr_chart *c, uint32_t need) {
    if (need + 1 <= c->cap_sets) return 0;
    uint32_t n = c->cap_sets ? c->cap_sets : 64;
    while (n < need + 1) n *= 2;
    uint32_t *s = realloc(c->set_start, (size_t)n * sizeof *s);
    if (!s) return -1;
    c->set_start = s;
    gr_class *b = realloc(c->next_bytes, (size_t)n * sizeof *b);
    if (!b) return -1;
    c->next_bytes = b;
    uint32_t *o = realloc(c->sx_off, (size_t)n * sizeof *o);
    if (!o) return -1;
    c->sx_off = o;
    uint32_t *l = realloc(c->sx_len, (size_t)n * sizeof *l);
    if (!l) return -1;
    c->sx_len = l;
    c->cap_sets = n;
    return 0;
}

static int seen_grow(gr_chart *c, uint32_t cap) {
    uint64_t *k = malloc((size_t)cap * sizeof *k);
    uint32_t *g = calloc(cap, sizeof *g);
    if (!k || !g) {
        free(k);
        free(g);
        return -1;
    }
    free(c->seen_key);
    free(c->seen_gen);
    c->seen_key = k;
    c->seen_gen = g;
    c->seen_cap = cap;
    c->gen = 0;
    return 0;
}

/* Starts a new dedup generation for a set that will be built from item index `from`. */
static int seen_reset(gr_chart *c) {
    if (++c->gen == 0) {
        memset(c->seen_gen, 0, (size_t)c->seen_cap * sizeof *c->seen_gen);
        c->gen = 1;
    }
    return 0;
}

static int seen_insert(gr_chart *c, uint64_t key) {
    uint32_t mask = c->seen_cap - 1;
    uint32_t h = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & mask;
    while (c->seen_gen[h] == c->gen) {
        if (c->seen_key[h] == key) return 0;
        h = (h + 1) & mask;
    }
    c->seen_gen[h] = c->gen;
    c->seen_key[h] = key;
    return 1;
}

/* Re-inserts the items of the set being built after a dedup table growth. */
static int seen_rebuild(gr_chart *c, uint32_t from) {
    if (seen_grow(c, c->seen_cap * 2)) return -1;
    seen_reset(c);
    for (uint32_t i = from; i < c->n_items; i++) seen_insert(c, (uint64_t)c->items[i].pos << 32 | c->items[i].origin);
    return 0;
}

/* Adds an item to the set being built (starting at `from`) unless present. */
static int add_item(gr_chart *c, uint32_t from, uint32_t pos, uint32_t origin) {
    if ((c->n_items - from + 1) * 2 > c->seen_cap && seen_rebuild(c, from)) return -1;
    if (!seen_insert(c, (uint64_t)pos << 32 | origin)) return 0;
    if (c->g->max_set_items && c->n_items - from >= c->g->max_set_items) {
        c->over_limit = 1;
        return -1;
    }
    if (reserve_items(c, c->n_items + 1)) return -1;
    uint32_t i = c->n_items++;
    c->items[i] = (gr_item){pos, origin};
    int32_t a = gr_pos_plain(c->g, pos) ? c->g->rhs[pos] : -1;
    if (a >= 0) { /* waits on nonterminal a: append to a's list */
        c->wait_next[i] = UINT32_MAX;
        if (c->wait_stamp[a] != c->wait_gen) {
            c->wait_stamp[a] = c->wait_gen;
            c->wait_head[a] = i;
        } else {
            c->wait_next[c->wait_tail[a]] = i;
        }
        c->wait_tail[a] = i;
    }
    return 0;
}

/* Sets at least this large get a completion index when an item completes against them: below
 * it, a linear pass over the set is as cheap as a binary search. */
#define SX_MIN_SET 48

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The completion index of finished set o (built now unless cached): out and n receive its sorted
 * (symbol << 32 | item index) entries. Returns 0 or -1 (memory). The index buffer is a cache:
 * when it outgrows the items four times over, every set's entry is dropped and it starts over. */
static int sym_index(gr_chart *c, uint32_t o, const uint64_t **out, uint32_t *n) {
    if (c->sx_off[o] == GR_SX_NONE) {
        uint32_t lo = c->set_start[o], hi = c->set_start[o + 1];
        if (c->sx_n + (hi - lo) > 4 * c->n_items + 1024) {
            for (uint32_t k = 0; k < c->n_sets; k++) c->sx_off[k] = GR_SX_NONE;
            c->sx_n = 0;
        }
        if (c->sx_n + (hi - lo) > c->sx_cap) {
            uint32_t cap = c->sx_cap ? c->sx_cap : 1024;
            while (cap < c->sx_n + (hi - lo)) cap *= 2;
            uint64_t *p = realloc(c->sx, (size_t)cap * sizeof *p);
            if (!p) return -1;
            c->sx = p;
            c->sx_cap = cap;
        }
        uint64_t *e = c->sx + c->sx_n;
        uint32_t m = 0;
        for (uint32_t j = lo; j < hi; j++) {
            uint32_t pos = c->items[j].pos;
            if (!gr_pos_plain(c->g, pos) || c->g->rhs[pos] < 0) continue;
            e[m++] = (uint64_t)(uint32_t)c->g->rhs[pos] << 32 | j;
        }
        qsort(e, m, sizeof *e, cmp_u64);
        c->sx_off[o] = c->sx_n;
        c->sx_len[o] = m;
        c->sx_n += m;
    }
    *out = c->sx + c->sx_off[o];
    *n = c->sx_len[o];
    return 0;
}

/* Advances the items of set `o` whose dot is before nonterminal lhs (lhs was just completed
 * with origin o) into the set being built. Returns 0 or -1 (memory). */
static int complete(gr_chart *c, uint32_t k, uint32_t from, uint32_t o, int32_t lhs) {
    const gr_cfg *g = c->g;
    uint32_t lo = c->set_start[o];
    uint32_t hi = o == k ? c->n_items : c->set_start[o + 1];
    if (o == k) { /* the set being built: its wait list, as it stands now (later items wait on lhs
                   * through the nullable shortcut at prediction) */
        if (c->wait_stamp[lhs] != c->wait_gen) return 0;
        for (uint32_t j = c->wait_head[lhs]; j != UINT32_MAX && j < hi; j = c->wait_next[j])
            if (add_item(c, from, c->items[j].pos + 1, c->items[j].origin)) return -1;
        return 0;
    }
    if (hi - lo < SX_MIN_SET) {
        for (uint32_t j = lo; j < hi; j++) {
            gr_item w = c->items[j];
            if (gr_pos_plain(g, w.pos) && g->rhs[w.pos] == lhs && add_item(c, from, w.pos + 1, w.origin)) return -1;
        }
        return 0;
    }
    const uint64_t *e;
    uint32_t n;
    if (sym_index(c, o, &e, &n)) return -1;
    uint64_t key = (uint64_t)(uint32_t)lhs << 32;
    uint32_t a = 0, b = n; /* first entry >= key */
    while (a < b) {
        uint32_t mid = a + (b - a) / 2;
        if (e[mid] < key) a = mid + 1;
        else b = mid;
    }
    for (; a < n && (e[a] >> 32) == (uint32_t)lhs; a++) {
        gr_item w = c->items[(uint32_t)e[a]];
        if (add_item(c, from, w.pos + 1, w.origin)) return -1;
    }
    return 0;
}

/* Closes the set that starts at item index `from` (set number k) and records its next bytes. */
static int closure(gr_chart *c, uint32_t k, uint32_t from) {
    const gr_cfg *g = c->g;
    gr_class *nb = &c->next_bytes[k];
    memset(nb, 0, sizeof *nb);
    for (uint32_t i = from; i < c->n_items; i++) {
        gr_item it = c->items[i];
        int32_t sym = g->rhs[gr_pos_at(g, it.pos)];
        if (sym == GR_END) {
            int32_t lhs = g->prods[g->pos_prod[it.pos]].lhs;
            if (it.origin < c->guard && !c->crossed) {
                uint32_t r = 0;
                while (r < c->n_readable && c->readable[r] != it.origin) r++;
                if (r == c->n_readable) c->crossed = 1;
            }
            if (complete(c, k, from, it.origin, lhs)) return -1;
        } else if (sym >= 0) {
            for (uint32_t p = g->prod_first[sym]; p < g->prod_first[sym + 1]; p++)
                if (add_item(c, from, g->prods[p].rhs_start, k)) return -1;
            if (g->nullable[sym] && add_item(c, from, it.pos + 1, it.origin)) return -1;
        } else {
            uint32_t st = gr_pos_state(g, it.pos);
            const gr_class *cl =
                gr_sym_is_dfa(sym) ? &g->dfas[gr_sym_dfa(sym)]->live[st ? st : 1] : &g->classes[-sym - 1];
            for (int w = 0; w < 4; w++) nb->bits[w] |= cl->bits[w];
        }
    }
    return 0;
}

int gr_chart_init(gr_chart *c, const gr_cfg *g) {
    memset(c, 0, sizeof *c);
    c->g = g;
    if (reserve_sets(c, 1) || reserve_items(c, 256) || seen_grow(c, 256) || wait_alloc(c)) {
        gr_chart_free(c);
        return -1;
    }
    c->set_start[0] = 0;
    gr_chart_set_pushed(c, 0);
    seen_reset(c);
    wait_begin(c);
    if (add_item(c, 0, g->aug_pos, 0) || closure(c, 0, 0)) {
        gr_chart_free(c);
        return -1;
    }
    c->n_sets = 1;
    c->set_start[1] = c->n_items;
    return 0;
}

void gr_chart_free(gr_chart *c) {
    free(c->items);
    free(c->set_start);
    free(c->next_bytes);
    free(c->seen_key);
    free(c->seen_gen);
    free(c->sx);
    free(c->sx_off);
    free(c->sx_len);
    free(c->wait_next);
    free(c->wait_head);
    free(c->wait_tail);
    free(c->wait_stamp);
    memset(c, 0, sizeof *c);
}

int gr_chart_copy(gr_chart *dst, const gr_chart *src) {
    memset(dst, 0, sizeof *dst);
    dst->g = src->g;
    if (reserve_sets(dst, src->n_sets) || reserve_items(dst, src->n_items ? src->n_items : 1) ||
        seen_grow(dst, src->seen_cap) || wait_alloc(dst)) {
        gr_chart_free(dst);
        return -1;
    }
    memcpy(dst->items, src->items, (size_t)src->n_items * sizeof *src->items);
    memcpy(dst->set_start, src->set_start, (size_t)(src->n_sets + 1) * sizeof *src->set_start);
    memcpy(dst->next_bytes, src->next_bytes, (size_t)src->n_sets * sizeof *src->next_bytes);
    for (uint32_t k = 0; k < src->n_sets; k++) gr_chart_set_pushed(dst, k);
    dst->n_items = src->n_items;
    dst->n_sets = src->n_sets;
    return 0;
}

int gr_chart_reserve(gr_chart *c, uint32_t sets, uint32_t items) {
    return reserve_sets(c, sets) || reserve_items(c, items) ? -1 : 0;
}

static int scan_closure(gr_chart *c, uint8_t b);

int gr_chart_scan(gr_chart *c, uint8_t b) {
    uint32_t k = c->n_sets - 1;
    if (!gr_class_has(&c->next_bytes[k], b)) return 0;
    if (!c->memo) return scan_closure(c, b);
    int r = gr_memo_lookup(c, k, b);
    if (r != -2) return r;
    int crossed_before = c->crossed;
    c->crossed = 0;
    r = scan_closure(c, b);
    int crossed = c->crossed;
    c->crossed = crossed_before | crossed;
    if (r >= 0) gr_memo_record(c, k, b, r, crossed);
    return r;
}

static int class_empty(const gr_class *c) { return !(c->bits[0] | c->bits[1] | c->bits[2] | c->bits[3]); }

/* Adds what item `it` becomes after byte b to the set being built: a class terminal advances
 * the dot; a DFA terminal steps its state, and the item ends the lexeme (dot advanced) where the
 * new state accepts and stays in it (new state in the pos) where the state can go on. */
static int scan_item(gr_chart *c, uint32_t from, gr_item it, uint8_t b) {
    const gr_cfg *g = c->g;
    uint32_t at = gr_pos_at(g, it.pos);
    int32_t sym = g->rhs[at];
    if (sym >= 0 || sym == GR_END) return 0;
    if (!gr_sym_is_dfa(sym)) return gr_class_has(&g->classes[-sym - 1], b) ? add_item(c, from, at + 1, it.origin) : 0;
    const gr_dfa *d = g->dfas[gr_sym_dfa(sym)];
    uint32_t st = gr_pos_state(g, it.pos), t = gr_dfa_step(d, st ? st : 1, b);
    if (!t) return 0;
    if (d->accepting[t] && add_item(c, from, at + 1, it.origin)) return -1;
    if (!class_empty(&d->live[t]) && add_item(c, from, gr_pos_with_state(g, at, t), it.origin)) return -1;
    return 0;
}

/* The scan proper: the items of set k that can scan b, advanced, then closed. */
static int scan_closure(gr_chart *c, uint8_t b) {
    uint32_t k = c->n_sets - 1;
    if (reserve_sets(c, c->n_sets + 1)) return -1;
    uint32_t from = c->n_items, lo = c->set_start[k];
    seen_reset(c);
    wait_begin(c);
    for (uint32_t i = lo; i < from; i++) {
        gr_item it = c->items[i];
        if (scan_item(c, from, it, b)) {
            c->n_items = from;
            return -1;
        }
    }
    c->set_start[k + 1] = from;
    gr_chart_set_pushed(c, k + 1);
    if (closure(c, k + 1, from)) {
        c->n_items = from;
        return -1;
    }
    c->n_sets = k + 2;
    c->set_start[k + 2] = c->n_items;
    return 1;
}

int gr_chart_accepting(const gr_chart *c) {
    uint32_t k = c->n_sets - 1;
    for (uint32_t i = c->set_start[k]; i < c->set_start[k + 1]; i++)
        if (c->items[i].pos == c->g->accept_pos && c->items[i].origin == 0) return 1;
    return 0;
}

static inline uint64_t item_key(gr_item it) { return (uint64_t)it.pos << 32 | it.origin; }

static int cmp_item_key(const void *a, const void *b) {
    uint64_t x = item_key(*(const gr_item *)a), y = item_key(*(const gr_item *)b);
    return x < y ? -1 : x > y;
}

void gr_items_sort(gr_item *v, uint32_t n) {
    if (n > 64) {
        qsort(v, n, sizeof *v, cmp_item_key);
        return;
    }
    for (uint32_t i = 1; i < n; i++) {
        gr_item x = v[i];
        uint64_t k = item_key(x);
        uint32_t j = i;
        for (; j > 0 && item_key(v[j - 1]) > k; j--) v[j] = v[j - 1];
        v[j] = x;
    }
}
