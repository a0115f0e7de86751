/* compute_cost.h - the estimated-compute cost model shared by the engine's
 * scheduler (engine/sched.c) and the cluster router's placement policies
 * (cluster/route_policy.c): pure arithmetic over plain numbers, no state.
 *
 * A token at position p costs linear_cost + attn_cost * (p + 1): the weight
 * work per token plus attention over its context. So computing positions
 * [start, start + n) costs
 *     n * linear_cost + attn_cost * (n*start + n*(n+1)/2).
 * Units are "one token's weight work" when linear_cost = 1. */
#ifndef CINFER_BASE_COMPUTE_COST_H
#define CINFER_BASE_COMPUTE_COST_H

#include <stdint.h>

/* The model dimensions the cost model needs (copied from model hparams by
 * the engine; given on the command line or learned from workers elsewhere). */
typedef struct cf_cost_shape {
    int32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
} cf_cost_shape;

/* Attention work per (token x context position) relative to the weight work
 * per token: (4 * n_layer * n_head * head_dim) / (2 * weights read per token).
 * shape NULL (or zero layers/width): a 4096-wide, 12-layer-equivalent default. */
double cf_attn_weight(const cf_cost_shape *shape);

/* Cost of computing positions [start, start + n) (formula above). */
double cf_chunk_cost(double linear_cost, double attn_cost, int32_t start, int32_t n);

#endif
