/* ep_balance.c - live rebalancing for expert parallelism: the load window
 * (routed rows per MoE layer and expert, this rank's engine, over the last
 * EP_LOAD_WINDOW rebalance periods) and the periodic switch to a new EPLB
 * plan. Every rank all-reduces the same window at the same busy round (busy
 * rounds are agreed through the round headers), so every rank computes the
 * same plan and stages it at the same round; its experts load in the
 * background (ep_weights.c) and every rank switches at the first round whose
 * headers say every rank is ready (or drops it when one rank failed), so the
 * ranks always route by the same plan. No request waits: rows flow under the
 * old plan until the switch. One plan is staged at a time. */
#include <mpi.h>
#include <string.h>

#include "base/log.h"
#include "ep/ep_internal.h"

void ep_balance_count(ep_runtime *r, int32_t layer, int32_t n, const int32_t *expert) {
    int32_t mi = r->moe_of_layer[layer];
    uint64_t *slot = r->win + ((size_t)r->win_pos * (size_t)r->n_moe + (size_t)mi) * (size_t)r->n_expert;
    for (int32_t i = 0; i < n; i++) slot[expert[i]]++;
}

void ep_balance_gather(ep_runtime *r) {
    size_t cells = (size_t)r->n_moe * (size_t)r->n_expert;
    memset(r->sum_local, 0, cells * sizeof(uint64_t));
    for (int w = 0; w < EP_LOAD_WINDOW; w++)
        for (size_t c = 0; c < cells; c++) r->sum_local[c] += r->win[(size_t)w * cells + c];
    MPI_Allreduce(r->sum_local, r->sum_all, (int)cells, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    for (size_t c = 0; c < cells; c++) r->load_f[c] = (float)r->sum_all[c];
}

static double mean_imbalance(const eplb_plan *p, const float *load, int32_t n_moe) {
    double sum = 0.0;
    for (int32_t l = 0; l < n_moe; l++) sum += eplb_imbalance(p, load, l, NULL);
    return sum / n_moe;
}

int ep_balance_maybe(ep_runtime *r, cf_err *err) {
    if (r->o.rebalance_rounds <= 0 || r->staged || ++r->busy_since_rebalance < (uint64_t)r->o.rebalance_rounds)
        return 0;
    r->busy_since_rebalance = 0;
    ep_balance_gather(r);
    size_t cells = (size_t)r->n_moe * (size_t)r->n_expert;
    r->win_pos = (r->win_pos + 1) % EP_LOAD_WINDOW; /* the oldest period leaves the window */
    memset(r->win + (size_t)r->win_pos * cells, 0, cells * sizeof(uint64_t));
    if (eplb_rebalance(&r->shape, r->load_f, &r->next, err)) return -1;
    /* before: the static placement (no EPLB) under the window's loads; after: the new plan under them */
    r->next_before = mean_imbalance(&r->static_plan, r->load_f, r->n_moe);
    r->next_after = mean_imbalance(&r->next, r->load_f, r->n_moe);
    r->staged = true;
    ep_weights_stage(r, &r->next);
    pthread_mutex_lock(&r->mu);
    r->st.staged = true;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int ep_balance_flags(ep_runtime *r) {
    if (!r->staged) return 0;
    if (r->o.weight_source == EP_WEIGHTS_PEER) ep_peer_progress(r); /* no-op unless moves are under way */
    int state = atomic_load(&r->load_state);
    return state == EP_LOAD_DONE ? EP_FLAG_READY : state == EP_LOAD_FAILED ? EP_FLAG_LOAD_FAILED : 0;
}

void ep_balance_after_round(ep_runtime *r) {
    if (!r->staged || (!r->any_failed && !r->all_ready)) return;
    if (r->any_failed) {
        if (atomic_load(&r->load_state) == EP_LOAD_FAILED)
            LOG_WARN("expert parallelism: rank %d: the new plan's experts did not load (%s); every rank keeps the "
                     "current plan",
                     r->rank, r->load_err);
        ep_weights_abandon(r);
        eplb_plan_free(&r->next);
    } else {
        ep_weights_switch(r, &r->next);
        eplb_plan_free(&r->plan);
        r->plan = r->next;
        memset(&r->next, 0, sizeof r->next);
        pthread_mutex_lock(&r->mu);
        r->st.rebalances++;
        r->st.imbalance_before = r->next_before;
        r->st.imbalance_after = r->next_after;
        r->st.replica_bytes = eplb_replica_bytes(&r->plan, (int64_t)model_expert_bytes(r->m));
        pthread_mutex_unlock(&r->mu);
        if (r->rank == 0)
            LOG_INFO("expert parallelism: rebalanced (%s policy): imbalance %.3f -> %.3f (max/mean rank load)",
                     r->plan.policy == EPLB_HIERARCHICAL ? "hierarchical" : "global", r->next_before, r->next_after);
    }
    r->staged = false;
    pthread_mutex_lock(&r->mu);
    r->st.staged = false;
    pthread_mutex_unlock(&r->mu);
}
