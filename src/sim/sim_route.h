/* sim_route.h - placement policies of the simulated router, pure functions
 * over per-instance candidates. This is the seam where the cluster layer's
 * policies (src/cluster/route_policy.h, built in parallel) plug in: the
 * simulator calls only these two functions.
 *   prefill: cache_aware (most prefix tokens already in the instance's
 *            memory, minus queued work converted to tokens), least_loaded
 *            (fewest queued tokens), round_robin;
 *   decode:  least_loaded (fewest running + pending sequences, then most
 *            free blocks), round_robin.
 * Ties go to the lowest index. */
#ifndef CINFER_SIM_SIM_ROUTE_H
#define CINFER_SIM_SIM_ROUTE_H

#include <stdint.h>

typedef struct sim_route_cand {
    int64_t hit_tokens; /* prefix tokens in this instance's memory (prefill) */
    int64_t queued_tokens; /* prefill tokens waiting or running */
    int64_t seqs; /* sequences running or pending (decode) */
    int64_t free_blocks;
} sim_route_cand;

int sim_route_prefill(const char *policy, const sim_route_cand *c, int n, uint64_t rr);
int sim_route_decode(const char *policy, const sim_route_cand *c, int n, uint64_t rr);

#endif
