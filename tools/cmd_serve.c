/* cmd_serve.c - `cinfer serve MODEL.gguf`: parses the options (one cli_opt
 * row per flag), binds the port (before anything slow, so a busy port fails at
 * once), loads the model with progress, starts the compute pool and the
 * engine, prints the start-up summary (serve_summary.c) and runs the
 * OpenAI-compatible HTTP server (src/serve/server.h) until SIGTERM/SIGINT.
 * Exit 0 after a graceful shutdown, 1 when start-up fails, 2 for usage errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/cli_opt.h"
#include "base/cpu.h"
#include "base/log.h"
#include "cinfer/engine.h"
#include "cinfer/recipe.h"
#include "commands.h"
#include "engine/engine_tok.h"
#include "mem_opts.h"
#include "model/model.h"
#include "serve/gen.h"
#include "serve/listen.h"
#include "serve/model_names.h"
#include "serve/server.h"
#include "serve/traffic.h"
#include "serve_ep.h"
#include "serve_summary.h"
#include "store/store_gc.h"
#include "text/chat_template.h"

enum { SERVE_BLOCK_TOKENS = 16 }; /* tokens per KV block (the engine's default; GET /load reports it) */

typedef struct serve_opts {
    const char *draft_model; /* --draft-model */
    const char *model, *host, *api_key, *log_level, *kv_store, *kv_key_file, *tool_parser, *reasoning_parser;
    const char *weights_cache;
    serve_names names; /* every --served-model-name (owned) */
    long long rs_max, rs_bytes;
    double rs_ttl;
    traffic_keys keys; /* every --api-key / --api-key-class (owned) */
    bool store_sync, share_prefix_cache, mlock, no_mem_check;
    int64_t retention[CINFER_TRAFFIC_N]; /* 0: the store's defaults */
    int64_t swa_retention; /* --retention swa=D: window-state snapshots stored this long; 0: not stored */
    long long port, ctx, max_seqs, max_batch, threads, max_queue, max_n, max_body, conn_buf;
    long long think_default; /* --reasoning-budget-default; -1: none */
    long long max_conns; /* --max-connections; -1: automatic */
    int spec_drafter; /* --speculative: cinfer_spec_drafter (0: off) */
    long long spec_k, spec_max_batch; /* --spec-k, --spec-max-batch (0: the engine's defaults) */
    double header_s, body_s, idle_s;
    double kv_gib, shutdown_s, store_quota_gib, swa_gib, swa_ttl_s;
    long long swa_replay_tokens; /* 0: the model's window */
    const char *swa_replay;
    const char *kv_dtype_name; /* --kv-dtype; NULL: the engine's default */
    const char *generation_config; /* --generation-config: auto (the model's sampling defaults) or none */
    serve_ep_opts ep; /* --ep and its knobs (serve_ep.h) */
    const char *role, *handoff_listen, *handoff_shm; /* --role, --handoff-listen, --handoff-shm (docs/pd.md) */
    double handoff_timeout_s;
    long long handoff_pool_bytes; /* --handoff-pool-bytes (0: 1 GiB) */
    bool handoff_pool_prefault;
    const char *attn_precision; /* --attn-precision */
} serve_opts;

static int opt_api_key(void *ctx, const char *v, char *msg, size_t cap) {
    serve_opts *o = ctx;
    if (!*v) { /* --api-key '': no key (overrides $CINFER_API_KEY) */
        o->api_key = "";
        return 0;
    }
    return traffic_keys_add(&o->keys, v, msg, cap) ? -1 : 0;
}

static int opt_key_class(void *ctx, const char *v, char *msg, size_t cap) {
    return traffic_keys_set_class(&((serve_opts *)ctx)->keys, v, msg, cap) ? -1 : 0;
}

static int opt_retention(void *ctx, const char *v, char *msg, size_t cap) {
    cf_err e = {0};
    serve_opts *o = ctx;
    if (!store_retention_parse(v, o->retention, &o->swa_retention, &e)) return 0;
    snprintf(msg, cap, "%s", e.msg);
    return -1;
}

static int opt_parser(void *ctx, const char *v, char *msg, size_t cap) {
    if (recipe_parser_from_name(v) < 0) {
        snprintf(msg, cap,
                 "'%s' is not a parser (hermes, llama3, mistral, deepseek_v3, deepseek_r1, deepseek_v31, "
                 "think, plain)",
                 v);
        return -1;
    }
    *(const char **)ctx = v;
    return 0;
}

static int opt_speculative(void *ctx, const char *v, char *msg, size_t cap) {
    int32_t d = cinfer_spec_drafter_parse(v);
    if (d < 0 || d == CINFER_SPEC_DEFAULT) {
        snprintf(msg, cap, "'%s' is not a drafter (ngram, draft, mtp, dspark, off)", v);
        return -1;
    }
    *(int *)ctx = d;
    return 0;
}

static int opt_names(void *ctx, const char *v, char *msg, size_t cap) {
    return serve_names_add((serve_names *)ctx, v, msg, cap);
}

static const char serve_about[] =
    "OpenAI- and Anthropic-compatible HTTP server (docs/serve.md): POST /v1/chat/completions, /v1/completions,\n"
    "/v1/messages (+ /count_tokens, Anthropic), /v1/responses (+ GET/DELETE /v1/responses/ID),\n"
    "/tokenize, /detokenize; GET /v1/models, /health, /ready, /metrics.\n"
    "The port is bound before the model loads: a busy port fails at once (exit 1).";

/* The defaults every flag starts from. */
static void serve_defaults(serve_opts *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->max_seqs = 64;
    o->max_batch = 2048;
    o->max_queue = 256;
    o->max_n = 16;
    o->max_body = 8 << 20;
    o->conn_buf = 256 << 10;
    o->kv_gib = 1;
    o->swa_gib = 0.25;
    o->swa_ttl_s = 300;
    o->shutdown_s = 30;
    o->rs_max = 1024;
    o->rs_bytes = 256ll << 20;
    o->rs_ttl = 3600;
    o->think_default = -1;
    o->max_conns = -1;
    o->header_s = 30;
    o->body_s = 60;
    o->idle_s = 60;
    o->api_key = getenv("CINFER_API_KEY");
}

/* Flags of the model, the engine, speculation and window state. Writes its rows to t (room for cap); returns how many. */
static size_t serve_rows_model(serve_opts *o, cli_opt *t, size_t cap) {
    const cli_opt rows[] = {
        {"model", 'm', "PATH", "GGUF model or Hugging Face model directory (or give it as the first argument)",
         CLI_STR(&o->model)},
        {"host", 0, "ADDR", "bind address (default 127.0.0.1: loopback only)", CLI_STR(&o->host)},
        {"port", 0, "N", "TCP port (default 8080; 0 = any free port, printed at start)", CLI_NUM(&o->port, 0, 65535)},
        {"api-key", 0, "KEY[:CLASS]",
         "require 'Authorization: Bearer KEY' on /v1/*, /tokenize, /detokenize;\n"
         "repeat for several keys; CLASS (agent|chat|default) is the key's\ndefault traffic class "
         "(default: $CINFER_API_KEY if set, else no key)",
         CLI_CALL(opt_api_key, o)},
        {"api-key-class", 0, "KEY=CLASS", "the traffic class of requests made with KEY (adds KEY)",
         CLI_CALL(opt_key_class, o)},
        {"served-model-name", 0, "NAME[,NAME...]",
         "model ids in the API (repeatable); the first is the default one\n"
         "echoed in responses (default: file name without .gguf)",
         CLI_CALL(opt_names, &o->names)},
        {"ctx", 'c', "N", "context per request, prompt + completion (default: the model's)",
         CLI_NUM(&o->ctx, 2, 1 << 24)},
        {"max-seqs", 0, "N", "requests running at once in the engine (default 64)", CLI_NUM(&o->max_seqs, 1, 4096)},
        {"max-batch-tokens", 0, "N", "tokens per forward pass (default 2048)", CLI_NUM(&o->max_batch, 16, 1 << 20)},
        {"speculative", 0, "DRAFTER",
         "default speculative decoding drafter: ngram (prompt lookup), draft (--draft-model), mtp (the model's own MTP "
         "block: DeepSeek V3 next-n layers, V4 MTP), dspark (DSpark-style block drafter: deepseek4 with dspark.* "
         "tensors) or off "
         "(default off; a request chooses its own with cinfer.speculative)",
         CLI_CALL(opt_speculative, &o->spec_drafter)},
        {"draft-model", 0, "FILE",
         "draft model for speculative decoding (a smaller GGUF with the same vocabulary; checked at start)",
         CLI_STR(&o->draft_model)},
        {"spec-k", 0, "N", "most draft tokens per step and request (default 8)", CLI_NUM(&o->spec_k, 1, 16)},
        {"spec-max-batch", 0, "N", "no drafts while more requests than this decode at once (default 3)",
         CLI_NUM(&o->spec_max_batch, 1, 4096)},
        {"kv-memory", 0, "GIB", "KV cache budget in GiB (default 1)", CLI_NUM(&o->kv_gib, 0.0001, 4096)},
        {"kv-dtype", 0, "TYPE",
         "KV cache element type: f32, bf16, f16 or q8_0 (default f32;\n"
         "docs/engine.md \"KV cache element type\"; part of the store's fingerprint)",
         CLI_STR(&o->kv_dtype_name)},
        {"swa-state-memory", 0, "GIB",
         "models with sliding-window layers: host memory for window-state\n"
         "snapshots at block boundaries, so prefix hits resume exactly\n(docs/engine.md \"Window state\"; "
         "separate from --kv-memory;\n0: off, hits recompute from the start; default 0.25)",
         CLI_NUM(&o->swa_gib, 0, 4096)},
        {"swa-state-ttl", 0, "S", "seconds an unused window-state snapshot is kept (default 300)",
         CLI_NUM(&o->swa_ttl_s, 0.001, 1e7)},
        {"swa-replay", 0, "on|off|auto",
         "window models, prefix hit without a snapshot: on = bounded replay\n"
         "of the last --swa-replay-tokens (approximate), off = exact\nrecompute; auto (default) = on for layouts "
         "trained for it\n(DeepSeek V4: kv_spec.bounded_replay), off otherwise (gemma2);\nper request "
         "cinfer.swa_replay: false = exact",
         CLI_STR(&o->swa_replay)},
        {"swa-replay-tokens", 0, "N",
         "tokens a bounded replay recomputes (default: 128 for\nDeepSeek V4-like layouts, else the model's window)",
         CLI_NUM(&o->swa_replay_tokens, 1, 1 << 24)},
        {"mlock", 0, NULL, "lock the weights in memory (never paged out; needs RLIMIT_MEMLOCK)",
         CLI_SET(&o->mlock, true)},
        {"no-memory-check", 0, NULL,
         "start even when the weights plus --kv-memory exceed available memory\n(MemAvailable; default: refuse)",
         CLI_SET(&o->no_mem_check, true)},
        {"weights-cache", 0, "DIR",
         "repacked-weights cache (docs/runtime.md): the first start writes the\n"
         "weights as the kernels want them to DIR, later starts map that file\n"
         "(no repacking; processes on the host share one copy)",
         CLI_STR(&o->weights_cache)},
        {"attn-precision", 0, "f32|bf16",
         "attention dot products: f32 or bf16 (AMX tiles or AVX-512 BF16;\n"
         "default: bf16 where the CPU has them, else f32; part of the KV cache\n"
         "fingerprint, so stores and handoffs never mix the two; docs/runtime.md)",
         CLI_STR(&o->attn_precision)},
    };
    size_t n = sizeof rows / sizeof rows[0];
    if (n > cap) abort(); /* the table in parse_serve is sized for every row: a programming error */
    memcpy(t, rows, sizeof rows);
    return n;
}

/* Flags of the KV store, HTTP limits, parsers and tenants. Writes its rows to t (room for cap); returns how many. */
static size_t serve_rows_store_http(serve_opts *o, cli_opt *t, size_t cap) {
    const cli_opt rows[] = {
        {"kv-store", 0, "DIR",
         "persistent KV block store (docs/store.md): prompt prefixes computed\n"
         "before, also by earlier runs, are loaded instead of recomputed",
         CLI_STR(&o->kv_store)},
        {"kv-store-quota", 0, "GIB", "store size limit; GC evicts least recently used objects (default: none)",
         CLI_NUM(&o->store_quota_gib, 0.001, 1 << 20)},
        {"kv-store-sync", 0, NULL, "fsync each object before publishing it (default: no)",
         CLI_SET(&o->store_sync, true)},
        {"kv-store-key-file", 0, "PATH",
         "authenticate store objects with HMAC-SHA256 under this key (a\n"
         "regular file of 32-4096 bytes, not readable by others); objects\nwithout a valid MAC are quarantined "
         "(default: checksums only)",
         CLI_STR(&o->kv_key_file)},
        {"retention", 0, "SPEC",
         "store retention per traffic class, e.g. agent=3d,chat=7d,default=1d\n"
         "(units s m h d; the class comes from the request field\ncinfer.traffic_class, the header "
         "X-Cinfer-Traffic-Class or the key);\nswa=D also stores window-state snapshots (window models)\n"
         "for D, e.g. swa=10m (default: not stored)",
         CLI_CALL(opt_retention, o)},
        {"threads", 't', "N", "compute threads (default: one per core)", CLI_NUM(&o->threads, 1, 1024)},
        {"max-queue", 0, "N", "requests waiting beyond --max-seqs before 429 (default 256)",
         CLI_NUM(&o->max_queue, 0, 1 << 20)},
        {"max-n", 0, "N", "largest n per request (default 16)", CLI_NUM(&o->max_n, 1, 128)},
        {"max-body-bytes", 0, "N", "request body limit, 413 above (default 8388608)",
         CLI_NUM(&o->max_body, 1024, 1ll << 30)},
        {"conn-buffer-bytes", 0, "N", "unsent bytes per streaming connection before it pauses (default 262144)",
         CLI_NUM(&o->conn_buf, 1024, 1ll << 30)},
        {"shutdown-timeout", 0, "S", "seconds in-flight requests get after SIGTERM (default 30)",
         CLI_NUM(&o->shutdown_s, 0, 3600)},
        {"log-level", 0, "L", "error|warn|info|debug (default info: one line per request)", CLI_STR(&o->log_level)},
        {"tool-call-parser", 0, "NAME",
         "model-output parser for tool calls (hermes, llama3, mistral,\n"
         "deepseek_v3, deepseek_r1, deepseek_v31, think, plain;\ndefault: detected from the chat template / "
         "architecture)",
         CLI_CALL(opt_parser, &o->tool_parser)},
        {"reasoning-parser", 0, "NAME", "the same, for reasoning; --tool-call-parser wins when both are given",
         CLI_CALL(opt_parser, &o->reasoning_parser)},
        {"generation-config", 0, "auto|none",
         "auto: requests that do not set temperature / top_p / top_k / min_p /\n"
         "repetition_penalty use the model's defaults (generation_config.json,\n"
         "GGUF general.sampling.*; shown in /v1/models); none: the API's\n(default auto)",
         CLI_STR(&o->generation_config)},
        {"reasoning-budget-default", 0, "N",
         "reasoning budget in tokens for chat requests that set none\n"
         "(no budget_tokens / reasoning effort) and do not turn thinking off\n(default: none; docs/serve.md "
         "\"Reasoning budget\")",
         CLI_NUM(&o->think_default, 0, 1 << 24)},
        {"response-store-max", 0, "N", "stored Responses (previous_response_id, GET) (default 1024; 0: none)",
         CLI_NUM(&o->rs_max, 0, 1 << 24)},
        {"response-store-bytes", 0, "N", "their total size limit in bytes (default 268435456)",
         CLI_NUM(&o->rs_bytes, 1024, 1ll << 40)},
        {"response-store-ttl", 0, "S", "seconds a stored response lives after its last use (default 3600)",
         CLI_NUM(&o->rs_ttl, 1, 1e7)},
        {"header-timeout", 0, "S",
         "a request's headers must arrive within S seconds of the connection\n"
         "(or of the request's first byte on a keep-alive one) (default 30; 0: off)",
         CLI_NUM(&o->header_s, 0, 86400)},
        {"body-timeout", 0, "S", "... and its body within S seconds after the headers (default 60; 0: off)",
         CLI_NUM(&o->body_s, 0, 86400)},
        {"idle-timeout", 0, "S", "a keep-alive connection idle between requests is closed (default 60; 0: off)",
         CLI_NUM(&o->idle_s, 0, 86400)},
        {"max-connections", 0, "N",
         "open connections; more get 503 + Connection: close (default: 1024, or\n"
         "the open-file limit minus 64 when lower; 0: no limit)",
         CLI_NUM(&o->max_conns, 0, 1 << 24)},
        {"share-prefix-cache", 0, NULL,
         "API keys share the prefix cache (default: each key's prompts are cached\n"
         "apart, so no key can observe another's cache hits; docs/serve.md)",
         CLI_SET(&o->share_prefix_cache, true)},
    };
    size_t n = sizeof rows / sizeof rows[0];
    if (n > cap) abort(); /* the table in parse_serve is sized for every row: a programming error */
    memcpy(t, rows, sizeof rows);
    return n;
}

/* Flags of the prefill/decode roles and expert parallelism. Writes its rows to t (room for cap); returns how many. */
static size_t serve_rows_cluster(serve_opts *o, cli_opt *t, size_t cap) {
    const cli_opt rows[] = {
        CLI_SECTION("disaggregated prefill/decode (docs/pd.md)"),
        {"role", 0, "ROLE",
         "both (default: today's server), prefill (computes prompts for decode\n"
         "workers: X-Cinfer-Handoff-To) or decode (takes KV handoffs)",
         CLI_STR(&o->role)},
        {"handoff-listen", 0, "HOST:PORT",
         "accept KV handoffs over UCX here (decode default: --host, any port;\n"
         "UCX_TLS restricts UCX's transports; GET /handoff/info reports it)",
         CLI_STR(&o->handoff_listen)},
        {"handoff-timeout", 0, "S",
         "a decode worker waits this long for a handoff; a prefill worker's\n"
         "direct push gives up after it and falls back to the store (default 5)",
         CLI_NUM(&o->handoff_timeout_s, 0.01, 3600)},
        {"handoff-shm", 0, "auto|off",
         "auto (default): a prefill and a decode worker of one host (same boot and\n"
         "network namespace) hand off through shared memory, watching each other's\n"
         "process instead of UCX's peer-failure detection; off: never",
         CLI_STR(&o->handoff_shm)},
        {"handoff-pool-bytes", 0, "N",
         "a decode worker's receive-buffer pool: KV handoffs held at once\n"
         "(recycled between handoffs; one that finds it full waits, the sender\n"
         "slowed by back-pressure; one larger than the pool is computed instead;\n"
         "default 1 GiB, mapped lazily)",
         CLI_NUM(&o->handoff_pool_bytes, 4096, 1ll << 40)},
        {"handoff-pool-prefault", 0, NULL,
         "fault the whole receive-buffer pool in at start (first touch of fresh\n"
         "memory is the slow part of a handoff on a VM; costs the pool's RSS)",
         CLI_SET(&o->handoff_pool_prefault, true)},
        CLI_SECTION("expert parallelism (mpirun -n N cinfer serve --ep ...; docs/ep.md)"),
        {"ep", 0, NULL,
         "MoE expert parallelism over MPI: each rank serves on --port + rank,\n"
         "routed experts are spread over the ranks, each rank holding only its\n"
         "own experts' weights (deepseek2, deepseek4) (needs mpirun; not with --weights-cache)",
         CLI_SET(&o->ep.on, true)},
        {"ep-redundant", 0, "N", "extra expert slots per MoE layer for replicas of hot experts (default 0)",
         CLI_NUM(&o->ep.redundant, 0, 4096)},
        {"ep-rebalance", 0, "N", "rebalance (EPLB) every N busy rounds from the measured loads (default 0: never)",
         CLI_NUM(&o->ep.rebalance, 0, 1 << 30)},
        {"ep-nodes", 0, "N", "hosts, for EPLB's hierarchical policy (default 1)", CLI_NUM(&o->ep.nodes, 1, 4096)},
        {"ep-threads", 0, "N", "threads computing experts for other ranks (default 1)",
         CLI_NUM(&o->ep.threads, 1, 1024)},
        {"ep-micro-batches", 0, "1|2",
         "2: dual-batch overlap (each round's rows in two halves, one's all-to-all\n"
         "overlapping the other's expert compute); same on every rank (default 1)",
         CLI_NUM(&o->ep.micro_batches, 1, 2)},
        {"ep-weight-source", 0, "file|peer",
         "where a rebalance's moved experts come from: the rank's own model file,\n"
         "or (peer) a rank holding them, over MPI with a checksum; same on every\n"
         "rank (default file)",
         CLI_STR(&o->ep.weight_source)},
    };
    size_t n = sizeof rows / sizeof rows[0];
    if (n > cap) abort(); /* the table in parse_serve is sized for every row: a programming error */
    memcpy(t, rows, sizeof rows);
    return n;
}

/* CLI_OK, CLI_HELP or CLI_USAGE (message printed). One row per flag. */
static int parse_serve(int argc, char **argv, serve_opts *o) {
    serve_defaults(o);
    cli_opt t[128];
    size_t n = serve_rows_model(o, t, 128);
    n += serve_rows_store_http(o, t + n, 128 - n);
    n += serve_rows_cluster(o, t + n, 128 - n);
    cli_cmd c = {.name = "serve",
                 .usage = "cinfer serve MODEL.gguf [options]",
                 .about = serve_about,
                 .opts = t,
                 .n_opts = n,
                 .epilog = "\nexit status: 0 after a graceful shutdown (SIGTERM/SIGINT), 1 when start-up fails,\n"
                           "2 for usage errors."};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc;
    if (pos < argc && !o->model) o->model = argv[pos++];
    if (pos < argc) return cli_usage_error(&c, "unexpected argument '%s'", argv[pos]);
    if (!o->model) return cli_usage_error(&c, "MODEL.gguf is required");
    if (o->kv_dtype_name && cinfer_kv_dtype_parse(o->kv_dtype_name) < 0)
        return cli_usage_error(&c, "--kv-dtype '%s': expected f32, bf16, f16 or q8_0", o->kv_dtype_name);
    if (o->kv_key_file && !o->kv_store) return cli_usage_error(&c, "--kv-store-key-file needs --kv-store");
    if (o->log_level && cf_log_parse_level(o->log_level, &(cf_log_lvl){0}))
        return cli_usage_error(&c, "unknown log level '%s' (error|warn|info|debug)", o->log_level);
    if (o->api_key && !*o->api_key) o->api_key = NULL;
    if (o->role && handoff_role_parse(o->role) < 0)
        return cli_usage_error(&c, "unknown --role '%s' (prefill|decode|both)", o->role);
    if (o->handoff_shm && strcmp(o->handoff_shm, "auto") && strcmp(o->handoff_shm, "off"))
        return cli_usage_error(&c, "unknown --handoff-shm '%s' (auto|off)", o->handoff_shm);
    if (o->keys.n > 0) o->api_key = NULL; /* explicit keys replace $CINFER_API_KEY */
    return CLI_OK;
}

/* --max-connections default: 1024, or the open-file limit minus 64 (model,
 * engine, store, listener) when that is lower, at least 16. */
static long long default_max_connections(void) {
    struct rlimit rl;
    long long n = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (long long)rl.rlim_cur - 64 < n)
        n = (long long)rl.rlim_cur - 64;
    return n < 16 ? 16 : n;
}

static char *default_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".gguf")) n -= 5;
    return strndup(b, n);
}

/* What serve_setup builds; serve_parts_free releases whatever is set. */
typedef struct serve_parts {
    model *m;
    model *draft; /* --draft-model, or NULL */
    thread_pool *pool;
    cinfer_engine *eng;
    chat_template *tmpl;
    bool fallback; /* no chat template in the model: ChatML */
    int32_t ctx;
    gen_model gm;
    ep_runtime *ep; /* --ep */
} serve_parts;

/* --generation-config: the model's sampling defaults (auto) or none; printed when some apply. */
static int read_sampling_defaults(const serve_opts *o, serve_parts *sp, cf_err *err) {
    const char *g = o->generation_config ? o->generation_config : "auto";
    if (strcmp(g, "auto") && strcmp(g, "none")) return cli_fail("serve: --generation-config: '%s' (auto or none)", g);
    if (!strcmp(g, "none")) return 0;
    if (gen_defaults_read(model_get_gguf(sp->m), &sp->gm.defaults, err))
        return cli_fail("serve: the model's sampling defaults: %s (--generation-config none ignores them)", err->msg);
    char desc[256];
    gen_defaults_describe(&sp->gm.defaults, desc, sizeof desc);
    if (sp->gm.defaults.set)
        LOG_INFO("sampling defaults from the model (requests that set none use them; --generation-config none "
                 "ignores them): %s",
                 desc);
    return 0;
}

/* Loads the model (with progress, serve_summary.c), the chat template, the
 * compute pool, the engine and the generation state. 0 ok, 1 after a message. */
static int serve_setup(const serve_opts *o, serve_parts *sp, cf_err *err) {
    int64_t kv_bytes = (int64_t)(o->kv_gib * (1ll << 30));
    int64_t swa_bytes = (int64_t)(o->swa_gib * (1ll << 30));
    bool swa_auto = !o->swa_replay || !strcmp(o->swa_replay, "auto"); /* by the layer-group kinds */
    bool swa_on = o->swa_replay && !strcmp(o->swa_replay, "on");
    if (!swa_auto && !swa_on && strcmp(o->swa_replay, "off"))
        return cli_fail("serve: --swa-replay: '%s' (on, off or auto)", o->swa_replay);
    attn_prec prec = attn_prec_default();
    if (o->attn_precision && attn_prec_parse(o->attn_precision, &prec))
        return cli_fail("serve: --attn-precision: '%s' (f32 or bf16)", o->attn_precision);
    /* the window-state tier (swa_bytes) is not counted: it exists only for models with window layers, and
     * the check runs before the model is read */
    if (!o->no_mem_check && mem_check_fits("serve", o->model, kv_bytes, "--kv-memory", o->weights_cache != NULL))
        return 1;
    load_progress lp;
    load_progress_init(&lp, o->model);
    model_load_opts lo = {.progress = load_progress_cb, .progress_ctx = &lp, .weights_cache_dir = o->weights_cache};
    if (o->ep.on) { /* each rank keeps only its placement's routed experts */
        if (o->weights_cache)
            return cli_fail("serve: --weights-cache cannot be used with --ep (each rank keeps only "
                            "its own routed experts)");
        lo.expert_keep = ep_initial_keep;
        lo.expert_keep_ctx = (void *)&o->ep.place;
    }
    int r = model_load_with(o->model, &lo, &sp->m, err);
    load_progress_end(&lp, r == 0);
    if (r) return cli_fail("%s", err->msg);
    if (o->mlock && mem_lock_model("serve", sp->m)) return 1;
    const model_hparams *hp = model_get_hparams(sp->m);
    sp->ctx = o->ctx ? (int32_t)o->ctx : hp->n_ctx_train;
    if (chat_template_from_gguf(model_get_gguf(sp->m), &sp->tmpl, &sp->fallback, err))
        return cli_fail("serve: the model's chat template: %s", err->msg);
    if (sp->fallback) LOG_INFO("the model has no chat template; using ChatML");
    if (!(sp->pool = pool_create((int)o->threads))) return cli_fail("serve: cannot start compute threads");
    if (o->draft_model && model_load(o->draft_model, &sp->draft, err))
        return cli_fail("serve: --draft-model: %s", err->msg);
    if (o->spec_drafter == CINFER_SPEC_DRAFT && !sp->draft)
        return cli_fail("serve: --speculative draft needs --draft-model");
    cinfer_engine_options eo = {.block_tokens = SERVE_BLOCK_TOKENS,
                                .kv_memory_bytes = kv_bytes,
                                .max_batch_tokens = (int32_t)o->max_batch,
                                .max_seqs = (int32_t)o->max_seqs,
                                .max_ctx = sp->ctx,
                                .kv_store_dir = o->kv_store,
                                .kv_store_quota_bytes = (int64_t)(o->store_quota_gib * (1ll << 30)),
                                .kv_store_sync = o->store_sync,
                                .kv_store_key_file = o->kv_key_file,
                                .speculative = {.drafter = o->spec_drafter, .k = (int32_t)o->spec_k},
                                .spec_max_batch = (int32_t)o->spec_max_batch,
                                .draft_model = sp->draft,
                                .swa_state_memory_bytes = swa_bytes > 0 ? swa_bytes : -1,
                                .swa_state_ttl_s = o->swa_ttl_s,
                                .swa_replay_tokens = swa_on || swa_auto ? (int32_t)o->swa_replay_tokens : -1,
                                .swa_replay_auto = swa_auto,
                                .kv_dtype = o->kv_dtype_name ? cinfer_kv_dtype_parse(o->kv_dtype_name) : 0,
                                .attn_precision = prec == ATTN_PREC_BF16 ? CINFER_ATTN_BF16 : CINFER_ATTN_F32};
    memcpy(eo.kv_store_retention_s, o->retention, sizeof eo.kv_store_retention_s);
    if (o->ep.on) {
        if (serve_ep_start(&o->ep, sp->m, (int)o->max_batch, &sp->ep)) return 1;
        eo.moe_executor = ep_runtime_executor(sp->ep);
    }
    eo.kv_store_swa_retention_s = o->swa_retention;
    char emsg[256];
    if (cinfer_engine_create(sp->m, sp->pool, &eo, &sp->eng, emsg, sizeof emsg)) return cli_fail("serve: %s", emsg);
    sp->gm.engine = sp->eng;
    sp->gm.tok = cinfer_engine_tokenizer(sp->eng);
    sp->gm.tmpl = sp->tmpl;
    sp->gm.ctx = sp->ctx;
    if (gen_model_init(&sp->gm, err)) return cli_fail("serve: %s", err->msg);
    return read_sampling_defaults(o, sp, err);
}

static void serve_parts_free(serve_parts *sp) {
    gen_model_free(&sp->gm);
    if (sp->eng) cinfer_engine_destroy(sp->eng);
    ep_runtime_stop(sp->ep); /* after the engine (its last MoE call), before the model */
    if (sp->pool) pool_destroy(sp->pool);
    chat_template_free(sp->tmpl);
    if (sp->m) model_free(sp->m);
    if (sp->draft) model_free(sp->draft);
}

static int serve_main(serve_opts *o) {
    if (o->log_level) cf_log_parse_level(o->log_level, &cf_log_level); /* checked by parse_serve */
    else if (!getenv("CINFER_LOG") && cf_log_level == CF_LOG_WARN) cf_log_level = CF_LOG_INFO;
    cf_err err = {0};
    char msg[160];
    if (o->names.n == 0) {
        char *def = default_name(o->model);
        if (!def) return cli_fail("serve: out of memory");
        int r = serve_names_add(&o->names, def, msg, sizeof msg);
        free(def);
        if (r) return cli_fail("serve: %s", msg);
    }
    int ep_rank = 0, ep_ranks = 1;
    if (o->ep.on && serve_ep_init(&ep_rank, &ep_ranks)) return 1;
    o->ep.place = (ep_placement){.rank = ep_rank, .n_ranks = ep_ranks, .redundant = (int32_t)o->ep.redundant};
    /* bind first: a busy port fails now, not after loading the model */
    int fd = -1, port = 0;
    if (serve_listen(o->host, o->port ? (int)o->port + ep_rank : 0, &fd, &port, &err)) {
        cli_fail("serve: %s", err.msg);
        if (o->ep.on) serve_ep_abort();
        return 1;
    }
    cpu_isa_active();
    serve_parts sp = {0};
    if (serve_setup(o, &sp, &err)) {
        if (o->ep.on) serve_ep_abort(); /* the other ranks would wait for this one forever */
        close(fd);
        serve_parts_free(&sp);
        return 1;
    }
    serve_config cfg = {.host = o->host,
                        .port = port,
                        .listen_fd = fd,
                        .api_key = o->api_key,
                        .keys = &o->keys,
                        .model_name = o->names.v[0],
                        .names = &o->names,
                        .max_n = (int32_t)o->max_n,
                        .max_inflight = (int32_t)(o->max_seqs + o->max_queue),
                        .max_seqs = (int32_t)o->max_seqs,
                        .kv_block_tokens = SERVE_BLOCK_TOKENS,
                        .max_body = (size_t)o->max_body,
                        .conn_buffer = (size_t)o->conn_buf,
                        .shutdown_timeout_s = o->shutdown_s,
                        .response_store_max = (size_t)o->rs_max,
                        .response_store_bytes = (size_t)o->rs_bytes,
                        .response_store_ttl_s = o->rs_ttl,
                        .has_reasoning_budget_default = o->think_default >= 0,
                        .reasoning_budget_default = (int32_t)o->think_default,
                        .header_timeout_s = o->header_s,
                        .body_timeout_s = o->body_s,
                        .idle_timeout_s = o->idle_s,
                        .max_connections = (int32_t)(o->max_conns >= 0 ? o->max_conns : default_max_connections()),
                        .share_prefix_cache = o->share_prefix_cache,
                        .extra_metrics = sp.ep ? serve_ep_metrics : NULL,
                        .extra_metrics_ctx = sp.ep,
                        .handoff = {.role = o->role ? (handoff_role)handoff_role_parse(o->role) : HANDOFF_ROLE_BOTH,
                                    .listen = o->handoff_listen,
                                    .http_host = o->host,
                                    .timeout_s = o->handoff_timeout_s > 0 ? o->handoff_timeout_s : 5,
                                    .no_shm = o->handoff_shm && !strcmp(o->handoff_shm, "off"),
                                    .max_bytes = (int64_t)o->handoff_pool_bytes,
                                    .pool_prefault = o->handoff_pool_prefault}};
    const char *pname = o->tool_parser ? o->tool_parser : o->reasoning_parser;
    cfg.parser = pname ? recipe_parser_from_name(pname)
                       : (int)recipe_parser_detect(sp.fallback ? NULL : chat_template_source(sp.tmpl),
                                                   model_get_hparams(sp.m)->arch);
    LOG_INFO("output parser: %s%s", recipe_parser_name((recipe_parser_kind)cfg.parser), pname ? "" : " (detected)");
    serve_summary_print(stderr, &(serve_summary){.m = sp.m,
                                                 .eng = sp.eng,
                                                 .pool = sp.pool,
                                                 .ctx = sp.ctx,
                                                 .host = o->host,
                                                 .port = port,
                                                 .names = &o->names,
                                                 .n_keys = o->keys.n    ? o->keys.n
                                                           : o->api_key ? 1
                                                                        : 0,
                                                 .store_dir = o->kv_store,
                                                 .retention = o->retention,
                                                 .swa_retention = o->swa_retention});
    int rc = 0;
    if (serve_run(&cfg, &sp.gm, &err)) rc = cli_fail("serve: %s", err.msg);
    serve_parts_free(&sp);
    if (o->ep.on) ep_mpi_finalize();
    return rc;
}

int cmd_serve(int argc, char **argv) {
    serve_opts o;
    int r = parse_serve(argc, argv, &o);
    if (!r) r = serve_main(&o);
    traffic_keys_free(&o.keys);
    serve_names_free(&o.names);
    return r == CLI_HELP ? 0 : r;
}
