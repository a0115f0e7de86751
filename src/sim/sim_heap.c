/* sim_heap.c - see sim_heap.h. */
#include "sim/sim_heap.h"

#include <stdlib.h>

static bool ev_less(const sim_event *a, const sim_event *b) { return a->t < b->t || (a->t == b->t && a->seq < b->seq); }

int sim_heap_push(sim_heap *h, double t, sim_ev_kind kind, int32_t a) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 1024;
        sim_event *v = realloc(h->v, cap * sizeof *v);
        if (!v) return -1;
        h->v = v;
        h->cap = cap;
    }
    sim_event e = {.t = t, .seq = h->next_seq++, .kind = (int32_t)kind, .a = a};
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ev_less(&e, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = e;
    return 0;
}

bool sim_heap_pop(sim_heap *h, sim_event *out) {
    if (h->n == 0) return false;
    *out = h->v[0];
    sim_event last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && ev_less(&h->v[c + 1], &h->v[c])) c++;
        if (!ev_less(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return true;
}

void sim_heap_free(sim_heap *h) {
    free(h->v);
    *h = (sim_heap){0};
}
