/* commands.h - the subcommands of the `cinfer` binary. Each lives in its own
 * tools/cmd_<name>.c, takes (argc, argv) starting at the subcommand name and
 * returns the process exit code (0 ok, 1 runtime error with a one-line
 * message on stderr, 2 usage error: an unknown/bad option or argument, also
 * one line). Options are parsed with one table per command (base/cli_opt.h). */
#ifndef CINFER_TOOLS_COMMANDS_H
#define CINFER_TOOLS_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_store(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_router(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_ep(int argc, char **argv); /* `ep stats` (cmd_ep.c) */
/* Benchmarks dispatched by cmd_bench: argv[0] is the benchmark's name.
 * `bench throughput` (cmd_bench_throughput.c). */
int bench_throughput(int argc, char **argv);
/* `bench serve` (cmd_bench_serve.c): load generator for an HTTP server. */
int bench_serve(int argc, char **argv);
/* `bench report` and `bench trace-stats` (cmd_bench_report.c). */
int bench_report(int argc, char **argv);
int bench_trace_stats(int argc, char **argv);
/* `bench replay` (cmd_bench_replay.c): bounded-replay quality (KL, top-1) vs replay length. */
int bench_replay(int argc, char **argv);

/* Prints "cinfer: <msg>" to stderr and returns 1. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
