/* eplb.h - expert-parallel load balancing (EPLB) as a pure function: a load
 * matrix [layers][logical experts] in, a placement of physical expert slots
 * (replicas) on ranks out. The algorithm is DeepSeek's open EPLB
 * (github.com/deepseek-ai/EPLB, eplb.py), reimplemented from its description
 * and checked against it (tests/oracles/eplb_ref.py writes the fixtures that
 * tests/unit/eplb/test_eplb.c compares):
 *
 *  - hierarchical policy (groups % nodes == 0): pack expert groups onto nodes
 *    so node loads balance (greedy, heaviest first, each node the same
 *    number of groups); within each node replicate the expert whose load per
 *    replica is highest until the node's physical slots are used; pack the
 *    node's replicas onto its ranks the same greedy way;
 *  - global policy (otherwise): the same with one group and one node.
 *
 * Physical slot p of a layer lives on rank p / (physical / ranks); its
 * logical expert is phy2log[layer][p]; it is replica number
 * phy_replica[layer][p] of that expert; log2phy[layer][e][k] lists the slots
 * of expert e (k < log_count[layer][e], the rest -1).
 *
 * Determinism: ties between equal loads are broken by the lower index (a
 * stable sort, the first minimum/maximum). Arithmetic is float32 in the
 * reference's order, so integer token counts give bit-identical placements.
 * Depends on base only (the simulator reuses it). Not thread-safe per plan;
 * eplb_rebalance allocates its scratch per call (it runs every T steps, off
 * the hot path). */
#ifndef CINFER_EPLB_EPLB_H
#define CINFER_EPLB_EPLB_H

#include <stdint.h>

#include "base/error.h"

typedef struct eplb_shape {
    int n_layers; /* MoE layers (rows of the load matrix) */
    int n_logical; /* routed experts per layer */
    int n_physical; /* expert slots per layer, >= n_logical, multiple of n_ranks */
    int n_groups; /* expert groups (group-limited routing); 1 if none */
    int n_nodes; /* hosts; ranks of a node are consecutive */
    int n_ranks; /* ranks in all, multiple of n_nodes */
} eplb_shape;

typedef enum eplb_policy { EPLB_HIERARCHICAL, EPLB_GLOBAL } eplb_policy;

typedef struct eplb_plan {
    eplb_shape shape;
    eplb_policy policy;
    int max_replicas; /* max over layers and experts of log_count */
    int32_t *phy2log; /* [n_layers][n_physical] */
    int32_t *phy_replica; /* [n_layers][n_physical] */
    int32_t *log_count; /* [n_layers][n_logical] */
    int32_t *log2phy; /* [n_layers][n_logical][max_replicas], -1 padded */
} eplb_plan;

/* Checks the shape: all counts positive, logical % groups == 0,
 * physical >= logical, physical % ranks == 0, ranks % nodes == 0. */
int eplb_shape_check(const eplb_shape *s, cf_err *err);

/* The policy eplb_rebalance uses for this shape. */
eplb_policy eplb_policy_for(const eplb_shape *s);

/* Computes the placement for `load` ([n_layers][n_logical], each >= 0 and
 * finite) into *out (which it owns afterwards: eplb_plan_free). On error
 * *out is left zeroed. */
int eplb_rebalance(const eplb_shape *s, const float *load, eplb_plan *out, cf_err *err);

/* The placement before any load is known: no replicas beyond one per expert
 * when n_physical == n_logical, slot p holds expert p; extra slots hold
 * experts 0, 1, ... again (round robin). */
int eplb_plan_identity(const eplb_shape *s, eplb_plan *out, cf_err *err);

/* Frees the arrays; the plan is zeroed. NULL-safe. */
void eplb_plan_free(eplb_plan *p);

/* Rank of physical slot `phys`. */
static inline int eplb_rank_of_slot(const eplb_shape *s, int phys) { return phys / (s->n_physical / s->n_ranks); }

/* Fills rank_load[n_ranks] with the load each rank carries in `layer` (each
 * replica takes load/count of its expert, summed in slot order, double) and
 * returns the balance metric max(rank_load) / mean(rank_load) (1 when all
 * loads are zero). rank_load may be NULL. */
double eplb_imbalance(const eplb_plan *p, const float *load, int layer, double *rank_load);

/* Bytes of expert weights the plan holds beyond one copy of each expert,
 * given the bytes of one expert's weights: the memory cost of replicas. */
int64_t eplb_replica_bytes(const eplb_plan *p, int64_t bytes_per_expert);

#endif
