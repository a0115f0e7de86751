/* cmd_bench_report.c - `cinfer bench report` (tables and SVG plots of
 * `bench serve` results, src/benchserve/report.h) and `cinfer bench
 * trace-stats` (request count, token totals and the infinite-cache
 * prefix-hit bound of a Mooncake trace, src/benchserve/trace.h). Called from
 * cmd_bench.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "benchserve/report.h"
#include "benchserve/trace.h"
#include "cli_util.h"
#include "commands.h"

static void report_usage(FILE *out) {
    fprintf(out,
            "usage: cinfer bench report RESULTS.json... [--svg DIR]\n"
            "Prints each results file of `cinfer bench serve --out` (and a comparison line per file when\n"
            "several are given). With --svg, writes to DIR: ttft_cdf.svg, tpot_cdf.svg, e2e_cdf.svg\n"
            "(latency CDFs), throughput.svg (output tok/s over time), cache_hit.svg (cache hit %% over\n"
            "time) and summary.svg (side-by-side bars: TTFT p50/p99, output tok/s, cache hit %%).\n");
}

int bench_report(int argc, char **argv) {
    const char **files = calloc((size_t)argc, sizeof *files);
    const char *dir = NULL;
    size_t n = 0;
    if (!files) return cli_fail("out of memory");
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            report_usage(stdout);
            free(files);
            return 0;
        } else if (!strcmp(argv[i], "--svg")) {
            if (!(dir = cli_value(argc, argv, &i))) return free(files), 2;
        } else if (argv[i][0] == '-') {
            free(files);
            return cli_fail("bench report: unknown option '%s' (see cinfer bench report --help)", argv[i]), 2;
        } else {
            files[n++] = argv[i];
        }
    }
    if (!n) {
        free(files);
        report_usage(stderr);
        return 2;
    }
    cf_err err;
    int rc = bs_report(files, n, dir, stdout, &err);
    free(files);
    return rc ? cli_fail("bench report: %s", err.msg) : 0;
}

int bench_trace_stats(int argc, char **argv) {
    const char *path = NULL;
    long long block = BS_TRACE_BLOCK, max = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            printf("usage: cinfer bench trace-stats TRACE.jsonl [--block-scale K] [--max-requests N]\n"
                   "Request count, duration, input/output token totals and the infinite-cache prefix-hit bound\n"
                   "of a Mooncake trace: block i of a request hits iff blocks 0..i were all seen before;\n"
                   "hits x block tokens (capped by the input length) over all input tokens. --block-scale K\n"
                   "gives each hash-id block K tokens instead of 512 (lengths scaled alike).\n");
            return 0;
        } else if (!strcmp(a, "--block-scale")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_int(a, v, 1, BS_TRACE_BLOCK, &block)) return 2;
        } else if (!strcmp(a, "--max-requests")) {
            if (!(v = cli_value(argc, argv, &i)) || cli_int(a, v, 1, 1LL << 40, &max)) return 2;
        } else if (a[0] == '-' || path) {
            return cli_fail("bench trace-stats: unexpected argument '%s'", a), 2;
        } else {
            path = a;
        }
    }
    if (!path) return cli_fail("bench trace-stats: a trace file is required"), 2;
    bs_trace t;
    bs_trace_stats s;
    cf_err err;
    if (bs_trace_load(path, (size_t)max, &t, &err)) return cli_fail("bench trace-stats: %s", err.msg);
    int rc = bs_trace_stats_compute(&t, (long)block, &s, &err);
    bs_trace_free(&t);
    if (rc) return cli_fail("bench trace-stats: %s", err.msg);
    printf("trace               %s\n", path);
    printf("requests            %zu\n", s.requests);
    printf("duration            %.1f s\n", s.duration_s);
    printf("block size          %lld tokens\n", block);
    printf("input tokens        %lld\n", s.input_tokens);
    printf("output tokens       %lld\n", s.output_tokens);
    printf("blocks              %lld (%lld distinct)\n", s.blocks, s.unique_blocks);
    printf("prefix-hit tokens   %lld\n", s.hit_tokens);
    printf("prefix-hit bound    %.1f%% (infinite cache)\n", 100 * s.hit_ratio);
    return 0;
}
