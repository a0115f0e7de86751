/* test_threadpool.c - pool_run runs every ith exactly once per run and returns
 * only after all have finished (over many back-to-back runs, with and without
 * idle gaps long enough for workers to go to sleep), workers really take part,
 * pool_split covers [0, n) exactly with near-equal ranges, sizes, and
 * create/destroy cycles. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threadpool.h"
#include "testutil.h"

#define MAXT 8

typedef struct {
    _Atomic int hits[MAXT];
    int nth_seen[MAXT];
    long long *data; /* each thread fills its pool_split range */
    long long n;
    int round;
} job;

static void task(void *ctx, int ith, int nth) {
    job *j = ctx;
    atomic_fetch_add(&j->hits[ith], 1);
    j->nth_seen[ith] = nth;
    long long b, e;
    pool_split(j->n, ith, nth, &b, &e);
    for (long long i = b; i < e; i++) j->data[i] = i * 7 + j->round;
}

static void run_many(int nthreads, int runs, int sleep_every) {
    thread_pool *p = pool_create(nthreads);
    CHECK(p != NULL);
    if (!p) return;
    int nth = pool_size(p);
    CHECK(nthreads <= 0 || nth == nthreads);
    job j;
    memset(&j, 0, sizeof j);
    j.n = 1001;
    j.data = malloc(sizeof(long long) * (size_t)j.n);
    int bad = 0;
    for (int r = 0; r < runs; r++) {
        j.round = r;
        for (int t = 0; t < MAXT; t++) atomic_store(&j.hits[t], 0);
        pool_run(p, task, &j);
        for (int t = 0; t < nth && t < MAXT; t++)
            if (atomic_load(&j.hits[t]) != 1 || j.nth_seen[t] != nth) bad++;
        for (long long i = 0; i < j.n; i++)
            if (j.data[i] != i * 7 + r) {
                bad++;
                break;
            }
        if (sleep_every && r % sleep_every == 0) {
            struct timespec ts = {0, 3 * 1000 * 1000}; /* 3 ms: workers go to sleep */
            nanosleep(&ts, NULL);
        }
    }
    CHECKF(bad == 0, "threads=%d: %d bad runs", nthreads, bad);
    free(j.data);
    pool_destroy(p);
}

/* Slots run by a thread other than the caller: the pool must actually run
 * work in parallel (the caller only runs slots whose worker has not started). */
typedef struct {
    pthread_t caller;
    _Atomic int on_worker;
    volatile double sink;
} par_job;

static void busy_task(void *ctx, int ith, int nth) {
    par_job *j = ctx;
    (void)nth;
    if (ith > 0 && !pthread_equal(pthread_self(), j->caller)) atomic_fetch_add(&j->on_worker, 1);
    double s = 0;
    for (int i = 0; i < 20000; i++) s += i * 1e-9;
    j->sink = s;
}

static void test_parallel(void) {
    thread_pool *p = pool_create(2);
    CHECK(p != NULL);
    if (!p) return;
    par_job j = {.caller = pthread_self()};
    for (int r = 0; r < 500; r++) pool_run(p, busy_task, &j);
    fprintf(stderr, "slot 1 ran on the worker in %d of 500 runs\n", atomic_load(&j.on_worker));
    CHECK(atomic_load(&j.on_worker) > 0);
    pool_destroy(p);
}

static void test_split(void) {
    int bad = 0;
    for (long long n = 0; n < 100; n++)
        for (int nth = 1; nth <= 9; nth++) {
            long long expect_begin = 0;
            for (int t = 0; t < nth; t++) {
                long long b, e;
                pool_split(n, t, nth, &b, &e);
                if (b != expect_begin || e < b || e - b > n / nth + 1 || e - b < n / nth) bad++;
                expect_begin = e;
            }
            if (expect_begin != n) bad++;
        }
    CHECKF(bad == 0, "pool_split: %d bad ranges", bad);
}

int main(void) {
    test_split();
    test_parallel();
    run_many(1, 1000, 0);
    run_many(2, 20000, 0);
    run_many(2, 200, 20);
    run_many(4, 5000, 0); /* oversubscribed on small machines */
    run_many(0, 100, 10);
    for (int i = 0; i < 20; i++) pool_destroy(pool_create(3));
    return test_finish();
}
