/* cmd_bench_report.c - `cinfer bench report` (tables and SVG plots of
 * `bench serve` results, src/benchserve/report.h) and `cinfer bench
 * trace-stats` (request count, token totals and the infinite-cache
 * prefix-hit bound of a Mooncake trace, src/benchserve/trace.h). Called from
 * cmd_bench.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cli_opt.h"
#include "benchserve/report.h"
#include "benchserve/trace.h"
#include "commands.h"

/* argv[0] is "report". */
int bench_report(int argc, char **argv) {
    const char *dir = NULL;
    const cli_opt t[] = {{"svg", 0, "DIR", "write SVG plots to DIR", CLI_STR(&dir)}};
    const cli_cmd c = {
        .name = "bench report",
        .usage = "cinfer bench report RESULTS.json... [--svg DIR]",
        .about = "Prints each results file of `cinfer bench serve --out` (and a comparison line per file when\n"
                 "several are given). With --svg, writes to DIR: ttft_cdf.svg, tpot_cdf.svg, e2e_cdf.svg\n"
                 "(latency CDFs), throughput.svg (output tok/s over time), cache_hit.svg (cache hit % over\n"
                 "time) and summary.svg (side-by-side bars: TTFT p50/p99, output tok/s, cache hit %).",
        .opts = t,
        .n_opts = 1};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    if (pos >= argc) return cli_usage_error(&c, "at least one RESULTS.json is required");
    cf_err err;
    if (bs_report((const char **)argv + pos, (size_t)(argc - pos), dir, stdout, &err))
        return cli_fail("bench report: %s", err.msg);
    return 0;
}

/* argv[0] is "trace-stats". */
int bench_trace_stats(int argc, char **argv) {
    long long block = BS_TRACE_BLOCK, max = 0;
    const cli_opt t[] = {
        {"block-scale", 0, "K", "tokens per hash-id block instead of 512 (lengths scaled alike)",
         CLI_NUM(&block, 1, BS_TRACE_BLOCK)},
        {"max-requests", 0, "N", "only the first N trace lines", CLI_NUM(&max, 1, 1LL << 40)},
    };
    const cli_cmd c = {
        .name = "bench trace-stats",
        .usage = "cinfer bench trace-stats TRACE.jsonl [--block-scale K] [--max-requests N]",
        .about = "Request count, duration, input/output token totals and the infinite-cache prefix-hit bound\n"
                 "of a Mooncake trace: block i of a request hits iff blocks 0..i were all seen before;\n"
                 "hits x block tokens (capped by the input length) over all input tokens.",
        .opts = t,
        .n_opts = sizeof t / sizeof t[0]};
    int pos, rc = cli_parse(&c, argc, argv, &pos);
    if (rc) return rc == CLI_HELP ? 0 : rc;
    if (pos >= argc) return cli_usage_error(&c, "a trace file is required");
    if (argc - pos > 1) return cli_usage_error(&c, "unexpected argument '%s'", argv[pos + 1]);
    const char *path = argv[pos];
    bs_trace tr;
    bs_trace_stats s;
    cf_err err;
    if (bs_trace_load(path, (size_t)max, &tr, &err)) return cli_fail("bench trace-stats: %s", err.msg);
    int r = bs_trace_stats_compute(&tr, (long)block, &s, &err);
    bs_trace_free(&tr);
    if (r) return cli_fail("bench trace-stats: %s", err.msg);
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
