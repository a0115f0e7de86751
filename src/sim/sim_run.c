/* sim_run.c - sim_run: sets up the run state (instances, scheduler limits,
 * tiers), drives the event loop to the last event, shows progress, and
 * folds per-request results into totals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim/sim_cost.h"
#include "sim/sim_eplb.h"
#include "sim/sim_state.h"

static sched_limits limits_of(const sim_config *c, const sim_pool_cfg *p) {
    sched_limits l = {.max_batch_tokens = (int32_t)(p->max_batch_tokens * p->dp),
                      .max_seqs = (int32_t)(p->max_seqs * p->dp),
                      .linear_cost = 1.0,
                      .attn_cost = sim_sched_attn_cost(&c->model),
                      .min_prefill_chunk = (int32_t)p->min_prefill_chunk};
    return l;
}

static void progress(double frac, double sim_t) {
    int w = (int)(frac * 40);
    fprintf(stderr, "\rsim [%.*s%*s] %5.1f%%  t=%.0fs", w, "########################################", 40 - w, "",
            frac * 100, sim_t);
}

static void totals(sim_state *s) {
    sim_results *r = s->r;
    for (size_t i = 0; i < r->n; i++) {
        const sim_req_result *q = &r->req[i];
        if (!q->done) continue;
        r->cached_hbm += q->cached_hbm;
        r->cached_store += q->cached_store;
        r->replayed += q->replayed;
        r->computed += q->computed;
        r->recomputed += q->recomputed;
        r->output_tokens += q->generated;
        int32_t cls = s->w->r[i].cls >= 0 && s->w->r[i].cls < STORE_N_CLASSES ? s->w->r[i].cls : 0;
        r->class_input[cls] += s->w->r[i].input_len;
        r->class_cached[cls] += q->cached_hbm + q->cached_store;
    }
    r->store_blocks_end = (int64_t)s->store.n;
    r->rejected = s->rejected;
    const sim_pool_cfg *p[2] = {&s->c->prefill, &s->c->decode};
    for (int i = 0; i < 2; i++) {
        r->pool[i].instances = i == 0 ? s->n_prefill : s->n_decode;
        r->pool[i].accels = r->pool[i].instances * p[i]->accels;
    }
}

static int setup(sim_state *s, cf_err *err) {
    const sim_config *c = s->c;
    s->n_prefill = s->o->store_only ? 0 : (int)c->prefill.instances;
    s->n_decode = s->o->store_only ? 0 : (int)c->decode.instances;
    s->n_inst = s->n_prefill + s->n_decode;
    s->lim[SIM_POOL_PREFILL] = limits_of(c, &c->prefill);
    if (s->n_decode) s->lim[SIM_POOL_DECODE] = limits_of(c, &c->decode);
    s->pool_blocks[SIM_POOL_PREFILL] = (int64_t)((double)c->prefill.kv_blocks * (1 - c->prefill.prefix_cache_fraction));
    s->pool_blocks[SIM_POOL_DECODE] = c->decode.kv_blocks;
    s->rq = calloc(s->w->n ? s->w->n : 1, sizeof *s->rq);
    s->r->req = calloc(s->w->n ? s->w->n : 1, sizeof *s->r->req);
    s->inst = calloc(s->n_inst ? (size_t)s->n_inst : 1, sizeof *s->inst);
    int most = s->n_prefill > s->n_decode ? s->n_prefill : s->n_decode;
    s->route_ws = calloc(most ? (size_t)most : 1, sizeof *s->route_ws);
    if (!s->rq || !s->r->req || !s->inst || !s->route_ws) return cf_fail(err, "out of memory");
    s->r->n = s->w->n;
    for (size_t i = 0; i < s->w->n; i++) s->rq[i].inst = -1;
    for (int i = 0; i < s->n_inst; i++)
        if (sim_inst_init(s, &s->inst[i], i < s->n_prefill ? SIM_POOL_PREFILL : SIM_POOL_DECODE, err)) return -1;
    if (sim_tiers_init(s, err)) return -1;
    for (int p = 0; p < 2; p++) {
        const sim_pool_cfg *pc = p == 0 ? &c->prefill : &c->decode;
        s->moe_imbalance[p] = pc->instances > 0 ? sim_moe_imbalance(&c->model, pc, s->o->seed, err) : 1.0;
        if (s->moe_imbalance[p] < 0) return -1;
        s->r->moe_imbalance[p] = s->moe_imbalance[p];
    }
    sim_rng_seed(&s->rng, s->o->seed);
    if (s->w->n && sim_heap_push(&s->heap, s->w->r[0].arrival, SIM_EV_ARRIVAL, 0)) return cf_fail(err, "out of memory");
    if (c->store_on && sim_heap_push(&s->heap, c->gc_interval_s, SIM_EV_GC, 0)) return cf_fail(err, "out of memory");
    return 0;
}

int sim_run(const sim_config *c, const sim_workload *w, const sim_opts *o, sim_results *r, cf_err *err) {
    *r = (sim_results){0};
    if (w->block_tokens != c->store_block_tokens)
        return cf_fail(err, "%s: store.block_tokens: %ld, but the workload's blocks hold %ld tokens", c->file,
                       c->store_block_tokens, w->block_tokens);
    sim_state s = {.c = c, .w = w, .o = o, .r = r};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = setup(&s, err);
    bool bar = o->progress && isatty(STDERR_FILENO);
    size_t arrived = 0, shown = 0;
    sim_event e;
    while (!rc && sim_heap_pop(&s.heap, &e)) {
        s.now = e.t;
        if (e.kind == SIM_EV_ARRIVAL) arrived = (size_t)e.a + 1;
        rc = sim_dispatch(&s, &e, err);
        if (bar && arrived * 100 / (w->n ? w->n : 1) != shown) {
            shown = arrived * 100 / (w->n ? w->n : 1);
            progress((double)arrived / (double)(w->n ? w->n : 1), s.now);
        }
    }
    if (bar) fprintf(stderr, "\n");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (r->n_done == 0) r->makespan_s = s.now; /* else: the last completion (sim_request_done) */
    r->wall_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (!rc) totals(&s);
    for (int i = 0; i < s.n_inst && s.inst; i++) sim_inst_free(&s.inst[i]);
    free(s.inst);
    free(s.rq);
    free(s.route_ws);
    sim_tiers_free(&s);
    sim_heap_free(&s.heap);
    if (rc) sim_results_free(r);
    return rc;
}

void sim_results_free(sim_results *r) {
    free(r->req);
    *r = (sim_results){0};
}
