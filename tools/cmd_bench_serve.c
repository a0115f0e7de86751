/* cmd_bench_serve.c - `cinfer bench serve`: a load generator for any
 * OpenAI-compatible server (cinfer serve or another engine). Parses options,
 * builds the workload (src/benchserve/workload.h), then either writes the
 * planned requests (--dry-run --dump) or runs them (runner.h) and prints /
 * writes the results (results.h). Called from cmd_bench.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/cli_opt.h"
#include "benchserve/api.h"
#include "benchserve/results.h"
#include "benchserve/runner.h"
#include "benchserve/workload.h"
#include "commands.h"

typedef struct serve_opts {
    const char *base_url, *model, *api_key, *out, *dump;
    bs_api api;
    bs_wl_opts wl;
    long concurrency, timeout, turns_set, system_set;
    double duration, temperature;
    int ignore_eos, text, dry_run, progress;
    long requests;
} serve_opts;

static int opt_range(void *ctx, const char *v, char *msg, size_t cap) {
    bs_wl_opts *w = ctx;
    long a, b;
    char tail;
    if (sscanf(v, "%ld:%ld%c", &a, &b, &tail) != 2 || a < 0 || b <= a || b > (1L << 30))
        return snprintf(msg, cap, "expects LO:HI with 0 <= LO < HI, got '%s'", v), -1;
    w->tok_lo = (int32_t)a;
    w->tok_hi = (int32_t)b;
    return 0;
}

static int opt_api(void *ctx, const char *v, char *msg, size_t cap) {
    if (bs_api_parse(v, ctx))
        return snprintf(msg, cap, "unknown API '%s' (chat, completions, messages, responses)", v), -1;
    return 0;
}

static int opt_workload(void *ctx, const char *v, char *msg, size_t cap) {
    if (bs_workload_parse_kind(v, &((bs_wl_opts *)ctx)->kind))
        return snprintf(msg, cap, "unknown workload '%s' (synthetic, chat, agent, code, trace, conversations)", v), -1;
    return 0;
}

static int opt_len_dist(void *ctx, const char *v, char *msg, size_t cap) {
    if (strcmp(v, "uniform") && strcmp(v, "fixed"))
        return snprintf(msg, cap, "expects fixed or uniform, got '%s'", v), -1;
    ((bs_wl_opts *)ctx)->uniform = !strcmp(v, "uniform");
    return 0;
}

/* Everything but the defaults that depend on the workload (checks in parse). */
static int parse_table(int argc, char **argv, serve_opts *o, int *pos) {
    bs_wl_opts *w = &o->wl;
    const cli_opt t[] = {
        {"base-url", 0, "URL", "http://host:port (\"/v1\" is added unless present)", CLI_STR(&o->base_url)},
        {"api", 0, "NAME", "chat (default) | completions | messages | responses", CLI_CALL(opt_api, &o->api)},
        {"model", 0, "NAME", "model field (default: the first id of GET /v1/models)", CLI_STR(&o->model)},
        {"api-key", 0, "KEY", "sent as Bearer token (x-api-key for messages)", CLI_STR(&o->api_key)},
        {"workload", 0, "NAME", "synthetic (default) | chat | agent | code | trace FILE | conversations FILE",
         CLI_CALL(opt_workload, w)},
        {"concurrency", 0, "C", "at most C requests in flight (default: no limit)",
         CLI_NUM(&o->concurrency, 1, 1 << 20)},
        {"rate", 0, "R",
         "session arrivals per second, Poisson (default: all at once;\n"
         "the trace workload uses the trace's timestamps)",
         CLI_NUM(&w->rate, 1e-6, 1e9)},
        {"requests", 0, "N", "synthetic/code: requests (default 64); others: stop after N sends",
         CLI_NUM(&o->requests, 1, 1 << 24)},
        {"duration", 0, "S", "stop sending after S seconds", CLI_NUM(&o->duration, 1e-3, 1e9)},
        {"seed", 0, "S", "workload seed (default 1)", CLI_NUM(&w->seed, 0, 0)},
        {"out", 0, "FILE", "write results as JSON (see docs/bench-serve.md)", CLI_STR(&o->out)},
        {"timeout", 0, "S", "per-request inactivity timeout (default 600)", CLI_NUM(&o->timeout, 1, 86400)},
        {"progress", 0, NULL, "progress bar on stderr even when it is not a terminal", CLI_SET(&o->progress, 1)},
        {"no-progress", 0, NULL, "no progress bar (default when stderr is not a terminal)", CLI_SET(&o->progress, 0)},
        CLI_SECTION("generation:"),
        {"output-len", 0, "N", "max_tokens per request/turn (default 128)", CLI_NUM(&w->output_len, 1, 1 << 24)},
        {"max-output-len", 0, "N", "caps every max_tokens (e.g. the trace's output lengths)",
         CLI_NUM(&w->max_output, 1, 1 << 24)},
        {"ignore-eos", 0, NULL, "ask the server to ignore EOS (\"ignore_eos\": true)", CLI_SET(&o->ignore_eos, 1)},
        {"temperature", 0, "T", "sampling temperature (default: not sent)", CLI_NUM(&o->temperature, 0, 100)},
        CLI_SECTION("synthetic / code:"),
        {"input-len", 0, "N", "prompt words (~tokens; token ids with --api completions) (default 256)",
         CLI_NUM(&w->input_len, 1, 1 << 24)},
        {"len-dist", 0, "D", "fixed (default) | uniform: lengths uniform in [L/2, 3L/2]", CLI_CALL(opt_len_dist, w)},
        {"prefix-share", 0, "F", "synthetic: share of each prompt that is a shared prefix (default 0)",
         CLI_NUM(&w->prefix_share, 0, 1)},
        {"prefix-pool", 0, "N", "synthetic: distinct shared prefixes, one drawn per request (default 0: none)",
         CLI_NUM(&w->prefix_pool, 0, 1L << 30)},
        CLI_SECTION("chat / agent:"),
        {"sessions", 0, "N",
         "concurrent conversations (default 8; conversations: how many run\n"
         "at once, closed loop)",
         CLI_NUM(&w->sessions, 1, 1 << 20)},
        {"turns", 0, "N",
         "turns per session (chat default 4, agent default 8; conversations:\n"
         "each one's first N, default all)",
         CLI_NUM(&o->turns_set, 1, 1 << 16)},
        {"system-len", 0, "N", "shared system prompt words (chat 1000, agent 2000)",
         CLI_NUM(&o->system_set, 0, 1 << 24)},
        {"user-len", 0, "N", "words per user message (default 64)", CLI_NUM(&w->user_len, 1, 1 << 24)},
        {"tool-len", 0, "N", "agent: words per tool result (default 2000)", CLI_NUM(&w->tool_len, 1, 1 << 24)},
        {"think-time", 0, "S", "agent: mean pause between turns (default 1.0; uniform 0.5x-1.5x)",
         CLI_NUM(&w->think_s, 0, 1e6)},
        CLI_SECTION("trace:"),
        {"trace", 0, "FILE", "Mooncake JSONL trace (or: --workload trace FILE)", CLI_STR(&w->trace_path)},
        {"block-scale", 0, "K", "tokens per hash-id block (default 512; e.g. 32 shrinks prompts 16x)",
         CLI_NUM(&w->block, 1, 512)},
        {"time-scale", 0, "X", "replay X times faster (default 1)", CLI_NUM(&w->time_scale, 1e-6, 1e9)},
        {"max-requests", 0, "N", "only the first N trace lines", CLI_NUM(&w->max_requests, 1, 1 << 24)},
        CLI_SECTION("conversations (closed-loop trace replay, docs/bench-serve.md):"),
        {"min-turns", 0, "N", "conversations of fewer trace lines are left out (default 2)",
         CLI_NUM(&w->min_turns, 1, 1 << 16)},
        {"conversations", 0, "N", "replay the first N that qualify (default all)",
         CLI_NUM(&w->conversations, 1, 1 << 24)},
        {"max-context", 0, "N",
         "leave out conversations with a turn whose input + max_tokens\n"
         "exceeds N tokens (e.g. the server's --ctx)",
         CLI_NUM(&w->max_context, 1, 1L << 30)},
        {"think-min", 0, "S", "think time = trace gap / --time-scale, at least S (default 0)",
         CLI_NUM(&w->think_min, 0, 1e6)},
        {"think-max", 0, "S", "... and at most S seconds (default 60)", CLI_NUM(&w->think_max, 0, 1e6)},
        CLI_SECTION("prompts:"),
        {"token-range", 0, "LO:HI", "token ids for --api completions (default 3:500, fits any vocab >= 500)",
         CLI_CALL(opt_range, w)},
        {"text", 0, NULL, "send text even with --api completions", CLI_SET(&o->text, 1)},
        {"dry-run", 0, NULL,
         "build the requests without sending; with --dump FILE write one JSON\n"
         "line per request: session, turn, trace_line, send_at_s, body",
         CLI_SET(&o->dry_run, 1)},
        {"dump", 0, "FILE", "with --dry-run: where the planned requests go", CLI_STR(&o->dump)},
    };
    const cli_cmd c = {
        .name = "bench serve",
        .usage = "cinfer bench serve --base-url URL [options]",
        .about = "Streams a workload to an OpenAI-compatible server and reports TTFT, TPOT, inter-token and\n"
                 "end-to-end latency (mean/p50/p90/p99), request and token rates (input split into cached,\n"
                 "replayed (window state) and computed, from the responses' usage), cache hit ratio and\n"
                 "errors by kind.",
        .opts = t,
        .n_opts = sizeof t / sizeof t[0],
        .epilog = "exit status: 0 when at least one request succeeded (the others are counted by kind), 1 if none;\n"
                  "2 for usage errors."};
    return cli_parse(&c, argc, argv, pos);
}

/* argv[0] is "serve". CLI_OK, CLI_HELP or CLI_USAGE. */
static int parse(int argc, char **argv, serve_opts *o) {
    *o = (serve_opts){.wl = {.kind = BS_WL_SYNTHETIC,
                             .seed = 1,
                             .input_len = 256,
                             .output_len = 128,
                             .sessions = 8,
                             .user_len = 64,
                             .tool_len = 2000,
                             .think_s = 1.0,
                             .block = 512,
                             .time_scale = 1,
                             .min_turns = 2,
                             .think_max = 60,
                             .tok_lo = 3,
                             .tok_hi = 500},
                      .timeout = 600,
                      .temperature = -1,
                      .progress = isatty(STDERR_FILENO),
                      .requests = -1,
                      .turns_set = -1,
                      .system_set = -1};
    bs_wl_opts *w = &o->wl;
    int pos, rc = parse_table(argc, argv, o, &pos);
    if (rc) return rc;
    const cli_cmd c = {.name = "bench serve"};
    int from_trace = w->kind == BS_WL_TRACE || w->kind == BS_WL_CONVERSATIONS;
    if (from_trace && !w->trace_path && pos < argc) w->trace_path = argv[pos++]; /* --workload trace FILE */
    if (pos < argc) return cli_usage_error(&c, "unexpected argument '%s'", argv[pos]);
    if (!o->dry_run && !o->base_url) return cli_usage_error(&c, "--base-url is required (or --dry-run)");
    if (o->dump && !o->dry_run) return cli_usage_error(&c, "--dump needs --dry-run");
    if (from_trace && !w->trace_path)
        return cli_usage_error(&c, "the %s workload needs a FILE", bs_workload_kind_name(w->kind));
    if (from_trace && w->rate > 0)
        return cli_usage_error(&c, "--rate does not apply to trace replay (use --time-scale)");
    if (w->think_max < w->think_min) return cli_usage_error(&c, "--think-max must be >= --think-min");
    int multi = w->kind == BS_WL_CHAT || w->kind == BS_WL_AGENT;
    w->turns = o->turns_set > 0 ? o->turns_set : w->kind == BS_WL_CONVERSATIONS ? 0 : w->kind == BS_WL_AGENT ? 8 : 4;
    w->system_len = o->system_set >= 0 ? o->system_set : w->kind == BS_WL_AGENT ? 2000 : 1000;
    if (!multi && w->kind != BS_WL_TRACE) w->requests = o->requests > 0 ? o->requests : 64;
    w->token_ids = o->api == BS_API_COMPLETIONS && !o->text && (w->kind == BS_WL_SYNTHETIC || from_trace);
    return CLI_OK;
}

/* The conversations workload's settings into the run's config object. */
static void conversations_json(json_t *c, const bs_wl_opts *w) {
    json_object_set_new(c, "trace", json_string(w->trace_path));
    json_object_set_new(c, "block_scale", json_integer(w->block));
    json_object_set_new(c, "time_scale", json_real(w->time_scale));
    json_object_set_new(c, "max_requests", json_integer(w->max_requests));
    json_object_set_new(c, "sessions_at_once", json_integer(w->sessions));
    json_object_set_new(c, "min_turns", json_integer(w->min_turns));
    json_object_set_new(c, "max_turns", json_integer(w->turns));
    json_object_set_new(c, "conversations", json_integer(w->conversations));
    json_object_set_new(c, "max_context", json_integer(w->max_context));
    json_object_set_new(c, "think_min", json_real(w->think_min));
    json_object_set_new(c, "think_max", json_real(w->think_max));
}

static json_t *config_json(const serve_opts *o, const char *model) {
    const bs_wl_opts *w = &o->wl;
    char when[32];
    time_t t = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    json_t *c = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:f, s:I, s:f, s:I, s:I, s:I, s:b, s:b}", "started", when, "base_url",
        o->base_url ? o->base_url : "", "api", bs_api_name(o->api), "workload", bs_workload_kind_name(w->kind), "seed",
        (json_int_t)w->seed, "rate", w->rate, "concurrency", (json_int_t)o->concurrency, "duration", o->duration,
        "requests", (json_int_t)(o->requests > 0 ? o->requests : 0), "output_len", (json_int_t)w->output_len,
        "max_output_len", (json_int_t)w->max_output, "ignore_eos", o->ignore_eos, "token_ids", w->token_ids);
    if (!c) return NULL;
    json_object_set_new(c, "model", json_string(model ? model : ""));
    if (w->kind == BS_WL_SYNTHETIC || w->kind == BS_WL_CODE) {
        json_object_set_new(c, "input_len", json_integer(w->input_len));
        json_object_set_new(c, "len_dist", json_string(w->uniform ? "uniform" : "fixed"));
        json_object_set_new(c, "prefix_share", json_real(w->prefix_share));
        json_object_set_new(c, "prefix_pool", json_integer(w->prefix_pool));
    } else if (w->kind == BS_WL_TRACE) {
        json_object_set_new(c, "trace", json_string(w->trace_path));
        json_object_set_new(c, "block_scale", json_integer(w->block));
        json_object_set_new(c, "time_scale", json_real(w->time_scale));
        json_object_set_new(c, "max_requests", json_integer(w->max_requests));
    } else if (w->kind == BS_WL_CONVERSATIONS) {
        conversations_json(c, w);
    } else {
        json_object_set_new(c, "sessions", json_integer(w->sessions));
        json_object_set_new(c, "turns", json_integer(w->turns));
        json_object_set_new(c, "system_len", json_integer(w->system_len));
        json_object_set_new(c, "user_len", json_integer(w->user_len));
        if (w->kind == BS_WL_AGENT) {
            json_object_set_new(c, "tool_len", json_integer(w->tool_len));
            json_object_set_new(c, "think_time", json_real(w->think_s));
        }
    }
    return c;
}

/* --dry-run: every turn in session order, answers replaced by a fixed
 * placeholder and turns planned as if each took no time. */
static int dry_run(const serve_opts *o, bs_workload *w) {
    FILE *f = o->dump ? fopen(o->dump, "w") : NULL;
    if (o->dump && !f) return cli_fail("cannot write %s", o->dump);
    const char **scratch = NULL;
    size_t cap = 0;
    long sent = 0;
    int rc = 0;
    cf_err err;
    bs_gen_opts g = {
        .model = o->model ? o->model : "MODEL", .temperature = o->temperature, .ignore_eos = o->ignore_eos};
    for (size_t i = 0; i < w->n && !rc; i++) {
        bs_session *s = &w->s[i];
        double t = s->arrival;
        for (long k = 0; k < s->n_turns && !rc; k++) {
            if (o->requests > 0 && sent >= o->requests) break;
            t += s->think[k];
            if (bs_workload_begin_turn(w, i, &err)) rc = cli_fail("%s", err.msg);
            bs_prompt p = bs_workload_prompt(w, i, &scratch, &cap);
            g.max_tokens = s->max_tokens[k];
            bs_buf body = {0};
            if (!rc && bs_api_body(o->api, &p, &g, &body)) rc = cli_fail("out of memory");
            if (!rc && f)
                fprintf(f, "{\"session\":%zu,\"turn\":%ld,\"trace_line\":%ld,\"send_at_s\":%.6f,\"body\":%s}\n", i, k,
                        s->trace_line, t, bs_buf_str(&body));
            bs_buf_free(&body);
            if (!rc && k + 1 < s->n_turns && bs_workload_add_answer(w, i, "(answer)", &err))
                rc = cli_fail("%s", err.msg);
            sent++;
        }
        bs_workload_release(w, i);
    }
    free(scratch);
    if (f && fclose(f)) rc = cli_fail("cannot write %s", o->dump);
    if (!rc)
        printf("dry run: %ld requests in %zu sessions%s%s\n", sent, w->n, o->dump ? ", written to " : "",
               o->dump ? o->dump : "");
    return rc;
}

static int write_json(json_t *res, const char *path) {
    if (json_dump_file(res, path, JSON_INDENT(1))) return cli_fail("cannot write %s", path);
    return 0;
}

int bench_serve(int argc, char **argv) {
    serve_opts o;
    int r = parse(argc, argv, &o);
    if (r) return r == CLI_HELP ? 0 : r;
    bs_workload w;
    cf_err err;
    if (bs_workload_build(&o.wl, &w, &err)) return cli_fail("bench serve: %s", err.msg);
    if (o.dry_run) {
        r = dry_run(&o, &w);
        bs_workload_free(&w);
        return r;
    }
    char model[256];
    if (!o.model) {
        if (bs_fetch_model(o.base_url, o.api_key, (double)o.timeout, model, sizeof model, &err)) {
            bs_workload_free(&w);
            return cli_fail("bench serve: %s", err.msg);
        }
        o.model = model;
    }
    bs_run_opts ro = {.base_url = o.base_url,
                      .api = o.api,
                      .api_key = o.api_key,
                      .gen = {.model = o.model, .temperature = o.temperature, .ignore_eos = o.ignore_eos},
                      .concurrency = o.concurrency,
                      .sessions_at_once = o.wl.kind == BS_WL_CONVERSATIONS ? o.wl.sessions : 0,
                      .duration = o.duration,
                      .timeout_s = (double)o.timeout,
                      .progress = o.progress,
                      .max_requests =
                          o.wl.kind == BS_WL_SYNTHETIC || o.wl.kind == BS_WL_CODE || o.requests < 0 ? 0 : o.requests};
    bs_run run;
    r = bs_run_workload(&w, &ro, &run, &err);
    bs_workload_free(&w);
    if (r) {
        bs_run_free(&run);
        return cli_fail("bench serve: %s", err.msg);
    }
    json_t *res = bs_results_json(&run, config_json(&o, o.model));
    bs_run_free(&run);
    if (!res) return cli_fail("bench serve: out of memory");
    bs_results_print(stdout, res);
    r = o.out ? write_json(res, o.out) : 0;
    json_t *sum = json_object_get(res, "summary");
    if (!r && json_integer_value(json_object_get(sum, "requests_ok")) == 0)
        r = cli_fail("bench serve: no request succeeded (%s)", json_string_value(json_object_get(sum, "first_error")));
    json_decref(res);
    return r;
}
