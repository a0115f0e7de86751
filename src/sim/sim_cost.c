/* sim_cost.c - see sim_cost.h. */
#include "sim/sim_cost.h"

#include <math.h>
#include <stdbool.h>

double sim_sched_attn_cost(const sim_model *m) {
    /* per context position relative to the linear work per token */
    return m->attn_flops_per_ctx_prefill / (2.0 * m->active_params);
}

sim_step_cost sim_step_time(const sim_model *m, const sim_pool_cfg *p, const sched_item *items, int32_t n_items,
                            double moe_imbalance) {
    sim_step_cost c = {0};
    double T = 0, pairs = 0, pairs_prefill = 0, kv_read = 0;
    for (int32_t i = 0; i < n_items; i++) {
        double s = items[i].start, n = items[i].n_tokens;
        T += n;
        double p = n * s + n * (n + 1) / 2; /* each query attends to its context (causal) */
        if (items[i].kind == SCHED_PREFILL) pairs_prefill += p;
        else pairs += p;
        kv_read += s + n; /* the chunk reads its whole context once */
    }
    if (T <= 0) return c;
    const sim_hw *h = &p->hw;
    double A = (double)p->accels;
    double lin = 2.0 * (m->dense_params + (m->active_params - m->dense_params) * moe_imbalance) * T;
    double attn = m->attn_flops_per_ctx * pairs + m->attn_flops_per_ctx_prefill * pairs_prefill;
    c.flops = lin + attn;
    c.compute_s = (lin / h->flops_fp8 + attn / h->flops_bf16) / (A * h->mfu);
    double routed = m->total_params - m->dense_params, touched = 1;
    if (m->n_expert > 0 && m->n_expert_used > 0) {
        double E = (double)m->n_expert, k = (double)m->n_expert_used;
        touched = 1 - pow(1 - k / E, T); /* share of experts hit by the step's T tokens */
    }
    double weights = (m->dense_params * (double)p->dp + routed * touched) * m->weight_bytes;
    c.bytes = weights + (kv_read + T) * m->kv_bytes_per_token;
    c.memory_s = c.bytes / (A * h->hbm_bw * h->mbu);
    if (p->accels > 1 && m->n_moe_layer > 0 && m->n_expert_used > 0) {
        /* one copy per destination: an expert on scale-out links when the instance spans nodes, at most
           route_nodes copies with node-limited routing (forwarded inside the node over scale-up links) */
        bool multi_node = p->accels > h->accel_per_node;
        double copies = (double)m->n_expert_used, nodes = ceil(A / (double)h->accel_per_node);
        if (multi_node && m->route_nodes > 0 && copies > (double)m->route_nodes) copies = (double)m->route_nodes;
        if (multi_node && copies > nodes) copies = nodes;
        double moved = T * copies * (double)m->n_embd * m->act_bytes * 2.0 * (double)m->n_moe_layer;
        c.comm_s = moved * moe_imbalance / (A * (multi_node ? h->scaleout_bw : h->scaleup_bw) * h->net_eff);
    }
    double busy = fmax(c.compute_s, c.memory_s);
    c.total_s = (p->overlap_comm ? fmax(busy, c.comm_s) : busy + c.comm_s) + h->step_overhead_s;
    return c;
}
