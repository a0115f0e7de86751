/* bench_threadpool.c - cost of pool_run: back-to-back runs of an empty task
 * (workers spinning) and runs after an idle gap (workers asleep on the futex).
 * Usage: bench_threadpool [threads]. Not a test: numbers depend on the machine. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/threadpool.h"
#include "base/timeutil.h"

static void empty_task(void *ctx, int ith, int nth) {
    (void)ctx, (void)ith, (void)nth;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
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
