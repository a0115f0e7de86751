/* threadpool.h - persistent compute thread pool, barrier-synchronised.
 *
 * pool_run(pool, fn, ctx) calls fn(ctx, ith, nth) once for every ith in
 * [0, nth) - the calling thread runs ith = 0 - and returns when all calls have
 * returned. Workers spin briefly, then sleep on a futex/condvar between runs,
 * so back-to-back runs (one per matmul) cost ~1 us, not a thread wake-up.
 * No locks are taken inside fn by the pool. Calls to pool_run on one pool must
 * not overlap (the engine thread is its only caller).
 * The calls for different ith may run on the same OS thread one after another:
 * when a worker has not started by the time the caller finished ith = 0 (it is
 * asleep or descheduled), the caller runs that slot itself. So fn must never
 * wait for another ith (no barriers or spin-waits inside fn); index per-thread
 * state by ith, not by thread-local storage. */
#ifndef CINFER_BASE_THREADPOOL_H
#define CINFER_BASE_THREADPOOL_H

#include "cinfer/threads.h"

/* The public cinfer_thread_pool (include/cinfer/threads.h) is this struct. */
typedef struct cinfer_thread_pool thread_pool;
typedef void (*pool_task_fn)(void *ctx, int ith, int nth);

/* n_threads total, including the caller; <= 0 means one per online core. NULL on failure. */
thread_pool *pool_create(int n_threads);
void pool_destroy(thread_pool *pool);
int pool_size(const thread_pool *pool);
void pool_run(thread_pool *pool, pool_task_fn fn, void *ctx);

/* Splits [0, n) into nth near-equal ranges; range of thread ith. */
static inline void pool_split(long long n, int ith, int nth, long long *begin, long long *end) {
    long long per = n / nth, rem = n % nth;
    *begin = ith * per + (ith < rem ? ith : rem);
    *end = *begin + per + (ith < rem ? 1 : 0);
}

#endif
