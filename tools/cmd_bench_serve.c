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

#include "benchserve/api.h"
#include "benchserve/results.h"
#include "benchserve/runner.h"
#include "benchserve/workload.h"
#include "cli_util.h"
#include "commands.h"

static void usage(FILE *out) {
    fprintf(out,
        "usage: cinfer bench serve --base-url URL [options]\n"
        "Streams a workload to an OpenAI-compatible server and reports TTFT, TPOT, inter-token and\n"
        "end-to-end latency (mean/p50/p90/p99), request and token rates (input split into cached and\n"
        "computed, from the responses' usage), cache hit ratio and errors by kind.\n"
        "  --base-url URL        http://host:port (\"/v1\" is added unless present)\n"
        "  --api NAME            chat (default) | completions | messages | responses\n"
        "  --model NAME          model field (default: the first id of GET /v1/models)\n"
        "  --api-key KEY         sent as Bearer token (x-api-key for messages)\n"
        "  --workload NAME       synthetic (default) | chat | agent | code | trace FILE\n"
        "  --concurrency C       at most C requests in flight (default: no limit)\n"
        "  --rate R              session arrivals per second, Poisson (default: all at once;\n"
        "                        the trace workload uses the trace's timestamps)\n"
        "  --requests N          synthetic/code: requests (default 64); others: stop after N sends\n"
        "  --duration S          stop sending after S seconds\n"
        "  --seed S              workload seed (default 1)\n"
        "  --out FILE            write results as JSON (see docs/bench-serve.md)\n"
        "  --timeout S           per-request inactivity timeout (default 600)\n"
        "  --progress            progress bar on stderr even when it is not a terminal\n"
        "  --no-progress         no progress bar (default when stderr is not a terminal)\n"
        "generation:\n"
        "  --output-len N        max_tokens per request/turn (default 128)\n"
        "  --max-output-len N    caps every max_tokens (e.g. the trace's output lengths)\n"
        "  --ignore-eos          ask the server to ignore EOS (\"ignore_eos\": true)\n"
        "  --temperature T       sampling temperature (default: not sent)\n"
        "synthetic / code:\n"
        "  --input-len N         prompt words (~tokens; token ids with --api completions) (default 256)\n"
        "  --len-dist D          fixed (default) | uniform: lengths uniform in [L/2, 3L/2]\n"
        "chat / agent:\n"
        "  --sessions N          concurrent conversations (default 8)\n"
        "  --turns N             turns per session (chat default 4, agent default 8)\n"
        "  --system-len N        shared system prompt words (chat 1000, agent 2000)\n"
        "  --user-len N          words per user message (default 64)\n"
        "  --tool-len N          agent: words per tool result (default 2000)\n"
        "  --think-time S        agent: mean pause between turns (default 1.0; uniform 0.5x-1.5x)\n"
        "trace:\n"
        "  --trace FILE          Mooncake JSONL trace (or: --workload trace FILE)\n"
        "  --block-scale K       tokens per hash-id block (default 512; e.g. 32 shrinks prompts 16x)\n"
        "  --time-scale X        replay X times faster (default 1)\n"
        "  --max-requests N      only the first N trace lines\n"
        "prompts:\n"
        "  --token-range LO:HI   token ids for --api completions (default 3:500, fits any vocab >= 500)\n"
        "  --text                send text even with --api completions\n"
        "  --dry-run             build the requests without sending; with --dump FILE write one JSON\n"
        "                        line per request: session, turn, trace_line, send_at_s, body\n"
        "exit status: 0 when at least one request succeeded (the others are counted by kind), 1 if none.\n");
}

typedef struct serve_opts {
    const char *base_url, *model, *api_key, *out, *dump;
    bs_api api;
    bs_wl_opts wl;
    long concurrency, timeout, turns_set, system_set;
    double duration, temperature;
    int ignore_eos, text, dry_run, progress;
    long requests;
} serve_opts;

static int parse_range(const char *v, int32_t *lo, int32_t *hi) {
    long a, b;
    char tail;
    if (sscanf(v, "%ld:%ld%c", &a, &b, &tail) != 2 || a < 0 || b <= a || b > (1L << 30))
        return cli_fail("--token-range expects LO:HI with 0 <= LO < HI, got '%s'", v);
    *lo = (int32_t)a;
    *hi = (int32_t)b;
    return 0;
}

static int parse(int argc, char **argv, serve_opts *o) {
    *o = (serve_opts){.wl = {.kind = BS_WL_SYNTHETIC, .seed = 1, .input_len = 256, .output_len = 128,
                             .sessions = 8, .user_len = 64, .tool_len = 2000, .think_s = 1.0, .block = 512,
                             .time_scale = 1, .tok_lo = 3, .tok_hi = 500},
                      .timeout = 600, .temperature = -1, .progress = isatty(STDERR_FILENO), .requests = -1, .turns_set = -1,
                      .system_set = -1};
    bs_wl_opts *w = &o->wl;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        long long n;
        double d;
#define VAL() if (!(v = cli_value(argc, argv, &i))) return 2
#define INT(lo, hi, dst) do { VAL(); if (cli_int(a, v, lo, hi, &n)) return 2; dst = n; } while (0)
#define FLT(lo, hi, dst) do { VAL(); if (cli_float(a, v, lo, hi, &d)) return 2; dst = d; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return -1; }
        else if (!strcmp(a, "--base-url")) { VAL(); o->base_url = v; }
        else if (!strcmp(a, "--api")) { VAL(); if (bs_api_parse(v, &o->api)) return cli_fail("--api: unknown API '%s' (chat, completions, messages, responses)", v), 2; }
        else if (!strcmp(a, "--model")) { VAL(); o->model = v; }
        else if (!strcmp(a, "--api-key")) { VAL(); o->api_key = v; }
        else if (!strcmp(a, "--workload")) {
            VAL();
            if (bs_workload_parse_kind(v, &w->kind)) return cli_fail("--workload: unknown workload '%s' (synthetic, chat, agent, code, trace)", v), 2;
            if (w->kind == BS_WL_TRACE && i + 1 < argc && argv[i + 1][0] != '-') w->trace_path = argv[++i];
        }
        else if (!strcmp(a, "--trace")) { VAL(); w->trace_path = v; }
        else if (!strcmp(a, "--concurrency")) INT(1, 1 << 20, o->concurrency);
        else if (!strcmp(a, "--rate")) FLT(1e-6, 1e9, w->rate);
        else if (!strcmp(a, "--requests")) INT(1, 1 << 24, o->requests);
        else if (!strcmp(a, "--duration")) FLT(1e-3, 1e9, o->duration);
        else if (!strcmp(a, "--seed")) { VAL(); if (cli_int(a, v, 0, 1LL << 62, &n)) return 2; w->seed = (uint64_t)n; }
        else if (!strcmp(a, "--out")) { VAL(); o->out = v; }
        else if (!strcmp(a, "--timeout")) INT(1, 86400, o->timeout);
        else if (!strcmp(a, "--no-progress")) o->progress = 0;
        else if (!strcmp(a, "--progress")) o->progress = 1;
        else if (!strcmp(a, "--output-len")) INT(1, 1 << 24, w->output_len);
        else if (!strcmp(a, "--max-output-len")) INT(1, 1 << 24, w->max_output);
        else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
        else if (!strcmp(a, "--temperature")) FLT(0, 100, o->temperature);
        else if (!strcmp(a, "--input-len")) INT(1, 1 << 24, w->input_len);
        else if (!strcmp(a, "--len-dist")) {
            VAL();
            if (!strcmp(v, "uniform")) w->uniform = 1;
            else if (strcmp(v, "fixed") != 0) return cli_fail("--len-dist expects fixed or uniform, got '%s'", v), 2;
        }
        else if (!strcmp(a, "--sessions")) INT(1, 1 << 20, w->sessions);
        else if (!strcmp(a, "--turns")) INT(1, 1 << 16, o->turns_set);
        else if (!strcmp(a, "--system-len")) INT(0, 1 << 24, o->system_set);
        else if (!strcmp(a, "--user-len")) INT(1, 1 << 24, w->user_len);
        else if (!strcmp(a, "--tool-len")) INT(1, 1 << 24, w->tool_len);
        else if (!strcmp(a, "--think-time")) FLT(0, 1e6, w->think_s);
        else if (!strcmp(a, "--block-scale")) INT(1, 512, w->block);
        else if (!strcmp(a, "--time-scale")) FLT(1e-6, 1e9, w->time_scale);
        else if (!strcmp(a, "--max-requests")) INT(1, 1 << 24, w->max_requests);
        else if (!strcmp(a, "--token-range")) { VAL(); if (parse_range(v, &w->tok_lo, &w->tok_hi)) return 2; }
        else if (!strcmp(a, "--text")) o->text = 1;
        else if (!strcmp(a, "--dry-run")) o->dry_run = 1;
        else if (!strcmp(a, "--dump")) { VAL(); o->dump = v; }
        else return cli_fail("bench serve: unknown option '%s' (see cinfer bench serve --help)", a), 2;
#undef VAL
#undef INT
#undef FLT
    }
    if (!o->dry_run && !o->base_url) return cli_fail("bench serve: --base-url is required (or --dry-run)"), 2;
    if (o->dump && !o->dry_run) return cli_fail("bench serve: --dump needs --dry-run"), 2;
    if (w->kind == BS_WL_TRACE && !w->trace_path) return cli_fail("bench serve: the trace workload needs a FILE"), 2;
    if (w->kind == BS_WL_TRACE && w->rate > 0)
        return cli_fail("bench serve: --rate does not apply to trace replay (use --time-scale)"), 2;
    int multi = w->kind == BS_WL_CHAT || w->kind == BS_WL_AGENT;
    w->turns = o->turns_set > 0 ? o->turns_set : w->kind == BS_WL_AGENT ? 8 : 4;
    w->system_len = o->system_set >= 0 ? o->system_set : w->kind == BS_WL_AGENT ? 2000 : 1000;
    if (!multi && w->kind != BS_WL_TRACE) w->requests = o->requests > 0 ? o->requests : 64;
    w->token_ids = o->api == BS_API_COMPLETIONS && !o->text && (w->kind == BS_WL_SYNTHETIC || w->kind == BS_WL_TRACE);
    return 0;
}

static json_t *config_json(const serve_opts *o, const char *model) {
    const bs_wl_opts *w = &o->wl;
    char when[32];
    time_t t = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    json_t *c = json_pack("{s:s, s:s, s:s, s:s, s:I, s:f, s:I, s:f, s:I, s:I, s:I, s:b, s:b}", "started", when,
                          "base_url", o->base_url ? o->base_url : "", "api", bs_api_name(o->api), "workload",
                          bs_workload_kind_name(w->kind), "seed", (json_int_t)w->seed, "rate", w->rate,
                          "concurrency", (json_int_t)o->concurrency, "duration", o->duration, "requests",
                          (json_int_t)(o->requests > 0 ? o->requests : 0), "output_len", (json_int_t)w->output_len,
                          "max_output_len", (json_int_t)w->max_output, "ignore_eos", o->ignore_eos, "token_ids",
                          w->token_ids);
    if (!c) return NULL;
    json_object_set_new(c, "model", json_string(model ? model : ""));
    if (w->kind == BS_WL_SYNTHETIC || w->kind == BS_WL_CODE) {
        json_object_set_new(c, "input_len", json_integer(w->input_len));
        json_object_set_new(c, "len_dist", json_string(w->uniform ? "uniform" : "fixed"));
    } else if (w->kind == BS_WL_TRACE) {
        json_object_set_new(c, "trace", json_string(w->trace_path));
        json_object_set_new(c, "block_scale", json_integer(w->block));
        json_object_set_new(c, "time_scale", json_real(w->time_scale));
        json_object_set_new(c, "max_requests", json_integer(w->max_requests));
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
    bs_gen_opts g = {.model = o->model ? o->model : "MODEL", .temperature = o->temperature, .ignore_eos = o->ignore_eos};
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
            if (!rc && k + 1 < s->n_turns && bs_workload_add_answer(w, i, "(answer)", &err)) rc = cli_fail("%s", err.msg);
            sent++;
        }
        bs_workload_release(w, i);
    }
    free(scratch);
    if (f && fclose(f)) rc = cli_fail("cannot write %s", o->dump);
    if (!rc) printf("dry run: %ld requests in %zu sessions%s%s\n", sent, w->n, o->dump ? ", written to " : "",
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
    if (r) return r < 0 ? 0 : r;
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
    bs_run_opts ro = {.base_url = o.base_url, .api = o.api, .api_key = o.api_key,
                      .gen = {.model = o.model, .temperature = o.temperature, .ignore_eos = o.ignore_eos},
                      .concurrency = o.concurrency, .duration = o.duration, .timeout_s = (double)o.timeout,
                      .progress = o.progress,
                      .max_requests = o.wl.kind == BS_WL_SYNTHETIC || o.wl.kind == BS_WL_CODE || o.requests < 0 ? 0 : o.requests};
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
        r = cli_fail("bench serve: no request succeeded (%s)",
                     json_string_value(json_object_get(sum, "first_error")));
    json_decref(res);
    return r;
}
