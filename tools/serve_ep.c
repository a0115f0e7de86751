/* serve_ep.c - the expert-parallel parts of `cinfer serve` (serve_ep.h):
 * MPI start-up, the runtime for the loaded model, and its /metrics rows
 * (src/ep/ep_stats_text.c; they name the rank, so a front can merge the
 * ranks' /metrics). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "commands.h"
#include "ep/ep_stats_text.h"
#include "serve_ep.h"

int serve_ep_init(int *rank, int *n_ranks) {
    cf_err err = {0};
    if (ep_mpi_init(NULL, NULL, rank, n_ranks, &err)) return cli_fail("serve --ep: %s", err.msg);
    LOG_INFO("expert parallelism: rank %d of %d, pid %d", *rank, *n_ranks, (int)getpid());
    return 0;
}

int serve_ep_start(const serve_ep_opts *o, model *m, int max_batch_tokens, ep_runtime **out) {
    const model_hparams *hp = model_get_hparams(m);
    ep_options eo = {.redundant = (int32_t)o->redundant,
                     .rebalance_rounds = (int32_t)o->rebalance,
                     .n_nodes = (int32_t)o->nodes,
                     .threads = (int32_t)o->threads,
                     .micro_batches = (int32_t)o->micro_batches,
                     .max_rows = max_batch_tokens * (hp->n_expert_used > 0 ? hp->n_expert_used : 1)};
    if (o->weight_source && strcmp(o->weight_source, "file") && strcmp(o->weight_source, "peer"))
        return cli_fail("serve: --ep-weight-source: '%s' (file or peer)", o->weight_source);
    eo.weight_source = o->weight_source && !strcmp(o->weight_source, "peer") ? EP_WEIGHTS_PEER : EP_WEIGHTS_FILE;
    cf_err err = {0};
    if (ep_runtime_start(m, &eo, out, &err)) return cli_fail("serve --ep: %s", err.msg);
    ep_stats s = ep_runtime_get_stats(*out);
    LOG_INFO(
        "expert parallelism: %d routed experts x %d MoE layers on %d ranks, %d slots per layer, rebalance every "
        "%lld busy rounds, %lld micro-batch(es) per round; rank %d holds %d of %d (layer, expert) weights, %.1f MiB",
        s.n_expert, s.n_moe, s.n_ranks, s.n_physical, o->rebalance, o->micro_batches > 1 ? 2LL : 1LL, s.rank,
        s.experts_held, s.n_expert * s.n_moe, (double)s.expert_bytes / (1 << 20));
    return 0;
}

void serve_ep_abort(void) { ep_mpi_abort(1); }

int serve_ep_metrics(void *runtime, char **out, size_t *len) {
    ep_stats s = ep_runtime_get_stats(runtime);
    return ep_stats_render(&s, out, len);
}
