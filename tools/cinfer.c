/* cinfer.c - entry point of the `cinfer` CLI: dispatches to the subcommands
 * declared in commands.h. Global options (before the command): --log-level,
 * --version, --help. Exit codes: 0 ok, 1 runtime error, 2 usage error. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli_opt.h"
#include "base/log.h"
#include "base/version.h"
#include "commands.h"

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("cinfer: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} command;

static const command commands[] = {
    {"run", cmd_run, "generate text from a prompt with a GGUF model"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server (chat/completions, streaming, metrics)"},
    {"router", cmd_router, "one HTTP front for several serve workers (placement policies, retries, PD)"},
    {"tokenize", cmd_tokenize, "show the token ids / pieces of a text"},
    {"convert", cmd_convert, "convert a model from another format to GGUF (llama2c, hf)"},
    {"quantize", cmd_quantize, "re-encode a GGUF model's weights as q8_0, q4_0, bf16, f16 or f32"},
    {"mkmodel", cmd_mkmodel, "write a random-weight model of any shape (tests, benchmarks)"},
    {"store", cmd_store, "persistent KV block store maintenance (gc, stats, verify)"},
    {"ep", cmd_ep, "expert parallelism: per-rank view of an `mpirun ... serve --ep` job (ep stats)"},
    {"sim", cmd_sim, "cluster simulator: a workload on a simulated prefill/decode cluster, its latency and economics"},
    {"bench", cmd_bench, "benchmarks (latency: prefill/decode vs roofline; throughput: the serving engine)"},
};

static int opt_log_level(void *ctx, const char *v, char *msg, size_t cap) {
    (void)ctx;
    if (cf_log_parse_level(v, &cf_log_level) == 0) return 0;
    snprintf(msg, cap, "unknown log level '%s' (error|warn|info|debug)", v);
    return -1;
}

int main(int argc, char **argv) {
    const char *env_level = getenv("CINFER_LOG");
    if (env_level) cf_log_parse_level(env_level, &cf_log_level);
    char about[2048];
    size_t k = (size_t)snprintf(about, sizeof about, "\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0] && k < sizeof about; i++)
        k += (size_t)snprintf(about + k, sizeof about - k, "  %-10s %s\n", commands[i].name, commands[i].summary);
    if (k < sizeof about)
        snprintf(about + k, sizeof about - k, "\n`cinfer <command> --help` describes a command's options.");
    bool version = false;
    const cli_opt t[] = {
        {"log-level", 0, "L", "error|warn|info|debug (default warn; serve: info)", CLI_CALL(opt_log_level, NULL)},
        {"version", 0, NULL, "print the version and exit", CLI_SET(&version, true)},
    };
    const cli_cmd c = {.name = "",
                       .usage = "cinfer [--log-level error|warn|info|debug] <command> [options]",
                       .about = about,
                       .opts = t,
                       .n_opts = sizeof t / sizeof t[0],
                       .epilog =
                           "\nexit status: 0 success; 1 runtime error (a model that does not load, a busy port,\n"
                           "a failed request...); 2 usage error (unknown or malformed option or argument).\n"
                           "Every error is one line on stderr, starting with \"cinfer\".\n"
                           "environment: CINFER_CPU=avx512|avx2|scalar forces a kernel path; CINFER_AMX=0 turns AMX\n"
                           "tiles off; CINFER_LOG=<level>.",
                       .stop_at_positional = true};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    if (version) {
        printf("cinfer %s\n", CINFER_VERSION);
        return 0;
    }
    if (pos >= argc) {
        fputs("cinfer: a command is required:", stderr);
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            fprintf(stderr, "%s %s", i ? "," : "", commands[i].name);
        fputs(" (see cinfer --help)\n", stderr);
        return CLI_USAGE;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[pos], commands[i].name)) return commands[i].fn(argc - pos, argv + pos);
    fprintf(stderr, "cinfer: unknown command '%s' (see cinfer --help)\n", argv[pos]);
    return CLI_USAGE;
}
