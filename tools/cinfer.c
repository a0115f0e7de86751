/* cinfer.c - entry point of the `cinfer` CLI: dispatches to the subcommands
 * declared in commands.h. Global options: --log-level, --version, --help. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "commands.h"

#define CINFER_VERSION "0.1.0"

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
    {"tokenize", cmd_tokenize, "show the token ids / pieces of a text"},
    {"convert", cmd_convert, "convert a model from another format to GGUF (llama2c)"},
    {"quantize", cmd_quantize, "re-encode a GGUF model's weights as q8_0, q4_0, bf16, f16 or f32"},
    {"mkmodel", cmd_mkmodel, "write a random-weight model of any shape (tests, benchmarks)"},
    {"store", cmd_store, "persistent KV block store maintenance (gc, stats, verify)"},
    {"bench", cmd_bench, "benchmarks (latency: prefill/decode vs roofline; throughput: the serving engine)"},
};

static void usage(FILE *out) {
    fprintf(out,
            "usage: cinfer [--log-level error|warn|info|debug] <command> [options]\n"
            "\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n`cinfer <command> --help` describes a command's options.\n"
            "environment: CINFER_CPU=avx512|avx2|scalar forces a kernel path; CINFER_LOG=<level>.\n");
}

int main(int argc, char **argv) {
    const char *env_level = getenv("CINFER_LOG");
    if (env_level) cf_log_parse_level(env_level, &cf_log_level);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("cinfer %s\n", CINFER_VERSION);
            return 0;
        } else if (!strcmp(argv[i], "--log-level") && i + 1 < argc) {
            if (cf_log_parse_level(argv[++i], &cf_log_level) != 0)
                return cli_fail("unknown log level '%s' (error|warn|info|debug)", argv[i]);
        } else {
            return cli_fail("unknown option '%s' (see cinfer --help)", argv[i]);
        }
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++)
        if (!strcmp(argv[i], commands[c].name)) return commands[c].fn(argc - i, argv + i);
    return cli_fail("unknown command '%s' (see cinfer --help)", argv[i]);
}
