/* scan_memo.c - interning of closed Earley sets and the (state, byte) transition table used by
 * gr_chart_scan during trie walks (see scan_memo.h for when a set is closed and why the memo is
 * exact). */
#include "grammar/scan_memo.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "grammar/earley.h"

/* An origin in a set made during the walk, encoded relative: MEMO_REL | state << 8 | distance. */
#define MEMO_REL 0x80000000u

void gr_scan_memo_free(gr_scan_memo *m) {
    free(m->st_off);
    free(m->st_n);
    free(m->st_hash);
    free(m->st_bytes);
    free(m->st_loop);
    free(m->trans);
    free(m->pool);
    free(m->tab);
    free(m->set_state);
    memset(m, 0, sizeof *m);
}

int gr_scan_memo_reset(gr_scan_memo *m, uint32_t base, uint32_t max_depth) {
    m->base = base;
    m->n_states = 0;
    m->n_pool = 0;
    if (!m->tab) {
        m->tab_cap = 2 * GR_MEMO_MAX_STATES;
        m->tab = calloc(m->tab_cap, sizeof *m->tab);
        if (!m->tab) return -1;
    } else {
        memset(m->tab, 0, m->tab_cap * sizeof *m->tab);
    }
    if (max_depth + 2 > m->cap_set_state) {
        free(m->set_state);
        m->cap_set_state = max_depth + 2;
        m->set_state = malloc(m->cap_set_state * sizeof *m->set_state);
        if (!m->set_state) return -1;
    }
    for (uint32_t i = 0; i < m->cap_set_state; i++) m->set_state[i] = -1;
    return 0;
}

static int grow_states(gr_scan_memo *m) {
    if (m->n_states < m->cap_states) return 0;
    uint32_t n = m->cap_states ? m->cap_states * 2 : 64;
    uint32_t *off = realloc(m->st_off, n * sizeof *off);
    if (off) m->st_off = off;
    uint32_t *cnt = realloc(m->st_n, n * sizeof *cnt);
    if (cnt) m->st_n = cnt;
    uint64_t *h = realloc(m->st_hash, n * sizeof *h);
    if (h) m->st_hash = h;
    gr_class *b = realloc(m->st_bytes, n * sizeof *b);
    if (b) m->st_bytes = b;
    gr_class *loop = realloc(m->st_loop, n * sizeof *loop);
    if (loop) m->st_loop = loop;
    int32_t *t = realloc(m->trans, (size_t)n * 256 * sizeof *t);
    if (t) m->trans = t;
    if (!off || !cnt || !h || !b || !loop || !t) return -1;
    m->cap_states = n;
    return 0;
}

/* Interns chart set j as a state if it is closed; returns the state or -1. */
static int32_t intern(gr_chart *c, gr_scan_memo *m, uint32_t j) {
    const gr_cfg *g = c->g;
    uint32_t lo = c->set_start[j], hi = c->set_start[j + 1];
    if (m->n_states >= GR_MEMO_MAX_STATES) return -1;
    if (m->n_pool + (hi - lo) > m->cap_pool) {
        uint32_t n = m->cap_pool ? m->cap_pool : 4096;
        while (n < m->n_pool + (hi - lo)) n *= 2;
        gr_item *p = realloc(m->pool, n * sizeof *p);
        if (!p) return -1;
        m->pool = p;
        m->cap_pool = n;
    }
    gr_item *out = m->pool + m->n_pool;
    uint32_t n = 0;
    for (uint32_t i = lo; i < hi; i++) {
        gr_item it = c->items[i];
        int inert = gr_pos_plain(g, it.pos) && g->rhs[it.pos] == GR_END;
        if (it.origin == j && j > m->base) it.origin = GR_ORIGIN_HERE_MEMO;
        else if (it.origin > m->base) { /* a set made during the walk: its state and distance */
            if (inert) continue; /* a completed item is never read again */
            int32_t ref = m->set_state[it.origin - m->base];
            uint32_t d = j - it.origin;
            if (ref < 0 || d > 255) return -1;
            it.origin = MEMO_REL | (uint32_t)ref << 8 | d;
        }
        out[n++] = it;
    }
    gr_items_sort(out, n);
    uint64_t h = XXH3_64bits(out, n * sizeof *out);
    uint32_t mask = m->tab_cap - 1, slot = (uint32_t)h & mask;
    for (; m->tab[slot]; slot = (slot + 1) & mask) {
        uint32_t q = m->tab[slot] - 1;
        if (m->st_hash[q] == h && m->st_n[q] == n && !memcmp(m->pool + m->st_off[q], out, n * sizeof *out))
            return (int32_t)q;
    }
    if (grow_states(m)) return -1;
    uint32_t q = m->n_states++;
    m->st_off[q] = m->n_pool;
    m->st_n[q] = n;
    m->st_hash[q] = h;
    m->st_bytes[q] = c->next_bytes[j];
    memset(&m->st_loop[q], 0, sizeof m->st_loop[q]);
    for (int b = 0; b < 256; b++) m->trans[(size_t)q * 256 + b] = -2;
    m->n_pool += n;
    m->tab[slot] = q + 1;
    return (int32_t)q;
}

int gr_memo_state_of(gr_chart *c, uint32_t j) {
    gr_scan_memo *m = c->memo;
    if (j < m->base || j - m->base >= m->cap_set_state) return -1;
    if (j == m->base && m->set_state[0] < 0) m->set_state[0] = intern(c, m, j);
    return m->set_state[j - m->base];
}

int gr_memo_push(gr_chart *c, int32_t q) {
    gr_scan_memo *m = c->memo;
    uint32_t k1 = c->n_sets, n = m->st_n[q];
    if (k1 + 1 - m->base >= m->cap_set_state || gr_chart_reserve(c, k1 + 1, c->n_items + n)) return -1;
    const gr_item *src = m->pool + m->st_off[q];
    gr_item *dst = c->items + c->n_items;
    for (uint32_t i = 0; i < n; i++) {
        dst[i] = src[i];
        if (dst[i].origin == GR_ORIGIN_HERE_MEMO) dst[i].origin = k1;
        else if (dst[i].origin & MEMO_REL) dst[i].origin = k1 - (dst[i].origin & 255);
    }
    c->set_start[k1] = c->n_items;
    gr_chart_set_pushed(c, k1);
    c->n_items += n;
    c->next_bytes[k1] = m->st_bytes[q];
    c->n_sets = k1 + 1;
    c->set_start[k1 + 1] = c->n_items;
    m->set_state[k1 - m->base] = q;
    return 0;
}

int gr_memo_lookup(gr_chart *c, uint32_t k, uint8_t b) {
    gr_scan_memo *m = c->memo;
    int32_t q = gr_memo_state_of(c, k);
    if (q < 0) return -2;
    int32_t t = m->trans[(size_t)q * 256 + b];
    if (t == -2) return -2;
    if (t == -1) return 0;
    if (gr_memo_push(c, t >> 1)) return -2;
    if (t & 1) c->crossed = 1;
    return 1;
}

void gr_memo_record(gr_chart *c, uint32_t k, uint8_t b, int result, int crossed) {
    gr_scan_memo *m = c->memo;
    int32_t q = gr_memo_state_of(c, k);
    int32_t next = -1;
    if (result == 1 && k + 1 - m->base < m->cap_set_state) {
        next = intern(c, m, k + 1);
        m->set_state[k + 1 - m->base] = next;
    }
    if (q < 0) return;
    if (result == 0) m->trans[(size_t)q * 256 + b] = -1;
    else if (result == 1 && next >= 0) {
        m->trans[(size_t)q * 256 + b] = next << 1 | (crossed ? 1 : 0);
        if (next == q && !crossed) gr_class_set(&m->st_loop[q], b);
    }
}
