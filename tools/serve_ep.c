/* serve_ep.c - the expert-parallel parts of `cinfer serve` (serve_ep.h):
 * MPI start-up, the runtime for the loaded model, and its /metrics rows:
 *   cinfer_ep_info{rank,ranks,experts,slots,moe_layers} 1
 *   cinfer_ep_rounds_total, cinfer_ep_busy_rounds_total, cinfer_ep_rebalances_total
 *   cinfer_ep_rows_sent_total (expert rows this rank's engine dispatched)
 *   cinfer_ep_rows_computed_total (rows this rank computed: its expert load)
 *   cinfer_ep_bytes_total{direction} (bytes that crossed ranks)
 *   cinfer_ep_seconds_total{phase="alltoall|compute|idle"}
 *   cinfer_ep_imbalance{when="before|after"} (last rebalance, mean over MoE layers)
 *   cinfer_ep_replica_bytes (memory the plan's replicas would take)
 * The rows name the rank, so a front can merge the ranks' /metrics. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/log.h"
#include "commands.h"
#include "serve_ep.h"

int serve_ep_init(int *rank, int *n_ranks) {
    cf_err err = {0};
    if (ep_mpi_init(NULL, NULL, rank, n_ranks, &err)) return cli_fail("serve --ep: %s", err.msg);
    LOG_INFO("expert parallelism: rank %d of %d, pid %d", *rank, *n_ranks, (int)getpid());
    return 0;
}

int serve_ep_start(const serve_ep_opts *o, const model *m, int max_batch_tokens, ep_runtime **out) {
    const model_hparams *hp = model_get_hparams(m);
    ep_options eo = {.redundant = (int32_t)o->redundant,
                     .rebalance_rounds = (int32_t)o->rebalance,
                     .n_nodes = (int32_t)o->nodes,
                     .threads = (int32_t)o->threads,
                     .max_rows = max_batch_tokens * (hp->n_expert_used > 0 ? hp->n_expert_used : 1)};
    cf_err err = {0};
    if (ep_runtime_start(m, &eo, out, &err)) return cli_fail("serve --ep: %s", err.msg);
    ep_stats s = ep_runtime_get_stats(*out);
    LOG_INFO("expert parallelism: %d routed experts x %d MoE layers on %d ranks, %d slots per layer, rebalance every "
             "%lld busy rounds",
             s.n_expert, s.n_moe, s.n_ranks, s.n_physical, o->rebalance);
    return 0;
}

void serve_ep_abort(void) { ep_mpi_abort(1); }

int serve_ep_metrics(void *runtime, char **out, size_t *len) {
    ep_stats s = ep_runtime_get_stats(runtime);
    size_t cap = 4096;
    char *p = malloc(cap);
    if (!p) return -1;
    int n = snprintf(
        p, cap,
        "# HELP cinfer_ep_info Expert parallelism layout of this rank.\n# TYPE cinfer_ep_info gauge\n"
        "cinfer_ep_info{rank=\"%d\",ranks=\"%d\",experts=\"%d\",slots=\"%d\",moe_layers=\"%d\"} 1\n"
        "# HELP cinfer_ep_rounds_total Collective rounds (busy: rows moved).\n# TYPE cinfer_ep_rounds_total counter\n"
        "cinfer_ep_rounds_total{rank=\"%d\"} %llu\n"
        "# TYPE cinfer_ep_busy_rounds_total counter\ncinfer_ep_busy_rounds_total{rank=\"%d\"} %llu\n"
        "# TYPE cinfer_ep_rebalances_total counter\ncinfer_ep_rebalances_total{rank=\"%d\"} %llu\n"
        "# HELP cinfer_ep_rows_sent_total Expert rows (token x routed expert) this rank's engine dispatched.\n"
        "# TYPE cinfer_ep_rows_sent_total counter\ncinfer_ep_rows_sent_total{rank=\"%d\"} %llu\n"
        "# HELP cinfer_ep_rows_computed_total Expert rows this rank computed (its expert load).\n"
        "# TYPE cinfer_ep_rows_computed_total counter\ncinfer_ep_rows_computed_total{rank=\"%d\"} %llu\n"
        "# HELP cinfer_ep_bytes_total Hidden-state bytes that crossed ranks (rows out and results back).\n"
        "# TYPE cinfer_ep_bytes_total counter\ncinfer_ep_bytes_total{rank=\"%d\",direction=\"sent\"} %llu\n"
        "cinfer_ep_bytes_total{rank=\"%d\",direction=\"received\"} %llu\n"
        "# HELP cinfer_ep_seconds_total Round thread time: all-to-all, expert compute, idle backoff.\n"
        "# TYPE cinfer_ep_seconds_total counter\ncinfer_ep_seconds_total{rank=\"%d\",phase=\"alltoall\"} %.6f\n"
        "cinfer_ep_seconds_total{rank=\"%d\",phase=\"compute\"} %.6f\n"
        "cinfer_ep_seconds_total{rank=\"%d\",phase=\"idle\"} %.6f\n"
        "# HELP cinfer_ep_imbalance Max/mean rank expert load under the last rebalance's window, mean over MoE "
        "layers: before = the start-up placement, after = the EPLB plan.\n"
        "# TYPE cinfer_ep_imbalance gauge\ncinfer_ep_imbalance{rank=\"%d\",when=\"before\"} %.6f\n"
        "cinfer_ep_imbalance{rank=\"%d\",when=\"after\"} %.6f\n"
        "# HELP cinfer_ep_replica_bytes Expert weight bytes the plan's redundant replicas take.\n"
        "# TYPE cinfer_ep_replica_bytes gauge\ncinfer_ep_replica_bytes{rank=\"%d\"} %lld\n",
        s.rank, s.n_ranks, s.n_expert, s.n_physical, s.n_moe, s.rank, (unsigned long long)s.rounds, s.rank,
        (unsigned long long)s.busy_rounds, s.rank, (unsigned long long)s.rebalances, s.rank,
        (unsigned long long)s.rows_sent, s.rank, (unsigned long long)s.rows_received, s.rank,
        (unsigned long long)s.bytes_sent, s.rank, (unsigned long long)s.bytes_received, s.rank, s.t_comm, s.rank,
        s.t_compute, s.rank, s.t_wait, s.rank, s.imbalance_before, s.rank, s.imbalance_after, s.rank,
        (long long)s.replica_bytes);
    if (n < 0 || (size_t)n >= cap) {
        free(p);
        return -1;
    }
    *out = p;
    *len = (size_t)n;
    return 0;
}
