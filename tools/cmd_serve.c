/* cmd_serve.c - `cinfer serve MODEL.gguf`: loads the model, starts the
 * compute pool and the engine, and runs the OpenAI-compatible HTTP server
 * (src/serve/server.h) until SIGTERM/SIGINT. Exit 0 after a graceful
 * shutdown, 1 when start-up fails, 2 for usage errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "base/log.h"
#include "cinfer/engine.h"
#include "cinfer/recipe.h"
#include "cli_util.h"
#include "commands.h"
#include "model/model.h"
#include "serve/gen.h"
#include "serve/server.h"
#include "serve/traffic.h"
#include "store/store_gc.h"
#include "text/chat_template.h"

static void serve_usage(FILE *out) {
    fprintf(out,
            "usage: cinfer serve MODEL.gguf [options]\n"
            "OpenAI- and Anthropic-compatible HTTP server (docs/serve.md): POST /v1/chat/completions, /v1/completions,\n"
            "/v1/messages (+ /count_tokens, Anthropic), /v1/responses (+ GET/DELETE /v1/responses/ID),\n"
            "/tokenize, /detokenize; GET /v1/models, /health, /ready, /metrics.\n"
            "  -m, --model FILE          GGUF model (or give it as the first argument)\n"
            "      --host ADDR           bind address (default 127.0.0.1: loopback only)\n"
            "      --port N              TCP port (default 8080; 0 = any free port, printed at start)\n"
            "      --api-key KEY[:CLASS] require 'Authorization: Bearer KEY' on /v1/*, /tokenize, /detokenize;\n"
            "                            repeat for several keys; CLASS (agent|chat|default) is the key's\n"
            "                            default traffic class (default: $CINFER_API_KEY if set, else no key)\n"
            "      --api-key-class KEY=CLASS  the traffic class of requests made with KEY (adds KEY)\n"
            "      --served-model-name NAME   model id in the API (default: file name without .gguf)\n"
            "  -c, --ctx N               context per request, prompt + completion (default: the model's)\n"
            "      --max-seqs N          requests running at once in the engine (default 64)\n"
            "      --max-batch-tokens N  tokens per forward pass (default 2048)\n"
            "      --kv-memory GIB       KV cache budget in GiB (default 1)\n"
            "      --kv-store DIR        persistent KV block store (docs/store.md): prompt prefixes computed\n"
            "                            before, also by earlier runs, are loaded instead of recomputed\n"
            "      --kv-store-quota GIB  store size limit; GC evicts least recently used objects (default: none)\n"
            "      --kv-store-sync       fsync each object before publishing it (default: no)\n"
            "      --kv-store-key-file PATH  authenticate store objects with HMAC-SHA256 under this key (a\n"
            "                            regular file of 32-4096 bytes, not readable by others); objects\n"
            "                            without a valid MAC are quarantined (default: checksums only)\n"
            "      --retention SPEC      store retention per traffic class, e.g. agent=3d,chat=7d,default=1d\n"
            "                            (units s m h d; the class comes from the request field\n"
            "                            cinfer.traffic_class, the header X-Cinfer-Traffic-Class or the key)\n"
            "  -t, --threads N           compute threads (default: one per core)\n"
            "      --max-queue N         requests waiting beyond --max-seqs before 429 (default 256)\n"
            "      --max-n N             largest n per request (default 16)\n"
            "      --max-body-bytes N    request body limit, 413 above (default 8388608)\n"
            "      --conn-buffer-bytes N unsent bytes per streaming connection before it pauses (default 262144)\n"
            "      --shutdown-timeout S  seconds in-flight requests get after SIGTERM (default 30)\n"
            "      --log-level L         error|warn|info|debug (default info: one line per request)\n"
            "      --tool-call-parser NAME   model-output parser for tool calls (hermes, llama3, mistral,\n"
            "                            deepseek_v3, deepseek_r1, deepseek_v31, think, plain;\n"
            "                            default: detected from the chat template / architecture)\n"
            "      --reasoning-parser NAME   the same, for reasoning; --tool-call-parser wins when both are given\n"
            "      --reasoning-budget-default N  reasoning budget in tokens for chat requests that set none\n"
            "                            (no budget_tokens / reasoning effort) and do not turn thinking off\n"
            "                            (default: none; docs/serve.md \"Reasoning budget\")\n"
            "      --response-store-max N    stored Responses (previous_response_id, GET) (default 1024; 0: none)\n"
            "      --response-store-bytes N  their total size limit in bytes (default 268435456)\n"
            "      --response-store-ttl S    seconds a stored response lives after its last use (default 3600)\n");
}

typedef struct serve_opts {
    const char *model, *host, *api_key, *name, *log_level, *kv_store, *kv_key_file, *tool_parser, *reasoning_parser;
    long long rs_max, rs_bytes;
    double rs_ttl;
    traffic_keys keys; /* every --api-key / --api-key-class (owned) */
    bool store_sync;
    int64_t retention[CINFER_TRAFFIC_N]; /* 0: the store's defaults */
    long long port, ctx, max_seqs, max_batch, threads, max_queue, max_n, max_body, conn_buf;
    long long think_default; /* --reasoning-budget-default; -1: none */
    double kv_gib, shutdown_s, store_quota_gib;
} serve_opts;

/* 0 ok, -1 help printed, 1/2 error */
static int parse_serve(int argc, char **argv, serve_opts *o) {
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
    o->shutdown_s = 30;
    o->rs_max = 1024;
    o->rs_bytes = 256ll << 20;
    o->rs_ttl = 3600;
    o->think_default = -1;
    o->api_key = getenv("CINFER_API_KEY");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
#define VAL() if (!(v = cli_value(argc, argv, &i))) return 2
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { serve_usage(stdout); return -1; }
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) { VAL(); o->model = v; }
        else if (!strcmp(a, "--host")) { VAL(); o->host = v; }
        else if (!strcmp(a, "--port")) { VAL(); if (cli_int(a, v, 0, 65535, &o->port)) return 2; }
        else if (!strcmp(a, "--api-key") || !strcmp(a, "--api-key-class")) {
            VAL();
            char m[160];
            int kr = a[9]  ? traffic_keys_set_class(&o->keys, v, m, sizeof m)
                     : *v ? traffic_keys_add(&o->keys, v, m, sizeof m)
                          : (o->api_key = "", 0); /* --api-key '': no key (overrides $CINFER_API_KEY) */
            if (kr) { cli_fail("serve: %s: %s", a, m); return 2; }
        }
        else if (!strcmp(a, "--served-model-name")) { VAL(); o->name = v; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) { VAL(); if (cli_int(a, v, 2, 1 << 24, &o->ctx)) return 2; }
        else if (!strcmp(a, "--max-seqs")) { VAL(); if (cli_int(a, v, 1, 4096, &o->max_seqs)) return 2; }
        else if (!strcmp(a, "--max-batch-tokens")) { VAL(); if (cli_int(a, v, 16, 1 << 20, &o->max_batch)) return 2; }
        else if (!strcmp(a, "--kv-memory")) { VAL(); if (cli_float(a, v, 0.0001, 4096, &o->kv_gib)) return 2; }
        else if (!strcmp(a, "--kv-store")) { VAL(); o->kv_store = v; }
        else if (!strcmp(a, "--kv-store-quota")) { VAL(); if (cli_float(a, v, 0.001, 1 << 20, &o->store_quota_gib)) return 2; }
        else if (!strcmp(a, "--kv-store-sync")) o->store_sync = true;
        else if (!strcmp(a, "--kv-store-key-file")) { VAL(); o->kv_key_file = v; }
        else if (!strcmp(a, "--retention")) {
            VAL();
            cf_err e = {0};
            if (store_retention_parse(v, o->retention, &e)) { cli_fail("serve: --retention: %s", e.msg); return 2; }
        }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { VAL(); if (cli_int(a, v, 1, 1024, &o->threads)) return 2; }
        else if (!strcmp(a, "--max-queue")) { VAL(); if (cli_int(a, v, 0, 1 << 20, &o->max_queue)) return 2; }
        else if (!strcmp(a, "--max-n")) { VAL(); if (cli_int(a, v, 1, 128, &o->max_n)) return 2; }
        else if (!strcmp(a, "--max-body-bytes")) { VAL(); if (cli_int(a, v, 1024, 1ll << 30, &o->max_body)) return 2; }
        else if (!strcmp(a, "--conn-buffer-bytes")) { VAL(); if (cli_int(a, v, 1024, 1ll << 30, &o->conn_buf)) return 2; }
        else if (!strcmp(a, "--shutdown-timeout")) { VAL(); if (cli_float(a, v, 0, 3600, &o->shutdown_s)) return 2; }
        else if (!strcmp(a, "--log-level")) { VAL(); o->log_level = v; }
        else if (!strcmp(a, "--tool-call-parser")) { VAL(); o->tool_parser = v; }
        else if (!strcmp(a, "--reasoning-parser")) { VAL(); o->reasoning_parser = v; }
        else if (!strcmp(a, "--reasoning-budget-default")) { VAL(); if (cli_int(a, v, 0, 1 << 24, &o->think_default)) return 2; }
        else if (!strcmp(a, "--response-store-max")) { VAL(); if (cli_int(a, v, 0, 1 << 24, &o->rs_max)) return 2; }
        else if (!strcmp(a, "--response-store-bytes")) { VAL(); if (cli_int(a, v, 1024, 1ll << 40, &o->rs_bytes)) return 2; }
        else if (!strcmp(a, "--response-store-ttl")) { VAL(); if (cli_float(a, v, 1, 1e7, &o->rs_ttl)) return 2; }
        else if (a[0] == '-') { cli_fail("serve: unknown option '%s' (see cinfer serve --help)", a); return 2; }
        else if (!o->model) o->model = a;
        else { cli_fail("serve: unexpected argument '%s' (see cinfer serve --help)", a); return 2; }
#undef VAL
    }
    if (!o->model) { cli_fail("serve: MODEL.gguf is required (see cinfer serve --help)"); return 2; }
    if (o->kv_key_file && !o->kv_store) { cli_fail("serve: --kv-store-key-file needs --kv-store"); return 2; }
    if (o->api_key && !*o->api_key) o->api_key = NULL;
    const char *pn[2] = {o->tool_parser, o->reasoning_parser};
    for (int i = 0; i < 2; i++)
        if (pn[i] && recipe_parser_from_name(pn[i]) < 0) {
            cli_fail("serve: unknown parser '%s' (hermes, llama3, mistral, deepseek_v3, deepseek_r1, deepseek_v31, think, plain)", pn[i]);
            return 2;
        }
    if (o->keys.n > 0) o->api_key = NULL; /* explicit keys replace $CINFER_API_KEY */
    return 0;
}

static char *default_name(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 5 && !strcmp(b + n - 5, ".gguf")) n -= 5;
    return strndup(b, n);
}

int cmd_serve(int argc, char **argv) {
    serve_opts o;
    int r = parse_serve(argc, argv, &o);
    if (r) {
        traffic_keys_free(&o.keys);
        return r < 0 ? 0 : r;
    }
    if (o.log_level) {
        if (cf_log_parse_level(o.log_level, &cf_log_level)) {
            cli_fail("serve: unknown log level '%s' (error|warn|info|debug)", o.log_level);
            return 2;
        }
    } else if (!getenv("CINFER_LOG") && cf_log_level == CF_LOG_WARN) {
        cf_log_level = CF_LOG_INFO;
    }
    cpu_isa_active();
    cf_err err = {0};
    model *m = NULL;
    thread_pool *pool = NULL;
    cinfer_engine *eng = NULL;
    chat_template *tmpl = NULL;
    char *name = o.name ? strdup(o.name) : default_name(o.model);
    gen_model gm = {0};
    int rc = 1;
    if (!name) { cli_fail("serve: out of memory"); goto done; }
    if (model_load(o.model, &m, &err)) { cli_fail("%s", err.msg); goto done; }
    const model_hparams *hp = model_get_hparams(m);
    int32_t ctx = o.ctx ? (int32_t)o.ctx : hp->n_ctx_train;
    bool fallback = false;
    if (chat_template_from_gguf(model_get_gguf(m), &tmpl, &fallback, &err)) {
        cli_fail("serve: the model's chat template: %s", err.msg);
        goto done;
    }
    if (fallback) LOG_INFO("the model has no chat template; using ChatML");
    if (!(pool = pool_create((int)o.threads))) { cli_fail("serve: cannot start compute threads"); goto done; }
    cinfer_engine_options eo = {.kv_memory_bytes = (int64_t)(o.kv_gib * (1ll << 30)),
                                .max_batch_tokens = (int32_t)o.max_batch,
                                .max_seqs = (int32_t)o.max_seqs,
                                .max_ctx = ctx,
                                .kv_store_dir = o.kv_store,
                                .kv_store_quota_bytes = (int64_t)(o.store_quota_gib * (1ll << 30)),
                                .kv_store_sync = o.store_sync,
                                .kv_store_key_file = o.kv_key_file};
    memcpy(eo.kv_store_retention_s, o.retention, sizeof eo.kv_store_retention_s);
    char emsg[256];
    if (cinfer_engine_create(m, pool, &eo, &eng, emsg, sizeof emsg)) { cli_fail("serve: %s", emsg); goto done; }
    gm.engine = eng;
    gm.tok = model_get_tokenizer(m);
    gm.tmpl = tmpl;
    gm.ctx = ctx;
    if (gen_model_init(&gm, &err)) { cli_fail("serve: %s", err.msg); goto done; }
    serve_config cfg = {.host = o.host,
                        .port = (int)o.port,
                        .api_key = o.api_key,
                        .keys = &o.keys,
                        .model_name = name,
                        .max_n = (int32_t)o.max_n,
                        .max_inflight = (int32_t)(o.max_seqs + o.max_queue),
                        .max_body = (size_t)o.max_body,
                        .conn_buffer = (size_t)o.conn_buf,
                        .shutdown_timeout_s = o.shutdown_s,
                        .response_store_max = (size_t)o.rs_max,
                        .response_store_bytes = (size_t)o.rs_bytes,
                        .response_store_ttl_s = o.rs_ttl,
                        .has_reasoning_budget_default = o.think_default >= 0,
                        .reasoning_budget_default = (int32_t)o.think_default};
    const char *pname = o.tool_parser ? o.tool_parser : o.reasoning_parser;
    cfg.parser = pname ? recipe_parser_from_name(pname)
                       : (int)recipe_parser_detect(fallback ? NULL : chat_template_source(tmpl), hp->arch);
    LOG_INFO("output parser: %s%s", recipe_parser_name((recipe_parser_kind)cfg.parser), pname ? "" : " (detected)");
    if (serve_run(&cfg, &gm, &err)) { cli_fail("serve: %s", err.msg); goto done; }
    rc = 0;
done:
    gen_model_free(&gm);
    if (eng) cinfer_engine_destroy(eng);
    if (pool) pool_destroy(pool);
    chat_template_free(tmpl);
    if (m) model_free(m);
    free(name);
    traffic_keys_free(&o.keys);
    return rc;
}
