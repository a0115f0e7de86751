/* sim_route.c - see sim_route.h. */
#include "sim/sim_route.h"

#include <string.h>

int sim_route_prefill(const char *policy, const sim_route_cand *c, int n, uint64_t rr) {
    if (!strcmp(policy, "round_robin")) return (int)(rr % (uint64_t)n);
    int best = 0;
    double best_score = 0;
    int aware = !strcmp(policy, "cache_aware");
    for (int i = 0; i < n; i++) {
        /* a cached token saves its compute; a queued token delays this request by about its compute */
        double score = (aware ? (double)c[i].hit_tokens : 0) - (double)c[i].queued_tokens;
        if (i == 0 || score > best_score) best = i, best_score = score;
    }
    return best;
}

int sim_route_decode(const char *policy, const sim_route_cand *c, int n, uint64_t rr) {
    if (!strcmp(policy, "round_robin")) return (int)(rr % (uint64_t)n);
    int best = 0;
    for (int i = 1; i < n; i++)
        if (c[i].seqs < c[best].seqs || (c[i].seqs == c[best].seqs && c[i].free_blocks > c[best].free_blocks)) best = i;
    return best;
}
