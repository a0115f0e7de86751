/* bench_threadpool.c - cost of pool_run: back-to-back runs of an empty task
 * (workers spinning) and runs after an idle gap (workers asleep on the futex).
 * Usage: bench_threadpool [-t THREADS | THREADS] (see --help). Not a test:
 * numbers depend on the machine. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/threadpool.h"
#include "base/timeutil.h"
#include "bench_cli.h"

static const char k_usage[] =
    "usage: bench_threadpool [-t THREADS] [THREADS]\n"
    "Cost of one pool_run of an empty task: back-to-back (workers spinning) and after 5 ms idle\n"
    "(workers asleep). Prints microseconds per run. Not a test: numbers depend on the machine.\n"
    "  -t, --threads N   pool size, 1..1024 (default 2; also accepted as the one positional argument)\n"
    "  -h, --help        this text\n";

/* Parses the command line into *threads. Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, int *threads) {
    static const struct option longs[] = {
        {"threads", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const char *t_arg = NULL;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":t:h", longs, NULL)) != -1) {
        if (c == 'h') {
            fputs(k_usage, stdout);
            return 0;
        }
        if (c == 't') t_arg = optarg;
        else return bench_bad_option("bench_threadpool", c, argv);
    }
    if (optind < argc) t_arg = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "bench_threadpool: unexpected argument '%s' (see bench_threadpool --help)\n", argv[optind]);
        return BENCH_USAGE_ERROR;
    }
    long v = 2;
    if (t_arg && bench_parse_long("bench_threadpool", "THREADS", t_arg, 1, 1024, &v)) return BENCH_USAGE_ERROR;
    *threads = (int)v;
    return -1;
}

static void empty_task(void *ctx, int ith, int nth) { (void)ctx, (void)ith, (void)nth; }

int main(int argc, char **argv) {
    int threads = 2;
    int rc = parse_args(argc, argv, &threads);
    if (rc >= 0) return rc;
    thread_pool *p = pool_create(threads);
    if (!p) return 1;
    const int n = 100000;
    for (int i = 0; i < 1000; i++) pool_run(p, empty_task, NULL);
    double t0 = time_now();
    for (int i = 0; i < n; i++) pool_run(p, empty_task, NULL);
    double hot = (time_now() - t0) / n;
    double cold = 0;
    const int nc = 50;
    for (int i = 0; i < nc; i++) {
        struct timespec ts = {0, 5 * 1000 * 1000}; /* 5 ms: workers go to sleep */
        nanosleep(&ts, NULL);
        double t1 = time_now();
        pool_run(p, empty_task, NULL);
        cold += time_now() - t1;
    }
    printf("threads %d: pool_run back-to-back %.2f us, after 5 ms idle %.2f us\n", pool_size(p), hot * 1e6,
           cold / nc * 1e6);
    pool_destroy(p);
    return 0;
}
