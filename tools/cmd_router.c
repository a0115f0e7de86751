/* cmd_router.c - `cinfer router`: parses the options (one cli_opt row per
 * flag), reads the worker list (--worker, --workers-file) and runs the
 * router (src/cluster/router.h) until SIGTERM/SIGINT. Exit 0 after a clean
 * shutdown, 1 when start-up fails, 2 for usage errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli_opt.h"
#include "base/log.h"
#include "cluster/router.h"
#include "commands.h"

typedef struct router_opts {
    const char *host, *workers_file, *log_level;
    long long port, max_attempts, max_body, conn_buf;
    double health_s, upstream_s, queue_s, shutdown_s, attn_cost;
    long long balance;
    router_worker_spec *specs;
    int32_t n_specs;
    route_policy_kind policy, prefill_policy, decode_policy;
    bool pd_sequential, store_shared;
} router_opts;

static int opt_worker(void *ctx, const char *v, char *msg, size_t cap) {
    router_opts *o = ctx;
    router_worker_spec one;
    cf_err e = {0};
    if (router_worker_parse(v, &one, &e)) {
        snprintf(msg, cap, "%s", e.msg);
        return -1;
    }
    router_worker_spec *g = realloc(o->specs, (size_t)(o->n_specs + 1) * sizeof *g);
    if (!g) {
        free(one.url);
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    o->specs = g;
    g[o->n_specs++] = one;
    return 0;
}

static int opt_policy(void *ctx, const char *v, char *msg, size_t cap) {
    if (route_policy_parse(v, (route_policy_kind *)ctx) == 0) return 0;
    snprintf(msg, cap,
             "'%s' is not a policy (round_robin|rr, least_requests|least, cache_affinity|affinity, "
             "prefill_compute|compute, decode_load|kv)",
             v);
    return -1;
}

static int opt_level(void *ctx, const char *v, char *msg, size_t cap) {
    cf_log_lvl lv;
    if (cf_log_parse_level(v, &lv)) {
        snprintf(msg, cap, "unknown log level '%s' (error|warn|info|debug)", v);
        return -1;
    }
    *(const char **)ctx = v;
    return 0;
}

static const char router_about[] =
    "\nOne HTTP front for several `cinfer serve` workers (docs/router.md): POST /v1/chat/completions,\n"
    "/v1/completions, /v1/messages, /v1/responses are placed on a worker by --policy and relayed\n"
    "unchanged (streams chunk by chunk); /v1/models, /tokenize, /detokenize, /v1/messages/count_tokens\n"
    "pass through. Own endpoints: GET /health, /ready, /metrics (Prometheus), /workers (JSON).\n"
    "With workers of role prefill and decode, requests run as a prefill step then a decode step\n"
    "(the KV handoff contract in docs/router.md).";

static int parse_router(int argc, char **argv, router_opts *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8000;
    o->max_attempts = 3;
    o->max_body = 8 << 20;
    o->conn_buf = 256 << 10;
    o->health_s = 1;
    o->upstream_s = 600;
    o->queue_s = 30;
    o->shutdown_s = 30;
    o->balance = 8;
    o->attn_cost = -1;
    o->policy = ROUTE_PREFILL_COMPUTE;
    o->prefill_policy = ROUTE_PREFILL_COMPUTE;
    o->decode_policy = ROUTE_DECODE_LOAD;
    const cli_opt t[] = {
        {"host", 0, "ADDR", "bind address (default 127.0.0.1)", CLI_STR(&o->host)},
        {"port", 0, "N", "TCP port (default 8000; 0 = any free port, printed at start)", CLI_NUM(&o->port, 0, 65535)},
        {"worker", 'w', "URL[@ROLE]",
         "a worker, e.g. http://10.0.0.2:8080 or http://10.0.0.3:8080@decode\n"
         "(ROLE both|prefill|decode, default both; repeatable, up to 64)",
         CLI_CALL(opt_worker, o)},
        {"workers-file", 0, "PATH", "more workers, one URL[@ROLE] per line ('#' comments)", CLI_STR(&o->workers_file)},
        {"policy", 0, "NAME",
         "placement for workers of role both: prefill_compute (default),\n"
         "decode_load, least_requests, round_robin, cache_affinity",
         CLI_CALL(opt_policy, &o->policy)},
        {"prefill-policy", 0, "NAME", "PD mode: placement of the prefill step (default prefill_compute)",
         CLI_CALL(opt_policy, &o->prefill_policy)},
        {"decode-policy", 0, "NAME", "PD mode: placement of the decode step (default decode_load)",
         CLI_CALL(opt_policy, &o->decode_policy)},
        {"pd-sequential", 0, NULL,
         "PD mode: send the decode step only after the prefill step answered\n"
         "(default: both at once; the decode worker waits for the handoff)",
         CLI_SET(&o->pd_sequential, true)},
        {"store-shared", 0, NULL,
         "the workers mount one persistent store (--kv-store on a shared\n"
         "filesystem): a prefix any worker computed counts as cached on every\n"
         "worker for prefill placement (store-aware; no strict cache affinity)",
         CLI_SET(&o->store_shared, true)},
        {"attn-cost", 0, "X",
         "attention cost per token and context position relative to a token's\n"
         "weight work (base/compute_cost.h; default: a 4096-wide model's)",
         CLI_NUM(&o->attn_cost, 0, 1)},
        {"balance-threshold", 0, "N",
         "cache_affinity: use the least loaded worker when the chosen one has\n"
         "more than N requests above it (default 8)",
         CLI_NUM(&o->balance, 0, 1 << 20)},
        {"health-interval", 0, "S", "seconds between GET /load probes of each worker (default 1)",
         CLI_NUM(&o->health_s, 0.05, 3600)},
        {"upstream-timeout", 0, "S", "seconds a worker may stay silent on a request (default 600)",
         CLI_NUM(&o->upstream_s, 1, 86400)},
        {"queue-timeout", 0, "S", "seconds a request waits for a worker that accepts (default 30)",
         CLI_NUM(&o->queue_s, 0, 86400)},
        {"max-attempts", 0, "N", "workers tried per request, resumes of a broken stream included (default 3)",
         CLI_NUM(&o->max_attempts, 1, 64)},
        {"max-body", 0, "BYTES", "request body limit (default 8 MiB; 413 above)",
         CLI_NUM(&o->max_body, 1024, 1ll << 32)},
        {"conn-buffer", 0, "BYTES", "unsent bytes to a client before its worker's stream is paused (default 256 KiB)",
         CLI_NUM(&o->conn_buf, 1024, 1ll << 32)},
        {"shutdown-timeout", 0, "S", "SIGTERM: seconds in-flight requests get to finish (default 30)",
         CLI_NUM(&o->shutdown_s, 0, 86400)},
        {"log-level", 0, "L", "error|warn|info|debug (default info)", CLI_CALL(opt_level, &o->log_level)},
    };
    cli_cmd c = {.name = "router",
                 .usage = "cinfer router --worker URL[@ROLE] [--worker ...] [--workers-file PATH] [options]",
                 .about = router_about,
                 .opts = t,
                 .n_opts = sizeof t / sizeof t[0]};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc;
    if (pos < argc) return cli_usage_error(&c, "unexpected argument '%s'", argv[pos]);
    if (o->workers_file) {
        cf_err e = {0};
        if (router_workers_file(o->workers_file, &o->specs, &o->n_specs, &e)) return cli_usage_error(&c, "%s", e.msg);
    }
    if (o->n_specs == 0) return cli_usage_error(&c, "no workers: give --worker URL or --workers-file PATH");
    if (o->n_specs > 64) return cli_usage_error(&c, "at most 64 workers (got %d)", o->n_specs);
    return CLI_OK;
}

int cmd_router(int argc, char **argv) {
    router_opts o;
    int rc = parse_router(argc, argv, &o);
    if (rc) {
        router_worker_specs_free(o.specs, o.n_specs);
        return rc == CLI_HELP ? 0 : rc;
    }
    if (o.log_level) cf_log_parse_level(o.log_level, &cf_log_level);
    else if (!getenv("CINFER_LOG") && cf_log_level == CF_LOG_WARN) cf_log_level = CF_LOG_INFO;
    router_config cfg = {.host = o.host,
                         .port = (int)o.port,
                         .workers = o.specs,
                         .n_workers = o.n_specs,
                         .policy = o.policy,
                         .prefill_policy = o.prefill_policy,
                         .decode_policy = o.decode_policy,
                         .params = route_default_params(),
                         .health_interval_s = o.health_s,
                         .upstream_timeout_s = o.upstream_s,
                         .queue_timeout_s = o.queue_s,
                         .max_attempts = (int32_t)o.max_attempts,
                         .max_body = (size_t)o.max_body,
                         .conn_buffer = (size_t)o.conn_buf,
                         .shutdown_timeout_s = o.shutdown_s,
                         .pd_sequential = o.pd_sequential,
                         .store_shared = o.store_shared};
    if (o.attn_cost >= 0) cfg.params.attn_cost = o.attn_cost;
    cfg.params.balance_threshold = (int32_t)o.balance;
    cf_err e = {0};
    rc = router_run(&cfg, &e);
    router_worker_specs_free(o.specs, o.n_specs);
    return rc ? cli_fail("router: %s", e.msg) : 0;
}
