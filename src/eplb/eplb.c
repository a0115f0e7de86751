/* eplb.c - DeepSeek's EPLB placement (see eplb.h): greedy balanced packing,
 * replication of the hottest expert per replica, the hierarchical and global
 * policies, and the plan's indexes and metrics.
 *
 * Invariants: every array a plan holds is sized from its shape; each logical
 * expert has >= 1 slot; replica numbers of an expert are 0..count-1, each once;
 * float32 arithmetic follows the reference's order (see eplb.h). */
#include "eplb/eplb.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int eplb_shape_check(const eplb_shape *s, cf_err *err) {
    if (s->n_layers < 1 || s->n_logical < 1 || s->n_physical < 1 || s->n_groups < 1 || s->n_nodes < 1 || s->n_ranks < 1)
        return cf_fail(err,
                       "eplb: every count must be >= 1 (layers %d, experts %d, slots %d, groups %d, "
                       "nodes %d, ranks %d)",
                       s->n_layers, s->n_logical, s->n_physical, s->n_groups, s->n_nodes, s->n_ranks);
    if (s->n_logical % s->n_groups)
        return cf_fail(err, "eplb: %d experts do not split into %d groups", s->n_logical, s->n_groups);
    if (s->n_physical < s->n_logical)
        return cf_fail(err, "eplb: %d slots cannot hold %d experts", s->n_physical, s->n_logical);
    if (s->n_physical % s->n_ranks)
        return cf_fail(err, "eplb: %d slots do not split evenly over %d ranks", s->n_physical, s->n_ranks);
    if (s->n_ranks % s->n_nodes)
        return cf_fail(err, "eplb: %d ranks do not split evenly over %d nodes", s->n_ranks, s->n_nodes);
    if (s->n_layers > (1 << 16) || s->n_physical > (1 << 20) || (int64_t)s->n_layers * s->n_physical > (1 << 26))
        return cf_fail(err, "eplb: %d layers x %d slots is too large", s->n_layers, s->n_physical);
    return 0;
}

eplb_policy eplb_policy_for(const eplb_shape *s) {
    return s->n_groups % s->n_nodes == 0 ? EPLB_HIERARCHICAL : EPLB_GLOBAL;
}

/* Indexes of w[0..n) by descending weight, ties by lower index (stable). */
static void sort_desc(const float *w, int n, int32_t *order) {
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && w[order[j - 1]] < w[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

/* Packs n weighted items into `packs` packs of n / packs items each, heaviest
 * first into the lightest pack that has room (the first such on a tie).
 * pack_weight is scratch [packs], pack_items [packs], order [n]. */
static void balanced_packing(const float *w, int n, int packs, int32_t *pack_of, int32_t *slot_in_pack,
                             float *pack_weight, int32_t *pack_items, int32_t *order) {
    int per_pack = n / packs;
    if (per_pack == 1) {
        for (int i = 0; i < n; i++) pack_of[i] = i, slot_in_pack[i] = 0;
        return;
    }
    sort_desc(w, n, order);
    for (int p = 0; p < packs; p++) pack_weight[p] = 0.0f, pack_items[p] = 0;
    for (int k = 0; k < n; k++) {
        int item = order[k], best = -1;
        for (int p = 0; p < packs; p++)
            if (pack_items[p] < per_pack && (best < 0 || pack_weight[p] < pack_weight[best])) best = p;
        pack_of[item] = best;
        slot_in_pack[item] = pack_items[best]++;
        pack_weight[best] += w[item];
    }
}

/* Replicates n_log experts into n_phy slots: slot i < n_log holds expert i;
 * each further slot goes to the expert with the highest load per replica. */
static void replicate_experts(const float *w, int n_log, int n_phy, int32_t *phy2log, int32_t *replica,
                              int32_t *count) {
    for (int i = 0; i < n_log; i++) phy2log[i] = i, replica[i] = 0, count[i] = 1;
    for (int i = n_log; i < n_phy; i++) {
        int best = 0;
        float best_v = w[0] / (float)count[0];
        for (int e = 1; e < n_log; e++) {
            float v = w[e] / (float)count[e];
            if (v > best_v) best = e, best_v = v;
        }
        phy2log[i] = best;
        replica[i] = count[best]++;
    }
}

/* Scratch for one layer, sized from the shape once per eplb_rebalance. */
typedef struct layer_scratch {
    float *group_w, *mlog_w, *phy_w, *pack_w;
    int32_t *group_pack, *group_slot, *log2mlog, *mlog2log, *phy2mlog, *phy_rep, *mlog_count, *pack_of, *slot_in_pack,
        *pphy2phy, *pack_items, *order;
} layer_scratch;

static int scratch_alloc(layer_scratch *sc, const eplb_shape *s) {
    int e = s->n_logical, r = s->n_physical, g = s->n_groups, big = e > r ? e : r;
    big = big > g ? big : g;
    sc->group_w = malloc(sizeof(float) * (size_t)g);
    sc->mlog_w = malloc(sizeof(float) * (size_t)e);
    sc->phy_w = malloc(sizeof(float) * (size_t)r);
    sc->pack_w = malloc(sizeof(float) * (size_t)big);
    int32_t **ints[] = {&sc->group_pack,   &sc->group_slot, &sc->log2mlog,   &sc->mlog2log,
                        &sc->phy2mlog,     &sc->phy_rep,    &sc->mlog_count, &sc->pack_of,
                        &sc->slot_in_pack, &sc->pphy2phy,   &sc->pack_items, &sc->order};
    int ok = sc->group_w && sc->mlog_w && sc->phy_w && sc->pack_w;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        *ints[i] = malloc(sizeof(int32_t) * (size_t)big);
        ok = ok && *ints[i];
    }
    return ok ? 0 : -1;
}

static void scratch_free(layer_scratch *sc) {
    free(sc->group_w), free(sc->mlog_w), free(sc->phy_w), free(sc->pack_w);
    int32_t *ints[] = {sc->group_pack, sc->group_slot, sc->log2mlog,     sc->mlog2log, sc->phy2mlog,   sc->phy_rep,
                       sc->mlog_count, sc->pack_of,    sc->slot_in_pack, sc->pphy2phy, sc->pack_items, sc->order};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) free(ints[i]);
}

/* One layer of the hierarchical policy (the global one is groups = nodes = 1):
 * writes phy2log/phy_replica [n_physical] and log_count [n_logical]. */
static void rebalance_layer(const float *w, int n_log, int n_phy, int groups, int nodes, int ranks, layer_scratch *sc,
                            int32_t *phy2log, int32_t *phy_replica, int32_t *log_count) {
    int group_size = n_log / groups, groups_per_node = groups / nodes;
    int log_per_node = n_log / nodes, phy_per_node = n_phy / nodes, ranks_per_node = ranks / nodes;
    int slots_per_rank = n_phy / ranks;
    /* 1: groups onto nodes; mlog ("node-major logical") numbers experts node by node */
    for (int g = 0; g < groups; g++) {
        float sum = 0.0f;
        for (int k = 0; k < group_size; k++) sum += w[g * group_size + k];
        sc->group_w[g] = sum;
    }
    balanced_packing(sc->group_w, groups, nodes, sc->group_pack, sc->group_slot, sc->pack_w, sc->pack_items, sc->order);
    for (int g = 0; g < groups; g++)
        for (int k = 0; k < group_size; k++) {
            int mlog = (sc->group_pack[g] * groups_per_node + sc->group_slot[g]) * group_size + k;
            sc->log2mlog[g * group_size + k] = mlog;
            sc->mlog2log[mlog] = g * group_size + k;
        }
    for (int node = 0; node < nodes; node++) {
        const int32_t *m2l = sc->mlog2log + node * log_per_node;
        int32_t *cnt = sc->mlog_count + node * log_per_node;
        for (int j = 0; j < log_per_node; j++) sc->mlog_w[j] = w[m2l[j]];
        /* 2: replicas within the node */
        replicate_experts(sc->mlog_w, log_per_node, phy_per_node, sc->phy2mlog, sc->phy_rep, cnt);
        /* 3: the node's replicas onto its ranks */
        for (int i = 0; i < phy_per_node; i++) sc->phy_w[i] = sc->mlog_w[sc->phy2mlog[i]] / (float)cnt[sc->phy2mlog[i]];
        balanced_packing(sc->phy_w, phy_per_node, ranks_per_node, sc->pack_of, sc->slot_in_pack, sc->pack_w,
                         sc->pack_items, sc->order);
        for (int i = 0; i < phy_per_node; i++) sc->pphy2phy[sc->pack_of[i] * slots_per_rank + sc->slot_in_pack[i]] = i;
        for (int q = 0; q < phy_per_node; q++) {
            int phy = sc->pphy2phy[q];
            phy2log[node * phy_per_node + q] = m2l[sc->phy2mlog[phy]];
            phy_replica[node * phy_per_node + q] = sc->phy_rep[phy];
        }
    }
    for (int e = 0; e < n_log; e++) log_count[e] = sc->mlog_count[sc->log2mlog[e]];
}

static int plan_alloc(const eplb_shape *s, eplb_plan *p, cf_err *err) {
    memset(p, 0, sizeof *p);
    p->shape = *s;
    size_t phys = (size_t)s->n_layers * (size_t)s->n_physical, logs = (size_t)s->n_layers * (size_t)s->n_logical;
    p->phy2log = malloc(sizeof(int32_t) * phys);
    p->phy_replica = malloc(sizeof(int32_t) * phys);
    p->log_count = malloc(sizeof(int32_t) * logs);
    if (!p->phy2log || !p->phy_replica || !p->log_count) {
        eplb_plan_free(p);
        return cf_fail(err, "eplb: out of memory for a %d x %d plan", s->n_layers, s->n_physical);
    }
    return 0;
}

/* Builds log2phy (and max_replicas) from phy2log, phy_replica, log_count. */
static int plan_index(eplb_plan *p, cf_err *err) {
    const eplb_shape *s = &p->shape;
    int maxc = 1;
    for (size_t i = 0; i < (size_t)s->n_layers * (size_t)s->n_logical; i++)
        if (p->log_count[i] > maxc) maxc = p->log_count[i];
    p->max_replicas = maxc;
    size_t n = (size_t)s->n_layers * (size_t)s->n_logical * (size_t)maxc;
    p->log2phy = malloc(sizeof(int32_t) * n);
    if (!p->log2phy) {
        eplb_plan_free(p);
        return cf_fail(err, "eplb: out of memory for the expert-to-slot index");
    }
    for (size_t i = 0; i < n; i++) p->log2phy[i] = -1;
    for (int l = 0; l < s->n_layers; l++)
        for (int q = 0; q < s->n_physical; q++) {
            size_t at = (size_t)l * (size_t)s->n_physical + (size_t)q;
            int e = p->phy2log[at], k = p->phy_replica[at];
            p->log2phy[((size_t)l * (size_t)s->n_logical + (size_t)e) * (size_t)maxc + (size_t)k] = q;
        }
    return 0;
}

int eplb_rebalance(const eplb_shape *s, const float *load, eplb_plan *out, cf_err *err) {
    memset(out, 0, sizeof *out);
    if (eplb_shape_check(s, err)) return -1;
    eplb_policy policy = eplb_policy_for(s);
    int groups = policy == EPLB_HIERARCHICAL ? s->n_groups : 1, nodes = policy == EPLB_HIERARCHICAL ? s->n_nodes : 1;
    for (size_t i = 0; i < (size_t)s->n_layers * (size_t)s->n_logical; i++)
        if (!(load[i] >= 0.0f) || !isfinite(load[i]))
            return cf_fail(err, "eplb: load of layer %zu expert %zu is %g, not a finite count >= 0",
                           i / (size_t)s->n_logical, i % (size_t)s->n_logical, (double)load[i]);
    if (plan_alloc(s, out, err)) return -1;
    out->policy = policy;
    layer_scratch sc = {0};
    if (scratch_alloc(&sc, s)) {
        scratch_free(&sc);
        eplb_plan_free(out);
        return cf_fail(err, "eplb: out of memory for scratch");
    }
    for (int l = 0; l < s->n_layers; l++) {
        size_t lo = (size_t)l * (size_t)s->n_logical, ph = (size_t)l * (size_t)s->n_physical;
        rebalance_layer(load + lo, s->n_logical, s->n_physical, groups, nodes, s->n_ranks, &sc, out->phy2log + ph,
                        out->phy_replica + ph, out->log_count + lo);
    }
    scratch_free(&sc);
    return plan_index(out, err);
}

int eplb_plan_identity(const eplb_shape *s, eplb_plan *out, cf_err *err) {
    memset(out, 0, sizeof *out);
    if (eplb_shape_check(s, err) || plan_alloc(s, out, err)) return -1;
    out->policy = eplb_policy_for(s);
    for (int l = 0; l < s->n_layers; l++) {
        int32_t *cnt = out->log_count + (size_t)l * (size_t)s->n_logical;
        for (int e = 0; e < s->n_logical; e++) cnt[e] = 0;
        for (int q = 0; q < s->n_physical; q++) {
            size_t at = (size_t)l * (size_t)s->n_physical + (size_t)q;
            int e = q % s->n_logical;
            out->phy2log[at] = e;
            out->phy_replica[at] = cnt[e]++;
        }
    }
    return plan_index(out, err);
}

void eplb_plan_free(eplb_plan *p) {
    if (!p) return;
    free(p->phy2log), free(p->phy_replica), free(p->log_count), free(p->log2phy);
    memset(p, 0, sizeof *p);
}

double eplb_imbalance(const eplb_plan *p, const float *load, int layer, double *rank_load) {
    const eplb_shape *s = &p->shape;
    double local[64], *rl = rank_load ? rank_load : s->n_ranks <= 64 ? local : NULL;
    double sum = 0.0, max = 0.0;
    if (!rl) { /* many ranks and no buffer: two passes per rank, no allocation */
        for (int r = 0; r < s->n_ranks; r++) {
            double v = 0.0;
            for (int q = r * (s->n_physical / s->n_ranks); q < (r + 1) * (s->n_physical / s->n_ranks); q++) {
                int e = p->phy2log[(size_t)layer * (size_t)s->n_physical + (size_t)q];
                v += (double)load[(size_t)layer * (size_t)s->n_logical + (size_t)e] /
                     p->log_count[(size_t)layer * (size_t)s->n_logical + (size_t)e];
            }
            sum += v, max = v > max ? v : max;
        }
    } else {
        for (int r = 0; r < s->n_ranks; r++) rl[r] = 0.0;
        for (int q = 0; q < s->n_physical; q++) {
            int e = p->phy2log[(size_t)layer * (size_t)s->n_physical + (size_t)q];
            rl[eplb_rank_of_slot(s, q)] += (double)load[(size_t)layer * (size_t)s->n_logical + (size_t)e] /
                                           p->log_count[(size_t)layer * (size_t)s->n_logical + (size_t)e];
        }
        for (int r = 0; r < s->n_ranks; r++) sum += rl[r], max = rl[r] > max ? rl[r] : max;
    }
    double mean = sum / s->n_ranks;
    return mean > 0.0 ? max / mean : 1.0;
}

int64_t eplb_replica_bytes(const eplb_plan *p, int64_t bytes_per_expert) {
    return (int64_t)p->shape.n_layers * (int64_t)(p->shape.n_physical - p->shape.n_logical) * bytes_per_expert;
}
