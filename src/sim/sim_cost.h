/* sim_cost.h - the time of one engine step from its plan, for one instance
 * (accels accelerators of one hardware profile running one model):
 *
 *   compute  = (2 * active_params * T / flops_fp8 + attention / flops_bf16)
 *              / (accels * mfu)
 *              attention = sum over items of the (query x context) pairs
 *              of its chunk x attn_flops_per_ctx (decode items) or
 *              attn_flops_per_ctx_prefill (prefill chunks)
 *   memory   = (dense weights x dp ranks + routed experts touched
 *              + KV read + KV written) / (accels * hbm_bw * mbu)
 *              experts touched per MoE layer: E * (1 - (1 - k/E)^T)
 *   comm     = expert-parallel dispatch + combine of T tokens x copies x
 *              n_embd x act_bytes x 2 per MoE layer / (accels * bw *
 *              net_eff): within a node copies = k experts over scale-up
 *              links; across nodes copies = min(k, route_nodes, nodes)
 *              over scale-out links (node-limited routing sends one copy
 *              per node and forwards it inside the node)
 *   step     = max(compute, memory) + comm (or max of all three when the
 *              pool overlaps communication with compute) + step_overhead
 * T is the number of tokens in the step. Pure functions. */
#ifndef CINFER_SIM_SIM_COST_H
#define CINFER_SIM_SIM_COST_H

#include <stdint.h>

#include "engine/sched.h"
#include "sim/sim_config.h"

typedef struct sim_step_cost {
    double compute_s, memory_s, comm_s, total_s;
    double flops, bytes;
} sim_step_cost;

/* Cost of a plan's items on one instance of pool p. */
/* moe_imbalance: max/mean expert load per rank (sim_eplb.h), >= 1; it scales the
 * routed-expert compute and the dispatch/combine time. */
sim_step_cost sim_step_time(const sim_model *m, const sim_pool_cfg *p, const sched_item *items, int32_t n_items,
                            double moe_imbalance);

/* The scheduler's compute weights for this model (sched_limits.attn_cost
 * relative to linear_cost = 1), so chunking follows the same cost model. */
double sim_sched_attn_cost(const sim_model *m);

#endif
