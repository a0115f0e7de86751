/* sim_cluster.c - the event loop of `cinfer sim` and a request's path
 * through the cluster: arrival -> router (sim_route.h) picks a prefill
 * instance -> prefix hits in that instance's memory, then in the store
 * (loaded at the store's read bandwidth), window state restored from the
 * window-state tier or replayed -> chunked prefill steps -> first token ->
 * blocks registered in the prefix cache, the store and the window tier ->
 * KV transferred over the network to a decode instance (or, colocated, the
 * same instance decodes) -> decode steps -> done. Store GC passes run every
 * gc_interval_s of simulated time while work remains. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cluster/route_policy.h"
#include "sim/sim_cost.h"
#include "sim/sim_state.h"

static const uint64_t *keys_of(const sim_state *s, int32_t q) { return s->w->keys + s->w->r[q].key_off; }

static int64_t blocks_for(int64_t tokens, long bt) { return (tokens + bt - 1) / bt; }

void sim_request_done(sim_state *s, int32_t q) {
    sim_rq *rq = &s->rq[q];
    sim_req_result *rr = &s->r->req[q];
    const sim_wreq *wr = &s->w->r[q];
    if (rq->inst >= 0) {
        sim_inst *in = &s->inst[rq->inst];
        in->free_blocks += rq->n_blocks;
        rq->n_blocks = 0;
        sim_inst_remove(in, q);
    }
    rq->inst = -1;
    rr->done = true;
    rr->generated = rq->n_generated;
    rr->e2e = s->now - wr->arrival;
    rr->tpot = wr->output_len > 1 ? (rr->e2e - rr->ttft) / (double)(wr->output_len - 1) : 0;
    s->r->n_done++;
    if (s->now > s->r->makespan_s) s->r->makespan_s = s->now; /* the last completion, not the last GC tick */
}

int sim_prefill_done(sim_state *s, int32_t idx, int32_t q, cf_err *err) {
    sim_inst *in = &s->inst[idx];
    const sim_wreq *wr = &s->w->r[q];
    sim_rq *rq = &s->rq[q];
    const uint64_t *keys = keys_of(s, q);
    for (uint32_t i = 0; i < wr->n_keys; i++) {
        sim_map_ent *e = sim_map_put(&in->hbm, keys[i]);
        if (!e) return cf_fail(err, "out of memory");
        e->used = s->now;
    }
    if (sim_store_write(s, keys, wr->n_keys, wr->cls, err) || sim_window_put(s, keys, wr->n_keys, err)) return -1;
    if (wr->output_len <= 1) {
        sim_request_done(s, q);
        return 0;
    }
    if (s->n_decode == 0) return 0; /* colocated: the same instance decodes */
    in->free_blocks += rq->n_blocks;
    rq->n_blocks = 0;
    sim_inst_remove(in, q);
    int di = s->n_prefill + sim_place(s, SIM_POOL_DECODE, q, err);
    if (di < s->n_prefill) return -1;
    sim_inst *d = &s->inst[di];
    double bytes = (double)wr->input_len * s->c->model.kv_bytes_per_token;
    long a = s->c->prefill.accels < s->c->decode.accels ? s->c->prefill.accels : s->c->decode.accels;
    double bw = (double)a * s->c->prefill.hw.scaleout_bw * s->c->prefill.hw.net_eff;
    double start = fmax(s->now, fmax(in->nic_free, d->nic_free)), end = start + bytes / bw;
    in->nic_free = d->nic_free = end;
    s->r->kv_bytes_moved += bytes;
    rq->inst = di;
    rq->st = SCHED_WAITING;
    rq->n_computed = wr->input_len; /* KV of the prompt; the first token is the one to decode */
    rq->hw = wr->input_len;
    if (sim_heap_push(&s->heap, end + s->c->net_latency_s, SIM_EV_XFER_DONE, q)) return cf_fail(err, "out of memory");
    return 0;
}

/* Prefix blocks of q present in instance memory (touch: mark them used). */
static uint32_t hbm_hits(sim_state *s, sim_inst *in, int32_t q, bool touch) {
    const uint64_t *keys = keys_of(s, q);
    uint32_t n = s->w->r[q].n_keys, h = 0;
    for (; h < n; h++) {
        sim_map_ent *e = sim_map_get(&in->hbm, keys[h]);
        if (!e) break;
        if (touch) e->used = s->now;
    }
    return h;
}

/* The router's placement (cluster/route_policy.h, the production code):
 * one route_worker per instance of the pool, as the router would see it. A
 * policy that finds no eligible worker (decode_load: none can hold the
 * prompt) means back-pressure in the router; the simulator then places by
 * least requests and counts it. Returns the index within the pool. */
int sim_place(sim_state *s, int pool, int32_t q, cf_err *err) {
    int base = pool == SIM_POOL_PREFILL ? 0 : s->n_prefill, n = pool == SIM_POOL_PREFILL ? s->n_prefill : s->n_decode;
    const sim_pool_cfg *p = pool == SIM_POOL_PREFILL ? &s->c->prefill : &s->c->decode;
    route_worker *ws = s->route_ws;
    const sim_wreq *wr = &s->w->r[q];
    long bt = s->c->store_block_tokens;
    for (int i = 0; i < n; i++) {
        const sim_inst *in = &s->inst[base + i];
        ws[i] = (route_worker){.id = sim_mix64((uint64_t)(base + i) + 1),
                               .healthy = true,
                               .accepting = true,
                               .running = in->n,
                               .waiting = in->n_pend,
                               .queued_cost = (double)in->queued_tokens,
                               .kv_tokens = (s->pool_blocks[pool] - in->free_blocks) * p->block_tokens,
                               .kv_capacity = s->pool_blocks[pool] * p->block_tokens,
                               .max_seqs = s->lim[pool].max_seqs,
                               .speed = 1,
                               .cached_tokens = pool == SIM_POOL_PREFILL
                                                    ? (int32_t)((int64_t)hbm_hits(s, &s->inst[base + i], q, false) * bt)
                                                    : 0};
    }
    route_request rr = {.prompt_tokens = wr->input_len,
                        .max_tokens = wr->output_len,
                        .affinity_key = wr->n_keys ? s->w->keys[wr->key_off] : (uint64_t)q};
    route_params rp = {.linear_cost = 1, .attn_cost = sim_sched_attn_cost(&s->c->model), .balance_threshold = 8};
    int k = route_pick(s->c->route_kind[pool], ws, n, &rr, &rp, &s->route_cursor[pool]);
    if (k < 0) {
        s->r->backpressure++;
        k = route_least_requests(ws, n);
    }
    if (k < 0 || k >= n) return cf_fail(err, "sim: no instance in the %s pool", pool ? "decode" : "prefill");
    return k;
}

/* Window-state models: a hit needs the window state at its end, from the
 * tier (exact), by bounded replay of the last window tokens, or (replay off)
 * only up to the last block that has a snapshot. */
static void window_resolve(sim_state *s, int32_t q, uint32_t *h1, uint32_t *h2, int32_t *replay) {
    *replay = 0;
    uint32_t h = *h1 + *h2;
    if (s->c->model.window_tokens <= 0 || h == 0) return;
    const uint64_t *keys = keys_of(s, q);
    if (sim_window_has(s, keys[h - 1])) {
        s->r->window_hits++;
        return;
    }
    s->r->window_misses++;
    long bt = s->c->store_block_tokens;
    if (s->c->bounded_replay) {
        int64_t t = (int64_t)h * bt;
        *replay = (int32_t)(s->c->model.window_tokens < t ? s->c->model.window_tokens : t);
        return;
    }
    while (h > 0 && !sim_window_has(s, keys[h - 1])) h--;
    if (h < *h1) *h1 = h;
    *h2 = h - *h1;
}

static int on_arrival(sim_state *s, int32_t q, cf_err *err) {
    const sim_wreq *wr = &s->w->r[q];
    sim_rq *rq = &s->rq[q];
    long bt = s->c->store_block_tokens;
    s->r->input_tokens += wr->input_len;
    if (s->o->store_only) {
        uint32_t h = sim_store_hits(s, keys_of(s, q), 0, wr->n_keys);
        sim_req_result *rr = &s->r->req[q];
        rr->cached_store = (int32_t)((int64_t)h * bt);
        rr->computed = wr->input_len - rr->cached_store;
        rr->done = true;
        s->r->n_done++;
        return sim_store_write(s, keys_of(s, q), wr->n_keys, wr->cls, err);
    }
    const sim_pool_cfg *run_pool = s->n_decode ? &s->c->decode : &s->c->prefill;
    if (blocks_for((int64_t)wr->input_len + wr->output_len, run_pool->block_tokens) >
            s->pool_blocks[s->n_decode ? SIM_POOL_DECODE : SIM_POOL_PREFILL] ||
        blocks_for(wr->input_len + 1, s->c->prefill.block_tokens) > s->pool_blocks[SIM_POOL_PREFILL]) {
        s->rejected++;
        return 0;
    }
    int pi = sim_place(s, SIM_POOL_PREFILL, q, err);
    if (pi < 0) return -1;
    sim_inst *in = &s->inst[pi];
    uint32_t h1 = hbm_hits(s, in, q, true), h2 = sim_store_hits(s, keys_of(s, q), h1, wr->n_keys);
    window_resolve(s, q, &h1, &h2, &rq->replay);
    rq->inst = pi;
    rq->hit_hbm = (int32_t)((int64_t)h1 * bt);
    rq->hit_store = (int32_t)((int64_t)h2 * bt);
    rq->n_cached = rq->hit_hbm + rq->hit_store - rq->replay;
    in->queued_tokens += wr->input_len - rq->n_cached;
    if (h2 > 0) {
        double bytes = (double)rq->hit_store * s->c->model.kv_bytes_per_token;
        double done = fmax(s->now, s->store_read_free) + bytes / s->c->store_read_bw;
        s->store_read_free = done;
        s->r->store_bytes_read += bytes;
        return sim_heap_push(&s->heap, done + s->c->net_latency_s, SIM_EV_LOAD_DONE, q) ? cf_fail(err, "out of memory")
                                                                                        : 0;
    }
    rq->ready = s->now;
    if (sim_inst_add(s, in, q, err)) return -1;
    return sim_inst_kick(s, pi, err);
}

/* The server's work on a request outside the forward passes delays its admission (prefill pool's
 * hardware profile); with none it is admitted at once (no extra event, as before the terms existed). */
static int request_arrived(sim_state *s, int32_t q, cf_err *err) {
    const sim_hw *h = &s->c->prefill.hw;
    double delay =
        s->o->store_only ? 0 : h->request_overhead_s + (double)s->w->r[q].input_len * h->prompt_token_overhead_s;
    if (delay <= 0) return on_arrival(s, q, err);
    return sim_heap_push(&s->heap, s->now + delay, SIM_EV_READY, q) ? cf_fail(err, "out of memory") : 0;
}

int sim_dispatch(sim_state *s, const sim_event *e, cf_err *err) {
    switch (e->kind) {
    case SIM_EV_ARRIVAL:
        if ((size_t)e->a + 1 < s->w->n &&
            sim_heap_push(&s->heap, s->w->r[e->a + 1].arrival, SIM_EV_ARRIVAL, e->a + 1)) /* arrivals, one at a time */
            return cf_fail(err, "out of memory");
        return request_arrived(s, e->a, err);
    case SIM_EV_READY: return on_arrival(s, e->a, err);
    case SIM_EV_LOAD_DONE: {
        int32_t pi = s->rq[e->a].inst;
        s->rq[e->a].ready = s->now;
        if (sim_inst_add(s, &s->inst[pi], e->a, err)) return -1;
        return sim_inst_kick(s, pi, err);
    }
    case SIM_EV_STEP_END: return sim_inst_step_end(s, e->a, err);
    case SIM_EV_XFER_DONE: {
        sim_inst *d = &s->inst[s->rq[e->a].inst];
        if (d->n_pend == d->cap_pend) {
            int32_t cap = d->cap_pend ? 2 * d->cap_pend : 64;
            int32_t *p = realloc(d->pend, (size_t)cap * sizeof *p);
            if (!p) return cf_fail(err, "out of memory");
            d->pend = p;
            d->cap_pend = cap;
        }
        d->pend[d->n_pend++] = e->a;
        return sim_inst_kick(s, s->rq[e->a].inst, err);
    }
    case SIM_EV_GC:
        if (sim_store_gc(s, err)) return -1;
        if (s->heap.n > 0 && sim_heap_push(&s->heap, s->now + s->c->gc_interval_s, SIM_EV_GC, 0))
            return cf_fail(err, "out of memory");
        return 0;
    default: return cf_fail(err, "sim: unknown event %d", e->kind);
    }
}
