/* cmd_sim.c - `cinfer sim`: runs the cluster simulator (src/sim/sim.h) on a
 * cluster config and a workload (a Mooncake trace, bench serve's synthetic
 * generator, or the agent/chat session model), prints a summary and
 * optionally writes the JSON results and SVG charts. --sweep reruns the
 * same workload with one setting varied (retention, store capacity, time
 * scale) and charts hit rate, TTFT and revenue against it. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/cli_opt.h"
#include "benchserve/bs_buf.h"
#include "benchserve/svg.h"
#include "commands.h"
#include "sim/sim.h"
#include "sim/sim_report.h"
#include "sim/sim_workload.h"
#include "store/store_gc.h"

typedef struct sim_cli {
    const char *profiles, *trace, *workload, *out, *svg, *retention, *sweep;
    unsigned long seed;
    long max_requests, replicas, requests, input_len, output_len, prefix_pool;
    double time_scale, rate, store_tb, prefix_share, sessions_per_s, duration, agent_share;
    bool uniform, store_only, quiet;
} sim_cli;

static int build_workload(const sim_cli *o, const sim_config *c, double time_scale, sim_workload *w, cf_err *err) {
    if (o->trace)
        return sim_workload_from_trace(o->trace, o->max_requests, time_scale, o->replicas, c->store_block_tokens,
                                       o->seed, w, err);
    if (!strcmp(o->workload, "synthetic")) {
        sim_synth_opts so = {.requests = o->requests,
                             .input_len = o->input_len,
                             .output_len = o->output_len,
                             .uniform = o->uniform,
                             .rate = o->rate * time_scale,
                             .prefix_share = o->prefix_share,
                             .prefix_pool = o->prefix_pool};
        return sim_workload_synthetic(&so, o->seed, c->store_block_tokens, w, err);
    }
    if (!strcmp(o->workload, "sessions")) {
        sim_session_model m = sim_session_defaults();
        m.sessions_per_s = o->sessions_per_s * time_scale;
        m.duration_s = o->duration / time_scale;
        m.agent_share = o->agent_share;
        return sim_workload_sessions(&m, o->seed, c->store_block_tokens, w, err);
    }
    return cf_fail(err, "--workload: unknown '%s' (synthetic, sessions; or --trace FILE)", o->workload);
}

typedef struct run_out {
    sim_summary s;
    double hit_chat, hit_agent;
} run_out;

static int run_once(const sim_cli *o, const sim_config *c, double time_scale, bool keep, run_out *ro, json_t **js,
                    cf_err *err) {
    sim_workload w;
    if (build_workload(o, c, time_scale, &w, err)) return -1;
    sim_results r;
    sim_opts so = {.seed = o->seed, .progress = !o->quiet, .store_only = o->store_only};
    int rc = sim_run(c, &w, &so, &r, err);
    if (rc) {
        sim_workload_free(&w);
        return -1;
    }
    rc = sim_summarize(c, &w, &r, &ro->s, err);
    if (!rc) {
        ro->hit_chat = r.class_input[STORE_CLASS_CHAT]
                           ? (double)r.class_cached[STORE_CLASS_CHAT] / (double)r.class_input[STORE_CLASS_CHAT]
                           : 0;
        ro->hit_agent = r.class_input[STORE_CLASS_AGENT]
                            ? (double)r.class_cached[STORE_CLASS_AGENT] / (double)r.class_input[STORE_CLASS_AGENT]
                            : 0;
        *js = sim_summary_json(c, &ro->s);
        if (*js) {
            json_object_set_new(*js, "hit_rate_chat", json_real(ro->hit_chat));
            json_object_set_new(*js, "hit_rate_agent", json_real(ro->hit_agent));
            json_object_set_new(*js, "seed", json_integer((json_int_t)o->seed));
        }
        if (!*js) rc = cf_fail(err, "out of memory");
    }
    if (!rc && keep && o->svg) rc = sim_report_svg(o->svg, &r, &ro->s, err);
    sim_results_free(&r);
    sim_workload_free(&w);
    return rc;
}

/* KEY=v1,v2,...: applies value v to the config (or the time scale). */
static int sweep_apply(const char *key, double v, sim_config *c, double *time_scale, cf_err *err) {
    if (!strcmp(key, "retention-days")) {
        for (int i = 0; i < STORE_N_CLASSES; i++) c->retention_s[i] = (int64_t)(v * 86400);
    } else if (!strcmp(key, "store-tb")) {
        c->store_capacity_bytes = v * 1e12;
    } else if (!strcmp(key, "time-scale")) {
        *time_scale = v;
    } else {
        return cf_fail(err, "--sweep: unknown key '%s' (retention-days, store-tb, time-scale)", key);
    }
    if (v <= 0) return cf_fail(err, "--sweep: values must be > 0");
    return 0;
}

static int write_text(const char *path, const char *text, cf_err *err) {
    FILE *f = fopen(path, "w");
    if (!f) return cf_fail(err, "%s: cannot write", path);
    int bad = fputs(text, f) < 0;
    bad |= fclose(f) != 0;
    return bad ? cf_fail(err, "%s: write failed", path) : 0;
}

static int sweep_charts(const sim_cli *o, const char *key, const double *x, const run_out *ro, size_t n, cf_err *err) {
    double *y = malloc(5 * n * sizeof *y);
    if (!y) return cf_fail(err, "out of memory");
    for (size_t i = 0; i < n; i++) {
        y[i] = 100 * (ro[i].s.hit_hbm + ro[i].s.hit_store);
        y[n + i] = 100 * ro[i].hit_chat;
        y[2 * n + i] = 100 * ro[i].hit_agent;
        y[3 * n + i] = ro[i].s.ttft.p50;
        y[4 * n + i] = ro[i].s.revenue_per_accel_hour;
    }
    svg_series hit[3] = {{"all", x, y, n}, {"chat", x, y + n, n}, {"agent", x, y + 2 * n, n}};
    svg_series tt = {"TTFT p50", x, y + 3 * n, n}, rev = {"revenue", x, y + 4 * n, n};
    bs_buf b[3] = {{0}};
    char path[4096];
    int rc = svg_line_chart(&b[0], "Cache hit rate", key, "input tokens cached (%)", hit, 3) ||
             svg_line_chart(&b[1], "Time to first token", key, "TTFT p50 (s)", &tt, 1) ||
             svg_line_chart(&b[2], "Revenue per accelerator-hour", key, "revenue ($/accelerator-hour)", &rev, 1);
    if (rc) rc = cf_fail(err, "out of memory");
    const char *names[3] = {"sweep_hit.svg", "sweep_ttft.svg", "sweep_revenue.svg"};
    for (int i = 0; i < 3 && !rc; i++) {
        snprintf(path, sizeof path, "%s/%s", o->svg, names[i]);
        rc = write_text(path, bs_buf_str(&b[i]), err);
    }
    for (int i = 0; i < 3; i++) bs_buf_free(&b[i]);
    free(y);
    return rc;
}

static int run_sweep(const sim_cli *o, sim_config *c, json_t *arr, cf_err *err) {
    char key[64];
    const char *eq = strchr(o->sweep, '=');
    if (!eq || eq == o->sweep || (size_t)(eq - o->sweep) >= sizeof key)
        return cf_fail(err, "--sweep: expected KEY=V1,V2,...");
    snprintf(key, sizeof key, "%.*s", (int)(eq - o->sweep), o->sweep);
    double x[64];
    run_out ro[64];
    size_t n = 0;
    for (const char *p = eq + 1; *p && n < 64;) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || (*end && *end != ',')) return cf_fail(err, "--sweep: bad value list '%s'", eq + 1);
        sim_config cc = *c;
        double ts = o->time_scale;
        if (sweep_apply(key, v, &cc, &ts, err)) return -1;
        json_t *js = NULL;
        if (run_once(o, &cc, ts, false, &ro[n], &js, err)) return -1;
        json_object_set_new(js, key, json_real(v));
        json_array_append_new(arr, js);
        if (!o->quiet)
            fprintf(stderr, "%s=%g: hit %.2f%% (chat %.2f%%, agent %.2f%%), TTFT p50 %.3f s, store peak %.3f TB\n", key,
                    v, 100 * (ro[n].s.hit_hbm + ro[n].s.hit_store), 100 * ro[n].hit_chat, 100 * ro[n].hit_agent,
                    ro[n].s.ttft.p50, ro[n].s.store_peak_tb);
        x[n++] = v;
        p = *end ? end + 1 : end;
    }
    return o->svg ? sweep_charts(o, key, x, ro, n, err) : 0;
}

static int sim_main(sim_cli *o, const char *cluster) {
    cf_err err;
    char dirbuf[4096], profiles[4096];
    if (!o->profiles) {
        snprintf(dirbuf, sizeof dirbuf, "%s", cluster);
        snprintf(profiles, sizeof profiles, "%s/..", dirname(dirbuf));
        o->profiles = profiles;
    }
    sim_config c;
    if (sim_config_load(cluster, o->profiles, &c, &err)) return cli_fail("sim: %s", err.msg);
    int64_t swa_s = 0;
    if (o->retention && store_retention_parse(o->retention, c.retention_s, &swa_s, &err))
        return cli_fail("sim: --retention: %s", err.msg);
    if (swa_s > 0) return cli_fail("sim: --retention: swa= (window-state snapshots in the store) is not simulated");
    if (o->store_tb > 0) c.store_capacity_bytes = o->store_tb * 1e12;
    if (o->store_only && !c.store_on) return cli_fail("sim: --store-only: %s has no store tier", cluster);
    if (o->svg && mkdir(o->svg, 0755) && errno != EEXIST) return cli_fail("sim: --svg: cannot create '%s'", o->svg);
    json_t *out = NULL;
    int rc;
    if (o->sweep) {
        out = json_array();
        rc = out ? run_sweep(o, &c, out, &err) : cf_fail(&err, "out of memory");
    } else {
        run_out ro;
        rc = run_once(o, &c, o->time_scale, true, &ro, &out, &err);
        if (!rc) sim_summary_print(stdout, &c, &ro.s);
    }
    if (!rc && o->out) {
        char *text = json_dumps(out, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        rc = text ? write_text(o->out, text, &err) : cf_fail(&err, "out of memory");
        free(text);
    }
    json_decref(out);
    return rc ? cli_fail("sim: %s", err.msg) : 0;
}

int cmd_sim(int argc, char **argv) {
    sim_cli o = {.workload = "synthetic",
                 .seed = 1,
                 .replicas = 1,
                 .requests = 200,
                 .input_len = 1024,
                 .output_len = 128,
                 .time_scale = 1,
                 .rate = 0,
                 .sessions_per_s = 0.2,
                 .duration = 86400,
                 .agent_share = 0.5};
    const cli_opt t[] = {
        CLI_SECTION("Cluster"),
        {"profiles", 0, "DIR", "directory with hw/, model/, prices/ (default: the cluster file's ../)",
         CLI_STR(&o.profiles)},
        {"retention", 0, "SPEC", "store retention per class, e.g. agent=3d,chat=7d (overrides the config)",
         CLI_STR(&o.retention)},
        {"store-tb", 0, "TB", "store capacity in TB (overrides the config)", CLI_NUM(&o.store_tb, 1e-9, 1e9)},
        CLI_SECTION("Workload"),
        {"trace", 0, "FILE", "replay a Mooncake JSONL trace (bench serve's reader)", CLI_STR(&o.trace)},
        {"max-requests", 0, "N", "trace: only the first N lines", CLI_NUM(&o.max_requests, 1, 1L << 40)},
        {"replicas", 0, "K", "trace: K copies with disjoint prefixes (cluster scale)", CLI_NUM(&o.replicas, 1, 100000)},
        {"time-scale", 0, "X", "arrivals X times faster (trace, synthetic rate, session rate)",
         CLI_NUM(&o.time_scale, 1e-6, 1e6)},
        {"workload", 0, "KIND", "synthetic (bench serve's generator, default) or sessions (agent/chat model)",
         CLI_STR(&o.workload)},
        {"requests", 'n', "N", "synthetic: requests (default 200)", CLI_NUM(&o.requests, 1, 1L << 30)},
        {"input-len", 0, "N", "synthetic: input tokens (default 1024)", CLI_NUM(&o.input_len, 1, 1L << 24)},
        {"output-len", 0, "N", "synthetic: output tokens (default 128)", CLI_NUM(&o.output_len, 1, 1L << 24)},
        {"prefix-share", 0, "F", "synthetic: share of each input that is a shared prefix (default 0)",
         CLI_NUM(&o.prefix_share, 0, 1)},
        {"prefix-pool", 0, "N", "synthetic: distinct shared prefixes (default 0: none)",
         CLI_NUM(&o.prefix_pool, 0, 1L << 30)},
        {"uniform", 0, NULL, "synthetic: lengths uniform in [L/2, 3L/2]", CLI_SET(&o.uniform, true)},
        {"rate", 0, "R", "synthetic: requests per second, Poisson (default 0: all at once)", CLI_NUM(&o.rate, 0, 1e9)},
        {"sessions-per-s", 0, "R", "sessions: new sessions per second (default 0.2)",
         CLI_NUM(&o.sessions_per_s, 1e-9, 1e9)},
        {"duration", 0, "S", "sessions: sessions start within S seconds (default 86400)",
         CLI_NUM(&o.duration, 1e-3, 1e9)},
        {"agent-share", 0, "F", "sessions: share of agent sessions (default 0.5)", CLI_NUM(&o.agent_share, 0, 1)},
        {"seed", 's', "N", "random seed (default 1): same seed, same results", CLI_NUM(&o.seed, 0, 1e18)},
        CLI_SECTION("Run and output"),
        {"store-only", 0, NULL, "simulate the cache tiers only (no compute model): retention studies",
         CLI_SET(&o.store_only, true)},
        {"sweep", 0, "KEY=V,..", "rerun with KEY = each value: retention-days, store-tb, time-scale",
         CLI_STR(&o.sweep)},
        {"out", 'o', "FILE", "write the results as JSON (a sweep: an array)", CLI_STR(&o.out)},
        {"svg", 0, "DIR", "write SVG charts to DIR", CLI_STR(&o.svg)},
        {"quiet", 'q', NULL, "no progress bar or sweep lines", CLI_SET(&o.quiet, true)},
    };
    const cli_cmd c = {
        .name = "sim",
        .usage = "cinfer sim CLUSTER.json [--trace FILE | --workload synthetic|sessions] [options]",
        .about = "Discrete-event simulation of a prefill/decode cluster running a workload. Every engine step is\n"
                 "planned by the server's own scheduler and the store tier uses the store's own retention and GC\n"
                 "decisions; step times come from the hardware and model profiles. Prints TTFT/TPOT/E2E, hit rate\n"
                 "by tier, tokens/s per accelerator and node, utilisation, store use and the economics.\n"
                 "Profiles, clusters and price tables: sim/ (docs/sim.md).",
        .opts = t,
        .n_opts = sizeof t / sizeof t[0]};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    if (pos >= argc) return cli_usage_error(&c, "a cluster config (CLUSTER.json) is required");
    if (argc - pos > 1) return cli_usage_error(&c, "unexpected argument '%s'", argv[pos + 1]);
    return sim_main(&o, argv[pos]);
}
