/* test_sim.c - the cluster simulator (src/sim): deterministic replay (same
 * seed, same per-request results), conservation (every input token of a
 * finished request is cached, replayed or computed exactly once; the tokens
 * the scheduler's plans executed add up), speculative decoding, preemption,
 * the store tier's retention and quota, the window-state tier, the
 * per-request overhead terms of a hardware profile, asynchronous
 * scheduling, and the
 * repository's profile/cluster files. Configs are inline JSON (no profile
 * directory) except the last test. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "sim/sim_eplb.h"
#include "sim/sim_report.h"
#include "sim/sim_workload.h"
#include "store/store_format.h"
#include "testutil.h"

#define SRC(x) "{\"value\": " #x ", \"source\": \"test\"}"

static const char *
    HW = "{\"name\": \"testgpu\", \"flops_fp8\": " SRC(1e15) ", \"flops_bf16\": " SRC(5e14) ", \"hbm_bytes\": " SRC(8e10) ", \"hbm_bw\": " SRC(3e12) ", \"scaleup_bw\": " SRC(
        2e11) ", \"scaleout_bw\": " SRC(5e10) ", \"ssd_bw\": " SRC(5e10) ", \"accel_per_node\": " SRC(8) ", "
                                                                                                         "\"mfu\":"
                                                                                                         " " SRC(0.5) ", \"mbu\": " SRC(0.8) ", \"net_eff\": " SRC(
                                                                                                             0.8) ", "
                                                                                                                  "\"st"
                                                                                                                  "ep_"
                                                                                                                  "over"
                                                                                                                  "head"
                                                                                                                  "_s\""
                                                                                                                  ":"
                                                                                                                  " " SRC(
                                                                                                                      0.001) "}";

static const char *MODEL =
    "{\"name\": \"testmoe\", \"total_params\": " SRC(1e11) ", \"active_params\": " SRC(1e10) ", \"dense_params\": " SRC(5e9) ", \"weight_bytes\": " SRC(1) ", \"n_layer\": " SRC(
        30) ", \"n_moe_layer\": " SRC(28) ", \"n_embd\": " SRC(4096) ", \"n_expert\": " SRC(64) ", "
                                                                                                "\"n_expert_used\":"
                                                                                                " " SRC(6) ", "
                                                                                                           "\"attn_"
                                                                                                           "flops_per_"
                                                                                                           "ctx\":"
                                                                                                           " " SRC(2e6) ", \"act_bytes\": " SRC(
                                                                                                               1.5) ", "
                                                                                                                    "\""
                                                                                                                    "ca"
                                                                                                                    "ch"
                                                                                                                    "e_"
                                                                                                                    "ki"
                                                                                                                    "nd"
                                                                                                                    "s"
                                                                                                                    "\""
                                                                                                                    ": "
                                                                                                                    "[{"
                                                                                                                    "\""
                                                                                                                    "na"
                                                                                                                    "me"
                                                                                                                    "\""
                                                                                                                    ": "
                                                                                                                    "\""
                                                                                                                    "kv"
                                                                                                                    "\""
                                                                                                                    ", "
                                                                                                                    "\""
                                                                                                                    "by"
                                                                                                                    "te"
                                                                                                                    "s_"
                                                                                                                    "pe"
                                                                                                                    "r_"
                                                                                                                    "to"
                                                                                                                    "ke"
                                                                                                                    "n"
                                                                                                                    "\""
                                                                                                                    ":"
                                                                                                                    " " SRC(
                                                                                                                        40000) "}%s]}";

static const char *PRICES = "{\"name\": \"p\", \"input_hit_per_mtok\": " SRC(0.1) ", \"input_miss_per_mtok\": " SRC(0.5) ", \"output_per_mtok\": " SRC(
    2) ", \"accel_hour\": " SRC(2) ", \"ssd_tb_month\": " SRC(10) ", \"cpu_node_hour\": " SRC(1) ", "
                                                                                                 "\"network_node_"
                                                                                                 "hour\": " SRC(
                                                                                                     1) ", "
                                                                                                        "\"i"
                                                                                                        "dle"
                                                                                                        "_re"
                                                                                                        "ser"
                                                                                                        "ve"
                                                                                                        "\":"
                                                                                                        " " SRC(
                                                                                                            0.1) "}";

/* A cluster: prefill/decode pool bodies (without hardware) and extra top-level fields. */
static int make_config(sim_config *c, const char *prefill, const char *decode, const char *extra, const char *kinds,
                       cf_err *err) {
    char model[8192], text[32768];
    snprintf(model, sizeof model, MODEL, kinds ? kinds : "");
    snprintf(text, sizeof text,
             "{\"model\": %s, \"prefill\": {\"hardware\": %s, %s}, \"decode\": {\"hardware\": %s, %s}, "
             "\"prices\": %s%s}",
             model, HW, prefill, HW, decode, PRICES, extra ? extra : "");
    return sim_config_parse("test.json", text, strlen(text), NULL, c, err);
}

static const char *P1 = "\"instances\": 2, \"accelerators\": 8, \"max_batch_tokens\": 1024, \"max_seqs\": 8";
static const char *D1 = "\"instances\": 1, \"accelerators\": 8, \"max_seqs\": 16";
static const char *STORE = ", \"store\": {\"capacity_tb\": 10, \"read_gbps\": 100, \"block_tokens\": 64}";

static void check_conservation(const char *what, const sim_workload *w, const sim_results *r) {
    int bad = 0;
    int64_t exec = 0, pool = r->pool[0].prefill_tokens + r->pool[0].decode_tokens + r->pool[1].prefill_tokens +
                             r->pool[1].decode_tokens;
    for (size_t i = 0; i < r->n && bad < 5; i++) {
        const sim_req_result *q = &r->req[i];
        const sim_wreq *wr = &w->r[i];
        if (!q->done) continue;
        int64_t parts = (int64_t)q->cached_hbm + q->cached_store + q->replayed + q->computed;
        int64_t decode = q->executed - q->computed - q->replayed - q->recomputed;
        exec += q->executed - (q->drafted - q->accepted);
        if (parts != wr->input_len || q->generated != wr->output_len ||
            decode != (int64_t)wr->output_len - 1 + q->drafted - q->accepted) {
            bad++;
            fprintf(stderr,
                    "%s: request %zu: input %d = hbm %d + store %d + replayed %d + computed %d; generated %d of %d;"
                    " executed %lld, recomputed %d, drafted %d, accepted %d\n",
                    what, i, wr->input_len, q->cached_hbm, q->cached_store, q->replayed, q->computed, q->generated,
                    wr->output_len, (long long)q->executed, q->recomputed, q->drafted, q->accepted);
        }
    }
    CHECKF(bad == 0, "%s: conservation", what);
    CHECKF(exec == pool, "%s: plans executed %lld kept tokens, pools counted %lld", what, (long long)exec,
           (long long)pool);
    CHECKF(r->n_done + (size_t)r->rejected == r->n, "%s: %zu done + %lld rejected of %zu", what, r->n_done,
           (long long)r->rejected, r->n);
}

/* Short sessions that come back within minutes (the tests simulate minutes, not days). */
static sim_session_model short_sessions(double per_s, double duration) {
    sim_session_model m = sim_session_defaults();
    m.sessions_per_s = per_s;
    m.duration_s = duration;
    for (int k = 0; k < 2; k++) {
        m.late_share[k] = 0;
        m.mean_turns[k] = 5;
        m.system_tokens[k] = 1024;
        m.turn_tokens[k] = 300;
        m.output_tokens[k] = 50;
    }
    return m;
}

static void test_determinism(void) {
    sim_config c;
    cf_err err = {0};
    CHECKF(make_config(&c, P1,
                       "\"instances\": 1, \"accelerators\": 8, \"max_seqs\": 16, \"spec_draft\": 2, "
                       "\"spec_accept\": 0.7",
                       STORE, NULL, &err) == 0,
           "%s", err.msg);
    sim_workload w;
    sim_synth_opts so = {.requests = 300,
                         .input_len = 700,
                         .output_len = 60,
                         .uniform = 1,
                         .rate = 50,
                         .prefix_share = 0.5,
                         .prefix_pool = 4};
    CHECKF(sim_workload_synthetic(&so, 7, 64, &w, &err) == 0, "%s", err.msg);
    sim_results a, b, d;
    sim_opts o = {.seed = 42};
    CHECK(sim_run(&c, &w, &o, &a, &err) == 0);
    CHECK(sim_run(&c, &w, &o, &b, &err) == 0);
    o.seed = 43;
    CHECK(sim_run(&c, &w, &o, &d, &err) == 0);
    CHECK(a.n == w.n && a.n_done == w.n);
    bool same = a.n == b.n && a.makespan_s == b.makespan_s, differ = false;
    for (size_t i = 0; same && i < a.n; i++) {
        const sim_req_result *x = &a.req[i], *y = &b.req[i];
        same = x->ttft == y->ttft && x->e2e == y->e2e && x->executed == y->executed && x->accepted == y->accepted;
        differ |= x->accepted != d.req[i].accepted || x->e2e != d.req[i].e2e;
    }
    CHECKF(same, "same seed, different results");
    CHECKF(differ, "a different seed changed nothing (speculative acceptance is random)");
    check_conservation("spec", &w, &a);
    int64_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < a.n; i++) drafted += a.req[i].drafted, accepted += a.req[i].accepted;
    CHECKF(drafted > 0 && accepted > drafted / 2 && accepted < drafted, "acceptance %lld of %lld", (long long)accepted,
           (long long)drafted);
    sim_results_free(&a);
    sim_results_free(&b);
    sim_results_free(&d);
    sim_workload_free(&w);
}

/* Sessions revisit their prefixes: hits from HBM and from the store; tight KV memory forces preemptions. */
static void test_hits_and_preemption(void) {
    sim_config c;
    cf_err err = {0};
    /* kv_fraction leaves 0.25% of (8 x 80 GB - 100 GB): about 520 blocks of 64 tokens */
    const char *tight = "\"instances\": 1, \"accelerators\": 8, \"max_batch_tokens\": 1024, \"max_seqs\": 64, "
                        "\"kv_fraction\": 0.0025, \"prefix_cache_fraction\": 0.02";
    int rc = make_config(&c, tight, "\"instances\": 0", STORE, NULL, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) return;
    sim_session_model m = short_sessions(100, 2); /* a burst: 200 sessions within 2 s */
    sim_workload w;
    CHECKF(sim_workload_sessions(&m, 5, 64, &w, &err) == 0, "%s", err.msg);
    sim_results r;
    sim_opts o = {.seed = 1};
    CHECKF(sim_run(&c, &w, &o, &r, &err) == 0, "%s", err.msg);
    check_conservation("sessions", &w, &r);
    CHECKF(r.cached_store > 0 && r.cached_hbm > 0, "hits: hbm %lld store %lld", (long long)r.cached_hbm,
           (long long)r.cached_store);
    CHECKF(r.pool[0].preemptions > 0 && r.recomputed > 0, "no preemption under tight memory (%lld)",
           (long long)r.pool[0].preemptions);
    CHECK(r.pool[1].instances == 0 && r.output_tokens > 0);
    sim_results_free(&r);
    sim_workload_free(&w);
}

/* A window model: snapshots give exact resumes, a tier too small forces bounded replay. */
static void test_window_replay(void) {
    const char *win = ", {\"name\": \"win\", \"bytes_per_token\": " SRC(1000) ", \"window\": " SRC(128) "}";
    sim_config c;
    cf_err err = {0};
    char extra[512];
    snprintf(extra, sizeof extra, "%s, \"window_state\": {\"capacity_gb\": 0.0005, \"bounded_replay\": 1}", STORE);
    int rc = make_config(&c, P1, D1, extra, win, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) return;
    CHECK(c.model.window_tokens == 128 && c.model.window_state_bytes == 128000);
    sim_session_model m = short_sessions(1, 60);
    sim_workload w;
    CHECKF(sim_workload_sessions(&m, 9, 64, &w, &err) == 0, "%s", err.msg);
    sim_results r;
    sim_opts o = {.seed = 3};
    CHECKF(sim_run(&c, &w, &o, &r, &err) == 0, "%s", err.msg);
    check_conservation("window", &w, &r);
    CHECKF(r.replayed > 0 && r.window_hits > 0 && r.window_misses > 0, "replayed %lld, snapshot hits %lld misses %lld",
           (long long)r.replayed, (long long)r.window_hits, (long long)r.window_misses);
    sim_results_free(&r);
    sim_workload_free(&w);
}

/* Store-only runs: longer retention never lowers the hit rate; a small quota lets GC evict by LRU. */
static void test_retention(void) {
    sim_config c;
    cf_err err = {0};
    const char *store = ", \"store\": {\"capacity_tb\": 10, \"read_gbps\": 100, \"block_tokens\": 64, "
                        "\"gc_interval_s\": 3600}";
    int rc = make_config(&c, P1, D1, store, NULL, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) return;
    sim_session_model m = short_sessions(0.01, 3 * 86400);
    for (int k = 0; k < 2; k++) m.late_share[k] = 0.4, m.late_median_s[k] = 86400, m.late_sigma[k] = 1;
    sim_workload w;
    CHECKF(sim_workload_sessions(&m, 11, 64, &w, &err) == 0, "%s", err.msg);
    double prev = -1;
    sim_opts o = {.seed = 1, .store_only = true};
    for (int days = 0; days <= 3; days++) {
        for (int k = 0; k < STORE_N_CLASSES; k++) c.retention_s[k] = days ? days * 86400 : 600;
        sim_results r;
        CHECK(sim_run(&c, &w, &o, &r, &err) == 0);
        double hit = (double)r.cached_store / (double)r.input_tokens;
        CHECKF(hit >= prev, "retention %d d: hit %.4f < %.4f", days, hit, prev);
        CHECK(r.store_gc_expired > 0 || days == 3);
        prev = hit;
        sim_results_free(&r);
    }
    c.store_capacity_bytes = 2e10; /* about 7,800 blocks of 64 x 40 kB */
    sim_results r;
    CHECK(sim_run(&c, &w, &o, &r, &err) == 0);
    CHECKF(r.store_gc_lru > 0, "quota: no LRU eviction");
    CHECKF((double)r.cached_store / (double)r.input_tokens < prev, "quota did not lower the hit rate");
    sim_results_free(&r);
    sim_workload_free(&w);
}

/* EPLB (src/eplb) with redundant slots balances a skewed expert load better than one slot per expert. */
static void test_eplb(void) {
    sim_config c;
    cf_err err = {0};
    int rc = make_config(&c, "\"instances\": 1, \"accelerators\": 16, \"redundant_experts\": 16, \"expert_skew\": 1",
                         D1, NULL, NULL, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) return;
    double on = sim_moe_imbalance(&c.model, &c.prefill, 1, &err);
    c.prefill.eplb = false;
    double off = sim_moe_imbalance(&c.model, &c.prefill, 1, &err);
    CHECKF(on >= 1 && off > on * 1.05, "imbalance with EPLB %.3f, without %.3f", on, off);
    c.prefill.accels = 1;
    CHECK(sim_moe_imbalance(&c.model, &c.prefill, 1, &err) == 1.0);
}

static void expect_error(const char *prefill, const char *extra, const char *want) {
    sim_config c;
    cf_err err = {0};
    int rc = make_config(&c, prefill, D1, extra, NULL, &err);
    CHECKF(rc != 0 && strstr(err.msg, "test.json") && strstr(err.msg, want), "want '%s', got rc %d '%s'", want, rc,
           err.msg);
    CHECKF(!strchr(err.msg, '\n'), "multi-line error: %s", err.msg);
}

static void test_bad_config(void) {
    expect_error("\"instances\": -2, \"accelerators\": 8", NULL, "prefill.instances");
    expect_error("\"instances\": 1, \"accelerators\": 1", NULL, "too small for the model");
    expect_error("\"instances\": 1, \"accelerators\": 8, \"dp\": 16", NULL, "prefill.dp");
    expect_error("\"instances\": 1, \"accelerators\": 8, \"max_seqz\": 1", NULL, "prefill.max_seqz: unknown field");
    expect_error(P1, ", \"router\": {\"prefill\": \"random\"}", "router.prefill");
    expect_error(P1, ", \"store\": {\"capacity_tb\": -1, \"read_gbps\": 1}", "store.capacity_tb");
    expect_error(P1, ", \"store\": {\"capacity_tb\": 1, \"read_gbps\": 1, \"retention\": \"chat=forever\"}",
                 "store.retention");
    sim_config c;
    cf_err err = {0};
    const char *named = "{\"model\": \"nosuch\", \"prefill\": {}, \"prices\": \"x\"}";
    CHECK(sim_config_parse("named.json", named, strlen(named), NULL, &c, &err) != 0 &&
          strstr(err.msg, "named.json: model: unknown model 'nosuch'"));
    const char *bad_json = "{\"model\": ";
    CHECK(sim_config_parse("b.json", bad_json, strlen(bad_json), NULL, &c, &err) != 0 &&
          strstr(err.msg, "b.json: line"));
    const char *nosrc = "{\"name\": \"x\", \"flops_fp8\": 1e15}";
    json_t *j = json_loads(nosrc, 0, NULL);
    sim_hw hw;
    CHECK(sim_hw_from_json(j, "hw.json", &hw, &err) != 0 && strstr(err.msg, "hw.json: flops_fp8") &&
          strstr(err.msg, "source"));
    json_decref(j);
}

/* The hardware profile's per-request terms (request_overhead_s + prompt tokens x prompt_token_overhead_s) delay
 * each isolated request's first token by exactly that much and change nothing else; bad values are refused. */
static void test_request_overhead(void) {
    sim_config c;
    cf_err err = {0};
    CHECKF(make_config(&c, P1, D1, STORE, NULL, &err) == 0, "%s", err.msg);
    sim_workload w;
    sim_synth_opts so = {.requests = 6, .input_len = 600, .output_len = 8, .uniform = 1, .rate = 0.01};
    CHECKF(sim_workload_synthetic(&so, 3, 64, &w, &err) == 0, "%s", err.msg);
    sim_results a, b;
    sim_opts o = {.seed = 1};
    CHECKF(sim_run(&c, &w, &o, &a, &err) == 0, "%s", err.msg);
    c.prefill.hw.request_overhead_s = 0.05;
    c.prefill.hw.prompt_token_overhead_s = 1e-4;
    CHECKF(sim_run(&c, &w, &o, &b, &err) == 0, "%s", err.msg);
    if (a.n_done != w.n || b.n_done != w.n) {
        CHECKF(false, "done %zu and %zu of %zu", (size_t)a.n_done, (size_t)b.n_done, w.n);
        return;
    }
    for (size_t i = 0; i < w.n; i++) {
        double want = 0.05 + 1e-4 * w.r[i].input_len, got = b.req[i].ttft - a.req[i].ttft;
        CHECKF(got > want - 1e-9 && got < want + 1e-9, "request %zu (%d tokens): TTFT +%.6f s, want +%.6f", i,
               w.r[i].input_len, got, want);
        CHECKF(b.req[i].e2e - b.req[i].ttft > a.req[i].e2e - a.req[i].ttft - 1e-9 &&
                   b.req[i].e2e - b.req[i].ttft < a.req[i].e2e - a.req[i].ttft + 1e-9,
               "request %zu: decode time changed", i);
    }
    check_conservation("overhead", &w, &b);
    sim_results_free(&a);
    sim_results_free(&b);
    sim_workload_free(&w);
    const char *bad[] = {"\"request_overhead_s\": " SRC(-1), "\"prompt_token_overhead_s\": " SRC(2),
                         "\"request_overhead_s\": 0.01"};
    const char *field[] = {"hw.json: request_overhead_s", "hw.json: prompt_token_overhead_s",
                           "hw.json: request_overhead_s"};
    for (int k = 0; k < 3; k++) {
        char text[4096];
        snprintf(text, sizeof text, "%.*s, %s}", (int)strlen(HW) - 1, HW, bad[k]);
        json_t *j = json_loads(text, 0, NULL);
        sim_hw hw;
        CHECKF(j && sim_hw_from_json(j, "hw.json", &hw, &err) != 0 && strstr(err.msg, field[k]), "case %d: %s", k,
               err.msg);
        json_decref(j);
    }
}

/* Asynchronous scheduling (colocated pool: running decodes keep every plan busy): a request that reaches a
 * busy instance misses the step already planned, so
 * overlapping requests wait longer than with the plan made at the step's end; an isolated request (idle
 * instance) is planned at once, so a sparse workload gives identical results in both modes. */
static void test_async_scheduling(void) {
    const char *sync_p = "\"instances\": 1, \"accelerators\": 8, \"max_batch_tokens\": 512, \"max_seqs\": 8";
    char async_p[512];
    snprintf(async_p, sizeof async_p, "%s, \"async_scheduling\": 1", sync_p);
    double rates[2] = {0.01, 100};
    for (int k = 0; k < 2; k++) {
        sim_config cs, ca;
        cf_err err = {0};
        CHECKF(make_config(&cs, sync_p, "\"instances\": 0", STORE, NULL, &err) == 0, "%s", err.msg);
        CHECKF(make_config(&ca, async_p, "\"instances\": 0", STORE, NULL, &err) == 0, "%s", err.msg);
        CHECK(ca.prefill.async_scheduling && !cs.prefill.async_scheduling);
        sim_workload w;
        sim_synth_opts so = {.requests = 40, .input_len = 400, .output_len = 32, .uniform = 1, .rate = rates[k]};
        CHECKF(sim_workload_synthetic(&so, 5, 64, &w, &err) == 0, "%s", err.msg);
        sim_results a, b;
        sim_opts o = {.seed = 1};
        CHECKF(sim_run(&cs, &w, &o, &a, &err) == 0, "%s", err.msg);
        CHECKF(sim_run(&ca, &w, &o, &b, &err) == 0, "%s", err.msg);
        double ta = 0, tb = 0;
        bool same = a.n_done == w.n && b.n_done == w.n;
        for (size_t i = 0; same && i < w.n; i++) {
            ta += a.req[i].ttft, tb += b.req[i].ttft;
            if (k == 0) same = a.req[i].ttft == b.req[i].ttft && a.req[i].e2e == b.req[i].e2e;
        }
        if (k == 0) CHECKF(same, "sparse arrivals: async scheduling changed a result");
        else
            CHECKF(same && tb > ta * 1.01, "overlapping arrivals: mean TTFT %.4f s async, %.4f s sync", tb / 40,
                   ta / 40);
        check_conservation("async", &w, &b);
        sim_results_free(&a);
        sim_results_free(&b);
        sim_workload_free(&w);
    }
}

/* Every file under sim/ parses; every cluster loads with its named profiles. */
static void test_repo_files(void) {
    const char *dirs[] = {"sim/hw", "sim/model", "sim/prices", "sim/clusters"};
    int n = 0;
    for (int d = 0; d < 4; d++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", source_path(dirs[d]));
        DIR *dp = opendir(dir);
        CHECKF(dp != NULL, "%s", dir);
        if (!dp) continue;
        struct dirent *e;
        while ((e = readdir(dp))) {
            size_t L = strlen(e->d_name);
            if (L < 6 || strcmp(e->d_name + L - 5, ".json")) continue;
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            cf_err err = {0};
            int rc = 0;
            if (d == 0) {
                sim_hw hw;
                rc = sim_hw_load(path, &hw, &err);
            } else if (d == 1) {
                sim_model m;
                rc = sim_model_load(path, &m, &err);
            } else if (d == 3) {
                sim_config c;
                rc = sim_config_load(path, source_path("sim"), &c, &err);
            }
            CHECKF(rc == 0, "%s", err.msg);
            n++;
        }
        closedir(dp);
    }
    CHECKF(n >= 8, "only %d profile files", n);
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : "";
    if (!*only || !strcmp(only, "determinism")) test_determinism();
    if (!*only || !strcmp(only, "hits")) test_hits_and_preemption();
    if (!*only || !strcmp(only, "window")) test_window_replay();
    if (!*only || !strcmp(only, "retention")) test_retention();
    if (!*only || !strcmp(only, "eplb")) test_eplb();
    if (!*only || !strcmp(only, "bad")) test_bad_config();
    if (!*only || !strcmp(only, "overhead")) test_request_overhead();
    if (!*only || !strcmp(only, "async")) test_async_scheduling();
    if (!*only || !strcmp(only, "files")) test_repo_files();
    return test_finish();
}
