/* compute_cost.c - see compute_cost.h. */
#include "base/compute_cost.h"

double cf_attn_weight(const cf_cost_shape *hp) {
    if (!hp || hp->n_layer <= 0 || hp->n_embd <= 0) return 4.0 / (2.0 * 12.0 * 4096.0);
    double qdim = (double)hp->n_head * hp->head_dim, kvdim = (double)hp->n_head_kv * hp->head_dim;
    double per_layer = 2.0 * hp->n_embd * qdim + 2.0 * hp->n_embd * kvdim + 3.0 * hp->n_embd * (double)hp->n_ff;
    double weights = hp->n_layer * per_layer + (double)hp->n_embd * hp->n_vocab;
    return (4.0 * hp->n_layer * qdim) / (2.0 * weights);
}

double cf_chunk_cost(double linear_cost, double attn_cost, int32_t start, int32_t n) {
    double L = n, s = start;
    return L * linear_cost + attn_cost * (L * s + L * (L + 1.0) / 2.0);
}
