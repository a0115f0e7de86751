/* ep_weights.c - which routed experts this rank holds, and moving them when
 * the plan changes (ep.h "Weights").
 *
 * A rank holds the experts of its plan's slots (a replica placed twice on
 * one rank is held once). At start-up that is the identity placement the
 * model was loaded with (ep_initial_keep). A rebalance stages the new plan:
 * ep_weights_stage lists the experts the new plan gives this rank that it
 * does not hold, and a loader thread prepares them from the model file
 * mapping (model_expert_acquire) while the rounds go on under the old plan,
 * which never routes a row to them. Why the file and not MPI: every rank
 * already maps the same file for its dense weights, so reading an expert's
 * slice there costs no network bytes, keeps the round thread (the only MPI
 * caller, MPI_THREAD_SERIALIZED) free of bulk transfers and needs no owner
 * to be idle; across hosts each host reads its own copy of the file (the
 * page cache, or the disk). ep_weights_switch (round thread, at the round
 * boundary every rank agreed on) frees the experts the new plan no longer
 * gives this rank: the old plan, the only one that routed rows to them, is
 * gone by then. ep_weights_abandon undoes a stage that some rank could not
 * load. With --ep-weight-source peer the new experts' bytes come from ranks
 * holding them instead, by MPI point-to-point (ep_peer.c). Without a partial expert set (a family loading every expert) every
 * expert is held and nothing moves. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timeutil.h"
#include "ep/ep_internal.h"

bool ep_initial_keep(void *ctx, const model_hparams *hp, int32_t layer, int32_t expert) {
    const ep_placement *p = ctx;
    (void)layer; /* the identity placement is the same in every MoE layer */
    int32_t ne = hp->n_expert;
    if (ne <= 0 || p->n_ranks <= 0) return true;
    int32_t slots = ne + (p->redundant > 0 ? p->redundant : 0);
    slots = (slots + p->n_ranks - 1) / p->n_ranks * p->n_ranks;
    int32_t per = slots / p->n_ranks;
    for (int32_t q = p->rank * per; q < (p->rank + 1) * per; q++)
        if (q % ne == expert) return true;
    return false;
}

void ep_plan_cells(const ep_runtime *r, const eplb_plan *p, int rank, bool *need) {
    size_t cells = (size_t)r->n_moe * (size_t)r->n_expert;
    int32_t S = r->shape.n_physical, per = S / r->n_ranks;
    memset(need, 0, cells * sizeof(bool));
    for (int32_t mi = 0; mi < r->n_moe; mi++)
        for (int32_t q = rank * per; q < (rank + 1) * per; q++)
            need[(size_t)mi * (size_t)r->n_expert + (size_t)p->phy2log[(size_t)mi * (size_t)S + (size_t)q]] = true;
}

/* r->need = the experts plan p gives this rank. */
static void plan_need(ep_runtime *r, const eplb_plan *p) { ep_plan_cells(r, p, r->rank, r->need); }

static void held_stats(ep_runtime *r) {
    int32_t n = 0;
    for (size_t c = 0; c < (size_t)r->n_moe * (size_t)r->n_expert; c++) n += r->held[c];
    uint64_t bytes =
        model_experts_partial(r->m) ? model_expert_resident_bytes(r->m) : (uint64_t)n * model_expert_bytes(r->m);
    pthread_mutex_lock(&r->mu);
    r->st.experts_held = n;
    r->st.expert_bytes = bytes;
    pthread_mutex_unlock(&r->mu);
}

int ep_weights_init(ep_runtime *r, cf_err *err) {
    size_t cells = (size_t)r->n_moe * (size_t)r->n_expert;
    r->held = calloc(cells, sizeof(bool));
    r->need = calloc(cells, sizeof(bool));
    r->load_list = calloc(cells, sizeof(int32_t));
    r->layer_of_moe = calloc((size_t)r->n_moe, sizeof(int32_t));
    if (!r->held || !r->need || !r->load_list || !r->layer_of_moe)
        return cf_fail(err, "expert parallelism: out of memory");
    for (int32_t il = 0; il < r->n_layer; il++)
        if (r->moe_of_layer[il] >= 0) r->layer_of_moe[r->moe_of_layer[il]] = il;
    plan_need(r, &r->plan);
    bool partial = model_experts_partial(r->m);
    for (size_t c = 0; c < cells; c++) {
        int32_t layer = r->layer_of_moe[c / (size_t)r->n_expert], e = (int32_t)(c % (size_t)r->n_expert);
        if (partial && r->need[c] && model_expert_acquire(r->m, layer, e, err)) /* loaded with other options */
            return cf_prefix(err, "expert parallelism: rank %d", r->rank);
        r->held[c] = !partial || model_expert_resident(r->m, layer, e);
    }
    held_stats(r);
    return 0;
}

static void *loader_main(void *arg) {
    ep_runtime *r = arg;
    double t0 = time_now();
    uint64_t bytes = 0;
    for (int32_t i = 0; i < r->n_load; i++) {
        int32_t c = r->load_list[i];
        uint64_t before = model_expert_resident_bytes(r->m);
        cf_err err = {0};
        if (model_expert_acquire(r->m, r->layer_of_moe[c / r->n_expert], c % r->n_expert, &err)) {
            snprintf(r->load_err, sizeof r->load_err, "%s", err.msg);
            atomic_store(&r->load_state, EP_LOAD_FAILED);
            return NULL;
        }
        bytes += model_expert_resident_bytes(r->m) - before;
    }
    /* reading the slices mapped neighbouring file pages too (fault-around); the copies are the weights now */
    model_trim_memory(r->m);
    r->load_bytes = bytes;
    r->load_seconds = time_now() - t0;
    atomic_store(&r->load_state, EP_LOAD_DONE);
    return NULL;
}

void ep_weights_stage(ep_runtime *r, const eplb_plan *next) {
    plan_need(r, next);
    r->n_load = 0;
    r->load_bytes = 0;
    r->load_seconds = 0.0;
    for (size_t c = 0; c < (size_t)r->n_moe * (size_t)r->n_expert; c++)
        if (r->need[c] && !r->held[c]) r->load_list[r->n_load++] = (int32_t)c;
    if (r->o.weight_source == EP_WEIGHTS_PEER && model_experts_partial(r->m)) { /* over MPI (ep_peer.c) */
        atomic_store(&r->load_state, EP_LOAD_RUNNING);
        ep_peer_stage(r, next); /* this rank may only send */
        return;
    }
    if (!r->n_load) {
        atomic_store(&r->load_state, EP_LOAD_DONE);
        return;
    }
    atomic_store(&r->load_state, EP_LOAD_RUNNING);
    if (pthread_create(&r->loader, NULL, loader_main, r)) {
        snprintf(r->load_err, sizeof r->load_err, "cannot start the weight loader thread");
        atomic_store(&r->load_state, EP_LOAD_FAILED);
        return;
    }
    r->loader_started = true;
}

void ep_weights_join(ep_runtime *r) {
    if (r->loader_started) pthread_join(r->loader, NULL);
    r->loader_started = false;
}

void ep_weights_switch(ep_runtime *r, const eplb_plan *next) {
    ep_weights_join(r);
    uint64_t released = 0;
    if (model_experts_partial(r->m)) {
        plan_need(r, next);
        for (size_t c = 0; c < (size_t)r->n_moe * (size_t)r->n_expert; c++) {
            if (r->held[c] && !r->need[c]) {
                model_expert_release(r->m, r->layer_of_moe[c / (size_t)r->n_expert],
                                     (int32_t)(c % (size_t)r->n_expert));
                released++;
            }
            r->held[c] = r->need[c];
        }
    }
    pthread_mutex_lock(&r->mu);
    r->st.weight_loads += (uint64_t)r->n_load;
    r->st.weight_releases += released;
    r->st.weight_load_bytes += r->load_bytes;
    r->st.t_weight_load += r->load_seconds;
    pthread_mutex_unlock(&r->mu);
    r->n_load = 0;
    atomic_store(&r->load_state, EP_LOAD_IDLE);
    held_stats(r);
}

void ep_weights_abandon(ep_runtime *r) {
    ep_weights_join(r);
    for (int32_t i = 0; i < r->n_load; i++) {
        int32_t c = r->load_list[i];
        if (!r->held[c]) model_expert_release(r->m, r->layer_of_moe[c / r->n_expert], c % r->n_expert);
    }
    r->n_load = 0;
    atomic_store(&r->load_state, EP_LOAD_IDLE);
    held_stats(r);
}
