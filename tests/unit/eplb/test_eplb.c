/* test_eplb.c - src/eplb/ against DeepSeek's reference EPLB: every case of
 * tests/data/eplb/eplb_ref.txt (written by tests/oracles/eplb_ref.py: the
 * README example, its global-policy variant, seeded skewed matrices) must give
 * the same slot-to-expert map, replica numbers, replica counts and balance
 * metric (also equal to the balance of the reference as published, whose
 * tie order among equal loads is torch's, see the oracle); plus the plan's invariants, bad shapes and bad loads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eplb/eplb.h"
#include "testutil.h"

/* Reads `n` integers after the word `key` at *at; 0 ok. */
static int read_ints(char **at, const char *key, int32_t *out, size_t n) {
    char *s = *at;
    while (*s == ' ' || *s == '\n') s++;
    size_t kl = strlen(key);
    if (strncmp(s, key, kl) != 0) return -1;
    s += kl;
    for (size_t i = 0; i < n; i++) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s) return -1;
        out[i] = (int32_t)v;
        s = end;
    }
    *at = s;
    return 0;
}

static int read_doubles(char **at, const char *key, double *out, size_t n) {
    char *s = *at;
    while (*s == ' ' || *s == '\n') s++;
    size_t kl = strlen(key);
    if (strncmp(s, key, kl) != 0) return -1;
    s += kl;
    for (size_t i = 0; i < n; i++) {
        char *end;
        out[i] = strtod(s, &end);
        if (end == s) return -1;
        s = end;
    }
    *at = s;
    return 0;
}

/* Every slot's replica number is unique per expert, counts agree, log2phy inverts phy2log. */
static void check_invariants(const eplb_plan *p, const char *name) {
    const eplb_shape *s = &p->shape;
    for (int l = 0; l < s->n_layers; l++)
        for (int e = 0; e < s->n_logical; e++) {
            int cnt = p->log_count[l * s->n_logical + e], seen = 0;
            CHECKF(cnt >= 1, "%s: layer %d expert %d has no slot", name, l, e);
            for (int k = 0; k < p->max_replicas; k++) {
                int q = p->log2phy[(l * s->n_logical + e) * p->max_replicas + k];
                if (k >= cnt) {
                    CHECKF(q == -1, "%s: padding", name);
                    continue;
                }
                CHECKF(q >= 0 && q < s->n_physical && p->phy2log[l * s->n_physical + q] == e &&
                           p->phy_replica[l * s->n_physical + q] == k,
                       "%s: layer %d expert %d replica %d -> slot %d", name, l, e, k, q);
                seen++;
            }
            CHECK(seen == cnt);
        }
}

static void run_case(char **at, int *cases, int *published_same) {
    char name[64];
    eplb_shape s = {0};
    while (**at == ' ' || **at == '\n') (*at)++;
    if (sscanf(*at, " case %63s %d %d %d %d %d %d", name, &s.n_layers, &s.n_logical, &s.n_physical, &s.n_groups,
               &s.n_nodes, &s.n_ranks) != 7) {
        CHECKF(0, "bad case header");
        *at += strlen(*at);
        return;
    }
    *at = strchr(*at, '\n') + 1;
    size_t nl = (size_t)s.n_layers * (size_t)s.n_logical, np = (size_t)s.n_layers * (size_t)s.n_physical;
    int32_t *w = malloc(sizeof(int32_t) * nl), *phy2log = malloc(sizeof(int32_t) * np);
    int32_t *phyrank = malloc(sizeof(int32_t) * np), *logcnt = malloc(sizeof(int32_t) * nl);
    float *load = malloc(sizeof(float) * nl);
    double *bal = malloc(sizeof(double) * (size_t)s.n_layers), *pub_bal = malloc(sizeof(double) * (size_t)s.n_layers);
    int32_t pub_same = 0;
    int ok = !read_ints(at, "weight", w, nl) && !read_ints(at, "phy2log", phy2log, np) &&
             !read_ints(at, "phyrank", phyrank, np) && !read_ints(at, "logcnt", logcnt, nl) &&
             !read_doubles(at, "balance", bal, (size_t)s.n_layers) &&
             !read_ints(at, "published_phy2log_same", &pub_same, 1) &&
             !read_doubles(at, "published_balance", pub_bal, (size_t)s.n_layers);
    CHECKF(ok, "%s: fixture record unreadable", name);
    if (ok) {
        for (size_t i = 0; i < nl; i++) load[i] = (float)w[i];
        eplb_plan p;
        cf_err err = {{0}};
        CHECKF(eplb_rebalance(&s, load, &p, &err) == 0, "%s: %s", name, err.msg);
        int mism = 0;
        for (size_t i = 0; i < np; i++) mism += p.phy2log[i] != phy2log[i] || p.phy_replica[i] != phyrank[i];
        for (size_t i = 0; i < nl; i++) mism += p.log_count[i] != logcnt[i];
        CHECKF(mism == 0, "%s: %d entries differ from the reference", name, mism);
        for (int l = 0; l < s.n_layers; l++) {
            double got = eplb_imbalance(&p, load, l, NULL);
            CHECKF(fabs(got - bal[l]) < 1e-9, "%s layer %d: balance %.12f, reference %.12f", name, l, got, bal[l]);
            /* ties only swap equal loads between ranks: the published run balances the same */
            CHECKF(fabs(got - pub_bal[l]) < 1e-9, "%s layer %d: balance %.12f, published run %.12f", name, l, got,
                   pub_bal[l]);
            double before = 0.0;
            eplb_plan id;
            CHECK(eplb_plan_identity(&s, &id, &err) == 0);
            before = eplb_imbalance(&id, load, l, NULL);
            eplb_plan_free(&id);
            printf("%-16s layer %d policy %-12s imbalance before %.4f after %.4f (published run %.4f)\n", name, l,
                   p.policy == EPLB_HIERARCHICAL ? "hierarchical" : "global", before, got, pub_bal[l]);
        }
        check_invariants(&p, name);
        eplb_plan_free(&p);
        (*cases)++;
        *published_same += pub_same;
    }
    free(w), free(phy2log), free(phyrank), free(logcnt), free(load), free(bal), free(pub_bal);
}

static void test_bad_input(void) {
    cf_err err = {{0}};
    eplb_plan p;
    float load[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    eplb_shape bad[] = {{1, 12, 8, 1, 1, 2},  {1, 12, 16, 5, 1, 2}, {1, 12, 13, 1, 1, 2},
                        {1, 12, 16, 4, 3, 8}, {0, 12, 12, 1, 1, 1}, {1, 12, 12, 1, 0, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECKF(eplb_rebalance(&bad[i], load, &p, &err) == -1 && err.msg[0], "bad shape %zu accepted", i);
        CHECK(p.phy2log == NULL);
    }
    eplb_shape ok = {1, 12, 16, 4, 2, 8};
    load[3] = -1.0f;
    CHECK(eplb_rebalance(&ok, load, &p, &err) == -1 && strstr(err.msg, "expert 3"));
    load[3] = NAN;
    CHECK(eplb_rebalance(&ok, load, &p, &err) == -1);
    load[3] = 0.0f;
    CHECK(eplb_rebalance(&ok, load, &p, &err) == 0);
    CHECK(eplb_replica_bytes(&p, 1000) == 4000);
    eplb_plan_free(&p);
    eplb_plan_free(NULL);
}

int main(void) {
    const char *path = source_path("tests/data/eplb/eplb_ref.txt");
    size_t len;
    char *text = read_file(path, &len);
    if (!text) return tu_missing_fixture(path);
    char *at = strchr(text, '\n') + 1; /* skip the comment line */
    int cases = 0, published_same = 0;
    while (strstr(at, "case ")) run_case(&at, &cases, &published_same);
    CHECKF(cases >= 14, "only %d cases", cases);
    printf("%d cases match the stable-sort reference; %d also the published run's phy2log\n", cases, published_same);
    free(text);
    test_bad_input();
    return test_finish();
}
