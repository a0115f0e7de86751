/* ep_stats_text.c - ep_stats to Prometheus text and back (ep_stats_text.h).
 * Rows (each labelled with the rank):
 *   cinfer_ep_info{rank,ranks,experts,slots,moe_layers} 1
 *   cinfer_ep_rounds_total, cinfer_ep_busy_rounds_total, cinfer_ep_rebalances_total
 *   cinfer_ep_rows_sent_total (expert rows this rank's engine dispatched)
 *   cinfer_ep_rows_computed_total (rows this rank computed: its expert load)
 *   cinfer_ep_bytes_total{direction="sent|received"} (bytes that crossed ranks)
 *   cinfer_ep_seconds_total{phase="alltoall|compute|idle"}
 *   cinfer_ep_imbalance{when="before|after"}
 *   cinfer_ep_replica_bytes
 *   cinfer_ep_expert_bytes, cinfer_ep_experts_held (resident on this rank now)
 *   cinfer_ep_weight_loads_total, cinfer_ep_weight_releases_total,
 *   cinfer_ep_weight_load_bytes_total, cinfer_ep_weight_load_seconds_total,
 *   cinfer_ep_weight_peer_bytes_total, cinfer_ep_plan_staged */
#include "ep/ep_stats_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ep_stats_render(const ep_stats *s, char **out, size_t *len) {
    size_t cap = 8192;
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
        "# TYPE cinfer_ep_replica_bytes gauge\ncinfer_ep_replica_bytes{rank=\"%d\"} %lld\n"
        "# HELP cinfer_ep_expert_bytes Routed expert weight bytes resident on this rank.\n"
        "# TYPE cinfer_ep_expert_bytes gauge\ncinfer_ep_expert_bytes{rank=\"%d\"} %llu\n"
        "# HELP cinfer_ep_experts_held (MoE layer, expert) weights resident on this rank.\n"
        "# TYPE cinfer_ep_experts_held gauge\ncinfer_ep_experts_held{rank=\"%d\"} %d\n"
        "# HELP cinfer_ep_weight_loads_total Experts made resident by rebalances (from the model file, or from a "
        "peer rank with --ep-weight-source peer).\n"
        "# TYPE cinfer_ep_weight_loads_total counter\ncinfer_ep_weight_loads_total{rank=\"%d\"} %llu\n"
        "# TYPE cinfer_ep_weight_releases_total counter\ncinfer_ep_weight_releases_total{rank=\"%d\"} %llu\n"
        "# TYPE cinfer_ep_weight_load_bytes_total counter\ncinfer_ep_weight_load_bytes_total{rank=\"%d\"} %llu\n"
        "# TYPE cinfer_ep_weight_load_seconds_total counter\n"
        "cinfer_ep_weight_load_seconds_total{rank=\"%d\"} %.6f\n"
        "# HELP cinfer_ep_weight_peer_bytes_total Expert bytes moved by MPI point-to-point (--ep-weight-source "
        "peer), checksummed: in = received, out = sent.\n"
        "# TYPE cinfer_ep_weight_peer_bytes_total counter\n"
        "cinfer_ep_weight_peer_bytes_total{rank=\"%d\",dir=\"in\"} %llu\n"
        "cinfer_ep_weight_peer_bytes_total{rank=\"%d\",dir=\"out\"} %llu\n"
        "# HELP cinfer_ep_plan_staged 1 while a new plan's experts are loading or moving (before the switch).\n"
        "# TYPE cinfer_ep_plan_staged gauge\ncinfer_ep_plan_staged{rank=\"%d\"} %d\n",
        s->rank, s->n_ranks, s->n_expert, s->n_physical, s->n_moe, s->rank, (unsigned long long)s->rounds, s->rank,
        (unsigned long long)s->busy_rounds, s->rank, (unsigned long long)s->rebalances, s->rank,
        (unsigned long long)s->rows_sent, s->rank, (unsigned long long)s->rows_received, s->rank,
        (unsigned long long)s->bytes_sent, s->rank, (unsigned long long)s->bytes_received, s->rank, s->t_comm, s->rank,
        s->t_compute, s->rank, s->t_wait, s->rank, s->imbalance_before, s->rank, s->imbalance_after, s->rank,
        (long long)s->replica_bytes, s->rank, (unsigned long long)s->expert_bytes, s->rank, s->experts_held, s->rank,
        (unsigned long long)s->weight_loads, s->rank, (unsigned long long)s->weight_releases, s->rank,
        (unsigned long long)s->weight_load_bytes, s->rank, s->t_weight_load, s->rank,
        (unsigned long long)s->peer_bytes_in, s->rank, (unsigned long long)s->peer_bytes_out, s->rank,
        s->staged ? 1 : 0);
    if (n < 0 || (size_t)n >= cap) {
        free(p);
        return -1;
    }
    *out = p;
    *len = (size_t)n;
    return 0;
}

/* The integer value of label `name` inside the {...} of line [l, e); -1 if absent. */
static long label_int(const char *l, const char *e, const char *name) {
    size_t nl = strlen(name);
    for (const char *p = l; p + nl + 2 < e; p++)
        if ((p == l || p[-1] == '{' || p[-1] == ',') && !strncmp(p, name, nl) && p[nl] == '=' && p[nl + 1] == '"') {
            long v = 0;
            const char *q = p + nl + 2;
            if (q >= e || *q < '0' || *q > '9') return -1;
            for (; q < e && *q >= '0' && *q <= '9' && v < 1000000000L; q++) v = v * 10 + (*q - '0');
            return v;
        }
    return -1;
}

static bool has_label(const char *l, const char *e, const char *kv) {
    size_t n = strlen(kv);
    for (const char *p = l; p + n <= e; p++)
        if (!strncmp(p, kv, n)) return true;
    return false;
}

/* The sample value: the text after the last space of the line, as a double (0 if none). */
static double line_value(const char *l, const char *e) {
    const char *sp = e;
    while (sp > l && sp[-1] != ' ') sp--;
    char buf[64];
    size_t n = (size_t)(e - sp) < sizeof buf - 1 ? (size_t)(e - sp) : sizeof buf - 1;
    memcpy(buf, sp, n);
    buf[n] = 0;
    return strtod(buf, NULL);
}

static bool starts(const char *l, const char *e, const char *name) {
    size_t n = strlen(name);
    return (size_t)(e - l) > n && !strncmp(l, name, n) && (l[n] == '{' || l[n] == ' ');
}

bool ep_stats_parse(const char *text, size_t len, ep_stats *s) {
    memset(s, 0, sizeof *s);
    bool found = false;
    for (const char *l = text, *end = text + len; l < end;) {
        const char *e = memchr(l, '\n', (size_t)(end - l));
        if (!e) e = end;
        if (!starts(l, e, "cinfer_ep_info") && !starts(l, e, "cinfer_ep_rounds_total") && (size_t)(e - l) > 10 &&
            !strncmp(l, "cinfer_ep_", 10)) {
            double v = line_value(l, e);
            uint64_t u = v > 0 && v < 1.8e19 ? (uint64_t)v : 0;
            if (starts(l, e, "cinfer_ep_busy_rounds_total")) s->busy_rounds = u;
            else if (starts(l, e, "cinfer_ep_rebalances_total")) s->rebalances = u;
            else if (starts(l, e, "cinfer_ep_rows_sent_total")) s->rows_sent = u;
            else if (starts(l, e, "cinfer_ep_rows_computed_total")) s->rows_received = u;
            else if (starts(l, e, "cinfer_ep_bytes_total"))
                *(has_label(l, e, "direction=\"sent\"") ? &s->bytes_sent : &s->bytes_received) = u;
            else if (starts(l, e, "cinfer_ep_seconds_total"))
                *(has_label(l, e, "phase=\"alltoall\"")  ? &s->t_comm
                  : has_label(l, e, "phase=\"compute\"") ? &s->t_compute
                                                         : &s->t_wait) = v;
            else if (starts(l, e, "cinfer_ep_imbalance"))
                *(has_label(l, e, "when=\"before\"") ? &s->imbalance_before : &s->imbalance_after) = v;
            else if (starts(l, e, "cinfer_ep_replica_bytes")) s->replica_bytes = (int64_t)u;
            else if (starts(l, e, "cinfer_ep_expert_bytes")) s->expert_bytes = u;
            else if (starts(l, e, "cinfer_ep_experts_held")) s->experts_held = (int32_t)(u < 1u << 30 ? u : 0);
            else if (starts(l, e, "cinfer_ep_weight_loads_total")) s->weight_loads = u;
            else if (starts(l, e, "cinfer_ep_weight_releases_total")) s->weight_releases = u;
            else if (starts(l, e, "cinfer_ep_weight_load_bytes_total")) s->weight_load_bytes = u;
            else if (starts(l, e, "cinfer_ep_weight_load_seconds_total")) s->t_weight_load = v;
        } else if (starts(l, e, "cinfer_ep_rounds_total")) {
            double v = line_value(l, e);
            s->rounds = v > 0 && v < 1.8e19 ? (uint64_t)v : 0;
        } else if (starts(l, e, "cinfer_ep_info")) {
            found = true;
            s->rank = (int32_t)label_int(l, e, "rank");
            s->n_ranks = (int32_t)label_int(l, e, "ranks");
            s->n_expert = (int32_t)label_int(l, e, "experts");
            s->n_physical = (int32_t)label_int(l, e, "slots");
            s->n_moe = (int32_t)label_int(l, e, "moe_layers");
        }
        l = e + 1;
    }
    return found;
}
