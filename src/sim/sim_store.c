/* sim_store.c - the store tier and the window-state tier of the simulated
 * cluster. The store keeps one entry per stored block (chain key, last use,
 * expiry, class); every decision is the store's own code: expiry at write
 * (store_expiry_for), what counts as expired (store_is_expired) and which
 * objects a GC pass evicts to meet the quota (store_gc_lru_victims). As in
 * the real store, an expired object is a miss at once and its bytes stay
 * until the next GC pass; capacity is enforced by GC passes, so the store
 * can overshoot its quota between passes. Times go to the store functions
 * in whole seconds (the store's clock), use stamps in milliseconds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim_state.h"
#include "store/store_gc.h"

int sim_tiers_init(sim_state *s, cf_err *err) {
    const sim_config *c = s->c;
    s->block_bytes = c->model.kv_bytes_per_token * (double)c->store_block_tokens;
    size_t wlimit = 0;
    if (c->model.window_state_bytes > 0 && c->window_state_bytes > 0)
        wlimit = (size_t)(c->window_state_bytes / c->model.window_state_bytes);
    if (sim_map_init(&s->store, 0) || sim_map_init(&s->window, wlimit ? wlimit : 1))
        return cf_fail(err, "out of memory");
    return 0;
}

void sim_tiers_free(sim_state *s) {
    sim_map_free(&s->store);
    sim_map_free(&s->window);
}

static int64_t store_clock(double t) { return (int64_t)floor(t); }

uint32_t sim_store_hits(sim_state *s, const uint64_t *keys, uint32_t from, uint32_t n) {
    if (!s->c->store_on) return 0;
    uint32_t h = 0;
    for (uint32_t i = from; i < n; i++, h++) {
        sim_map_ent *e = sim_map_get(&s->store, keys[i]);
        if (!e || store_is_expired((int64_t)e->expires, store_clock(s->now))) break;
        e->used = s->now;
    }
    return h;
}

int sim_store_write(sim_state *s, const uint64_t *keys, uint32_t n, int32_t cls, cf_err *err) {
    if (!s->c->store_on) return 0;
    for (uint32_t i = 0; i < n; i++) {
        sim_map_ent *e = sim_map_get(&s->store, keys[i]);
        if (e && !store_is_expired((int64_t)e->expires, store_clock(s->now))) continue;
        if (!e) {
            e = sim_map_put(&s->store, keys[i]);
            if (!e) return cf_fail(err, "out of memory");
            s->store_bytes += s->block_bytes;
        }
        /* an expired object is rewritten in place (same name), as the store's writer does */
        e->cls = cls;
        e->used = s->now;
        e->expires = (double)store_expiry_for(store_clock(s->now), cls, s->c->retention_s);
        double dt = s->block_bytes / s->c->store_write_bw;
        s->store_write_free = fmax(s->store_write_free, s->now) + dt;
        s->r->store_bytes_written += s->block_bytes;
    }
    if (s->store_bytes > s->r->store_peak_bytes) s->r->store_peak_bytes = s->store_bytes;
    return 0;
}

int sim_store_gc(sim_state *s, cf_err *err) {
    sim_map *m = &s->store;
    int64_t now = store_clock(s->now);
    /* 1. expired objects */
    for (size_t i = 0; i < m->cap;) {
        if (m->v[i].key && store_is_expired((int64_t)m->v[i].expires, now)) {
            sim_map_del(m, m->v[i].key); /* a shifted entry may now sit at i */
            s->store_bytes -= s->block_bytes;
            s->r->store_gc_expired++;
        } else {
            i++;
        }
    }
    /* 3. the quota, by the store's own LRU decision */
    int64_t quota = (int64_t)s->c->store_capacity_bytes;
    uint64_t live = (uint64_t)llround(s->store_bytes);
    if (live <= (uint64_t)quota) return 0;
    store_gc_cand *v = malloc((m->n ? m->n : 1) * sizeof *v);
    if (!v) return cf_fail(err, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->v[i].key) continue;
        memset(v[k].key, 0, sizeof v[k].key);
        memcpy(v[k].key, &m->v[i].key, sizeof m->v[i].key);
        v[k].atime = (int64_t)llround(m->v[i].used * 1000.0);
        v[k].size = (int64_t)llround(s->block_bytes);
        k++;
    }
    size_t victims = store_gc_lru_victims(v, k, live, quota);
    for (size_t i = 0; i < victims; i++) {
        uint64_t key;
        memcpy(&key, v[i].key, sizeof key);
        sim_map_del(m, key);
        s->store_bytes -= s->block_bytes;
    }
    s->r->store_gc_lru += (int64_t)victims;
    free(v);
    return 0;
}

bool sim_window_has(sim_state *s, uint64_t key) {
    sim_map_ent *e = sim_map_get(&s->window, key);
    if (e) e->used = s->now;
    return e != NULL;
}

int sim_window_put(sim_state *s, const uint64_t *keys, uint32_t n, cf_err *err) {
    if (s->c->model.window_tokens <= 0 || s->c->window_state_bytes <= 0) return 0;
    for (uint32_t i = 0; i < n; i++) {
        sim_map_ent *e = sim_map_put(&s->window, keys[i]);
        if (!e) return cf_fail(err, "out of memory");
        e->used = s->now;
    }
    return 0;
}
