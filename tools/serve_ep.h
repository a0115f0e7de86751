/* serve_ep.h - `cinfer serve --ep`: the expert-parallel parts of the serve
 * command (docs/ep.md). Each MPI rank is a whole server on port base + rank;
 * its engine's routed experts run through the ep runtime (src/ep). Start-up
 * failures on any rank abort the whole job (the other ranks would otherwise
 * wait in the rounds forever). */
#ifndef CINFER_TOOLS_SERVE_EP_H
#define CINFER_TOOLS_SERVE_EP_H

#include <stdbool.h>
#include <stddef.h>

#include "ep/ep.h"

typedef struct serve_ep_opts {
    bool on; /* --ep */
    long long redundant, rebalance, nodes, threads; /* --ep-redundant, --ep-rebalance, --ep-nodes, --ep-threads */
    long long micro_batches; /* --ep-micro-batches */
    const char *weight_source; /* --ep-weight-source file|peer (NULL: file) */
    ep_placement place; /* this rank's start-up placement (set after serve_ep_init; the load keeps its experts) */
} serve_ep_opts;

/* MPI start-up: rank and rank count. 0, or 1 after a message. */
int serve_ep_init(int *rank, int *n_ranks);
/* Starts the runtime for the loaded model; max_rows = max_batch_tokens x experts_used. 0, or 1 after a message. */
int serve_ep_start(const serve_ep_opts *o, model *m, int max_batch_tokens, ep_runtime **out);
/* Prometheus text of the runtime's counters (serve_config.extra_metrics): 0, or -1 (out of memory). */
int serve_ep_metrics(void *runtime, char **out, size_t *len);
/* A start-up failure on one rank: take the job down now. */
void serve_ep_abort(void);

#endif
