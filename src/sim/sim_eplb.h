/* sim_eplb.h - expert-parallel load imbalance of a simulated pool, from the
 * production expert placement (src/eplb: eplb_rebalance with the pool's
 * redundant expert slots, or the identity placement when the pool runs
 * without EPLB) over an expert load drawn from the run's seed: per layer and
 * expert, log-normal with median 1 and the pool's expert_skew as sigma. The
 * factor, max over mean rank load averaged over layers, multiplies the
 * routed-expert compute and the dispatch/combine time of every step (the
 * slowest rank sets the step). Pure apart from the scratch it allocates. */
#ifndef CINFER_SIM_SIM_EPLB_H
#define CINFER_SIM_SIM_EPLB_H

#include <stdint.h>

#include "sim/sim_config.h"

/* 1 for dense models and single-accelerator instances; -1 on error. */
double sim_moe_imbalance(const sim_model *m, const sim_pool_cfg *p, uint64_t seed, cf_err *err);

#endif
