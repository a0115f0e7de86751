/* sim_eplb.c - see sim_eplb.h. */
#include "sim/sim_eplb.h"

#include <stdlib.h>

#include "eplb/eplb.h"
#include "sim/sim_rng.h"

#define SIM_EPLB_LAYERS 8 /* layers sampled: enough for a stable mean, cheap at start-up */

double sim_moe_imbalance(const sim_model *m, const sim_pool_cfg *p, uint64_t seed, cf_err *err) {
    if (m->n_expert <= 0 || m->n_moe_layer <= 0 || p->accels <= 1) return 1.0;
    int ranks = (int)p->accels;
    int nodes = p->accels > p->hw.accel_per_node && p->accels % p->hw.accel_per_node == 0
                    ? (int)(p->accels / p->hw.accel_per_node)
                    : 1;
    int physical = (int)(m->n_expert + p->redundant_experts);
    physical = (physical + ranks - 1) / ranks * ranks;
    int layers = m->n_moe_layer < SIM_EPLB_LAYERS ? (int)m->n_moe_layer : SIM_EPLB_LAYERS;
    eplb_shape s = {.n_layers = layers,
                    .n_logical = (int)m->n_expert,
                    .n_physical = physical,
                    .n_groups = 1,
                    .n_nodes = nodes,
                    .n_ranks = ranks};
    float *load = malloc((size_t)layers * (size_t)m->n_expert * sizeof *load);
    if (!load) return cf_fail(err, "out of memory");
    sim_rng rng;
    sim_rng_seed(&rng, seed ^ 0xE91Bull);
    for (long i = 0; i < layers * m->n_expert; i++) load[i] = (float)sim_rng_lognormal(&rng, 1.0, p->expert_skew);
    eplb_plan plan;
    int rc = p->eplb ? eplb_rebalance(&s, load, &plan, err) : eplb_plan_identity(&s, &plan, err);
    double sum = 0;
    for (int l = 0; !rc && l < layers; l++) sum += eplb_imbalance(&plan, load, l, NULL);
    if (!rc) eplb_plan_free(&plan);
    free(load);
    if (rc) {
        cf_prefix(err, "EPLB for %ld experts on %d ranks", m->n_expert, ranks);
        return -1;
    }
    return sum / layers;
}
