/* lexeme_count.c - counted lexemes: `open E{min,max} close` as one DFA (see lexeme.h).
 *
 * A JSON string with maxLength 1024 has too many states for subset construction over its
 * Thompson NFA, yet it is regular and its DFA is simple: the product of E's DFA (one string
 * character: a byte, an escape, a UTF-8 sequence) with the number of characters read. E must be
 * prefix-free (an accepting state of E has no way on), so "E ended, start the next one" is
 * deterministic, and `close` must not start an E, so "close here or read on" is too. States:
 *   1                      before `open`;
 *   2 + c * k + i          c characters read, in E's i-th non-accepting state (i = 0: E's start;
 *                          with a max, no transition enters i > 0 at c = max: that character
 *                          could not end, and a live state must reach acceptance);
 *   n_states               after `close` (accepting, no transitions).
 * With max < 0 the count saturates at min. gr_dfa_canonical maps a state to the lowest-numbered
 * one that no string of `horizon` bytes tells apart: what matters within the horizon is E's
 * state, the characters still allowed (clamped to horizon + 1) and those still required (same).
 * Owns nothing beyond the DFAs it returns. */
#include <stdlib.h>
#include <string.h>

#include "grammar/lexeme.h"

#define COUNT_MINIMIZE_MAX 256u /* element DFAs up to this many states are minimized first */

int gr_dfa_fill_sets(gr_dfa *d) {
    d->live = calloc(d->n_states + 1, sizeof *d->live);
    d->loop = calloc(d->n_states + 1, sizeof *d->loop);
    gr_class col_bytes[256];
    if (!d->live || !d->loop) return -1;
    memset(col_bytes, 0, sizeof col_bytes);
    for (int b = 0; b < 256; b++) gr_class_set(&col_bytes[d->col[b]], (uint8_t)b);
    for (uint32_t s = 1; s <= d->n_states; s++)
        for (uint32_t c = 0; c < d->n_cols; c++) {
            uint32_t t = d->next[(size_t)s * d->n_cols + c];
            for (int w = 0; w < 4; w++) {
                if (t) d->live[s].bits[w] |= col_bytes[c].bits[w];
                if (t == s) d->loop[s].bits[w] |= col_bytes[c].bits[w];
            }
        }
    return 0;
}

static gr_dfa *dfa_alloc(uint32_t n_states, uint32_t n_cols) {
    gr_dfa *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->n_states = n_states;
    d->n_cols = n_cols;
    d->next = calloc((size_t)(n_states + 1) * n_cols, sizeof *d->next);
    d->accepting = calloc(n_states + 1, 1);
    if (!d->next || !d->accepting) {
        gr_dfa_free(d);
        return NULL;
    }
    return d;
}

gr_dfa *gr_dfa_byte_class(const gr_class *c) {
    gr_dfa *d = dfa_alloc(2, 2);
    if (!d) return NULL;
    for (int b = 0; b < 256; b++) d->col[b] = (uint8_t)gr_class_has(c, (uint8_t)b);
    d->next[1 * 2 + 1] = 2;
    d->accepting[2] = 1;
    if (gr_dfa_fill_sets(d)) {
        gr_dfa_free(d);
        return NULL;
    }
    return d;
}

/* E's DFA with equivalent states merged (Moore's partition refinement, quadratic in E's states:
 * only for small E; state 1 stays the start), so that the product has as few states per count as
 * E allows. NULL: memory. */
static gr_dfa *minimized(const gr_dfa *e) {
    uint32_t n = e->n_states, *cls = calloc(n + 1, sizeof *cls), *next_cls = calloc(n + 1, sizeof *next_cls);
    uint32_t n_cls = 0;
    gr_dfa *d = NULL;
    if (!cls || !next_cls) goto out;
    for (uint32_t s = 1; s <= n; s++) cls[s] = 1 + e->accepting[s]; /* 0: the dead state */
    for (;;) { /* refine by (class, classes of the successors) until the count stops growing */
        uint32_t count = 0;
        for (uint32_t s = 1; s <= n; s++) {
            uint32_t same = 0;
            for (uint32_t r = 1; r < s && !same; r++) {
                if (cls[r] != cls[s]) continue;
                uint32_t c = 0;
                while (c < e->n_cols &&
                       cls[e->next[(size_t)r * e->n_cols + c]] == cls[e->next[(size_t)s * e->n_cols + c]])
                    c++;
                if (c == e->n_cols) same = next_cls[r];
            }
            next_cls[s] = same ? same : ++count;
        }
        int stable = count == n_cls;
        n_cls = count;
        memcpy(cls, next_cls, (n + 1) * sizeof *cls);
        if (stable) break;
    }
    d = dfa_alloc(n_cls, e->n_cols);
    if (!d) goto out;
    memcpy(d->col, e->col, sizeof d->col);
    /* renumber so that the start's class is 1 (classes are numbered in first-state order: it is) */
    for (uint32_t s = 1; s <= n; s++) {
        d->accepting[cls[s]] = e->accepting[s];
        for (uint32_t c = 0; c < e->n_cols; c++)
            d->next[(size_t)cls[s] * e->n_cols + c] = (uint16_t)cls[e->next[(size_t)s * e->n_cols + c]];
    }
    if (gr_dfa_fill_sets(d)) {
        gr_dfa_free(d);
        d = NULL;
    }
out:
    free(cls);
    free(next_cls);
    return d;
}

static int class_meets(const gr_class *a, const gr_class *b) {
    return ((a->bits[0] & b->bits[0]) | (a->bits[1] & b->bits[1]) | (a->bits[2] & b->bits[2]) |
            (a->bits[3] & b->bits[3])) != 0;
}

/* Columns of the product: bytes that E's columns, open and close all treat alike. Returns the
 * column count, and one representative byte per column in rep. */
static uint32_t product_columns(const gr_dfa *e, const gr_class *open, const gr_class *close, uint8_t col[256],
                                uint8_t rep[256]) {
    int16_t id[1024];
    memset(id, 0xff, sizeof id);
    uint32_t n = 0;
    for (int b = 0; b < 256; b++) {
        uint32_t key = (uint32_t)e->col[b] * 4 + (uint32_t)gr_class_has(open, (uint8_t)b) * 2 +
                       (uint32_t)gr_class_has(close, (uint8_t)b);
        if (id[key] < 0) {
            rep[n] = (uint8_t)b;
            id[key] = (int16_t)n++;
        }
        col[b] = (uint8_t)id[key];
    }
    return n;
}

static gr_dfa *counted_of_minimal(const gr_dfa *elem, const gr_class *open, const gr_class *close, uint32_t min,
                                  int64_t max, uint32_t max_states);

gr_dfa *gr_dfa_counted(const gr_dfa *elem, const gr_class *open, const gr_class *close, uint32_t min, int64_t max,
                       uint32_t max_states) {
    if (elem->n_states > COUNT_MINIMIZE_MAX) return counted_of_minimal(elem, open, close, min, max, max_states);
    gr_dfa *e = minimized(elem);
    if (!e) return NULL;
    gr_dfa *d = counted_of_minimal(e, open, close, min, max, max_states);
    gr_dfa_free(e);
    return d;
}

static gr_dfa *counted_of_minimal(const gr_dfa *elem, const gr_class *open, const gr_class *close, uint32_t min,
                                  int64_t max, uint32_t max_states) {
    if (elem->accepting[1] || class_meets(close, &elem->live[1])) return NULL;
    uint32_t *idx = malloc((elem->n_states + 1) * sizeof *idx); /* E state -> i, UINT32_MAX: accepting */
    if (!idx) return NULL;
    uint32_t k = 0;
    idx[0] = UINT32_MAX;
    for (uint32_t s = 1; s <= elem->n_states; s++) {
        int prefix_free = !elem->accepting[s] || !(elem->live[s].bits[0] | elem->live[s].bits[1] |
                                                   elem->live[s].bits[2] | elem->live[s].bits[3]);
        if (!prefix_free) {
            free(idx);
            return NULL;
        }
        idx[s] = elem->accepting[s] ? UINT32_MAX : k++; /* state 1, the start, gets 0 */
    }
    uint64_t top = max >= 0 ? (uint64_t)max : min, n_states = 2 + (top + 1) * k;
    if (n_states > max_states || n_states > 65535) {
        free(idx);
        return NULL;
    }
    uint8_t col[256], rep[256];
    uint32_t n_cols = product_columns(elem, open, close, col, rep);
    uint32_t *state_of = malloc(k * sizeof *state_of); /* i -> E state */
    gr_dfa *d = state_of ? dfa_alloc((uint32_t)n_states, n_cols) : NULL;
    if (!d) {
        free(idx);
        free(state_of);
        return NULL;
    }
    for (uint32_t s = 1; s <= elem->n_states; s++)
        if (idx[s] != UINT32_MAX) state_of[idx[s]] = s;
    memcpy(d->col, col, sizeof col);
    d->count_k = k;
    d->count_top = (uint32_t)top;
    d->count_min = min;
    d->count_max = max;
    uint32_t final = d->n_states;
    d->accepting[final] = 1;
    for (uint32_t c = 0; c < n_cols; c++)
        if (gr_class_has(open, rep[c])) d->next[1 * n_cols + c] = 2;
    for (uint64_t cnt = 0; cnt <= top; cnt++)
        for (uint32_t i = 0; i < k; i++) {
            uint16_t *row = &d->next[(2 + cnt * k + i) * n_cols];
            for (uint32_t c = 0; c < n_cols; c++) {
                uint32_t t = gr_dfa_step(elem, state_of[i], rep[c]);
                if (t && idx[t] != UINT32_MAX) { /* inside a character: not at the last count, where
                                                  * it could never end (a dead end) */
                    if (max < 0 || cnt < top) row[c] = (uint16_t)(2 + cnt * k + idx[t]);
                } else if (t) { /* one more element read */
                    uint64_t next = cnt + 1;
                    if (max < 0 && next > top) next = top;
                    if (next <= top) row[c] = (uint16_t)(2 + next * k);
                } else if (i == 0 && cnt >= min && gr_class_has(close, rep[c])) {
                    row[c] = (uint16_t) final;
                }
            }
        }
    free(idx);
    free(state_of);
    if (gr_dfa_fill_sets(d)) {
        gr_dfa_free(d);
        return NULL;
    }
    return d;
}

uint32_t gr_dfa_canonical(const gr_dfa *d, uint32_t st, uint32_t horizon) {
    if (!d->count_k || st < 2 || st == d->n_states) return st;
    uint64_t k = d->count_k, c = (st - 2) / k, i = (st - 2) % k, h = (uint64_t)horizon + 1;
    uint64_t m = d->count_min, lo = 0;
    if (d->count_max >= 0) { /* characters still allowed, clamped */
        uint64_t r = (uint64_t)d->count_max - c;
        if (r < h) lo = (uint64_t)d->count_max - r;
    }
    uint64_t q = m > c ? m - c : 0; /* characters still required, clamped */
    uint64_t q_lo = q >= h ? 0 : (q ? m - q : m);
    if (d->count_max < 0 && !q) q_lo = c; /* saturated: the last count is its own class */
    if (q_lo > lo) lo = q_lo;
    return (uint32_t)(2 + lo * k + i);
}
