/* ep_balance.c - live rebalancing for expert parallelism: the load window
 * (routed rows per MoE layer and expert, this rank's engine, over the last
 * EP_LOAD_WINDOW rebalance periods) and the periodic switch to a new EPLB
 * plan. Every rank all-reduces the same window at the same busy round (busy
 * rounds are agreed through the round headers), so every rank computes the
 * same plan and switches at the same round boundary. The switch only changes
 * which rank computes a row: every rank holds every expert's weights, so
 * nothing is copied and no request waits. */
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
    if (r->o.rebalance_rounds <= 0 || ++r->busy_since_rebalance < (uint64_t)r->o.rebalance_rounds) return 0;
    r->busy_since_rebalance = 0;
    ep_balance_gather(r);
    size_t cells = (size_t)r->n_moe * (size_t)r->n_expert;
    r->win_pos = (r->win_pos + 1) % EP_LOAD_WINDOW; /* the oldest period leaves the window */
    memset(r->win + (size_t)r->win_pos * cells, 0, cells * sizeof(uint64_t));
    eplb_plan next;
    if (eplb_rebalance(&r->shape, r->load_f, &next, err)) return -1;
    /* before: the static placement (no EPLB) under the window's loads; after: the new plan under them */
    double before = mean_imbalance(&r->static_plan, r->load_f, r->n_moe);
    double after = mean_imbalance(&next, r->load_f, r->n_moe);
    int64_t expert_bytes = model_expert_bytes(r->m);
    eplb_plan_free(&r->plan);
    r->plan = next;
    pthread_mutex_lock(&r->mu);
    r->st.rebalances++;
    r->st.imbalance_before = before;
    r->st.imbalance_after = after;
    r->st.replica_bytes = eplb_replica_bytes(&r->plan, expert_bytes);
    pthread_mutex_unlock(&r->mu);
    if (r->rank == 0)
        LOG_INFO("expert parallelism: rebalanced (%s policy): imbalance %.3f -> %.3f (max/mean rank load)",
                 r->plan.policy == EPLB_HIERARCHICAL ? "hierarchical" : "global", before, after);
    return 0;
}
